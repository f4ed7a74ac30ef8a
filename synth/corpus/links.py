"""Turning KILT anchors into links between pages of the corpus.

The rules (each drop is counted by reason):

* an anchor whose ``paragraph_id`` is outside ``text``, or whose offsets are missing,
  negative, reversed or beyond int32, is dropped as ``bad_anchor``;
* an anchor whose ``wikipedia_id`` is set (non-null, non-empty) resolves iff that id
  is a page of the corpus; there is no title fallback;
* otherwise an ``href`` containing ``http`` is ``external``; any other href becomes
  a title (:func:`title_from_href`) looked up exactly among page titles; a title that
  several pages hold names the one with the smallest id (:mod:`synth.corpus.titles`),
  the same page ``open`` returns for it;
* what does not resolve is ``unresolved``; a page linking to itself is ``self``.

Links keep KILT's ``paragraph_id`` (0 is the title): pages store ``paragraphs =
text[1:]``, so a link's paragraph is ``pages.paragraphs[paragraph_id - 1]``.

Pass 1 (:func:`stage_anchors`) applies the per-anchor rules with Arrow compute and
stages the rest as Parquet; pass 2 (:func:`resolve_links`) joins them against page
ids and titles in DuckDB, which spills to disk past its memory limit, and streams
the links back in anchor order.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Iterator
from urllib.parse import unquote

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from synth.corpus.titles import PAGE_ORDER_SQL

STAGED_SCHEMA = pa.schema([
    ("seq", pa.int64()), ("src_id", pa.string()), ("paragraph_id", pa.int32()), ("start", pa.int32()),
    ("end", pa.int32()), ("anchor_text", pa.string()), ("wid", pa.string()), ("title_key", pa.string()),
])
IDS_SCHEMA = pa.schema([("seq", pa.int64()), ("page_id", pa.string()), ("title", pa.string())])
_INT32_MAX = 2**31 - 1


SHARED_TITLE_EXAMPLES = 5


def shared_titles(ids: Path, tmp: Path, memory_limit: str = "1GB") -> dict:
    """Titles that more than one page holds, in the ``ids`` table pass 1 staged:
    ``{"titles": how many, "pages": the pages a title lookup does not reach, "examples": a few titles}``.

    DuckDB groups the titles, spilling to ``tmp`` past ``memory_limit``."""
    tmp.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    try:
        con.execute(f"SET memory_limit='{memory_limit}'")
        con.execute(f"SET temp_directory={_sql_path(tmp)}")
        (row,) = con.execute(f"""
            SELECT count(*) AS titles, coalesce(sum(n) - count(*), 0) AS pages,
                   list(title ORDER BY title)[1:{SHARED_TITLE_EXAMPLES}] AS examples
            FROM (SELECT title, count(*) AS n FROM read_parquet({_sql_path(ids)}) GROUP BY title HAVING n > 1)
            """).fetchall()
    finally:
        con.close()
    return {"titles": int(row[0]), "pages": int(row[1]), "examples": list(row[2] or [])}


@lru_cache(maxsize=1 << 18)  # popular targets recur across blocks; bounded, so memory is too
def title_from_href(href: str) -> str:
    """The page title an href names: unquoted, cut at ``#``, ``_`` as spaces, first letter upper-case."""
    title = unquote(href).split("#", 1)[0].replace("_", " ")
    return title[:1].upper() + title[1:]


def _title_keys(href: pa.Array) -> pa.Array:
    # hrefs repeat a lot, so each distinct one is normalised once (exact Python semantics).
    enc = pc.dictionary_encode(href)
    keys = pa.array([title_from_href(h) for h in enc.dictionary.to_pylist()], pa.string())
    return keys.take(enc.indices)


