"""Benchmark: hopforge's KILT ingest against a plain ``json.loads`` line loop.

Usage: ``python bench/ingest.py [MB] [--repeats N] [--keep DIR]`` (default 250 MB of
synthetic KILT, 5 alternating runs of each side, best time kept).

Both sides read the same synthetic KILT JSON Lines file (:mod:`synth.corpus.synthetic`) in
one run and write the same tables: ``corpus/pages`` and the resolved
``corpus/links`` with the same rules (first id wins, id resolution with no title
fallback, href -> title for null ids, external / self / bad anchors dropped).
The baseline is what one writes first: ``json.loads`` per line, Python dicts, and
``pyarrow.parquet.ParquetWriter`` for the output.  hopforge runs as the pipeline
runs it (``run_stage``: content key, source hash, commit included).  The tables
are compared row for row, then the last line printed is JSON::

    {"bench": "ingest", "ours": MB_per_s, "baseline": MB_per_s, "ratio": r}

MB is 10^6 bytes of the (uncompressed) input file.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from flows.config import load_config
from synth.corpus.links import title_from_href
from synth.engine.runner import run_stage
from synth.engine.records import LINK_SCHEMA, PAGE_SCHEMA
from flows.stages import INGEST
from synth.engine.store import Store
from synth.corpus.synthetic import write_synthetic_kilt

BYTES_PER_PAGE = 9_700  # what write_synthetic_kilt writes per page with 30 anchors


def baseline(src: Path, out: Path) -> dict[str, int]:
    """Ingest ``src`` the plain way: a json.loads loop, dicts, ParquetWriter.  Returns row counts."""
    out.mkdir(parents=True, exist_ok=True)
    page_ids: set[str] = set()
    title_to_id: dict[str, str] = {}
    anchors: list[tuple[str, int, dict]] = []
    rows: list[dict] = []
    n_pages = n_bad = 0
    with open(src, "rb") as f, pq.ParquetWriter(out / "pages.parquet", PAGE_SCHEMA, compression="zstd") as pw:
        for line in f:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                n_bad += 1
                continue
            pid, title, text = obj.get("_id"), obj.get("wikipedia_title"), obj.get("text")
            if not (isinstance(pid, str) and pid and isinstance(title, str) and title and isinstance(text, list)
                    and text and all(isinstance(t, str) for t in text)) or pid in page_ids:
                n_bad += 1
                continue
            page_ids.add(pid)
            title_to_id.setdefault(title, pid)
            wd, hist = obj.get("wikidata_info") or {}, obj.get("history") or {}
            rows.append({"page_id": pid, "title": title, "paragraphs": text[1:], "description": wd.get("description"),
                         "aliases": wd.get("aliases") or None, "wikidata_id": wd.get("wikidata_id"),
                         "categories": obj.get("categories"), "url": hist.get("url"),
                         "n_chars": sum(len(p) for p in text[1:])})
            anchors.extend((pid, len(text), a) for a in obj.get("anchors") or [])
            n_pages += 1
            if len(rows) >= 5000:
                pw.write_table(pa.Table.from_pylist(rows, schema=PAGE_SCHEMA))
                rows = []
        if rows:
            pw.write_table(pa.Table.from_pylist(rows, schema=PAGE_SCHEMA))
    links: list[dict] = []
    n_links = 0
    with pq.ParquetWriter(out / "links.parquet", LINK_SCHEMA, compression="zstd") as lw:
        for src_id, n_text, a in anchors:
            p, s, e = a.get("paragraph_id"), a.get("start"), a.get("end")
            if not (isinstance(p, int) and isinstance(s, int) and isinstance(e, int)
                    and 0 <= p < n_text and 0 <= s <= e <= 2**31 - 1):
                continue
            wid, href = a.get("wikipedia_id"), a.get("href")
            if wid:
                dst = wid if wid in page_ids else None
            elif href is None or "http" in href:
                dst = None
            else:
                dst = title_to_id.get(title_from_href(href))
            if dst is None or dst == src_id:
                continue
            links.append({"src_id": src_id, "dst_id": dst, "paragraph_id": p, "start": s, "end": e,
                          "anchor_text": a.get("text")})
            if len(links) >= 200_000:
                lw.write_table(pa.Table.from_pylist(links, schema=LINK_SCHEMA))
                n_links += len(links)
                links = []
        if links:
            lw.write_table(pa.Table.from_pylist(links, schema=LINK_SCHEMA))
            n_links += len(links)
    return {"pages": n_pages, "links": n_links, "bad": n_bad}


def main(argv: list[str]) -> dict:
    """Generate the data, run both sides, compare their tables, print figures."""
    mb = float(argv[0]) if argv and not argv[0].startswith("--") else 250.0
    keep = Path(argv[argv.index("--keep") + 1]) if "--keep" in argv else None
    repeats = int(argv[argv.index("--repeats") + 1]) if "--repeats" in argv else 5
    work = keep or Path(tempfile.mkdtemp(prefix="hopforge-bench-ingest-"))
    src = work / "kilt_synthetic.jsonl"
    n_pages = max(100, int(mb * 1e6 / BYTES_PER_PAGE))
    t = time.perf_counter()
    gen = write_synthetic_kilt(src, n_pages, anchors_per_page=30, seed=7)
    print(f"synthetic KILT: {gen['pages']:,} pages, {gen['anchors']:,} anchors, {gen['bytes'] / 1e6:,.0f} MB "
          f"in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    size_mb = src.stat().st_size / 1e6
    src.read_bytes()  # warm the page cache so neither side pays the first read

    # Both sides run `repeats` times, alternating, and each keeps its best time: the
    # machine is shared, and the best run is the one least disturbed by other work.
    import synth.corpus.ingest  # noqa: F401 - imports are paid before timing, as the baseline's are

    cfg = load_config(None, [f"corpus.source={src}"])
    store = Store(work / "ours")
    times_base, times_ours = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        base = baseline(src, work / "baseline")
        times_base.append(time.perf_counter() - t)
        t = time.perf_counter()
        outcome = run_stage(INGEST, cfg, store, force=True, progress=False)
        times_ours.append(time.perf_counter() - t)
    t_base, t_ours = min(times_base), min(times_ours)

    ours_pages = store.read("corpus/pages")
    ours_links = store.read("corpus/links")
    base_pages = pq.read_table(work / "baseline" / "pages.parquet")
    base_links = ds.dataset(work / "baseline" / "links.parquet").to_table()
    assert ours_pages.num_rows == base["pages"] == outcome.report["output"], (ours_pages.num_rows, base)
    assert ours_links.num_rows == base["links"], (ours_links.num_rows, base)
    assert ours_pages.equals(base_pages), "pages differ from the baseline's"
    assert ours_links.equals(base_links), "links differ from the baseline's"

    ours, base_mb = size_mb / t_ours, size_mb / t_base
    print(f"{'':10}{'best s':>10}{'MB/s':>10}   all runs (s)", file=sys.stderr)
    for name, best, mbs, runs in (("baseline", t_base, base_mb, times_base), ("hopforge", t_ours, ours, times_ours)):
        print(f"{name:10}{best:10.2f}{mbs:10.1f}   {' '.join(f'{x:.2f}' for x in runs)}", file=sys.stderr)
    print(f"same tables: {base['pages']:,} pages, {base['links']:,} links", file=sys.stderr)
    result = {"bench": "ingest", "ours": round(ours, 1), "baseline": round(base_mb, 1), "ratio": round(ours / base_mb, 2)}
    print(json.dumps(result))
    if keep is None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
