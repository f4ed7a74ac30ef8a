"""The resolved benchmark index on disk: built once per benchmark content and corpus, then read back.

:class:`~synth.decontam.index.BenchIndex` resolves every benchmark title against the corpus and
normalises every answer, which takes seconds per 10k questions in Python.  A questions stage that
reruns with the same files over the same corpus (a teacher or validator setting changed) reads the
index back instead, from ``DIR/.cache/decontam/index-<key>/``: ``<key>`` hashes each file's format
and sha256, the ingest stage's key (the corpus, as resolved) and the source of the modules that
shape the index, so a changed file, corpus or rule builds a new one.  The folder is written beside
its final name and renamed into place, so a reader never sees half of it.  Arrays go to one
``.npz`` (no pickles), strings to Parquet.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from synth.decontam.index import BenchIndex, Benchmark

_ROOT = Path(__file__).resolve().parents[2]
# The modules whose rules shape a resolved index: the readers, the index, title and answer normalisation.
_SHAPERS = ("synth/decontam/formats.py", "synth/decontam/index.py", "synth/corpus/links.py", "synth/text/answers.py")
_ARRAYS = ("owner_bench", "pair_keys", "pair_owner", "entity_keys", "entity_owner")


def index_key(benchmarks: list[Benchmark], corpus_key: str) -> str:
    """The cache key of the index of ``benchmarks`` over the corpus whose ingest key is ``corpus_key``."""
    h = hashlib.sha256(corpus_key.encode())
    for b in benchmarks:
        h.update(f"\0{b.format}\0{b.sha256}".encode())
    for rel in _SHAPERS:
        h.update((_ROOT / rel).read_bytes())
    return h.hexdigest()[:32]


def save(index: BenchIndex, folder: Path) -> None:
    """Write ``index`` to ``folder`` atomically (a temporary folder beside it, then a rename)."""
    tmp = folder.with_name(f".{folder.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.mkdir(parents=True)
    try:
        np.savez(tmp / "arrays.npz", m=np.int64(index.m), **{k: getattr(index, k) for k in _ARRAYS})
        pq.write_table(pa.table({"page_id": pa.array(list(index.pages), pa.string())}), tmp / "pages.parquet")
        pq.write_table(pa.table({"answer": pa.array(list(index.answer_ids), pa.string()),
                                 "id": pa.array(list(index.answer_ids.values()), pa.int64())}), tmp / "answers.parquet")
        rows = [(p, a) for p, aids in index.answer_pages.items() for a in sorted(aids)]
        pq.write_table(pa.table({"page_id": pa.array([p for p, _ in rows], pa.string()),
                                 "id": pa.array([a for _, a in rows], pa.int64())}), tmp / "answer_pages.parquet")
        stats = [{k: v for k, v in b.summary().items() if k.startswith(("titles_", "unresolved_"))}
                 for b in index.benchmarks]
        (tmp / "benchmarks.json").write_text(json.dumps(stats), encoding="utf-8")
        try:
            os.replace(tmp, folder)
        except OSError:  # another process saved the same index first: theirs is as good
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load(folder: Path, benchmarks: list[Benchmark]) -> BenchIndex:
    """The index saved in ``folder``, over ``benchmarks`` (the same files, parsed: their questions)."""
    index = BenchIndex.__new__(BenchIndex)
    index.benchmarks = benchmarks
    index.questions = [q for b in benchmarks for q in b.questions]
    with np.load(folder / "arrays.npz") as arrays:
        index.m = int(arrays["m"])
        for k in _ARRAYS:
            setattr(index, k, arrays[k])
    index.pages = np.array(pq.read_table(folder / "pages.parquet").column("page_id").to_pylist(), dtype=object)
    answers = pq.read_table(folder / "answers.parquet")
    index.answer_ids = dict(zip(answers.column("answer").to_pylist(), answers.column("id").to_pylist()))
    index.answer_pages = {}
    pages = pq.read_table(folder / "answer_pages.parquet")
    for p, a in zip(pages.column("page_id").to_pylist(), pages.column("id").to_pylist()):
        index.answer_pages.setdefault(p, set()).add(a)
    for b, stats in zip(benchmarks, json.loads((folder / "benchmarks.json").read_text(encoding="utf-8"))):
        b.titles_resolved, b.titles_unresolved = stats["titles_resolved"], stats["titles_unresolved"]
        b.unresolved_examples = list(stats["unresolved_examples"])
    index._coarse, index._by_page = None, None
    return index


def built_once(benchmarks: list[Benchmark], resolve: Callable[[list[str]], dict[str, str]], cache: Path | None,
               corpus_key: str | None) -> BenchIndex:
    """The index of ``benchmarks``: read from ``cache`` when this content and corpus were indexed before,
    else built and saved there (``cache`` or ``corpus_key`` None: built, not saved)."""
    if cache is None or corpus_key is None:
        return BenchIndex(benchmarks, resolve)
    folder = cache / f"index-{index_key(benchmarks, corpus_key)}"
    if (folder / "benchmarks.json").is_file():
        return load(folder, benchmarks)
    index = BenchIndex(benchmarks, resolve)
    save(index, folder)
    return index


__all__ = ["built_once", "index_key", "load", "save"]
