"""Building the page-level BM25 index (tantivy) from ``corpus/pages``.

One tantivy document per page (LiteResearcher's page-level indexing):

=============  ==========================  ==============================================
field          how                          why
=============  ==========================  ==============================================
``page_id``    raw term, stored             exact lookup, masking (``MustNot``), results
``title``      raw term, stored             the title as results show it (searched through ``text`` and
                                            ``title_key``, so never analysed: one stemmed field a page)
``title_key``  raw term                     exact-title lookup and the exact-title bonus
``text``       analyzed (freqs)             the tool's ranking: the title ``TITLE_WEIGHT`` times, then the
                                            body (BM25F with integer field weights, see below)
``lead``       stored bytes (UTF-8)         the body's first ``lead_chars``: snippets, ``open``
``meta``       stored bytes (JSON)          description, aliases, url, links (only when present)
=============  ==========================  ==============================================

A search reads the stored document of every hit, so what a document stores is bounded:
a body longer than ``lead_chars`` (:data:`synth.tools.snippet.SCAN_CHARS`, 100,000
characters) is stored whole in a second index, ``index_dir/long`` (``page_id`` a raw term,
``body`` stored bytes), read only when ``open`` or ``find`` goes past the lead
(``meta.long`` marks such a page).  A 5 MB page then costs a search what a 100 KB one does.

**The ``body`` index.**  The ``body`` ranking (plain BM25 over the paragraphs alone, words as written,
no title: the question checks' adversary, :mod:`synth.questions.depth`) has its own index,
``index_dir/body`` (``page_id`` a stored raw term, ``body`` unstemmed with freqs), built in a second pass
over the same pages.  The agents' tools never read it, so the index they search carries no field it
does not rank with (one field analysed per page, not two), and the two builds are timed apart
(``tool_seconds``, ``body_seconds``).  ``build_index(..., body=False)`` skips it; the ``body``
ranking is then unknown.  It holds exactly the documents of the main index, so its BM25 statistics
(document count, mean length) are those of the pages the tool searches.

``links`` are the page's out-links, ``[anchor text, page id, title]`` in the order the page
has them, each target once: ``open`` lists those whose anchor its window shows, as a browser
shows a page's links.  They come from ``corpus/links`` (joined with the target titles in
DuckDB, which sorts them by page and spills past its memory limit; the sorted file is then merged with
the pages as both are read in order), so a link the ingest could not resolve is none.

**Why one ``text`` field.**  Ranking title and body as two ``Should`` clauses gives each field its
own BM25 and its own length normalisation: a two-word title that holds one query word then
outscores a page whose text holds every word ("landlocked country in Central Europe" returned
"Country music").  BM25F avoids it by adding the fields' weighted term frequencies and lengths
*before* saturation; with an integer weight ``w`` that is exactly BM25 over a document whose title
is written ``w`` times before its body, which is what ``text`` holds.  ``TITLE_WEIGHT`` (2) was chosen on
held-out queries drawn from the demo corpus (``bench/retrieval.py --calibrate``): it has the best
worst-case margin over a plain BM25 across the query sets.  A weight of 1 ranks descriptions a little
better and loses to plain BM25 on "name + attribute" queries; 3 and more rank descriptions worse.

Positions are not indexed: queries are bags of words (see :mod:`synth.tools.analysis`),
so positions would only double the index and its build time.  The body is the
paragraphs rendered as the agent reads them (Markdown), joined by ``PARA_SEP``
(an ASCII record separator, which the tokenizer treats as a break): one string
is both indexed and stored, and splitting it restores the paragraph list with its
indices (empty paragraphs included), so ``find`` reports the corpus's indices.

Rendering and joining run in Arrow compute kernels on whole batches (their buffers from the system
allocator, :func:`_memory_pool`); Python only touches the paragraphs that carry KILT markup, and builds each
document field by field.  The build streams batches, so
memory is bounded by the writer's heap, and writes into ``index_dir`` (inside a stage's staging folder, which the store then
commits with one rename).  ``hopforge.json`` is written last: an index folder
without it is incomplete and :meth:`synth.tools.search.SearchIndex.open` refuses it.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Callable

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import tantivy

from synth.tools.analysis import (ANALYZER_NAME, MAX_TOKEN_CHARS, RAW_ANALYZER_NAME, analyzer, raw_analyzer,
                                  render_paragraph, title_key)
from synth.tools.snippet import SCAN_CHARS
from synth.engine.store import atomic_write_json

FORMAT = 7  # bump when the schema, the analyzer or the rendering changes
TITLE_WEIGHT = 2  # BM25F weight of the title in the ``text`` field (module docstring)
META_FILE = "hopforge.json"
LONG_DIR = "long"  # the bodies longer than the lead, inside the index folder
BODY_DIR = "body"  # the ``body`` ranking's index, inside the index folder (module docstring)
PARA_SEP = "\x1e"  # between stored paragraphs; removed from the text itself
COLUMNS = ["page_id", "title", "paragraphs", "description", "aliases", "url"]


def make_schema() -> tantivy.Schema:
    """The index schema (see the module docstring)."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("page_id", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("title", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("title_key", stored=False, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("text", stored=False, tokenizer_name=ANALYZER_NAME, index_option="freq")
    sb.add_bytes_field("lead", stored=True)
    sb.add_bytes_field("meta", stored=True)
    return sb.build()


