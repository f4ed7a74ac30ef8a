"""The ingest stage: a KILT knowledge source -> ``corpus/pages`` and ``corpus/links``.

Outputs (schemas in :mod:`synth.engine.records`):

* ``corpus/pages``: one row per page, first record wins for a repeated id;
  ``paragraphs = text[1:]`` with KILT markup kept (``Section::::``, ``BULLET::::``),
  ``n_chars`` their total length in characters;
* ``corpus/links``: one row per anchor occurrence that resolves to another page of
  the corpus (rules in :mod:`synth.corpus.links`).  ``paragraph_id`` keeps KILT's
  indexing into ``text`` (0 is the title), so the anchor sits in
  ``pages.paragraphs[paragraph_id - 1][start:end]`` (or in the title when 0);
* ``rejects/ingest.jsonl``: one JSON object per bad record (``line``, ``reason``,
  ``detail``, ``raw`` prefix, and ``file`` inside a folder source), always written.

Pages that share a title are all kept (their ids differ) and counted in the report,
``duplicate_titles: {titles, pages, examples}``: a title names the page with the smallest id
(:mod:`synth.corpus.titles`), for links and for ``open`` alike, so ``pages`` is how
many pages can be reached by id only.

Bad records (:data:`PAGE_REASONS`: ``bad_json``, ``not_object``, ``bad_id``, ``bad_title``,
``blank_title``, ``nul_title``, ``long_title``, ``bad_text``, ``no_text``, ``long_word``, ``duplicate_id``) are skipped and
counted, or with ``corpus.strict`` stop the run with ``InputError("line N: why")``.  Blank
lines are not records.

The stage streams: pass 1 reads the source in blocks (:mod:`synth.corpus.lines`),
writes page shards, and stages the anchors as Parquet; pass 2 resolves them in
DuckDB.  Memory is bounded by the block size and DuckDB's limit, plus the set of
page ids seen (for first-wins de-duplication).
"""

from __future__ import annotations

import logging
import queue
import shutil
import threading
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, TypeVar

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from synth.engine.errors import InputError
from synth.corpus.kilt import read_source, resolve_source, source_size
from synth.corpus.normalise import RawBatch
from synth.corpus.links import IDS_SCHEMA, STAGED_SCHEMA, resolve_links, shared_titles, stage_anchors
from synth.engine.stage import StageContext, StageResult
from synth.engine.progress import print_table
from synth.engine.records import LINK_SCHEMA, PAGE_SCHEMA

log = logging.getLogger("hopforge")
T = TypeVar("T")

# Why a record is not a page (the checks are in synth.corpus.normalise, in this order):
PAGE_REASONS = ("bad_json", "not_object",
                "bad_id",        # `_id` missing, not a string, or empty
                "bad_title",     # `wikipedia_title` missing or not a string
                "blank_title",   # a title that is empty or only whitespace
                "nul_title",     # a title with a NUL character in it
                "long_title",    # a title over normalise.MAX_TITLE_CHARS characters
                "bad_text",      # `text` missing, not a non-empty list of strings, or with a null paragraph
                "no_text",       # nothing but whitespace after the title
                "long_word",     # a word (no space) over normalise.MAX_WORD_CHARS characters after the title
                "duplicate_id")  # an id already read: the first record wins
LINK_REASONS = ("external", "unresolved", "self", "bad_anchor")
DUCKDB_MEMORY = "1GB"  # pass 2 spills to ctx.staging past this
# Staging is written once and read once: cheap compression, no dictionaries to build.
STAGING_OPTS = dict(compression="snappy", use_dictionary=False)


FIRST_KEPT = " (the first record is kept)"  # a duplicate's detail in rejects/ingest.jsonl; not under --strict


def strict_stop(reject: dict, source: str) -> str:
    """What ``corpus.strict`` (``--strict``) stops with at the first bad record: its line, why, and the file it is
    in (a folder source's file, and the folder), without what skipping it would have kept."""
    where = f"(in {reject['file']}) of the folder {source}" if "file" in reject else f"(in {source})"
    return (f"line {reject['line']}: {reject['detail'].removesuffix(FIRST_KEPT)} {where}; --strict stops at the first "
            "bad record: fix it, or run without --strict to skip and count bad records in rejects/ingest.jsonl")


