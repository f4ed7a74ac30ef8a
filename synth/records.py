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
]