def make_body_schema() -> tantivy.Schema:
    """The schema of ``index_dir/body``: the ``body`` ranking's field, and the page id it returns."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("page_id", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("body", stored=False, tokenizer_name=RAW_ANALYZER_NAME, index_option="freq")
    return sb.build()


def make_long_schema() -> tantivy.Schema:
    """The schema of ``index_dir/long``: whole bodies by page id, stored only."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("page_id", stored=False, tokenizer_name="raw", index_option="basic")
    sb.add_bytes_field("body", stored=True)
    return sb.build()


def _writer_threads(threads: int) -> int:
    return threads if threads > 0 else max(1, min(os.cpu_count() or 1, 8))


def build_index(
    pages: ds.Dataset | str | Path,
    index_dir: str | Path,
    progress: Callable[[int], object] | None = None,
    heap_mb: int = 256,
    threads: int = 0,
    batch_rows: int = 2048,
    links: ds.Dataset | str | Path | None = None,
    memory_limit: str = "2GB",
    lead_chars: int | None = SCAN_CHARS,
    title_weight: int = TITLE_WEIGHT,
    body: bool = True,
    body_progress: Callable[[int], object] | None = None,
) -> dict:
    """Index every page with text; returns ``{"pages", "indexed", "empty", "long", "links", "seconds",
    "pages_per_s", "tool_seconds", "body_seconds"}`` (``seconds``: both passes; ``tool_seconds``: the
    agents' index alone; ``body_seconds``: the ``body`` index, 0 without it).

    ``pages`` is the ``corpus/pages`` dataset (or its folder) and ``links`` the ``corpus/links``
    one (None: no page lists links); ``index_dir`` is created, and anything already in it is
    removed first (a crashed build leaves a half-written index that must not be extended).
    ``progress(n)`` is called after each batch of ``n`` pages.  A page whose paragraphs are
    all empty is not indexed (``empty``).  A body longer than ``lead_chars`` stores its lead in the
    index and its whole text in ``index_dir/long`` (``long``; None: every body is stored whole
    in the index, as before the bound).  ``title_weight`` is the title's BM25F weight in ``text`` (the
    default is what the tools are tuned for; ``bench/retrieval.py --calibrate`` builds others).
    ``body`` builds the ``body`` ranking's index in a second pass (``body_progress(n)`` after each of its
    batches); see the module docstring.
    """
    t0 = time.perf_counter()
    if not isinstance(pages, ds.Dataset):
        pages = ds.dataset(str(pages), format="parquet")
    if links is not None and not isinstance(links, ds.Dataset):
        links = ds.dataset(str(links), format="parquet")
    index_dir = Path(index_dir)
    if index_dir.exists():
        shutil.rmtree(index_dir)
    index_dir.mkdir(parents=True)

    schema = make_schema()
    index = tantivy.Index(schema, path=str(index_dir), reuse=False)
    index.register_tokenizer(ANALYZER_NAME, analyzer())
    index.register_tokenizer(RAW_ANALYZER_NAME, raw_analyzer())
    n_threads = _writer_threads(threads)
    # Less than ~64 MiB per thread makes many small segments, and merging them costs more
    # than the memory saved.
    heap = max(heap_mb, 64 * n_threads) << 20
    writer = index.writer(heap_size=heap, num_threads=n_threads)
    (index_dir / LONG_DIR).mkdir()
    long_index = tantivy.Index(make_long_schema(), path=str(index_dir / LONG_DIR), reuse=False)
    long_writer = long_index.writer(heap_size=64 << 20, num_threads=1)
    n_in = n_out = n_links = n_long = 0
    cols = [c for c in COLUMNS if c in pages.schema.names]
    pool = _memory_pool()
    for batch in _batches(pages, links, cols, batch_rows, index_dir, memory_limit, pool):
        n = batch.num_rows
        bodies = rendered_bodies(batch.column("paragraphs"), pool).to_pylist()
        # The optional columns with a value in this batch (an older or hand-made pages table may lack some).
        extra = [(c, batch.column(c).to_pylist()) for c in ("description", "aliases", "url", "links")
                 if c in batch.schema.names and batch.column(c).null_count < n]
        ids, titles = batch.column("page_id").to_pylist(), batch.column("title").to_pylist()
        for i, page in enumerate(bodies):
            if not page.strip(PARA_SEP):
                continue
            pid, title = ids[i], titles[i]
            lead = page if lead_chars is None or len(page) <= lead_chars else page[:lead_chars]
            # Field by field: cheaper than Document(**fields), which tries each value's type in turn.
            doc = tantivy.Document()
            doc.add_text("page_id", pid)
            doc.add_text("title", title)
            doc.add_text("title_key", title_key(title))
            doc.add_text("text", ranked_text(title, page, title_weight))
            doc.add_bytes("lead", lead.encode("utf-8"))
            meta = {}
            for c, values in extra:
                value = values[i]
                if value:
                    if c == "links":
                        value = _first_per_target(value)
                        n_links += len(value)
                    meta[c] = value
            if len(lead) < len(page):
                meta["long"] = True
                long_doc = tantivy.Document()
                long_doc.add_text("page_id", pid)
                long_doc.add_bytes("body", page.encode("utf-8"))
                long_writer.add_document(long_doc)
                n_long += 1
            if meta:
                doc.add_bytes("meta", orjson.dumps(meta))
            writer.add_document(doc)
            n_out += 1
        n_in += n
        if progress is not None:
            progress(n)
    writer.commit()
    writer.wait_merging_threads()
    long_writer.commit()
    long_writer.wait_merging_threads()
    tool_seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    if body:
        n_body = _build_body(pages, index_dir / BODY_DIR, batch_rows, n_threads, heap, body_progress)
        if n_body != n_out:
            raise RuntimeError(f"index: the body index holds {n_body} pages, the index {n_out}; rebuild it")
    body_seconds = time.perf_counter() - t1 if body else 0.0
    seconds = time.perf_counter() - t0
    stats = {
        "pages": n_in,
        "indexed": n_out,
        "empty": n_in - n_out,
        "long": n_long,
        "links": n_links,
        "seconds": round(seconds, 3),
        "pages_per_s": round(n_in / seconds, 1) if seconds > 0 else None,
        "tool_seconds": round(tool_seconds, 3),
        "body_seconds": round(body_seconds, 3),
    }
    atomic_write_json(
        index_dir / META_FILE,
        {"format": FORMAT, "analyzer": ANALYZER_NAME, "max_token_chars": MAX_TOKEN_CHARS, "title_weight": title_weight,
         "docs": n_out, "pages": n_in, "empty": n_in - n_out, "body": body},
    )
    return stats


