"""The evidence of a hop: the anchor in page ``src`` that links to ``dst``, with its paragraph.

Walks and subgraph expansion produce node pairs; questions need the text that
justifies each pair.  For a batch of (src_id, dst_id) pairs one DuckDB query picks
the *first* anchor from src to dst (lowest ``paragraph_id``, then ``start``), then
reads the paragraph that holds it from ``corpus/pages``.  KILT numbers paragraphs
with the title at 0, and ``pages.paragraphs`` is ``text[1:]``, so paragraph p is
``paragraphs[p-1]`` in Python and ``paragraphs[p]`` in DuckDB's 1-based lists.

Only the selected anchors' pages are read in full, so a batch of ~1M pairs costs one
scan of ``corpus/links`` plus one of ``page_id`` and the matching paragraphs.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from synth.engine.records import EVIDENCE_TYPE

_QUERY = """
WITH want AS (SELECT DISTINCT src_id, dst_id FROM pairs),
first AS (
    SELECT l.src_id, l.dst_id, l.paragraph_id, l.start, l."end", l.anchor_text
    FROM read_parquet($links) l SEMI JOIN want w ON l.src_id = w.src_id AND l.dst_id = w.dst_id
    QUALIFY row_number() OVER (PARTITION BY l.src_id, l.dst_id
                               ORDER BY l.paragraph_id, l.start, l."end", l.anchor_text) = 1
),
src_pages AS (
    SELECT page_id, title, paragraphs FROM read_parquet($pages)
    WHERE page_id IN (SELECT src_id FROM first)
    QUALIFY row_number() OVER (PARTITION BY page_id ORDER BY title) = 1
),
found AS (
    SELECT f.*, CASE WHEN f.paragraph_id = 0 THEN sp.title ELSE sp.paragraphs[f.paragraph_id] END AS paragraph
    FROM first f LEFT JOIN src_pages sp ON sp.page_id = f.src_id
)
SELECT p.i, p.src_id, p.dst_id, f.paragraph_id, f.paragraph, f.anchor_text, f.start, f."end",
       coalesce(substring(f.paragraph, f.start + 1, f."end" - f.start) = f.anchor_text, false) AS verified
FROM pairs p LEFT JOIN found f ON f.src_id = p.src_id AND f.dst_id = p.dst_id
ORDER BY p.i
"""


class MissingEvidence(RuntimeError):
    """A pair has no anchor in ``corpus/links``: the graph and the corpus disagree."""


def lookup_evidence(page_files: list[str], link_files: list[str], src_ids, dst_ids, memory_limit: str = "2GB",
                    tmp: Path | None = None) -> pa.Table:
    """Evidence for each pair ``(src_ids[i], dst_ids[i])``, in input order (duplicates allowed).

    Returns a table with columns ``src_id, dst_id, paragraph_id, paragraph, anchor_text,
    start, end, verified``; ``verified`` says ``paragraph[start:end] == anchor_text``.
    Raises :class:`MissingEvidence` if some pair has no anchor or its page is missing.
    """
    pairs = pa.table({"i": pa.array(np.arange(len(src_ids), dtype=np.int64)),
                      "src_id": pa.array(src_ids, pa.string()), "dst_id": pa.array(dst_ids, pa.string())})
    if pairs.num_rows == 0:
        return _empty()
    # DuckDB spills here past memory_limit; a private folder, removed afterwards, so nothing
    # is left inside a stage's staging folder to be committed with its output.
    if tmp is not None:
        Path(tmp).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="evidence-", dir=tmp))
    con = duckdb.connect()
    try:
        con.execute("SET memory_limit = " + _sql_str(memory_limit))
        con.execute("SET temp_directory = " + _sql_str(work))
        con.register("pairs", pairs)
        out = con.sql(_QUERY, params={"links": list(link_files), "pages": list(page_files)}).to_arrow_table()
    finally:
        con.close()
        shutil.rmtree(work, ignore_errors=True)
        if tmp is not None and not any(Path(tmp).iterdir()):
            Path(tmp).rmdir()
    missing = pc.is_null(out.column("paragraph"))
    if pc.any(missing).as_py():
        bad = out.filter(missing).slice(0, 5)
        raise MissingEvidence(f"{pc.sum(missing).as_py()} pair(s) have no anchor or no source page, e.g. "
                              f"{list(zip(bad['src_id'].to_pylist(), bad['dst_id'].to_pylist()))}")
    return out.drop_columns(["i"])


def to_structs(evidence: pa.Table) -> pa.StructArray:
    """The rows of a :func:`lookup_evidence` table as an ``EVIDENCE_TYPE`` struct array."""
    names = [f.name for f in EVIDENCE_TYPE]
    cols = [evidence.column(n).combine_chunks().cast(EVIDENCE_TYPE.field(n).type) for n in names]
    return pa.StructArray.from_arrays(cols, fields=list(EVIDENCE_TYPE))


def _sql_str(x) -> str:
    return "'" + str(x).replace("'", "''") + "'"


def _empty() -> pa.Table:
    return pa.table({"src_id": pa.array([], pa.string()), "dst_id": pa.array([], pa.string()),
                     "paragraph_id": pa.array([], pa.int32()), "paragraph": pa.array([], pa.string()),
                     "anchor_text": pa.array([], pa.string()), "start": pa.array([], pa.int32()),
                     "end": pa.array([], pa.int32()), "verified": pa.array([], pa.bool_())})
