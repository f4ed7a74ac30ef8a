"""Every prompt the teacher answers, as a :class:`Task` (the shape of distilabel's ``Task``).

A task has a name, a template in ``prompts/``, :meth:`Task.format_input` (inputs ->
chat messages) and :meth:`Task.format_output` (a reply -> a value, or a named reason and
a detail; it never raises).  Stages call the teacher with a task's messages and pass
``task.hint(...)``: a frozen hint of the task's own type (:class:`QuestionHint`,
:class:`RepairHint`, :class:`AgentHint`...), the facts only the offline oracle reads
(never sent, never part of a cache key).  The oracle dispatches on the hint's type, so it
needs no stage's code; a real backend reads only ``hint.task`` (for a JSON schema).

The questions' input, :class:`Source`, lives here too: it is what the question tasks
format and what the oracle writes from; and so does :class:`CorpusView`, what the
questions stage lets the oracle's writer ask of the corpus.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterator, NamedTuple, Protocol

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

    def hint(self, **facts: Any) -> "Hint":
        """What the offline oracle reads for this call: the task's hint type, holding ``facts``."""
        return HINTS[self.name](**facts)


class CorpusView(Protocol):
    """What the oracle's question writer may ask of the corpus, beyond the source it writes from:
    the pages around a chain (to make each clue fit one of them) and the search index (so no clue
    is found by one search).  The questions stage implements it (``synth.questions.links``)."""

    k: int  # depth of the searches a clue must not be found in (``tools.search_max_k``, the agents' largest search k)

    def neighbours(self, page_id: str, backward: bool) -> list[str]:
        """The pages ``page_id`` links to (``backward``: the pages that link to it)."""

    def title(self, page_id: str) -> str:
        """A page's title."""

    def description(self, page_id: str) -> str:
        """A page's short description (``""`` when none)."""

    def page(self, page_id: str) -> dict | None:
        """A page as the tools show it: ``paragraphs`` and ``links`` (``[anchor, page id, title]``)."""

    def search_ids(self, text: str, k: int, dense: bool = True) -> list[str]:
        """The pages one search for ``text`` returns in the unmasked index, top ``k``: at the checks' depth
        ``k``, every page any of the question checks' adversaries returns (``questions.adversaries``); with
        ``dense`` false, those of the adversaries that need no model to read the query (the lexical ones)."""

    def rarity(self, word: str) -> float:
        """How rare a word is in the corpus (its inverse document frequency)."""

    def is_title(self, text: str) -> bool:
        """Whether some page has this title (case aside): a word a clue may name a topic by."""


@dataclass(frozen=True)
class Hint:
    """A hint's base: the task it belongs to (``TASK``, a task name)."""

    TASK: ClassVar[str] = ""

    @property
    def task(self) -> "Task":
        """The task this hint belongs to."""
        return TASKS[self.TASK]


# The hint of the teacher call under way: set by Teacher around its backend's call, read only by backends that
# script their answers (the offline oracle, tests' fakes).  A real backend is handed the call's task alone.
_HINT: ContextVar[Any] = ContextVar("hopforge_teacher_hint", default=None)


def current_hint() -> Any:
    """The hint of the teacher call under way in this task (None outside one, or for a call without a hint):
    what the caller knows that a real model is never told, for a scripted backend to answer from."""
    return _HINT.get()


@contextmanager
def hinted(hint: Any) -> Iterator[None]:
    """Make ``hint`` the :func:`current_hint` of the backend call made inside the block."""
    token = _HINT.set(hint)
    try:
        yield
    finally:
        _HINT.reset(token)


def task_of(hint: Any) -> "Task | None":
    """The task a hint belongs to (what a real backend may know of a call: its expected output), None for none."""
    return hint.task if isinstance(hint, Hint) else None


@dataclass(frozen=True)
class QuestionHint(Hint):
    """A question through a walk's path: the source, its seed, the word budget and the corpus view."""

    TASK: ClassVar[str] = "question"
    source: "Source"
    seed: int
    max_words: int
    corpus: CorpusView | None = field(default=None, compare=False)