def _build_body(pages: ds.Dataset, body_dir: Path, batch_rows: int, n_threads: int, heap: int,
                progress: Callable[[int], object] | None) -> int:
    """Index every page with text into ``body_dir`` for the ``body`` ranking; returns how many."""
    body_dir.mkdir()
    index = tantivy.Index(make_body_schema(), path=str(body_dir), reuse=False)
    index.register_tokenizer(RAW_ANALYZER_NAME, raw_analyzer())
    writer = index.writer(heap_size=heap, num_threads=n_threads)
    n_out = 0
    pool = _memory_pool()
    for batch in pages.to_batches(columns=["page_id", "paragraphs"], batch_size=batch_rows, memory_pool=pool):
        bodies = rendered_bodies(batch.column("paragraphs"), pool).to_pylist()
        for pid, text in zip(batch.column("page_id").to_pylist(), bodies):
            if text.strip(PARA_SEP):
                doc = tantivy.Document()
                doc.add_text("page_id", pid)
                doc.add_text("body", text)
                writer.add_document(doc)
                n_out += 1
        if progress is not None:
            progress(batch.num_rows)
    writer.commit()
    writer.wait_merging_threads()
    return n_out


def ranked_text(title: str, body: str, weight: int = TITLE_WEIGHT) -> str:
    """The ``text`` field of a page: its title ``weight`` times, then its body (BM25F by repetition)."""
    return PARA_SEP.join([title] * weight + [body])


