"""Config of long-context assembly (``assemble:``): tiered contexts packed to target lengths.

Every field but the three marked operational shapes the ``longctx`` rows, so it
enters the stage's content key.  Lengths are in tokens of the run's tokenizer
(``DIR/tokenizer``), measured on the rendered text.
"""

from __future__ import annotations

import string
from typing import Literal

from pydantic import Field, field_validator, model_validator

from synth.engine.config import Section, operational


def _fields(template: str) -> list[str]:
    """The replacement-field names of a ``str.format`` template (raises ValueError on bad syntax)."""
    return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]


class AssembleConfig(Section):
    """Gold + tier-1 + tier-2 documents packed to each target length, then shuffled."""

    lengths: list[int] = Field(
        default_factory=lambda: [8192, 32768, 131072],
        description="Target lengths L in tokens; every accepted question gets one row per L.",
    )
    slack: int = Field(
        256, ge=1,
        description="Every row has between L - slack and L tokens (prompt + completion, measured exactly).",
    )
    tier1_from: Literal["kept", "all"] = Field(
        "kept",
        description="Tier-1 distractors come from the question's kept traces (trace ids in `sft`) or from "
        "all its traces. Without an `sft` table every trace counts.",
    )
    tier2_bm25_k: int = Field(
        50, ge=0, le=1000,
        description="BM25 neighbours of the question text tried as tier-2 before random pages (0: random only).",
    )
    max_questions: int | None = Field(
        None, ge=1, description="Assemble only the first N accepted questions by question id. None: all."
    )
    fill_max_skips: int = Field(
        64, ge=0, le=100_000,
        description="Tier-2 candidates too long for the remaining budget that are passed over before the fill "
        "stops (and the first of them is truncated, if `truncate_fill`).",
    )
    truncate_fill: bool = Field(
        True,
        description="When whole tier-2 pages cannot land a row in the window, cut one tier-2 page at a token "
        "boundary to close the gap. Gold and tier-1 pages are never cut.",
    )
    preamble: str = Field(
        "Read the documents below, then answer the question that follows them.",
        description="Text before the documents ('' for none).",
    )
    doc_template: str = Field(
        "Document [{index}] ({title})\n{text}",
        description="One document: fields {index} (1-based position after the shuffle), {title} and {text} "
        "(the page's paragraphs, KILT markup rendered, one per line).",
    )
    doc_separator: str = Field("\n\n", description="Between the preamble, each document and the question block.")
    question_template: str = Field(
        "Question: {question}\nAnswer with the name of the answer entity only.\nAnswer:\n",
        description="The block after the documents (field {question}); the completion (the answer) follows it.",
    )
    questions_per_pass: int = operational(
        "Questions assembled per pass over the corpus, at most (bounds the page text held in memory); passes are "
        "smaller when that spreads the questions over the worker processes (`runner.cpu_workers`) better.", 4096, ge=1
    )
    tokenize_batch: int = operational("Pages tokenized per batch call of the fast tokenizer.", 1024, ge=1)
    verify_batch: int = operational("Rows whose rendered text is re-tokenized per batch call.", 32, ge=1)

    @field_validator("lengths")
    @classmethod
    def _lengths_ok(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("at least one target length is needed")
        if any(n < 1 for n in v):
            raise ValueError("target lengths must be positive")
        if len(set(v)) != len(v):
            raise ValueError("target lengths must be distinct")
        return v

    @field_validator("doc_template")
    @classmethod
    def _doc_template_ok(cls, v: str) -> str:
        names = _fields(v)
        if names.count("text") != 1 or set(names) - {"index", "title", "text"}:
            raise ValueError("doc_template takes {index}, {title} and exactly one {text}, and no other field")
        return v

    @field_validator("question_template")
    @classmethod
    def _question_template_ok(cls, v: str) -> str:
        names = _fields(v)
        if "question" not in names or set(names) - {"question"}:
            raise ValueError("question_template takes the field {question} and no other")
        return v

    @model_validator(mode="after")
    def _slack_below_lengths(self) -> "AssembleConfig":
        if self.slack >= min(self.lengths):
            raise ValueError(f"slack ({self.slack}) must be smaller than the shortest length ({min(self.lengths)})")
        return self


__all__ = ["AssembleConfig"]
