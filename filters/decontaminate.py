"""The decontamination filter (reason ``contaminated``): keep evaluation questions out of the data.

A question is contaminated when it shares an n-gram of ``filters.ngram`` normalised words
with any evaluation question, by the rule of :mod:`synth.text.overlap` (its one home; the
questions stage's text level of decontamination uses it before any rollout is paid for,
and this filter stays as the last guard).

Evaluation files (``filters.decontaminate``) are plain text (one question a line),
JSONL (``.jsonl`` / ``.json``, one object a line with a ``question`` field) or Parquet
with a ``question`` column.
"""

from __future__ import annotations

import json
from dataclasses import field
from pathlib import Path
from typing import Iterable

from synth.text.overlap import EvalSet as _EvalSet, ngrams, words
from synth.engine.config import ConfigError
from synth.engine.errors import InputError, not_a_file
from synth.engine.records import Trace

from filters.base import BaseFilter, FilterContext, Verdict, register
from filters.config import FiltersConfig


def read_questions(path: str | Path) -> list[str]:
    """The questions of one evaluation file (see the module docstring for the formats)."""
    p = Path(path)
    if (why := not_a_file(p)) is not None:
        raise ConfigError(f"bad value for config key 'filters.decontaminate': {p}: {why}")
    if p.suffix == ".parquet":
        import pyarrow.parquet as pq

        schema = pq.read_schema(p)
        if "question" not in schema.names:
            raise InputError(f"{p}: no `question` column (columns: {', '.join(schema.names)})")
        return [q for q in pq.read_table(p, columns=["question"]).column("question").to_pylist() if q]
    out = []
    with p.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            if p.suffix in (".jsonl", ".json"):
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InputError(f"{p}: line {lineno}: not JSON ({e})") from None
                q = obj.get("question") if isinstance(obj, dict) else None
                if not isinstance(q, str):
                    raise InputError(f"{p}: line {lineno}: no string `question` field")
                out.append(q)
            else:
                out.append(line)
    return out


class EvalSet(_EvalSet):
    """The n-gram set of evaluation files (:class:`synth.text.overlap.EvalSet`, the rule's home)."""

    @classmethod
    def from_files(cls, paths: Iterable[str | Path], n: int) -> "EvalSet":
        """The evaluation set of every question in ``paths``."""
        questions: list[str] = []
        for p in paths:
            questions.extend(read_questions(p))
        return cls(questions, n)


@register("decontaminate", "contaminated")
class DecontaminateFilter(BaseFilter):
    """Drops traces whose question overlaps an evaluation question (``contaminated``)."""

    evalset: EvalSet | None  # None: no evaluation files, nothing is contaminated
    _seen: dict[str, str | None] = field(default_factory=dict, init=False, repr=False)  # question_id -> match

    @classmethod
    def from_config(cls, cfg: FiltersConfig) -> "DecontaminateFilter":
        """The evaluation set of the ``filters.decontaminate`` files, in ``filters.ngram``-grams."""
        return cls(EvalSet.from_files(cfg.decontaminate, cfg.ngram) if cfg.decontaminate else None)

    def __call__(self, trace: Trace, ctx: FilterContext) -> Verdict:
        if self.evalset is None:
            return True
        q = ctx.questions.get(trace.question_id)
        if q is None:
            return True
        qid = trace.question_id
        if qid not in self._seen:  # n samples share one question
            self._seen[qid] = self.evalset.match(q.question)
        hit = self._seen[qid]
        if hit is not None:
            return False, "contaminated", f"shares {hit!r} with an evaluation question"
        return True


__all__ = ["DecontaminateFilter", "EvalSet", "ngrams", "read_questions", "words"]
