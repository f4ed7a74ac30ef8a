"""The decontamination filter (reason ``contaminated``): keep evaluation questions out of the data.

Texts are normalised as answers are (:func:`synth.text.answers.normalize_answer`: lower
case, no punctuation, no articles) and split into words.  A question is contaminated
when it shares an n-gram of ``filters.ngram`` words with any evaluation question.
Texts shorter than n words count as one n-gram, the whole text: a short question is
contaminated when it occurs, word for word, inside an evaluation question, and a short
evaluation question contaminates every question that contains it.

Evaluation files (``filters.decontaminate``) are plain text (one question a line),
JSONL (``.jsonl`` / ``.json``, one object a line with a ``question`` field) or Parquet
with a ``question`` column.
"""

from __future__ import annotations

import json
from dataclasses import field
from pathlib import Path
from typing import Iterable, Iterator

from synth.text.answers import normalize_answer
from synth.engine.config import ConfigError
from synth.engine.errors import InputError
from synth.engine.records import Trace

from filters.base import BaseFilter, FilterContext, Verdict, register
from filters.config import FiltersConfig


def words(text: str) -> list[str]:
    """Normalised words of ``text``."""
    return normalize_answer(text or "").split()


def ngrams(tokens: list[str], n: int) -> Iterator[tuple[str, ...]]:
    """Every contiguous n-gram of ``tokens`` (none when there are fewer than n)."""
    for i in range(len(tokens) - n + 1):
        yield tuple(tokens[i : i + n])


def read_questions(path: str | Path) -> list[str]:
    """The questions of one evaluation file (see the module docstring for the formats)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"bad value for config key 'filters.decontaminate': file not found: {p}")
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


class EvalSet:
    """The n-grams of a set of evaluation questions, for :meth:`match`."""

    def __init__(self, questions: Iterable[str], n: int):
        self.n = n
        self.size = 0
        self._grams: set[int] = set()  # hashes of n-word tuples (this process only)
        self._short: dict[int, set[int]] = {}  # length -> hashes of whole evaluation texts under n words
        parts = []
        for q in questions:
            toks = words(q)
            if not toks:
                continue
            self.size += 1
            parts.append(" ".join(toks))
            if len(toks) >= n:
                self._grams.update(hash(g) for g in ngrams(toks, n))
            else:
                self._short.setdefault(len(toks), set()).add(hash(tuple(toks)))
        # Newlines never occur inside normalised text, so a match cannot span two questions.
        self._joined = " \n ".join(f" {t} " for t in parts)

    @classmethod
    def from_files(cls, paths: Iterable[str | Path], n: int) -> "EvalSet":
        """The evaluation set of every question in ``paths``."""
        questions: list[str] = []
        for p in paths:
            questions.extend(read_questions(p))
        return cls(questions, n)

    def match(self, question: str) -> str | None:
        """The first shared n-gram (as text) of ``question`` with the evaluation set, or None."""
        toks = words(question)
        if not toks:
            return None
        if len(toks) < self.n:
            whole = " ".join(toks)
            if f" {whole} " in self._joined:
                return whole
        else:
            for g in ngrams(toks, self.n):
                if hash(g) in self._grams:
                    return " ".join(g)
        for length, hashes in self._short.items():
            if length <= len(toks):
                for g in ngrams(toks, length):
                    if hash(g) in hashes:
                        return " ".join(g)
        return None


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
