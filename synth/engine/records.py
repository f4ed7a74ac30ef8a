"""Record types and their Arrow schemas: the one place a table's columns are defined.

Bulk tables (pages, links) are processed as Arrow batches and only their schemas
live here.  Per-record stages use the dataclasses, whose fields are exactly the
table's columns: a column that a later stage reads is a field, never a key in a
free-form dict.  A trace's conversation, stored as OpenAI-format JSON, is read once
into :class:`Conversation` (``Trace.conversation``).
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields
from enum import StrEnum
from functools import lru_cache
from typing import Any, ClassVar, Iterator

import pyarrow as pa

# ---- corpus ------------------------------------------------------------------------------

class Split(StrEnum):
    """The split of a question, decided once when it is written and carried by every table."""

    SFT = "sft"  # its kept traces become SFT rows (and longctx)
    RL = "rl"  # it may enter rl_pool
    EVAL = "eval"  # held out: the student is evaluated on it, never trained


SPLITS: tuple[str, ...] = tuple(s.value for s in Split)

PAGE_SCHEMA = pa.schema(
    [
        pa.field("page_id", pa.string(), nullable=False),
        pa.field("title", pa.string(), nullable=False),
        pa.field("paragraphs", pa.list_(pa.string()), nullable=False),  # text[1:], markup kept
        pa.field("description", pa.string()),  # wikidata_info.description when present
        pa.field("aliases", pa.list_(pa.string())),  # wikidata_info.aliases
        pa.field("wikidata_id", pa.string()),
        pa.field("categories", pa.string()),
        pa.field("url", pa.string()),
        pa.field("n_chars", pa.int64()),  # total characters of the paragraphs
    ]
)

LINK_SCHEMA = pa.schema(
    [
        pa.field("src_id", pa.string(), nullable=False),
        pa.field("dst_id", pa.string(), nullable=False),
        pa.field("paragraph_id", pa.int32(), nullable=False),  # index into KILT `text` (0 is the title)
        pa.field("start", pa.int32(), nullable=False),
        pa.field("end", pa.int32(), nullable=False),
        pa.field("anchor_text", pa.string()),
    ]
)

# One hop of evidence: the anchor in `src` that links to `dst`, with its paragraph.
EVIDENCE_TYPE = pa.struct(
    [
        pa.field("src_id", pa.string()),
        pa.field("dst_id", pa.string()),
        pa.field("paragraph_id", pa.int32()),
        pa.field("paragraph", pa.string()),
        pa.field("anchor_text", pa.string()),
    ]
)


@dataclass(slots=True)
class Evidence:
    """The anchor in page ``src_id`` (paragraph ``paragraph_id``) that links to ``dst_id``."""

    src_id: str
    dst_id: str
    paragraph_id: int
    paragraph: str
    anchor_text: str


class Record:
    """Mixin: Arrow conversion for dataclass records whose fields match ``SCHEMA``.

    ``NESTED`` names the list-of-struct columns and the dataclass of their items, so
    :meth:`from_row` rebuilds them (:meth:`to_row` turns them back into dicts).
    """

    SCHEMA: ClassVar[pa.Schema]
    NESTED: ClassVar[dict[str, type]] = {}

    def to_row(self) -> dict[str, Any]:
        """The record as a table row (nested dataclasses as dicts)."""
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_row(cls, row: dict[str, Any]):
        """The record of a table row (as ``to_pylist`` gives it)."""
        # A column a record gained later (with a default) may be missing from a row written before it.
        kw = {f.name: row[f.name] if f.name in row or f.default is MISSING else f.default
              for f in fields(cls)}  # type: ignore[arg-type]
        for name, item in cls.NESTED.items():
            kw[name] = [x if isinstance(x, item) else item(**x) for x in kw[name]]
        return cls(**kw)

    @classmethod
    def to_table(cls, records: list) -> pa.Table:
        return pa.Table.from_pylist([r.to_row() for r in records], schema=cls.SCHEMA)


@dataclass(slots=True)
class Walk(Record):
    """A k-hop entity path ``P = [v0..vk]`` with the evidence of each hop."""

    walk_id: str
    path: list[str]
    titles: list[str]
    hops: list[Evidence]  # k hops, hop i links path[i] -> path[i+1]
    start_index: int  # walker slot that produced it (reproducibility)

    NESTED: ClassVar[dict[str, type]] = {"hops": Evidence}

    SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            pa.field("walk_id", pa.string(), nullable=False),
            pa.field("path", pa.list_(pa.string()), nullable=False),
            pa.field("titles", pa.list_(pa.string()), nullable=False),
            pa.field("hops", pa.list_(EVIDENCE_TYPE), nullable=False),
            pa.field("start_index", pa.int64(), nullable=False),
        ]
    )


@dataclass(slots=True)
class Subgraph(Record):
    """``G_sub = Expand(G, v_seed, K)``: a connected set of K pages and the evidence of its edges."""

    subgraph_id: str
    seed_id: str
    nodes: list[str]
    titles: list[str]
    edges: list[Evidence]  # every edge of the induced subgraph
    slot: int

    NESTED: ClassVar[dict[str, type]] = {"edges": Evidence}

    SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            pa.field("subgraph_id", pa.string(), nullable=False),
            pa.field("seed_id", pa.string(), nullable=False),
            pa.field("nodes", pa.list_(pa.string()), nullable=False),
            pa.field("titles", pa.list_(pa.string()), nullable=False),
            pa.field("edges", pa.list_(EVIDENCE_TYPE), nullable=False),
            pa.field("slot", pa.int64(), nullable=False),
        ]
    )


HOP_TYPE = pa.struct(
    [
        pa.field("sub_question", pa.string()),
        pa.field("bridge", pa.string()),  # title of the entity this hop reaches
        pa.field("page_id", pa.string()),  # that entity's page
    ]
)


@dataclass(slots=True)
class Hop:
    """One link of a question's chain: the sub-question it answers and the entity it reaches."""

    sub_question: str
    bridge: str  # title of the entity this hop reaches
    page_id: str  # that entity's page