@dataclass(frozen=True)
class SubgraphHint(Hint):
    """A question over a subgraph: as :class:`QuestionHint`, and the least hops its chain needs."""

    TASK: ClassVar[str] = "subgraph_question"
    source: "Source"
    seed: int
    max_words: int
    min_hops: int
    corpus: CorpusView | None = field(default=None, compare=False)


@dataclass(frozen=True)
class RepairHint(Hint):
    """One rewrite of a rejected question: why it failed (``reason``, ``detail``) and the hop it names."""

    TASK: ClassVar[str] = "repair"
    source: "Source"
    seed: int
    reason: str
    hop: int | None
    max_words: int
    min_hops: int
    detail: str = ""
    corpus: CorpusView | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ObfuscateHint(Hint):
    """A rewrite that blurs names: the source and the question to rewrite."""

    TASK: ClassVar[str] = "obfuscate"
    source: "Source"
    question: str
    seed: int


@dataclass(frozen=True)
class ClosedBookHint(Hint):
    """A question asked without tools: its answer and the chain's titles."""

    TASK: ClassVar[str] = "closed_book"
    answer: str
    titles: tuple[str, ...]


@dataclass(frozen=True)
class SolvableHint(Hint):
    """A question asked with the gold pages in context: its answer and the chain's titles."""

    TASK: ClassVar[str] = "solvable"
    answer: str
    titles: tuple[str, ...]


@dataclass(frozen=True)
class JudgeHint(Hint):
    """A final answer to judge against the gold answer and its aliases."""

    TASK: ClassVar[str] = "judge"
    prediction: str | None
    answer: str
    aliases: tuple[str, ...]


@dataclass(frozen=True)
class AgentHint(Hint):
    """A rollout: the persona seed of the question (the agent reads the question from the conversation)."""

    TASK: ClassVar[str] = "agent"
    seed: int


QUESTION = Task("question", "question.jinja2", "json")
SUBGRAPH_QUESTION = Task("subgraph_question", "subgraph_question.jinja2", "json")


def _evidence_view(src: Source, link: Evidence) -> dict:
    titles = {e["page_id"]: e["title"] for e in src.entities}
    return {"src": titles.get(link.src_id, link.src_id), "dst": titles.get(link.dst_id, link.dst_id),
            "anchor_text": link.anchor_text, "paragraph": link.paragraph}


def question_request(src: Source, qcfg: Any, corpus: CorpusView | None = None) -> tuple[Task, list[dict], Hint]:
    """(task, messages, oracle hint) of the question request for a source (a walk: ``question.jinja2``; a
    subgraph: ``subgraph_question.jinja2``), under the questions config ``qcfg`` (``max_words``,
    ``min_subgraph_hops``); ``corpus`` is what the oracle's writer may read.

    The request holds the source alone, not the pages around it, so a rebuild over a grown corpus
    asks nothing again for a walk it kept (the validators, which read the current corpus, judge the
    cached question anew; a repair names the page a clue also fits)."""
    ents = [{"title": e["title"], "description": e.get("description") or ""} for e in src.entities]
    views = [_evidence_view(src, h) for h in src.links]
    if src.kind == "walk":
        task, inputs = QUESTION, {"entities": ents, "hops": views, "n_hops": len(src.links), "max_words": qcfg.max_words}
        hint = task.hint(source=src, seed=src.seed, max_words=qcfg.max_words, corpus=corpus)
    else:
        task, inputs = SUBGRAPH_QUESTION, {"entities": ents, "edges": views, "min_hops": qcfg.min_subgraph_hops,
                                           "max_words": qcfg.max_words}
        hint = task.hint(source=src, seed=src.seed, max_words=qcfg.max_words, min_hops=qcfg.min_subgraph_hops,
                         corpus=corpus)
    return task, task.format_input(**inputs), hint


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
HINTS: dict[str, type[Hint]] = {h.TASK: h for h in (QuestionHint, SubgraphHint, RepairHint, ObfuscateHint,
                                                    ClosedBookHint, SolvableHint, JudgeHint, AgentHint)}


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
