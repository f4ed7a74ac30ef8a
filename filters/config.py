"""Configuration of the ``filter`` stage (``filters:``): which filters run, and their thresholds.

Every field here changes which traces are kept, so all of them enter the stage's
content key (none is operational).  The contents of the ``decontaminate`` files
enter the key too (see :func:`filters.stage.key_extra`), not just their names.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from synth.engine.config import Section

DEFAULT_CHAIN = ["format", "correctness", "low_step", "repeats", "grounded", "length", "decontaminate"]


class FiltersConfig(Section):
    """Trace filters (datatrove style: each returns True or (False, reason)), best-of-n and the RL band."""

    chain: list[str] = Field(
        default_factory=lambda: list(DEFAULT_CHAIN),
        description="Filters applied to every trace, in this order; a trace stops at the first that drops it. "
        "Names: format, correctness, low_step, repeats, grounded, length, decontaminate. `correctness` runs last when "
        "not listed (SFT keeps correct traces only); best-of-n (`not_best`) runs after the chain.",
    )
    min_f1: float = Field(
        0.8, ge=0, le=1,
        description="A final answer is correct when it matches the answer or an alias exactly after SQuAD/HotpotQA "
        "normalisation, or its token F1 against the best of them reaches this value.",
    )
    judge: bool = Field(
        False,
        description="Also ask the teacher to judge every final answer (prompt `judge.jinja2`). The judge can only "
        "rescue a rule miss whose F1 is above 0, never overturn a rule match; both verdicts are recorded.",
    )
    min_tool_calls: int = Field(
        3, ge=0, description="T_min of the low-step filter: traces with fewer tool calls are dropped (`too_few_steps`)."
    )
    max_tool_calls: int = Field(60, ge=1, description="Traces with more tool calls are dropped (`too_many_steps`).")
    max_repeats: int = Field(
        1, ge=1,
        description="A trace that makes the same tool call (same name, same canonical arguments) more than this "
        "many times is dropped (`repeated_calls`).",
    )
    min_grounding: float = Field(
        0.8, ge=0, le=1,
        description="The grounded filter (`ungrounded`): a search query (or find text) is grounded when at least this "
        "share of its content terms (the index's analyzer, stop words dropped) were in the question or an earlier "
        "observation; an opened or found page must have been shown (its id, or its title's terms in order). A trace "
        "with any ungrounded call is dropped.",
    )
    max_tokens: int = Field(
        32768, ge=1,
        description="Longest rendered trace, in tokens of DIR/tokenizer (chat template with the tools); longer "
        "traces are dropped (`too_long`), never truncated.",
    )
    decontaminate: list[str] = Field(
        default_factory=list,
        description="Files of evaluation questions to keep out of the data: plain text (one question a line), "
        "JSONL with a `question` field, or Parquet with a `question` column. Empty: nothing is contaminated.",
    )
    ngram: int = Field(
        8, ge=1, le=64,
        description="Decontamination n-gram size (normalised words): a question sharing any n-gram with an "
        "evaluation question (the whole text when either has fewer words) is dropped (`contaminated`).",
    )
    keep_per_question: int = Field(
        1, ge=1,
        description="Best-of-n: correct traces kept per question, ranked by entity rubric, then fewer tool calls, "
        "then trace id; the others are dropped (`not_best`).",
    )

    @field_validator("chain")
    @classmethod
    def _known_filters(cls, v: list[str]) -> list[str]:
        from filters.base import available

        names = available()
        bad = [n for n in v if n not in names]
        if bad:
            raise ValueError(f"unknown filter {bad[0]!r} (allowed: {', '.join(sorted(names))})")
        if len(set(v)) != len(v):
            raise ValueError("a filter is listed twice")
        return v

    @model_validator(mode="after")
    def _bounds(self) -> "FiltersConfig":
        if self.min_tool_calls > self.max_tool_calls:
            raise ValueError(f"min_tool_calls ({self.min_tool_calls}) is above max_tool_calls ({self.max_tool_calls})")
        return self


class RLConfig(Section):
    """How ``rl_pool`` is built beyond the difficulty band (``rl:``): action guidance and the dual reward's
    baselines.  Both change the table, so both enter the filter stage's key."""

    guidance: bool = Field(
        False,
        description="ACTGUIDE-RL: an rl question whose band is all-wrong also enters rl_pool, with "
        "`extra_info.guidance`, the tool-call sequence of the best correct teacher rollout of that question (a "
        "trainer prefixes its first k actions). A question with no correct rollout has no guidance and stays out.",
    )
    baselines: bool = Field(
        False,
        description="Store each rl_pool question's closed-book answer and naive-RAG answer (one search for the "
        "question, then an answer from its results), both by the teacher, with their scores, in "
        "`extra_info.baselines` (the `gain` reward mode reads them). Costs two teacher calls a row.",
    )
    rag_k: int = Field(5, ge=1, le=50, description="Search results the naive-RAG baseline answers from.")


__all__ = ["DEFAULT_CHAIN", "FiltersConfig", "RLConfig"]