def _batches(pages: ds.Dataset, links: ds.Dataset | None, cols: list[str], batch_rows: int, index_dir: Path,
             memory_limit: str, pool: pa.MemoryPool | None = None):
    """The pages' rows in batches, in the dataset's order, with a ``links`` column (``[anchor, page id,
    title]`` lists, in page order) when ``links`` is given.

    Nothing holds all the links grouped at once (a GROUP BY that lists 100M links runs out of memory
    at the whole dump's size).  Each page gets its position in the scan (the ids and titles alone are
    held: ~40 bytes a page); DuckDB sorts the links by their source page's position, then paragraph and
    offset, into a scratch Parquet file beside the index (spilling past ``memory_limit``); the pages are
    then read in the same order with that file, a merge of two sorted streams, so memory is one batch
    of each.
    """
    if links is None or links.count_rows() == 0:
        yield from pages.to_batches(columns=cols, batch_size=batch_rows, memory_pool=pool)
        return
    import duckdb
    import numpy as np

    tmp = index_dir.parent / (index_dir.name + ".links-tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        ids = pages.to_table(columns=["page_id", "title"])
        titles = ids.column("title").combine_chunks()
        pos = pa.table({"page_id": ids.column("page_id"), "pos": pa.array(np.arange(ids.num_rows, dtype=np.int64))})
        page_ids = ids.column("page_id")
        del ids
        sorted_path = tmp / "links.parquet"
        con = duckdb.connect()
        try:
            con.execute(f"SET memory_limit='{memory_limit}'")
            con.execute("SET temp_directory='" + str(tmp / "duckdb").replace("'", "''") + "'")
            con.register("pos", pos)
            con.register("links", links)
            con.execute(f"""
                COPY (SELECT s.pos AS src, coalesce(l.anchor_text, '') AS anchor, l.dst_id, t.pos AS dst
                      FROM links l JOIN pos s ON s.page_id = l.src_id JOIN pos t ON t.page_id = l.dst_id
                      ORDER BY s.pos, l.paragraph_id, l.start, l.dst_id, anchor)
                TO '{str(sorted_path).replace("'", "''")}' (FORMAT parquet, ROW_GROUP_SIZE 131072)""")
        finally:
            con.close()
        del pos
        shutil.rmtree(tmp / "duckdb", ignore_errors=True)
        linked = _SortedLinks(sorted_path)
        start = 0
        for batch in pages.to_batches(columns=cols, batch_size=batch_rows, memory_pool=pool):
            n = batch.num_rows
            if not batch.column("page_id").equals(page_ids.slice(start, n).combine_chunks()):
                raise RuntimeError("index: the pages table read back in another order; rerun the index stage")
            rows = linked.take_until(start + n)
            src = rows.column("src").to_numpy() - start
            m = rows.num_rows
            offsets = np.zeros(n + 1, dtype=np.int32)
            np.cumsum(np.bincount(src, minlength=n), out=offsets[1:])
            anchor = rows.column("anchor").combine_chunks()
            dst_id = rows.column("dst_id").combine_chunks()
            title = titles.take(rows.column("dst").combine_chunks())
            flat = pa.concat_arrays([anchor.cast(pa.string()), dst_id.cast(pa.string()), title.cast(pa.string())])
            order = np.arange(3 * m, dtype=np.int64).reshape(3, m).T.ravel()  # anchor, id, title of each link
            triples = pa.ListArray.from_arrays(pa.array(np.arange(0, 3 * m + 1, 3, dtype=np.int32)), flat.take(order))
            yield batch.append_column("links", pa.ListArray.from_arrays(pa.array(offsets), triples))
            start += n
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class _SortedLinks:
    """The scratch links file, sorted by source position, read forward in slices."""

    def __init__(self, path: Path):
        import pyarrow.parquet as pq

        self._file = pq.ParquetFile(path)
        self._batches = self._file.iter_batches(batch_size=65_536)
        self._carry: pa.RecordBatch | None = None

    def take_until(self, end: int) -> pa.Table:
        """The next rows whose source position is below ``end`` (all of them: the file is sorted)."""
        import numpy as np

        parts = []
        while True:
            if self._carry is None:
                self._carry = next(self._batches, None)
                if self._carry is None:
                    break
            cut = int(np.searchsorted(self._carry.column("src").to_numpy(), end, side="left"))
            parts.append(self._carry.slice(0, cut))
            if cut < self._carry.num_rows:
                self._carry = self._carry.slice(cut)
                break
            self._carry = None
        return pa.Table.from_batches(parts, schema=self._file.schema_arrow)


def _first_per_target(links: list[list[str]]) -> list[list[str]]:
    """Each target page once, at its first anchor in page order."""
    seen: set[str] = set()
    out = []
    for anchor, dst, title in links:
        if dst not in seen:
            seen.add(dst)
            out.append([anchor, dst, title])
    return out


def rendered_bodies(paragraphs: pa.ListArray | pa.ChunkedArray, pool: pa.MemoryPool | None = None) -> pa.StringArray:
    """Each page's paragraphs rendered (:func:`render_paragraph`) and joined by ``PARA_SEP`` (buffers from
    ``pool``, default: Arrow's)."""
    if isinstance(paragraphs, pa.ChunkedArray):
        paragraphs = paragraphs.combine_chunks(memory_pool=pool)
    offsets = pc.subtract(paragraphs.offsets, paragraphs.offsets[0], memory_pool=pool)
    flat = pc.replace_substring(paragraphs.flatten(), PARA_SEP, " ", memory_pool=pool)
    flat = pc.utf8_trim_whitespace(flat, memory_pool=pool)
    marked = pc.or_(pc.starts_with(flat, "Section::::", memory_pool=pool),
                    pc.starts_with(flat, "BULLET::::", memory_pool=pool), memory_pool=pool)
    if pc.any(marked).as_py():
        # KILT markup is rare enough per batch for Python to render just those paragraphs.
        values = flat.to_pylist()
        for j in pc.indices_nonzero(marked).to_pylist():
            values[j] = render_paragraph(values[j])
        flat = pa.array(values, pa.string(), memory_pool=pool)
    flat = pc.coalesce(flat, "", memory_pool=pool)
    return pc.binary_join(pa.ListArray.from_arrays(offsets, flat, pool=pool), PARA_SEP, memory_pool=pool)


def _memory_pool() -> pa.MemoryPool:
    """The Arrow memory pool of a build's batches: the system allocator.  Arrow's default (mimalloc) hands
    each batch's freed buffers back to the kernel and faults them in again (huge pages, zeroed) for the
    next batch: ~5 us of system time a page on ``bench/search.py``'s pages, 2-3% of the build's CPU."""
    return pa.system_memory_pool()


__all__ = ["FORMAT", "TITLE_WEIGHT", "ranked_text", "META_FILE", "LONG_DIR", "PARA_SEP", "make_schema", "make_long_schema", "build_index",
           "rendered_bodies"]
