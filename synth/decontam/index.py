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
one benchmark question, the first configured file first.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
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


def _sorted_owned(keys: list[np.ndarray], owners: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Keys sorted and made unique, each kept with its first owner (owners ascend in file order)."""
    if not keys:
        return np.empty(0, np.int64), np.empty(0, np.int32)
    k, o = np.concatenate(keys), np.concatenate(owners)
    order = np.lexsort((o, k))
    k, o = k[order], o[order]
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
        keys = {title_from_href(t) for _, q in rows for t in (*q.supporting, *q.linked, *q.answers) if t.strip()}
        found = resolve(sorted(keys))
        self.pages = np.array(sorted(set(found.values())), dtype=object)
        dense = {p: i for i, p in enumerate(self.pages)}
        self.m = max(len(self.pages), 1)
        self.answer_ids: dict[str, int] = {}
        self.answer_pages: dict[str, set[int]] = {}
        pair_k, pair_o, ent_k, ent_o = [], [], [], []
        for g, (b, q) in enumerate(rows):
            bench = benchmarks[b]
            support = list(dict.fromkeys(q.supporting))  # a title named twice is one page, counted once
            sup = self._resolve(support, found, dense, bench)
            linked = self._resolve([t for t in dict.fromkeys(q.linked) if t not in support], found, dense, bench)
            s = np.unique(np.array(sup, np.int64))
            if len(s) >= 2:
                a, c = np.triu_indices(len(s), 1)
                pair_k.append(s[a] * self.m + s[c])
                pair_o.append(np.full(len(a), g, np.int32))
            aids = []
            for ans in q.answers:
                norm = normalize_answer(ans)
                if not norm:
                    continue
                aid = self.answer_ids.setdefault(norm, len(self.answer_ids))
                aids.append(aid)
                page = found.get(title_from_href(ans))
                if page is not None:
                    self.answer_pages.setdefault(page, set()).add(aid)
            pages = np.unique(np.array(sup + linked, np.int64))
            if aids and len(pages):
                ent_k.append((np.array(aids, np.int64)[:, None] * self.m + pages[None, :]).ravel())
                ent_o.append(np.full(len(aids) * len(pages), g, np.int32))
        self.pair_keys, self.pair_owner = _sorted_owned(pair_k, pair_o)
        self.entity_keys, self.entity_owner = _sorted_owned(ent_k, ent_o)

    @staticmethod
    def _resolve(titles: Sequence[str], found: dict[str, str], dense: dict[str, int], bench: Benchmark) -> list[int]:
        out = []
        for t in titles:
            page = found.get(title_from_href(t)) if t.strip() else None
            if page is None:
                bench.titles_unresolved += 1
                if len(bench.unresolved_examples) < UNRESOLVED_EXAMPLES and t not in bench.unresolved_examples:
                    bench.unresolved_examples.append(t)
            else:
                bench.titles_resolved += 1
                out.append(dense[page])
        return out

    def answers_of(self, page_id: str, names: Sequence[str]) -> list[int]:
        """The benchmark answers an entity is: its normalised names (title, aliases) and its page."""
        out = set(self.answer_pages.get(page_id, ()))
        for n in names:
            aid = self.answer_ids.get(normalize_answer(n or ""))
            if aid is not None:
                out.add(aid)
        return sorted(out)

    def dense(self, page_ids: pa.Array | Sequence[str]) -> np.ndarray:
        """Dense ids of page ids (-1: a page no benchmark question names), vectorised in Arrow."""
        import pyarrow.compute as pc

        arr = pa.array(page_ids, pa.string()) if not isinstance(page_ids, (pa.Array, pa.ChunkedArray)) else page_ids
        idx = pc.index_in(arr, value_set=pa.array(self.pages, pa.string()))
        return np.asarray(pc.fill_null(idx, -1).to_numpy(zero_copy_only=False), np.int64)


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


__all__ = ["BenchIndex", "Benchmark", "corpus_resolver", "file_sha256", "load_benchmark"]
