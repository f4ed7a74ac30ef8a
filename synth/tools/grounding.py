"""What an agent had seen when it made each tool call: the grounding analysis of a conversation.

The grounded filter (:mod:`filters.grounded`, reason ``ungrounded``) and the step labels of every
trace (:mod:`synth.rollout.labels`, whether a turn was grounded) read one analysis, this one.
For every tool call in order:

* **Seen text** before a call is the question (every ``user`` message) and the observation of
  every tool call answered before the assistant turn that makes the call.  Observations are read
  as their JSON values (titles, snippets, page text, page ids), except an error observation and
  the echo of a ``find`` pattern, which only repeat the agent's own words.  The system prompt and
  the agent's own text do not count.
* Words are compared as the index compares them: terms of :func:`synth.tools.analysis.analyze`
  (lowercase, ASCII folding, English stemming), so "Resins" grounds "resin".
* A **search** is grounded when at least ``min_grounding`` of its query's content terms
  (:func:`synth.tools.analysis.query_terms`: distinct terms, stop words dropped unless nothing else
  is left) are terms of the seen text.  A query with no terms is grounded.  A ``multi_search`` is
  grounded when each of its queries is, and the queries its hits echo (``queries``: the agent's own
  words) are not seen text.
* An **open** or a **find** is grounded when its page was seen: its argument is a page id shown in
  an earlier observation, or its terms (a title, or the last part of a ``/wiki/`` URL) occur, in
  order and contiguous, in the question or in one observation.  The ``text`` of a find must pass
  the search rule too.
* Calls of other tools, or with arguments that are not a JSON object, are not judged (the format
  filter's business).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator
from urllib.parse import unquote

from synth.engine.conversation import Conversation, ToolCall
from synth.tools.analysis import analyze, query_terms
from synth.tools.registry import find_tool


@dataclass(frozen=True, slots=True)
class Step:
    """One tool call and whether what it acted on had been seen; ``why`` says what was not."""

    index: int  # 0-based position among the trace's tool calls
    name: str
    grounded: bool
    why: str = ""
    turn: int = 0  # the assistant turn that made the call (turns count from 1)


class Seen:
    """What the agent has been shown so far: terms, term sequences (one per text) and page ids."""

    def __init__(self) -> None:
        self.terms: set[str] = set()
        self.sequences: list[str] = []
        self.ids: set[str] = set()

    def add_text(self, text: str) -> None:
        """Take in one text (the question, or one value of an observation)."""
        seq, joined = _analysed(text)
        if seq:
            self.terms.update(seq)
            self.sequences.append(joined)

    def add_observation(self, content: str | None) -> None:
        """Take in one tool observation (JSON text; anything else is read as plain text)."""
        if not content:
            return
        try:
            obs = json.loads(content)
        except ValueError:
            self.add_text(content)
            return
        for key, value in _values(obs):
            if key == "page_id":
                self.ids.add(value)
            self.add_text(value)

    def holds_name(self, name: str) -> bool:
        """Whether ``name`` was shown as a page id, or its terms occur contiguously in one seen text."""
        if name in self.ids:
            return True
        if "/wiki/" in name:
            name = unquote(name.rsplit("/wiki/", 1)[1]).split("#", 1)[0].replace("_", " ")
        seq = analyze(name)
        if not seq:
            return False
        needle = " " + " ".join(seq) + " "
        return any(needle in s for s in self.sequences)

    def share(self, text: str) -> tuple[float, list[str]]:
        """The share of ``text``'s query terms that were seen, and the unseen ones."""
        wanted = _query_terms(text)
        if not wanted:
            return 1.0, []
        unseen = [t for t in wanted if t not in self.terms]
        return 1 - len(unseen) / len(wanted), unseen


@lru_cache(maxsize=1 << 16)
def _analysed(text: str) -> tuple[tuple[str, ...], str]:
    """The terms of one seen text and their joined form (cached: the samples of a question, and the
    questions of one page, are shown the same snippets and pages again and again)."""
    seq = tuple(analyze(text))
    return seq, (" " + " ".join(seq) + " ") if seq else ""


def _values(obs: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """(key, string value) of every string in an observation, but an error's and a find's echoed pattern."""
    if isinstance(obs, dict):
        if "error" in obs:
            return
        for k, v in obs.items():
            if k == "text" and "passages" in obs:
                continue  # find echoes the agent's own pattern here
            if k == "queries" and "page_id" in obs:
                continue  # a multi_search hit echoes the agent's own queries here
            yield from _values(v, k)
    elif isinstance(obs, list):
        for v in obs:
            yield from _values(v, key)
    elif isinstance(obs, str):
        yield key, obs


@lru_cache(maxsize=4096)
def _query_terms(text: str) -> tuple[str, ...]:
    return tuple(query_terms(text, max_terms=1 << 20))


def _check(tc: ToolCall, seen: Seen, min_grounding: float) -> tuple[bool, str] | None:
    """Whether one call is grounded and why not; None for a call the rule does not judge."""
    args = tc.args()
    spec = find_tool(tc.name)
    if args is None or spec is None:
        return None
    problems = []
    key = spec.text_arg  # the words the agent chose (a query, a pattern)
    value = args.get(key) if key is not None else None
    # one text (a query, a pattern), or a list of them (multi_search's queries): each must pass
    for text in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
        if not isinstance(text, str):
            continue
        share, unseen = seen.share(text)
        if share < min_grounding:
            problems.append(f"{key} {text!r}: {share:.2f} of its terms seen (unseen: {', '.join(unseen)})")
    page = args.get(spec.page_arg) if spec.page_arg else None
    if isinstance(page, str) and not seen.holds_name(page):
        problems.append(f"page {page!r} not seen")
    return not problems, "; ".join(problems)


def grounding(conv: Conversation, min_grounding: float) -> list[Step]:
    """Every judged tool call of ``conv`` with whether it is grounded (module docstring)."""
    seen, out, index, turn = Seen(), [], 0, 0
    for m in conv.messages:
        if m.role == "user":
            seen.add_text(m.text or "")
        elif m.role == "tool":
            seen.add_observation(m.text)
        elif m.role == "assistant":
            turn += 1
            for tc in m.tool_calls:  # calls of one turn see only what came before the turn
                verdict = _check(tc, seen, min_grounding)
                if verdict is not None:
                    out.append(Step(index, tc.name, *verdict, turn=turn))
                index += 1
    return out


__all__ = ["Seen", "Step", "grounding"]