def stage_anchors(pages: pa.Table, seq0: int) -> tuple[pa.Table, dict[str, int]]:
    """The anchors of ``pages`` (raw rows) that may resolve, numbered from ``seq0``, and counts.

    Counts: ``seen`` (every anchor), ``bad_anchor`` and ``external``.  The staged rows
    carry ``wid`` (the anchor's id, when set) or ``title_key`` (the title its href names).
    """
    lists = pages.column("anchors").combine_chunks()
    flat = pc.list_flatten(lists)
    counts = {"seen": len(flat), "bad_anchor": 0, "external": 0}
    if len(flat) == 0:
        return STAGED_SCHEMA.empty_table(), counts
    parents = pc.list_parent_indices(lists)
    n_text = pc.take(pc.list_value_length(pages.column("text").combine_chunks()), parents)
    p, s, e = (pc.struct_field(flat, f) for f in ("paragraph_id", "start", "end"))
    ok = pc.and_kleene(pc.and_kleene(pc.greater_equal(p, 0), pc.less(p, n_text)),
                       pc.and_kleene(pc.and_kleene(pc.greater_equal(s, 0), pc.greater_equal(e, s)),
                                     pc.less_equal(e, _INT32_MAX)))
    ok = pc.fill_null(ok, False)
    wid = pc.struct_field(flat, "wikipedia_id")
    wid = pc.if_else(pc.equal(wid, ""), pa.scalar(None, pa.string()), wid)
    href = pc.struct_field(flat, "href")
    external = pc.and_(ok, pc.and_(pc.is_null(wid), pc.fill_null(pc.match_substring(href, "http"), False)))
    keep = pc.and_(ok, pc.invert(external))
    counts["bad_anchor"] = len(flat) - pc.sum(ok).as_py()
    counts["external"] = pc.sum(external).as_py() or 0
    wid, href = wid.filter(keep), href.filter(keep)
    n = len(wid)
    need_key = pc.and_(pc.is_null(wid), pc.is_valid(href))
    title_key = pa.nulls(n, pa.string())
    if pc.any(need_key).as_py():
        title_key = pc.replace_with_mask(title_key, need_key, _title_keys(href.filter(need_key)))
    arrays = [
        pa.array(np.arange(seq0, seq0 + n, dtype=np.int64)),
        pc.take(pages.column("page_id"), parents.filter(keep)).combine_chunks(),
        p.filter(keep).cast(pa.int32()), s.filter(keep).cast(pa.int32()), e.filter(keep).cast(pa.int32()),
        pc.struct_field(flat, "text").filter(keep), wid, title_key,
    ]
    return pa.Table.from_arrays(arrays, schema=STAGED_SCHEMA), counts


def _sql_path(p: Path) -> str:
    return "'" + str(p).replace("'", "''") + "'"


def resolve_links(ids: Path, anchors: Path, tmp: Path, memory_limit: str = "1GB",
                  batch_rows: int = 500_000) -> Iterator[tuple[pa.RecordBatch, dict[str, int]]]:
    """Join staged anchors with page ids and titles; yield link batches (``LINK_SCHEMA`` columns) in anchor order.

    Each batch comes with the counts it dropped: ``unresolved`` and ``self``.
    """
    tmp.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    try:
        con.execute(f"SET memory_limit='{memory_limit}'")
        con.execute(f"SET temp_directory={_sql_path(tmp)}")
        # The ORDER BY fixes the output order; insertion order need not be kept elsewhere.
        con.execute("SET preserve_insertion_order=false")
        query = f"""
            WITH ids AS (SELECT seq, page_id, title FROM read_parquet({_sql_path(ids)})),
                 titles AS (SELECT title, arg_min(page_id, {PAGE_ORDER_SQL}) AS page_id FROM ids GROUP BY title)
            SELECT a.src_id, coalesce(i.page_id, t.page_id) AS dst_id,
                   a.paragraph_id, a.start, a."end", a.anchor_text
            FROM read_parquet({_sql_path(anchors)}) a
            LEFT JOIN ids i ON a.wid = i.page_id
            LEFT JOIN titles t ON a.title_key = t.title
            ORDER BY a.seq"""
        reader = con.sql(query).to_arrow_reader(batch_rows)
        for batch in reader:
            dst, src = batch.column("dst_id"), batch.column("src_id")
            resolved = pc.is_valid(dst)
            is_self = pc.fill_null(pc.equal(dst, src), False)
            keep = pc.and_(resolved, pc.invert(is_self))
            counts = {"unresolved": batch.num_rows - pc.sum(resolved).as_py() if batch.num_rows else 0,
                      "self": pc.sum(is_self).as_py() or 0}
            yield batch.filter(keep), counts
    finally:
        con.close()
