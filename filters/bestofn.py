"""Best-of-n by the entity rubric (reason ``not_best``).

Among the traces of one question that passed the whole chain -- so all of them are
correct: the rubric is *positive-only*, a wrong trace never gets one -- each trace is
scored by the fraction of the path's intermediate entities (``path[1:-1]``) it
engaged with:

- it **searched** for the entity: a ``search`` query mentions its title;
- it **opened** it: the page id is in ``opened_page_ids``, or an ``open`` / ``find``
  call names the page by id or title;
- it **named** it: an assistant message's text mentions its title.

Titles match as whole normalised phrases (:func:`synth.text.answers.mentions`), also with a
trailing disambiguation removed ("Mercury (planet)" -> "Mercury").  A path with no
intermediate entity scores 1.  As in the rubric reward design, the score is then
normalised within the question's group by the group maximum (``rubric = raw / max``,
0 when the maximum is 0).  Traces are ranked by rubric, then fewer tool calls, then
trace id (deterministic), and the top ``filters.keep_per_question`` are kept.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from synth.engine.records import Question, Trace
from synth.text.answers import mentions, normalize_answer
from synth.tools.registry import find_tool

_PAREN = re.compile(r"\s*\([^)]*\)\s*$")


@dataclass(slots=True)
class Candidate:
    """A trace that passed the chain, as best-of-n sees it."""

    trace_id: str
    question_id: str
    n_tool_calls: int
    rubric_raw: float
    rubric: float = 0.0
    # What the filter's report says of the kept rows' reasoning: tokens of the assistant turns' reasoning, and of
    # everything the assistant wrote (reasoning, text, tool calls); None when no tokenizer counted them.
    reasoning_tokens: int | None = None
    assistant_tokens: int | None = None


def title_variants(title: str) -> list[str]:
    """The title, and the title without a trailing parenthetical disambiguation."""
    out = [title]
    short = _PAREN.sub("", title)
    if short and short != title:
        out.append(short)
    return out


def rubric_raw(trace: Trace, question: Question) -> float:
    """Fraction of ``question``'s intermediate path entities the trace searched, opened or named."""
    path, titles = list(question.path), list(question.titles)
    inner = list(range(1, len(path) - 1))
    if not inner:
        return 1.0
    conv = trace.conversation
    queries: list[str] = []
    page_args: set[str] = set()  # raw `page` arguments (ids or titles)
    page_names: set[str] = set()  # the same, normalised, to compare with titles
    for _, tc in conv.tool_calls():
        args = tc.args() or {}
        spec = find_tool(tc.name)
        if spec is None:
            continue
        if spec.page_arg:  # a tool that reads a page: the page it named
            if isinstance(args.get(spec.page_arg), str):
                page_args.add(args[spec.page_arg])
                page_names.add(normalize_answer(args[spec.page_arg]))
        elif spec.text_arg and isinstance(args.get(spec.text_arg), str):  # a search: its query
            queries.append(args[spec.text_arg])
        elif spec.text_arg and isinstance(args.get(spec.text_arg), list):  # a multi_search: each of its queries
            queries.extend(q for q in args[spec.text_arg] if isinstance(q, str))
    opened = set(trace.opened_page_ids or []) | page_args
    texts = [m.content for m in conv.messages
             if m.role == "assistant" and isinstance(m.content, str) and m.content]
    hits = 0
    for j in inner:
        variants = title_variants(titles[j]) if j < len(titles) else []
        if path[j] in opened or any(normalize_answer(v) in page_names for v in variants):
            hits += 1
        elif any(mentions(q, v) for q in queries for v in variants):
            hits += 1
        elif any(mentions(t, v) for t in texts for v in variants):
            hits += 1
    return hits / len(inner)


def select_best(candidates: list[Candidate], keep: int) -> set[str]:
    """Normalise rubrics within each question's group (sets ``.rubric``) and return the kept trace ids."""
    groups: dict[str, list[Candidate]] = defaultdict(list)
    for c in candidates:
        groups[c.question_id].append(c)
    kept: set[str] = set()
    for group in groups.values():
        top = max(c.rubric_raw for c in group)
        for c in group:
            c.rubric = c.rubric_raw / top if top > 0 else 0.0
        ranked = sorted(group, key=lambda c: (-c.rubric, c.n_tool_calls, c.trace_id))
        kept.update(c.trace_id for c in ranked[:keep])
    return kept


__all__ = ["Candidate", "rubric_raw", "select_best", "title_variants"]