@dataclass(slots=True)
class Question(Record):
    """A verified multi-hop question through every entity of ``path``, with its provenance."""

    question_id: str
    kind: str  # "walk" or "subgraph"
    walk_id: str  # the walk (or subgraph) the question was written from
    path: list[str]  # page ids of the gold chain, in order; the last one is the answer page
    titles: list[str]
    question: str
    answer: str  # title of the answer page
    answer_aliases: list[str]
    answer_page_id: str  # masked from search during rollouts
    hops: list[Hop]  # one per link of the chain
    teacher_model: str
    prompt_sha: str
    seed: int
    split: str  # sft | rl | eval: decided once, by a stable hash of the question id
    # Hops a solver with a search tool must walk (synth.questions.depth); None when not measured (no index).
    effective_depth: int | None = None
    entry: str | None = None  # the search that lets a solver enter the chain later than its start, in words

    NESTED: ClassVar[dict[str, type]] = {"hops": Hop}

    SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            pa.field("question_id", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),
            pa.field("walk_id", pa.string(), nullable=False),
            pa.field("path", pa.list_(pa.string()), nullable=False),
            pa.field("titles", pa.list_(pa.string()), nullable=False),
            pa.field("question", pa.string(), nullable=False),
            pa.field("answer", pa.string(), nullable=False),
            pa.field("answer_aliases", pa.list_(pa.string()), nullable=False),
            pa.field("answer_page_id", pa.string(), nullable=False),
            pa.field("hops", pa.list_(HOP_TYPE), nullable=False),
            pa.field("teacher_model", pa.string(), nullable=False),
            pa.field("prompt_sha", pa.string(), nullable=False),
            pa.field("seed", pa.int64(), nullable=False),
            pa.field("split", pa.string(), nullable=False),
            pa.field("effective_depth", pa.int64()),
            pa.field("entry", pa.string()),
        ]
    )


