"""Decontamination in the questions stage: no question is written, and no rollout paid, for a benchmark's path.

The entity and path levels (:mod:`synth.decontam.check`) run once over every source when the
stage loads them, so a shard drops a contaminated walk or subgraph before its first teacher call;
the text level runs on each written question before it is kept, so no rollout is spent on it.
Every drop is a counted reason in ``rejects/questions`` (its detail names the benchmark question)
and in the ``decontamination`` entry of ``reports/questions.json`` (:mod:`synth.decontam.tally`).

The stage's key holds the benchmark files' bytes (:func:`identity`), not only their names, and
the text level's n-gram size (``filters.ngram``, the trace filter's rule) when files are set.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth.decontam.check import ENTITY, PATH, TEXT, contaminated, describe
from synth.decontam.index import BenchIndex, Benchmark, corpus_resolver, file_sha256, load_benchmark
from synth.decontam.saved import built_once
from synth.decontam.tally import Tally
from synth.engine.config import ConfigError, project_path
from synth.engine.errors import not_a_file
from synth.engine.records import Question
from synth.text.overlap import EvalSet


def _located(entry: Any) -> Path:
    p = project_path(entry.path)
    if (why := not_a_file(p)) is not None:
        raise ConfigError(f"bad value for config key 'questions.decontaminate': {p}: {why}")
    return p


def identity(cfg: Any, store: Any = None) -> str:
    """Content-key part of the questions stage: each benchmark file's format and sha256 ("" when no file is
    set; the text level's n-gram size is a config read the stage declares then, ``more_sections``)."""
    files = cfg.questions.decontaminate
    if not files:
        return ""
    h = hashlib.sha256()
    for entry in files:
        h.update(f"\0{entry.format}\0{file_sha256(_located(entry))}".encode())
    return h.hexdigest()[:16]


@dataclass
class Screen:
    """The benchmark index of a stage run and its verdict on every source (by position)."""

    index: BenchIndex
    verdicts: dict[int, tuple[str, int]]  # source position -> (reason, benchmark question row)
    ngram: int
    _texts: list[EvalSet] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls, ctx: Any, sources: list) -> "Screen | None":
        """The screen of the configured files over ``sources``; None when no file is configured."""
        files = ctx.cfg.questions.decontaminate
        if not files:
            return None
        cache = ctx.store.root / ".cache" / "decontam"
        benches = []
        for entry in files:
            path = _located(entry)
            sha = file_sha256(path)
            benches.append(Benchmark(entry.format, path.name, sha, load_benchmark(path, entry.format, cache, sha)))
        ingest = ctx.store.stage_entry("ingest") or {}
        index = built_once(benches, corpus_resolver(ctx.store), cache, ingest.get("key"))
        return cls(index, contaminated(index, sources), ctx.cfg.filters.ngram)

    def files(self) -> list[dict]:
        """Each file's facts for the report: format, name, sha256, questions read, titles resolved."""
        return [b.summary() for b in self.index.benchmarks]

    def drop_sources(self, sources: list, start: int, funnel: Any, tally: Tally) -> list:
        """The shard's sources (positions from ``start``) that retrace no benchmark question; the others
        are dropped (``contaminated_path`` / ``contaminated_entity``) before any teacher call."""
        return self._drop(sources, start, self.verdicts, funnel, tally)

    def drop_routed(self, sources: list, funnel: Any, tally: Tally) -> list:
        """:meth:`drop_sources` for sources whose path changed after the screen was made (walks re-routed by
        :mod:`synth.questions.route`): a new path is screened as any path is, before any teacher call."""
        return self._drop(sources, 0, contaminated(self.index, sources), funnel, tally)

    def _drop(self, sources: list, start: int, verdicts: dict, funnel: Any, tally: Tally) -> list:
        out = []
        for i, src in enumerate(sources, start):
            hit = verdicts.get(i)
            if hit is None:
                out.append(src)
                continue
            reason, row = hit
            titles = [e["title"] for e in src.entities]
            detail = describe(self.index, row, titles)
            funnel.drop(src.question_id, src.source_id, reason, detail, detail)  # no reply: the raw text says why
            bq = self.index.questions[row]
            tally.add(int(self.index.owner_bench[row]), reason,
                      {"source_id": src.source_id, "kind": src.kind, "titles": titles, "benchmark_question": bq.qid,
                       "question": bq.question[:200], "answer": bq.answers[0] if bq.answers else None})
        return out

    def _evalsets(self) -> list[EvalSet]:
        with self._lock:  # shards run on threads; the sets are built once, by the first that needs them
            if self._texts is None:
                self._texts = [EvalSet((f"{q.question} {q.answers[0] if q.answers else ''}" for q in b.questions),
                                       self.ngram) for b in self.index.benchmarks]
            return self._texts

    def text_match(self, q: Question) -> tuple[int, str] | None:
        """``(benchmark, shared n-gram)`` when the question, or the question followed by its answer, shares
        an n-gram with a benchmark question followed by its answer; the first configured file first."""
        for b, evalset in enumerate(self._evalsets()):
            hit = evalset.match(q.question) or evalset.match(f"{q.question} {q.answer}")
            if hit is not None:
                return b, hit
        return None

    def drop_texts(self, kept: list, funnel: Any, tally: Tally) -> list:
        """The written questions that share no n-gram with a benchmark; the others are dropped
        (``contaminated_text``) before rollout."""
        out = []
        for src, q in kept:
            hit = self.text_match(q)
            if hit is None:
                out.append((src, q))
                continue
            b, gram = hit
            bench = self.index.benchmarks[b]
            funnel.drop(q.question_id, src.source_id, TEXT, f"shares {gram!r} with {bench.format} {bench.file}",
                        q.question)
            tally.add(b, TEXT, {"source_id": src.source_id, "question_id": q.question_id, "question": q.question,
                                "answer": q.answer, "ngram": gram})
        return out


__all__ = ["ENTITY", "PATH", "Screen", "TEXT", "identity"]
