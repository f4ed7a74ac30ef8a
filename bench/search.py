"""Benchmark: hopforge's local search (tantivy, snippets included) against rank-bm25, side by side.

The corpus is 100k synthetic pages in the ``corpus/pages`` layout (PAGE_SCHEMA
Parquet shards).  Words come from a 200k-word vocabulary with Zipf frequencies
(rank^-1, like English), so posting lengths have the real shape: a few words occur
everywhere, most are rare.  A page has a two-word title, 3-10 paragraphs of 20-90
words, and mentions its title words a few times, as Wikipedia pages do.

Queries are what an agent asks about an entity: 2-6 terms, a page's title words
(most of the time) and words drawn from its paragraphs.  Ours is timed on every
query one at a time (top 5, snippets included); rank-bm25 (``BM25Okapi``, ~180 ms a
query at this size) on a subset, per query, scores plus top-5 selection only.

The last line is JSON: {"bench": "search", "ours": q/s, "baseline": q/s, "ratio": r,
"p50_ms", "p99_ms", "build_pages_per_s", "build_cpu_us_per_page", "tool_build_pages_per_s",
"body_build_pages_per_s"}.
Goals: ratio >= 100, p99 < 5 ms with snippets, the agents' index built at >= 10k pages/s
(``tool_build_pages_per_s``: the index the tools search; ``build_pages_per_s`` adds the second pass, the
question checks' plain-BM25 index ``index/body``, which the tools never read).

Usage: python bench/search.py [--pages 100000] [--queries 2000] [--baseline-queries 50]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synth.engine.records import PAGE_SCHEMA  # noqa: E402
from synth.tools.search import SearchIndex, build_index  # noqa: E402
from synth.engine.store import ShardWriter  # noqa: E402

_ONSETS = "b c d f g h j k l m n p r s t v w z br ch cl dr fl gr kr pl sh st th tr".split()
_VOWELS = "a e i o u ai ea ie ou".split()
_CODAS = ["", "", "n", "r", "s", "l", "m", "nd", "rt", "st", "x"]


def vocabulary(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` distinct pronounceable pseudo-words (1-4 syllables), most frequent first."""
    words: dict[str, None] = {}
    while len(words) < n:
        syl = rng.integers(1, 5)
        w = "".join(_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))] for _ in range(syl))
        words.setdefault(w + _CODAS[rng.integers(len(_CODAS))], None)
    # Short words are the common ones, as in natural language.
    return np.array(sorted(words, key=len))


def synthetic_pages(n_pages: int, out: Path, seed: int = 0, vocab_size: int = 200_000) -> tuple[list, list]:
    """Write ``n_pages`` pages as Parquet shards under ``out``; returns (titles, tokens of each page)."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary(vocab_size, rng)
    cdf = np.cumsum(1.0 / np.arange(1, vocab_size + 1))
    cdf /= cdf[-1]
    writer = ShardWriter(out, PAGE_SCHEMA, rows_per_shard=25_000)
    titles, page_tokens = [], []
    rows = []
    for i in range(n_pages):
        # Titles use mid-frequency words: names, not "the".
        t_ids = rng.integers(500, vocab_size, size=2)
        title_words = [str(vocab[j]).capitalize() for j in t_ids]
        n_par = int(rng.integers(3, 11))
        lens = rng.integers(20, 91, size=n_par)
        ids = np.searchsorted(cdf, rng.random(int(lens.sum())))
        words = vocab[ids].tolist()
        # The title words recur in the text, a few times per page.
        for _ in range(int(rng.integers(2, 6))):
            words[int(rng.integers(len(words)))] = title_words[int(rng.integers(2))]
        paragraphs, pos = [], 0
        for ln in lens.tolist():
            chunk = words[pos:pos + ln]
            pos += ln
            paragraphs.append(chunk[0].capitalize() + " " + " ".join(chunk[1:]) + ".")
        title = " ".join(title_words)
        titles.append(title)
        page_tokens.append([w.lower() for w in title_words] + [w.lower() for w in words])
        body_chars = sum(map(len, paragraphs))
        rows.append({"page_id": str(1000 + i), "title": title, "paragraphs": paragraphs, "description": None,
                     "aliases": None, "wikidata_id": None, "categories": "", "url": None, "n_chars": body_chars})
        if len(rows) == 5000:
            writer.write(rows)
            rows = []
    writer.write(rows)
    writer.close()
    return titles, page_tokens


def make_queries(titles: list[str], page_tokens: list[list[str]], n: int, seed: int = 1) -> tuple[list[str], list[str]]:
    """``n`` queries of 2-6 terms about random pages (title words 80% of the time, plus words from
    the page), and the id of each query's page (what a rollout would mask)."""
    rng = np.random.default_rng(seed)
    out, about = [], []
    for _ in range(n):
        p = int(rng.integers(len(titles)))
        n_terms = int(rng.integers(2, 7))
        terms = titles[p].lower().split() if rng.random() < 0.8 else []
        toks = page_tokens[p]
        while len(terms) < n_terms:
            terms.append(toks[int(rng.integers(len(toks)))])
        out.append(" ".join(terms[:n_terms]))
        about.append(str(1000 + p))
    return out, about