# ---- the trace conversation ------------------------------------------------------------------
# A trace stores its conversation as OpenAI-format JSON; these types are that JSON parsed once.


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an assistant turn; ``arguments`` is the JSON text the model wrote."""

    id: str
    name: str
    arguments: str

    def args(self) -> dict | None:
        """The arguments as a dict; None when they are not a JSON object."""
        try:
            obj = json.loads(self.arguments)
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None

    @classmethod
    def from_openai(cls, tc: dict[str, Any], index: int, id_prefix: str = "call") -> "ToolCall":
        """A server's tool call in the one shape hopforge stores.

        Servers differ: some send ``arguments`` as an object instead of a JSON string, some
        omit the id (it becomes ``<id_prefix>_<index>``) or the name.  Arrow merges dict keys
        across rows, so the stored shape must not vary with the server.
        """
        fn = tc.get("function") or {}
        cid, name, args = tc.get("id"), fn.get("name"), fn.get("arguments")
        if not isinstance(args, str):
            args = json.dumps(args if args is not None else {}, ensure_ascii=False)
        return cls(cid if isinstance(cid, str) and cid else f"{id_prefix}_{index}",
                   name if isinstance(name, str) else "", args)

    def to_openai(self) -> dict[str, Any]:
        """The call as an OpenAI ``tool_calls`` item (the shape of :data:`TOOL_CALL_TYPE`)."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation.  ``content`` is text, or OpenAI content parts as given."""

    role: str
    content: str | list | None = None
    tool_calls: tuple[ToolCall, ...] = ()  # assistant turns only
    tool_call_id: str | None = None  # tool messages: the call they answer
    name: str | None = None  # tool messages: the tool that answered
    reasoning_content: str | None = None

    @property
    def text(self) -> str | None:
        """``content`` as plain text (content parts joined)."""
        if isinstance(self.content, list):
            return "".join(p.get("text") or "" for p in self.content if isinstance(p, dict))
        return self.content


@dataclass(frozen=True, slots=True)
class Conversation:
    """A parsed conversation.  Parsing is lenient: it stops at the first structural problem
    (JSON that is not a list of messages in OpenAI shape), described in ``problem``, and
    keeps what came before it, including the message it stopped in when that message is
    readable.  ``problem_at`` is that message's index; None when the problem is with the
    whole JSON."""

    messages: tuple[Message, ...] = ()
    problem: str | None = None
    problem_at: int | None = None

    @classmethod
    def from_json(cls, text: str) -> "Conversation":
        """Parse a JSON list of OpenAI messages; see :meth:`from_openai`."""
        try:
            raw = json.loads(text)
        except (TypeError, ValueError) as e:
            return cls((), f"messages are not JSON: {e}")
        return cls.from_openai(raw)

    @classmethod
    def from_openai(cls, raw: Any) -> "Conversation":
        """Read decoded OpenAI messages.  Structural problems: not a non-empty list, a message
        that is not an object or whose role is not a string, a tool message whose
        ``tool_call_id`` is not a string, and an assistant tool call that is not an object or
        lacks an id, a function object, a string name or string arguments."""
        if not isinstance(raw, list) or not raw:
            return cls((), "messages are not a non-empty list")
        out: list[Message] = []
        for i, m in enumerate(raw):
            if not isinstance(m, dict):
                return cls(tuple(out), f"message {i} is not an object", i)
            role = m.get("role")
            if not isinstance(role, str):
                return cls(tuple(out), f"message {i} has role {role!r}", i)
            cid = m.get("tool_call_id") if role == "tool" else None
            if cid is not None and not isinstance(cid, str):
                # The same words the format filter uses for an id that answers no call.
                return cls(tuple(out), f"message {i}: tool message answers {cid!r}, which no earlier "
                                       "unanswered call has", i)
            content, name, reasoning = m.get("content"), m.get("name"), m.get("reasoning_content")
            if not isinstance(content, (str, list)):
                content = None  # OpenAI content is text or parts; anything else is read as no content
            calls, problem = _read_calls(m.get("tool_calls")) if role == "assistant" else ((), None)
            out.append(Message(role, content, calls, cid, name if role == "tool" and isinstance(name, str) else None,
                               reasoning if isinstance(reasoning, str) else None))
            if problem is not None:
                return cls(tuple(out), f"message {i}: {problem}", i)
        return cls(tuple(out))

    def tool_calls(self) -> Iterator[tuple[int, ToolCall]]:
        """``(assistant turn, call)`` for every tool call, in order; turns count assistant messages from 1."""
        turn = 0
        for m in self.messages:
            if m.role == "assistant":
                turn += 1
                for tc in m.tool_calls:
                    yield turn, tc


