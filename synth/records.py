"""Record types and their Arrow schemas: the one place a table's columns are defined.

Bulk tables (pages, links) are processed as Arrow batches and only their schemas
live here.  Per-record stages use the dataclasses, whose fields are exactly the
table's columns: a column that a later stage reads is a field, never a key in a
free-form dict.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

import pyarrow as pa

# ---- corpus ------------------------------------------------------------------------------

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
    """Mixin: Arrow conversion for dataclass records whose fields match ``SCHEMA``."""

    SCHEMA: ClassVar[pa.Schema]

    def to_row(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_row(cls, row: dict[str, Any]):
        kw = {f.name: row[f.name] for f in fields(cls)}  # type: ignore[arg-type]
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
    hops: list[dict]  # k Evidence dicts, hop i links path[i] -> path[i+1]
    start_index: int  # walker slot that produced it (reproducibility)

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
    edges: list[dict]  # Evidence dicts for every edge of the induced subgraph
    slot: int

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
    hops: list[dict]  # HOP_TYPE dicts, one per link of the chain
    teacher_model: str
    prompt_sha: str
    seed: int

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
        ]
    )


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
    stop_reason: str  # answer | max_turns | max_tokens | teacher_failed | no_answer
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
        ]
    )


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
    ]
)


# Rejected rows of per-record stages keep the raw model output and the reason.
REJECT_SCHEMA = pa.schema(
    [
        pa.field("record_id", pa.string(), nullable=False),
        pa.field("source_id", pa.string()),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("detail", pa.string()),
        pa.field("raw", pa.string()),
    ]
)

__all__ = [
    "PAGE_SCHEMA",
    "LINK_SCHEMA",
    "EVIDENCE_TYPE",
    "Evidence",
    "Record",
    "Walk",
    "Subgraph",
    "Question",
    "HOP_TYPE",
    "REJECT_SCHEMA",
    "Trace",
    "SFT_SCHEMA",
    "MESSAGE_TYPE",
    "TOOL_CALL_TYPE",
]
