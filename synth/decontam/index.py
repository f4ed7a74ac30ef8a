"""The benchmark index: answers, supporting and linked pages (as KILT page ids) and question texts.

Each benchmark file is parsed once per content: the parsed questions are cached as Parquet under
``DIR/.cache/decontam/<sha256 of the file>-<format>-<reader code>.parquet`` (written atomically),
so a rerun, a second stage or a rebuilt corpus reads HotpotQA's 90k training questions back in
a fraction of a second.  The index over the corpus is then built in arrays:

* **titles** go through ingest's title normalisation (:func:`synth.corpus.links.title_from_href`:
  unquoted, cut at ``#``, ``_`` as spaces, first letter upper-case) and are looked up exactly among
  the corpus's page titles, a title several pages hold naming the first in
  :data:`~synth.corpus.titles.PAGE_ORDER_SQL` order, as links and ``open`` do.  KILT keeps no
  redirect pages, so a title that names a redirect does not resolve; it is counted (and shown)
  as not resolved rather than guessed;
* **pages** that any benchmark question names get dense ids ``0..M-1``;
* **path keys** ``min(a, b) * M + max(a, b)`` for every pair of supporting pages of a question;
* **entity keys** ``answer * M + page`` for every answer of a question and every supporting or
  linked page of it; answers are ids of their normalised text
  (:func:`synth.text.answers.normalize_answer`), and an answer that is itself a page title also
  marks that page (``answer_pages``).

A key several questions share belongs to the first in file order, so a drop is attributed to
one benchmark question, the first configured file first.  The resolved index itself is kept per
benchmark content and corpus by :mod:`synth.decontam.saved`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from synth.corpus.links import title_from_href
from synth.decontam.formats import BenchQuestion, read_benchmark
from synth.engine.store import write_parquet_atomic
from synth.text.answers import normalize_answer

UNRESOLVED_EXAMPLES = 5
_CACHE_SCHEMA = pa.schema([("qid", pa.string()), ("question", pa.string()), ("answers", pa.list_(pa.string())),
                           ("supporting", pa.list_(pa.string())), ("linked", pa.list_(pa.string()))])
# The readers' code is part of a cached parse's name: a reader fixed later re-reads the file.
_READER_CODE = hashlib.sha256((Path(__file__).parent / "formats.py").read_bytes()).hexdigest()[:12]


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes (its identity in content keys, the report and the card)."""
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_benchmark(path: str | Path, fmt: str, cache_dir: Path | None = None,
                   sha256: str | None = None) -> list[BenchQuestion]:
    """The questions of one file, parsed once per content (cached under ``cache_dir`` when given)."""
    if cache_dir is None:
        return read_benchmark(path, fmt)
    sha = sha256 or file_sha256(path)
    cached = cache_dir / f"{sha[:32]}-{fmt}-{_READER_CODE}.parquet"
    if cached.is_file():
        return [BenchQuestion(**r) for r in pq.read_table(cached).to_pylist()]
    qs = read_benchmark(path, fmt)
    write_parquet_atomic(pa.Table.from_pylist([{"qid": q.qid, "question": q.question, "answers": q.answers,
                                                "supporting": q.supporting, "linked": q.linked} for q in qs],
                                              schema=_CACHE_SCHEMA), cached)
    return qs


@dataclass
class Benchmark:
    """One configured file and what resolving it found (its entry in the decontamination report)."""

    format: str
    file: str  # the file's name, never its local path (the card is public)
    sha256: str
    questions: list[BenchQuestion]
    titles_resolved: int = 0
    titles_unresolved: int = 0
    unresolved_examples: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        """The report's facts about the file itself."""
        return {"benchmark": self.format, "file": self.file, "sha256": self.sha256, "questions": len(self.questions),
                "titles_resolved": self.titles_resolved, "titles_unresolved": self.titles_unresolved,
                "unresolved_examples": self.unresolved_examples}