@dataclass
class _Pass1:
    """Counters and writers of pass 1."""

    read: int = 0
    pages: int = 0
    anchors: int = 0
    staged: int = 0
    data_bytes: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PAGE_REASONS, 0))
    link_dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LINK_REASONS, 0))
    shared: dict = field(default_factory=dict)  # shared_titles() of the pages kept
    seen: set[str] = field(default_factory=set)
    done: bool = False


def pages_table(raw: pa.Table) -> pa.Table:
    """``PAGE_SCHEMA`` rows from raw page rows (text[1:] as paragraphs, n_chars their length)."""
    paragraphs = pc.list_slice(raw.column("text").combine_chunks(), 1)
    flat = pc.list_flatten(paragraphs)
    n_chars = np.bincount(pc.list_parent_indices(paragraphs).to_numpy(), minlength=raw.num_rows,
                          weights=pc.utf8_length(flat).to_numpy().astype(np.float64)).astype(np.int64)
    cols = {"paragraphs": paragraphs, "n_chars": pa.array(n_chars), "title": raw.column("title"),
            "page_id": raw.column("page_id")}
    return pa.Table.from_arrays([cols[n] if n in cols else raw.column(n) for n in PAGE_SCHEMA.names],
                                schema=PAGE_SCHEMA)


def _select(batch: RawBatch, st: _Pass1, max_pages: int | None) -> tuple[np.ndarray, list[dict]]:
    """Which rows of ``batch`` become pages (first id wins, ``max_pages`` cut) and this batch's rejects."""
    table = batch.table
    keep = np.ones(table.num_rows, dtype=bool)
    dups = []
    for i, pid in enumerate(table.column("page_id").to_pylist()):
        if pid in st.seen:
            keep[i] = False
            dups.append(i)
        else:
            st.seen.add(pid)
    lines = table.column("line").to_numpy()
    rejects = list(batch.rejects)
    if max_pages is not None:
        kept = np.flatnonzero(keep)
        room = max_pages - st.pages
        if len(kept) >= room:  # stop at the record that fills the quota: later ones are not read
            last = int(kept[room - 1])
            keep[last + 1:] = False
            dups = [i for i in dups if i < last]
            rejects = [r for r in rejects if r["line"] < lines[last]]
            st.done = True
    for i in dups:
        pid = table.column("page_id")[i].as_py()
        rejects.append({"line": int(lines[i]), "reason": "duplicate_id",
                        "detail": f"page id {pid!r} was already read{FIRST_KEPT}", "raw": batch.prefix(i)})
    rejects.sort(key=lambda r: r["line"])
    if batch.file is not None:
        for r in rejects:
            r["file"] = batch.file
    return keep, rejects