def _read_calls(raw: Any) -> tuple[tuple[ToolCall, ...], str | None]:
    """An assistant message's tool calls, up to the first malformed one, and what is wrong with it."""
    calls: list[ToolCall] = []
    if not raw:
        return (), None
    if not isinstance(raw, list):
        return (), "a tool call is not an object"  # a dict or a string holds no call objects either
    for tc in raw:
        if not isinstance(tc, dict):
            return tuple(calls), "a tool call is not an object"
        cid = tc.get("id")
        if not isinstance(cid, str) or not cid:
            return tuple(calls), "a tool call has no id"
        fn = tc.get("function")
        if not isinstance(fn, dict):
            return tuple(calls), f"tool call {cid!r} has no function"
        name, args = fn.get("name"), fn.get("arguments")
        if not isinstance(name, str):
            return tuple(calls), f"tool call {cid!r} names unknown tool {name!r}"
        if not isinstance(args, str):
            return tuple(calls), f"tool call {cid!r}: arguments are not a JSON string"
        calls.append(ToolCall(cid, name, args))
    return tuple(calls), None


@lru_cache(maxsize=256)
def parse_conversation(messages_json: str) -> Conversation:
    """:meth:`Conversation.from_json`, cached: every filter and writer of a trace reads one parse."""
    return Conversation.from_json(messages_json)


@dataclass(slots=True)
class Trace(Record):
    """One teacher rollout: the full ReAct conversation plus the measurements filters and RL read.

    ``messages`` and ``tools`` are JSON strings (OpenAI format, with ``tool_call_id``s and
    tool-call ``arguments`` as JSON strings) because Arrow would merge dict keys across rows.
    Turns count assistant messages from 1.  ``gold_first_seen[j]`` is the turn whose tool
    observation first showed gold page ``path[j]`` (in a search result, an opened or a found
    page), -1 if never; the evidence state E_t and the evidence-recovery time derive from it.
    """

    trace_id: str
    question_id: str
    sample_index: int
    messages: str
    tools: str
    final_answer: str | None
    stop_reason: str  # answer | max_turns | max_tokens | truncated | teacher_failed | no_answer
    n_turns: int
    n_tool_calls: int
    n_search: int
    n_open: int
    n_find: int
    n_tool_errors: int  # malformed or failed tool calls (the observation was an error)
    searched_page_ids: list[str]
    opened_page_ids: list[str]
    gold_page_ids: list[str]  # the question's path, in order
    gold_first_seen: list[int]
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    teacher_model: str
    error: str | None  # teacher failure reason when stop_reason == teacher_failed
    split: str  # the question's split, carried so no table needs a join to know it
    # How tool calls travelled: native (the server's tool_calls) or a text protocol (hermes, llama3,
    # mistral, react) parsed back into the same shape; see synth/teacher/protocols.py.
    tool_protocol: str = "native"

    SCHEMA: ClassVar[pa.Schema] = pa.schema(
        [
            pa.field("trace_id", pa.string(), nullable=False),
            pa.field("question_id", pa.string(), nullable=False),
            pa.field("sample_index", pa.int32(), nullable=False),
            pa.field("messages", pa.string(), nullable=False),
            pa.field("tools", pa.string(), nullable=False),
            pa.field("final_answer", pa.string()),
            pa.field("stop_reason", pa.string(), nullable=False),
            pa.field("n_turns", pa.int32(), nullable=False),
            pa.field("n_tool_calls", pa.int32(), nullable=False),
            pa.field("n_search", pa.int32(), nullable=False),
            pa.field("n_open", pa.int32(), nullable=False),
            pa.field("n_find", pa.int32(), nullable=False),
            pa.field("n_tool_errors", pa.int32(), nullable=False),
            pa.field("searched_page_ids", pa.list_(pa.string()), nullable=False),
            pa.field("opened_page_ids", pa.list_(pa.string()), nullable=False),
            pa.field("gold_page_ids", pa.list_(pa.string()), nullable=False),
            pa.field("gold_first_seen", pa.list_(pa.int32()), nullable=False),
            pa.field("prompt_tokens", pa.int64(), nullable=False),
            pa.field("completion_tokens", pa.int64(), nullable=False),
            pa.field("latency_s", pa.float64(), nullable=False),
            pa.field("teacher_model", pa.string(), nullable=False),
            pa.field("error", pa.string()),
            pa.field("split", pa.string(), nullable=False),
            pa.field("tool_protocol", pa.string(), nullable=False),
        ]
    )

    @property
    def conversation(self) -> Conversation:
        """``messages`` parsed (see :class:`Conversation`); parsed once however often it is read."""
        return parse_conversation(self.messages)