def _cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def time_ours(index: SearchIndex, queries: list[str], k: int, masks: list[str] | None = None) -> np.ndarray:
    """Seconds per query (top ``k`` with snippets), one query at a time, after a warm-up;
    with ``masks``, query i never returns page ``masks[i]`` (source masking)."""
    masks = masks or [""] * len(queries)
    for q, m in zip(queries[:100], masks):
        index.search(q, k, exclude_page_ids=[m])
    lat = np.empty(len(queries))
    for i, q in enumerate(queries):
        t0 = time.perf_counter()
        index.search(q, k, exclude_page_ids=[masks[i]])
        lat[i] = time.perf_counter() - t0
    return lat


def time_rank_bm25(page_tokens: list[list[str]], queries: list[str], k: int) -> tuple[np.ndarray, float]:
    """Seconds per query of ``BM25Okapi`` (scores + top-k selection), and its build seconds."""
    from rank_bm25 import BM25Okapi

    t0 = time.perf_counter()
    bm25 = BM25Okapi(page_tokens)
    build_s = time.perf_counter() - t0
    lat = np.empty(len(queries))
    for i, q in enumerate(queries):
        t0 = time.perf_counter()
        scores = bm25.get_scores(q.split())
        top = np.argpartition(-scores, k)[:k]
        top[np.argsort(-scores[top])]
        lat[i] = time.perf_counter() - t0
    return lat, build_s


def main(argv: list[str] | None = None) -> dict:
    """Generate the corpus, build the index, time both engines, print the figures and the JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--baseline-queries", type=int, default=50)
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="hopforge-bench-search-") as tmp:
        t0 = time.perf_counter()
        titles, page_tokens = synthetic_pages(args.pages, Path(tmp) / "pages")
        n_tokens = sum(map(len, page_tokens))
        print(f"corpus: {args.pages:,} pages, {n_tokens:,} tokens, generated in {time.perf_counter() - t0:.1f}s")

        cpu0 = _cpu_seconds()
        stats = build_index(Path(tmp) / "pages", Path(tmp) / "index")
        # CPU time per page says what the build costs whatever else the machine is running.
        cpu_us = (_cpu_seconds() - cpu0) / stats["pages"] * 1e6
        build_rate = stats["pages"] / stats["seconds"]
        tool_rate, body_rate = stats["pages"] / stats["tool_seconds"], stats["pages"] / stats["body_seconds"]
        size = sum(f.stat().st_size for f in (Path(tmp) / "index").iterdir() if f.is_file())
        body_size = sum(f.stat().st_size for f in (Path(tmp) / "index" / "body").iterdir() if f.is_file())
        print(f"index build: {stats['seconds']:.1f}s = {build_rate:,.0f} pages/s, {cpu_us:.0f} us CPU a page (all "
              f"threads); the agents' index {stats['tool_seconds']:.1f}s = {tool_rate:,.0f} pages/s, "
              f"{size / 2**20:.0f} MiB; the body ranking's index {stats['body_seconds']:.1f}s = {body_rate:,.0f} "
              f"pages/s, {body_size / 2**20:.0f} MiB")

        index = SearchIndex.open(Path(tmp) / "index")
        queries, about = make_queries(titles, page_tokens, args.queries)
        lat = time_ours(index, queries, args.k)
        ours = len(lat) / lat.sum()
        p50, p99 = np.percentile(lat, 50) * 1e3, np.percentile(lat, 99) * 1e3
        print(f"ours: {ours:,.0f} queries/s, p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {lat.max() * 1e3:.2f} ms "
              f"(top {args.k}, snippets included, {len(lat):,} queries)")
        mlat = time_ours(index, queries, args.k, masks=about)
        print(f"ours, masked (each query's own page excluded): {len(mlat) / mlat.sum():,.0f} queries/s, "
              f"p50 {np.percentile(mlat, 50) * 1e3:.2f} ms, p99 {np.percentile(mlat, 99) * 1e3:.2f} ms")
        sample = index.search(queries[0], args.k)[0]
        print(f"  e.g. {queries[0]!r} -> {sample['title']!r}: {sample['snippet'][:80]!r}")

        blat, bbuild = time_rank_bm25(page_tokens, queries[: args.baseline_queries], args.k)
        base = len(blat) / blat.sum()
        print(f"rank-bm25: {base:,.2f} queries/s ({blat.mean() * 1e3:.0f} ms a query, {len(blat)} queries; "
              f"built in {bbuild:.1f}s, no snippets)")
        ratio = ours / base
        print(f"ratio: {ratio:,.0f}x")
    result = {"bench": "search", "ours": round(ours, 1), "baseline": round(base, 2), "ratio": round(ratio, 1),
              "p50_ms": round(p50, 3), "p99_ms": round(p99, 3), "build_pages_per_s": round(build_rate),
              "build_cpu_us_per_page": round(cpu_us, 1), "tool_build_pages_per_s": round(tool_rate),
              "body_build_pages_per_s": round(body_rate)}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