def _sorted_owned(keys: np.ndarray, owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keys sorted and made unique, each kept with its first owner (owners ascend in file order)."""
    order = np.lexsort((owners, keys))
    k, o = keys[order], owners[order]
    first = np.ones(len(k), bool)
    first[1:] = k[1:] != k[:-1]
    return k[first], o[first]


class BenchIndex:
    """Every configured benchmark, resolved against one corpus: the arrays :mod:`synth.decontam.check` reads."""

    def __init__(self, benchmarks: list[Benchmark], resolve: Callable[[list[str]], dict[str, str]]):
        self.benchmarks = benchmarks
        rows = [(b, q) for b, bench in enumerate(benchmarks) for q in bench.questions]
        self.owner_bench = np.array([b for b, _ in rows], np.int32)
        self.questions = [q for _, q in rows]
        # Each distinct title is normalised once; a title -> its page's dense id (None: not in the corpus).
        key_of = {t: title_from_href(t) for _, q in rows for t in (*q.supporting, *q.linked, *q.answers) if t.strip()}
        found = resolve(sorted(set(key_of.values())))
        self.pages = np.array(sorted(set(found.values())), dtype=object)
        dense = {p: i for i, p in enumerate(self.pages)}
        page_of = {t: found.get(k) for t, k in key_of.items()}
        dense_of = {t: (dense[p] if p is not None else None) for t, p in page_of.items()}
        self.m = max(len(self.pages), 1)
        self.answer_ids: dict[str, int] = {}
        self.answer_pages: dict[str, set[int]] = {}
        # Flat Python lists, turned into arrays once: per-question numpy calls would cost more than the work.
        pair_a: list[int] = []
        pair_b: list[int] = []
        pair_o: list[int] = []
        ent_a: list[int] = []
        ent_p: list[int] = []
        ent_o: list[int] = []
        for g, (b, q) in enumerate(rows):
            bench = benchmarks[b]
            support = list(dict.fromkeys(q.supporting))  # a title named twice is one page, counted once
            sup = sorted(set(self._resolve(support, dense_of, bench)))
            linked = self._resolve([t for t in dict.fromkeys(q.linked) if t not in support], dense_of, bench)
            for a, c in combinations(sup, 2):
                pair_a.append(a)
                pair_b.append(c)
                pair_o.append(g)
            aids = []
            for ans in q.answers:
                norm = normalize_answer(ans)
                if not norm:
                    continue
                aid = self.answer_ids.setdefault(norm, len(self.answer_ids))
                aids.append(aid)
                page = page_of.get(ans)
                if page is not None:
                    self.answer_pages.setdefault(page, set()).add(aid)
            pages = set(sup) | set(linked)
            for aid in dict.fromkeys(aids):
                for p in pages:
                    ent_a.append(aid)
                    ent_p.append(p)
                    ent_o.append(g)
        self._coarse: pa.Array | None = None
        self._by_page: tuple[pa.Array, np.ndarray, np.ndarray] | None = None
        m = np.int64(self.m)
        self.pair_keys, self.pair_owner = _sorted_owned(np.array(pair_a, np.int64) * m + np.array(pair_b, np.int64),
                                                        np.array(pair_o, np.int32))
        self.entity_keys, self.entity_owner = _sorted_owned(np.array(ent_a, np.int64) * m + np.array(ent_p, np.int64),
                                                            np.array(ent_o, np.int32))

    @staticmethod
    def _resolve(titles: Sequence[str], dense_of: dict[str, int | None], bench: Benchmark) -> list[int]:
        out = []
        for t in titles:
            d = dense_of.get(t)
            if d is None:
                bench.titles_unresolved += 1
                if len(bench.unresolved_examples) < UNRESOLVED_EXAMPLES and t not in bench.unresolved_examples:
                    bench.unresolved_examples.append(t)
            else:
                bench.titles_resolved += 1
                out.append(d)
        return out

    def answers_of(self, page_id: str, names: Sequence[str]) -> list[int]:
        """The benchmark answers an entity is: its normalised names (title, aliases) and its page."""
        out = set(self.answer_pages.get(page_id, ()))
        for n in names:
            aid = self.answer_ids.get(normalize_answer(n or ""))
            if aid is not None:
                out.add(aid)
        return sorted(out)

    def answer_page_arrays(self) -> tuple[pa.Array, np.ndarray, np.ndarray]:
        """``answer_pages`` as arrays (built once): page ids, and each one's answers as a CSR slice."""
        if self._by_page is None:
            pages = sorted(self.answer_pages)
            lists = [sorted(self.answer_pages[p]) for p in pages]
            starts = np.zeros(len(pages) + 1, np.int64)
            np.cumsum([len(x) for x in lists], out=starts[1:])
            self._by_page = (pa.array(pages, pa.string()), starts,
                             np.fromiter((a for x in lists for a in x), np.int64, count=int(starts[-1])))
        return self._by_page

    def coarse_answers(self) -> pa.Array:
        """:func:`coarse_key` of every answer (built once): the prefilter of
        :func:`~synth.decontam.check.last_answers`."""
        if self._coarse is None:
            self._coarse = pc.unique(coarse_key(pa.array(list(self.answer_ids), pa.string())))
        return self._coarse

    def dense(self, page_ids: pa.Array | Sequence[str]) -> np.ndarray:
        """Dense ids of page ids (-1: a page no benchmark question names), vectorised in Arrow."""
        arr = pa.array(page_ids, pa.string()) if not isinstance(page_ids, (pa.Array, pa.ChunkedArray)) else page_ids
        idx = pc.index_in(arr, value_set=pa.array(self.pages, pa.string()))
        return np.asarray(pc.fill_null(idx, -1).to_numpy(zero_copy_only=False), np.int64)


def coarse_key(names: pa.Array) -> pa.Array:
    """A key of each name that two names equal under :func:`~synth.text.answers.normalize_answer` share,
    in Arrow: lower case, then only the ASCII digits and letters outside ``a``, ``n``, ``t``, ``h``, ``e``.
    Normalising drops punctuation, spaces and the words *a*, *an*, *the*, all of which this key drops too,
    so equal normal forms give equal keys; a key match is then checked exactly, in Python."""
    return pc.replace_substring_regex(pc.utf8_lower(names), r"[^0-9bcdfgijklmopqrsuvwxyz]+", "")


def corpus_resolver(store) -> Callable[[list[str]], dict[str, str]]:
    """Title -> page id over ``corpus/pages`` in DuckDB: exact titles, a shared title naming its first page."""
    import duckdb

    from synth.corpus.titles import PAGE_ORDER_SQL

    files = [str(f) for f in store.dataset("corpus/pages", hint="ingest").files]

    def resolve(titles: list[str]) -> dict[str, str]:
        if not titles or not files:
            return {}
        con = duckdb.connect()
        try:
            con.register("wanted", pa.table({"title": pa.array(titles, pa.string())}))
            rows = con.execute(f"""
                SELECT title, arg_min(page_id, {PAGE_ORDER_SQL}) FROM read_parquet($files)
                WHERE title IN (SELECT title FROM wanted) GROUP BY title""", {"files": files}).fetchall()
        finally:
            con.close()
        return dict(rows)

    return resolve


__all__ = ["BenchIndex", "Benchmark", "coarse_key", "corpus_resolver", "file_sha256", "load_benchmark"]