def prefetch(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Iterate ``items`` with a thread producing up to ``depth`` ahead.

    Reading and parsing the next block (mostly C++ that drops the GIL) then overlaps
    with writing the current one.  Errors surface in the consumer; leaving the loop
    early stops the producer and closes ``items``.
    """
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop, end = threading.Event(), object()

    def put(x) -> bool:
        while not stop.is_set():
            try:
                q.put(x, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for x in items:
                if not put(x):
                    break
            else:
                put(end)
        except BaseException as e:  # noqa: BLE001 - re-raised in the consumer
            put(_Failed(e))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    worker = threading.Thread(target=produce, name="ingest-read", daemon=True)
    worker.start()
    try:
        while True:
            x = q.get()
            if x is end:
                return
            if isinstance(x, _Failed):
                raise x.error
            yield x
    finally:
        stop.set()
        worker.join()


@dataclass
class _Failed:
    error: BaseException


def _pass1(ctx: StageContext, source: str, tmp: Path, st: _Pass1) -> None:
    cfg = ctx.cfg.corpus
    pages_w = ctx.writer("corpus/pages", PAGE_SCHEMA, rows_per_shard=100_000, bytes_per_shard=128 << 20)
    total = source_size(source)
    with open(ctx.out("rejects/ingest.jsonl"), "wb") as rej, \
            pq.ParquetWriter(tmp / "ids.parquet", IDS_SCHEMA, **STAGING_OPTS) as ids_w, \
            pq.ParquetWriter(tmp / "anchors.parquet", STAGED_SCHEMA, **STAGING_OPTS) as anchors_w, \
            ctx.bar("read", total=total, unit="B") as bar, \
            closing(prefetch(read_source(source, cfg))) as batches:
        for batch in batches:
            keep, rejects = _select(batch, st, cfg.max_pages)
            if rejects and cfg.strict:
                raise InputError(strict_stop(rejects[0], source))
            for r in rejects:
                st.dropped[r["reason"]] += 1
                rej.write(orjson.dumps(r) + b"\n")
            kept = batch.table.filter(pa.array(keep))
            st.read += int(keep.sum()) + len(rejects)
            pages_w.write(pages_table(kept))
            ids_w.write_table(pa.Table.from_arrays(
                [pa.array(np.arange(st.pages, st.pages + kept.num_rows, dtype=np.int64)),
                 kept.column("page_id"), kept.column("title")], schema=IDS_SCHEMA))
            st.pages += kept.num_rows
            staged, counts = stage_anchors(kept, st.staged)
            anchors_w.write_table(staged)
            st.staged += staged.num_rows
            st.anchors += counts["seen"]
            st.link_dropped["bad_anchor"] += counts["bad_anchor"]
            st.link_dropped["external"] += counts["external"]
            st.data_bytes += batch.data_bytes
            bar.update(batch.source_bytes if total is not None else batch.data_bytes)
            if st.done:
                break
    pages_w.close()


def _pass2(ctx: StageContext, tmp: Path, st: _Pass1) -> int:
    st.shared = shared_titles(tmp / "ids.parquet", tmp / "duckdb", DUCKDB_MEMORY)
    links_w = ctx.writer("corpus/links", LINK_SCHEMA, rows_per_shard=2_000_000)
    with ctx.bar("resolve links", total=st.staged, unit="anchors") as bar:
        for batch, counts in resolve_links(tmp / "ids.parquet", tmp / "anchors.parquet", tmp / "duckdb",
                                           DUCKDB_MEMORY):
            links_w.write(batch)
            for k, v in counts.items():
                st.link_dropped[k] += v
            bar.update(batch.num_rows + sum(counts.values()))
    links_w.close()
    return links_w.rows_written


def run_ingest(ctx: StageContext) -> StageResult:
    """Ingest ``ctx.cfg.corpus.source`` into ``corpus/pages``, ``corpus/links`` and ``rejects/ingest.jsonl``."""
    t0 = time.monotonic()
    source = resolve_source(ctx.cfg.corpus.source, ctx.store.root)
    # Shards left by a crashed run of this key would be appended to, not replaced.
    for rel in ("corpus", "rejects", "_ingest_tmp"):
        shutil.rmtree(ctx.staging / rel, ignore_errors=True)
    tmp = ctx.staging / "_ingest_tmp"
    tmp.mkdir(parents=True)
    st = _Pass1()
    try:
        _pass1(ctx, source, tmp, st)
        st.seen.clear()
        log.info("ingest: read %s pages and %s anchors in %.1fs", f"{st.pages:,}", f"{st.anchors:,}",
                 time.monotonic() - t0)
        n_links = _pass2(ctx, tmp, st)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    seconds = time.monotonic() - t0
    mb_s = st.data_bytes / 1e6 / max(seconds, 1e-9)
    links = {"input": st.anchors, "output": n_links, "dropped": dict(st.link_dropped)}
    rows = [["records read", st.read], ["pages", st.pages], ["links", n_links], ["anchors", st.anchors]]
    rows += [[f"dropped page: {k}", v] for k, v in st.dropped.items() if v]
    rows += [[f"dropped anchor: {k}", v] for k, v in st.link_dropped.items() if v]
    if st.shared["titles"]:
        rows += [["titles held by several pages", st.shared["titles"]],
                 ["pages reached by id only (a shared title names another)", st.shared["pages"]]]
    rows += [["MB/s", round(mb_s, 1)]]
    print_table(f"ingest: {source}", ["what", "count"], rows)
    if st.anchors != n_links + sum(st.link_dropped.values()):  # pragma: no cover - a bug, not bad input
        raise AssertionError(f"ingest: anchor funnel does not add up: {links}")
    return StageResult(input=st.read, output=st.pages, dropped=dict(st.dropped),
                       extra={"links": links, "duplicate_titles": st.shared, "bytes": st.data_bytes, "seconds": round(seconds, 3),
                              "mb_per_s": round(mb_s, 2), "source": source})