# Chat messages as TRL's SFTTrainer reads them (conversational, with tool calls).
# Tool-call arguments stay JSON strings: Arrow would otherwise merge argument keys across rows.
TOOL_CALL_TYPE = pa.struct(
    [
        pa.field("id", pa.string()),
        pa.field("type", pa.string()),
        pa.field("function", pa.struct([pa.field("name", pa.string()), pa.field("arguments", pa.string())])),
    ]
)
MESSAGE_TYPE = pa.struct(
    [
        pa.field("role", pa.string()),
        pa.field("content", pa.string()),
        pa.field("tool_calls", pa.list_(TOOL_CALL_TYPE)),
        pa.field("tool_call_id", pa.string()),
        pa.field("name", pa.string()),
    ]
)

SFT_SCHEMA = pa.schema(
    [
        pa.field("messages", pa.list_(MESSAGE_TYPE), nullable=False),
        pa.field("tools", pa.string(), nullable=False),  # JSON list of OpenAI function schemas (TRL json.loads it)
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("trace_id", pa.string(), nullable=False),
        pa.field("rubric", pa.float64(), nullable=False),
        pa.field("n_tool_calls", pa.int32(), nullable=False),
        pa.field("teacher_model", pa.string(), nullable=False),
        pa.field("split", pa.string(), nullable=False),  # always sft
    ]
)


# Rejected rows of per-record stages (questions, assemble) keep the raw model output and the reason.
REJECT_SCHEMA = pa.schema(
    [
        pa.field("record_id", pa.string(), nullable=False),
        pa.field("source_id", pa.string()),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("detail", pa.string()),
        pa.field("raw", pa.string()),
    ]
)

# ---- downstream tables -----------------------------------------------------------------------

# Rejected traces of the filter stage: the whole trace plus why it was dropped.
TRACE_REJECT_SCHEMA = pa.schema(list(Trace.SCHEMA) + [pa.field("reason", pa.string(), nullable=False),
                                                pa.field("detail", pa.string())])

VERDICT_SCHEMA = pa.schema(
    [
        pa.field("trace_id", pa.string(), nullable=False),
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("teacher_model", pa.string(), nullable=False),
        pa.field("split", pa.string(), nullable=False),
        pa.field("rule_correct", pa.bool_(), nullable=False),  # exact match or F1 >= min_f1
        pa.field("em", pa.bool_(), nullable=False),
        pa.field("f1", pa.float64(), nullable=False),
        pa.field("judge_correct", pa.bool_()),  # null: judge off, not asked (no answer) or failed
        pa.field("correct", pa.bool_(), nullable=False),  # rule_correct or (judge_correct and f1 > 0)
        pa.field("rubric_raw", pa.float64()),  # only for traces that passed the chain (positive-only)
        pa.field("rubric", pa.float64()),  # rubric_raw / group max
        pa.field("n_tokens", pa.int64()),  # rendered length, when the length filter measured it
        pa.field("ungrounded_steps", pa.int64(), nullable=False),  # tool calls acting on what was not yet seen
        pa.field("kept", pa.bool_(), nullable=False),
        pa.field("reason", pa.string()),  # drop reason; null when kept
    ]
)


