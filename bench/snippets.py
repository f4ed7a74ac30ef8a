"""Benchmark: what one huge page costs every search that returns it, with and without the snippet bound.

The corpus is 2,000 ordinary pages (5 paragraphs of 80 words from a 5,000-word vocabulary)
and one page of about 5 MB (``--huge-mb``) in ~470-character paragraphs of the same words.
Each of 1,000 rare words is in two ordinary pages and somewhere in the huge one, so a query
of two rare words returns the huge page among its five hits.  Each query (top 5, snippets
included) is timed twice: as it is
(the huge page among its hits) and with the huge page masked (``exclude``), the same
search over ordinary pages only.  The slowdown is the ratio of the two, measured on an index
built with ``lead_chars=None`` (every page stored whole in its search document and scored
whole for its snippet: hopforge before the bound) and on one built with the default lead
(:data:`synth.tools.snippet.SCAN_CHARS`; the rest of a longer page in ``index/long``).  Each
figure is the median of ``--runs`` (3) passes over the queries; the load average is printed
before and after, since the cores here are shared.

The last line is JSON: {"bench": "snippets", "before": slowdown, "after": slowdown,
"ratio": before / after, "ms": {...}, "loadavg": [...]}.  Goal: after <= 5 (a huge hit
costs at most a few ordinary ones).

Usage: python bench/snippets.py [--huge-mb 5] [--queries 200] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synth.engine.records import PAGE_SCHEMA  # noqa: E402
from synth.engine.store import write_parquet_atomic  # noqa: E402
from synth.tools.search import SearchIndex, build_index  # noqa: E402
from synth.tools.snippet import SCAN_CHARS  # noqa: E402

HUGE_ID = "huge"


def _page(pid: str, title: str, paragraphs: list[str]) -> dict:
    return {"page_id": pid, "title": title, "paragraphs": paragraphs, "description": None, "aliases": None,
            "wikidata_id": None, "categories": None, "url": None, "n_chars": sum(map(len, paragraphs))}


def corpus(out: Path, n_pages: int, huge_mb: float, rng: np.random.Generator) -> list[str]:
    """Write the pages under ``out``; returns the rare words (each in the huge page and in two others)."""
    vocab = [f"w{i}x{'abcdefgh'[i % 8]}" for i in range(5000)]
    rare = [f"rare{i}q" for i in range(n_pages // 2)]
    pages = []
    for i in range(n_pages):
        paragraphs = [" ".join(rng.choice(vocab, 80)) + ".\n" for _ in range(5)]
        paragraphs[int(rng.integers(5))] += f" It mentions {rare[i // 2]}.\n"
        pages.append(_page(str(i), f"Page {i}", paragraphs))
    huge, size = [], 0
    while size < huge_mb * 1e6:
        p = " ".join(rng.choice(vocab, 60)) + ".\n"
        huge.append(p)
        size += len(p)
    for j, word in enumerate(rare):  # spread over the page, so most fall past any prefix bound
        huge[(j * 7919) % len(huge)] += f" Here is {word}.\n"
    pages.append(_page(HUGE_ID, "Huge page", huge))
    write_parquet_atomic(pa.Table.from_pylist(pages, schema=PAGE_SCHEMA), out / "part-00000.parquet")
    return rare


def time_queries(index: SearchIndex, queries: list[str], exclude: tuple[str, ...]) -> float:
    """Seconds per query, on average over ``queries``."""
    t0 = time.perf_counter()
    for q in queries:
        index.search(q, 5, exclude_page_ids=exclude)
    return (time.perf_counter() - t0) / len(queries)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--huge-mb", type=float, default=5.0)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="hopforge-bench-snippets-") as tmp:
        rare = corpus(Path(tmp) / "pages", args.pages, args.huge_mb, rng)
        queries = [" ".join(rng.choice(rare, 2, replace=False)) for _ in range(args.queries)]
        ms: dict[str, float] = {}
        for label, lead in (("before", None), ("after", SCAN_CHARS)):
            build_index(Path(tmp) / "pages", Path(tmp) / label, lead_chars=lead)
            index = SearchIndex.open(Path(tmp) / label)
            returned = sum(HUGE_ID in [h["page_id"] for h in index.search(q, 5)] for q in queries)
            print(f"{label}: {returned}/{len(queries)} queries return the huge page in their top 5")
            for masked in (False, True):
                exclude = (HUGE_ID,) if masked else ()
                time_queries(index, queries[:20], exclude)  # warm the caches
                runs = [time_queries(index, queries, exclude) for _ in range(args.runs)]
                ms[f"{label}_{'masked' if masked else 'with_huge'}"] = round(statistics.median(runs) * 1e3, 3)
            print(f"{label:6} ({'the whole page stored and scored' if lead is None else f'a {lead:,}-char lead'}): "
                  f"{ms[f'{label}_with_huge']:.2f} ms a query with the huge page, "
                  f"{ms[f'{label}_masked']:.2f} ms with it masked (median of {args.runs})")
    before = ms["before_with_huge"] / ms["before_masked"]
    after = ms["after_with_huge"] / ms["after_masked"]
    load1 = os.getloadavg()
    print(f"corpus: {args.pages:,} pages + one of {args.huge_mb:g} MB")
    print(f"slowdown from the huge page: before {before:.1f}x, after {after:.1f}x; ratio {before / after:.1f}x")
    print(f"load average: {load0[0]:.2f} before, {load1[0]:.2f} after")
    result = {"bench": "snippets", "before": round(before, 2), "after": round(after, 2),
              "ratio": round(before / after, 2), "ms": ms, "returned": returned,
              "loadavg": [round(x, 2) for x in load0 + load1]}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
