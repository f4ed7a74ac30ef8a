"""Every prompt the teacher answers, as a :class:`Task` (the shape of distilabel's ``Task``).

A task has a name, a template in ``prompts/``, :meth:`Task.format_input` (inputs ->
chat messages) and :meth:`Task.format_output` (a reply -> a value, or a named reason and
a detail; it never raises).  Stages call the teacher with a task's messages and pass
``task.hint(...)``, the facts only the offline oracle reads (never sent, never cached):
the oracle dispatches on the task, so it needs no stage's code.

The questions' input, :class:`Source`, lives here too: it is what the question tasks
format and what the oracle writes from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from synth.engine.records import Evidence
from synth.engine.seeding import short_hash
from synth.teacher.prompting import extract_answer, extract_json, prompt_sha, read_json, render
from synth.teacher.types import split_reasoning
from synth.text.answers import names_of, normalize_answer


class Parsed(NamedTuple):
    """What :meth:`Task.format_output` gives: ``value`` or a ``reason`` with a ``detail``."""

    value: Any
    reason: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class Task:
    """One prompt: ``template`` (a file in ``prompts/``) and how its reply is read.

    ``output`` is ``json`` (an object, whose ``required`` keys must have the given types),
    ``answer`` (the last ``<answer>...</answer>`` span) or ``turn`` (an agent turn, read by
    the rollout loop itself).
    """

    name: str
    template: str
    output: str
    required: tuple[tuple[str, type], ...] = ()
    parse: Callable[[str | None], Parsed] | None = None  # a reader of its own, in place of ``output``'s

    @property
    def sha(self) -> str:
        """The template's ``prompt_sha``, recorded with every row the task produced."""
        return prompt_sha(self.template.removesuffix(".jinja2"))

    def format_input(self, **inputs: Any) -> list[dict]:
        """The chat messages (system, user) for ``inputs``."""
        return render(self.template.removesuffix(".jinja2"), **inputs)

    def format_output(self, reply: Any, finish_reason: str | None = None) -> Parsed:
        """The reply read as this task's output, or why it cannot be.

        ``reply`` is the reply text, or the whole :class:`~synth.teacher.types.ChatResponse`
        (then its ``finish_reason`` is used, so a reply cut at max_tokens is ``truncated``, not
        a parse failure).  Reasons are those of :data:`~synth.teacher.prompting.PARSE_REASONS`:
        ``empty``, ``truncated``, ``prose``, ``invalid_json``, ``schema_error``.  Reasoning
        (``<think>`` blocks) is never read as output.  Of several JSON objects, the first with
        the ``required`` keys is taken.
        """
        content = getattr(reply, "content", reply)
        if finish_reason is None:
            finish_reason = getattr(reply, "finish_reason", None)
        if self.output == "json":
            objs, reason, detail = read_json(content, finish_reason)
            if reason is not None:
                return Parsed(None, reason, detail)
            if self.parse is not None:
                return self.parse(content)
            for obj in objs:
                if all(isinstance(obj.get(key), typ) for key, typ in self.required):
                    return Parsed(obj)
            key, typ = next((k, t) for k, t in self.required if not isinstance(objs[0].get(k), t))
            return Parsed(None, "schema_error", f"`{key}` must be {typ.__name__}")
        if self.parse is not None:
            return self.parse(content)
        if self.output == "answer":
            answer = extract_answer(content)
            if answer is not None:
                return Parsed(answer)
            text = split_reasoning(content)[0]
            if finish_reason == "length":
                return Parsed(None, "truncated", "cut at max_tokens before <answer>...</answer>")
            if not text or not text.strip():
                return Parsed(None, "empty", "no text outside the reasoning")
            return Parsed(None, "prose", "no <answer>...</answer> tag")
        return Parsed(content)

    def hint(self, **facts: Any) -> dict:
        """What the offline oracle reads for this call: the task and the facts it answers from."""
        return {"task": self, **facts}


QUESTION = Task("question", "question.jinja2", "json")
SUBGRAPH_QUESTION = Task("subgraph_question", "subgraph_question.jinja2", "json")
OBFUSCATE = Task("obfuscate", "obfuscate.jinja2", "json", required=(("question", str),))
CLOSED_BOOK = Task("closed_book", "closed_book.jinja2", "answer")
SOLVABLE = Task("solvable", "solvable.jinja2", "answer")
# One rewrite of a question a validator rejected: the original request, the rejected reply, the reason and its rule.
REPAIR = Task("repair", "repair.jinja2", "json")
def _judge_verdict(content: str | None) -> Parsed:
    """The judge's verdict (``{"correct": true|false}``, or the words yes/no/correct/incorrect)."""
    obj, reason = extract_json(content)
    if obj is None:
        return Parsed(None, reason, "no JSON object")
    v = obj.get("correct")
    if isinstance(v, str):
        v = {"true": True, "yes": True, "correct": True, "false": False, "no": False,
             "incorrect": False}.get(v.strip().lower())
    if not isinstance(v, bool):
        return Parsed(None, "schema_error", "`correct` must be true or false")
    return Parsed(v)


JUDGE = Task("judge", "judge.jinja2", "json", parse=_judge_verdict)
AGENT = Task("agent", "agent.jinja2", "turn")

TASKS = {t.name: t for t in (QUESTION, SUBGRAPH_QUESTION, REPAIR, OBFUSCATE, CLOSED_BOOK, SOLVABLE, JUDGE, AGENT)}


@dataclass(slots=True)
class Source:
    """What one question is written from: a walk's path or a subgraph, with page metadata."""

    kind: str  # "walk" | "subgraph"
    source_id: str
    entities: list[dict]  # {page_id, title, description, aliases} in path / node order
    links: list[Evidence]  # walk: one per hop, in order; subgraph: every edge
    seed: int

    @property
    def question_id(self) -> str:
        return "q-" + short_hash(self.kind, self.source_id)

    def entity(self, title_or_alias: str) -> dict | None:
        """The entity whose title (or alias, or unqualified title) matches, after normalisation."""
        n = normalize_answer(title_or_alias)
        for e in self.entities:
            if n in {normalize_answer(x) for x in names_of(e)}:
                return e
        return None


def json_message(obj: dict) -> dict:
    """An assistant message whose content is ``obj`` as JSON (how a model answers a json task)."""
    return {"role": "assistant", "content": json.dumps(obj, ensure_ascii=False)}