# The `rl_pool` table in the verl / Search-R1 layout.
PROMPT_MESSAGE_TYPE = pa.struct([pa.field("role", pa.string()), pa.field("content", pa.string())])
# extra_info.tools_kwargs: {tool name: {"create_kwargs": {...}}}; only `search` takes any (the pages it never returns).
RL_TOOLS_KWARGS_TYPE = pa.struct([
    pa.field("search", pa.struct([
        pa.field("create_kwargs", pa.struct([pa.field("exclude", pa.list_(pa.string()))])),
    ])),
])
RL_SCHEMA = pa.schema(
    [
        pa.field("data_source", pa.string(), nullable=False),
        pa.field("prompt", pa.list_(PROMPT_MESSAGE_TYPE), nullable=False),
        pa.field("ability", pa.string(), nullable=False),
        pa.field("reward_model", pa.struct([
            pa.field("style", pa.string()),
            pa.field("ground_truth", pa.struct([pa.field("target", pa.list_(pa.string()))])),
        ]), nullable=False),
        pa.field("extra_info", pa.struct([
            pa.field("question_id", pa.string()),
            pa.field("index", pa.int64()),
            pa.field("path", pa.list_(pa.string())),
            pa.field("n", pa.int32()),
            pa.field("c", pa.int32()),
            pa.field("split", pa.string()),
            # verl's multi-turn tool rollouts: per tool, the kwargs of its ``create`` (the search masks the
            # answer page, as the rollout's Toolbox did); see filters/band.py and synth/tools/verl_tool.py.
            pa.field("tools_kwargs", RL_TOOLS_KWARGS_TYPE),
            pa.field("need_tools_kwargs", pa.bool_()),
        ]), nullable=False),
        pa.field("tools", pa.string(), nullable=False),
    ]
)


# Tiered long-context rows (`longctx`).
LONGCTX_SCHEMA = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),  # "<question_id>-<L>"
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("target_length", pa.int32(), nullable=False),
        pa.field("prompt", pa.string(), nullable=False),
        pa.field("completion", pa.string(), nullable=False),  # the answer
        pa.field("n_tokens", pa.int32(), nullable=False),  # exact, of prompt + completion
        pa.field("doc_page_ids", pa.list_(pa.string()), nullable=False),  # in prompt order (Document [1] first)
        pa.field("doc_tiers", pa.list_(pa.int8()), nullable=False),  # 0 gold, 1 retrieved, 2 fill
        pa.field("doc_n_tokens", pa.list_(pa.int32()), nullable=False),  # each document's segment, counted alone
        pa.field("gold_positions", pa.list_(pa.int32()), nullable=False),  # 0-based, in path order
        pa.field("truncated_page_id", pa.string()),  # the one tier-2 page cut short, if any
        pa.field("n_gold", pa.int32(), nullable=False),
        pa.field("n_tier1", pa.int32(), nullable=False),
        pa.field("n_tier2", pa.int32(), nullable=False),
        pa.field("answer_aliases", pa.list_(pa.string()), nullable=False),
        pa.field("split", pa.string(), nullable=False),  # always sft
    ]
)

__all__ = [
    "Split",
    "SPLITS",
    "PAGE_SCHEMA",
    "LINK_SCHEMA",
    "EVIDENCE_TYPE",
    "Evidence",
    "Record",
    "Walk",
    "Subgraph",
    "Question",
    "HOP_TYPE",
    "Hop",
    "REJECT_SCHEMA",
    "ToolCall",
    "Message",
    "Conversation",
    "parse_conversation",
    "Trace",
    "SFT_SCHEMA",
    "TRACE_REJECT_SCHEMA",
    "VERDICT_SCHEMA",
    "PROMPT_MESSAGE_TYPE",
    "RL_SCHEMA",
    "LONGCTX_SCHEMA",
    "MESSAGE_TYPE",
    "TOOL_CALL_TYPE",
]
