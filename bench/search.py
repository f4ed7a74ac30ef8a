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

``--rankers`` measures instead the agents' three rankers (``tools.ranker``: bm25, dense, hybrid, each opened by
:func:`synth.tools.rank.open_search` as the agents open it) on the demo corpus (the store of
``bench/retrieval.py``, built up to its page vectors when missing), one query at a time (``search_ids``, no
snippets; ``bm25`` with snippets too), against two baselines in the same run: bm25s (title plus body, its own
tokenizer, English stop words, PyStemmer) one query at a time, and a plain FAISS ``IndexFlatIP`` over the same
page vectors, each query embedded alone by the same model (one torch thread).  The queries are
``bench/retrieval.py``'s sets (``--ranker-queries`` a set, drawn from the evaluation half with seed 7), so hit@10
is measured on the very queries timed.  Every run opens fresh indexes (the rankings remember answers), warms each
up on other queries (seed 8), and times each ranker and its baseline interleaved query by query (``bm25`` then
bm25s on a query, ``dense`` then FAISS flat), so a change of load falls on both; the figures are the median of
``--runs`` runs.  It also measures the embedding throughput of the demo's page text (title and description, the
``embed`` stage's ``title_description``) at 1 and 2 torch threads, and the index size a page.
Goals: bm25 >= bm25s's queries/s at a hit@10 at least bm25s's; dense >= 0.95 of the FAISS flat's queries/s at a
recall@10 >= 0.99 of the flat's exact top 10 (on the queries that are no page's title: the dense ranker puts a
page titled as the query first).  The last line is JSON: {"bench": "search", "mode": "rankers", ...}.

Usage: python bench/search.py [--pages 100000] [--queries 2000] [--baseline-queries 50]
       python bench/search.py --rankers [--ranker-queries 150] [--runs 3] [--embed-pages 2000]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
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


# ---- --rankers: the agents' rankers on the demo corpus (module docstring) -------------------------------
def timed(fn, texts: list[str]) -> tuple[np.ndarray, list]:
    """Seconds per call of ``fn`` on each text, one at a time, and its answers."""
    lat, found = np.empty(len(texts)), []
    for i, q in enumerate(texts):
        t0 = time.perf_counter()
        found.append(fn(q))
        lat[i] = time.perf_counter() - t0
    return lat, found


def timed_pair(fn_a, fn_b, texts: list[str]) -> tuple[np.ndarray, list, np.ndarray, list]:
    """:func:`timed` of two engines interleaved query by query (A then B on each text), so a change of the
    machine's load while they run falls on both alike."""
    lat_a, lat_b, found_a, found_b = np.empty(len(texts)), np.empty(len(texts)), [], []
    for i, q in enumerate(texts):
        t0 = time.perf_counter()
        found_a.append(fn_a(q))
        t1 = time.perf_counter()
        found_b.append(fn_b(q))
        lat_a[i], lat_b[i] = t1 - t0, time.perf_counter() - t1
    return lat_a, found_a, lat_b, found_b


def _rates(lat: np.ndarray) -> dict:
    return {"qps": len(lat) / lat.sum(), "p50_ms": float(np.percentile(lat, 50) * 1e3),
            "p99_ms": float(np.percentile(lat, 99) * 1e3)}


def embedding_rate(store, n_pages: int, threads: int) -> dict:
    """The embedder's throughput on the first ``n_pages`` pages' embedded text (the ``embed`` stage's
    ``title_description``) at ``threads`` torch threads: pages a second (wall) and a CPU second (all threads of
    the process), and the tokens a page (as the model reads them, and padded as :class:`Embedder` pads)."""
    import pyarrow.dataset as pads

    from bench.retrieval import config
    from synth.tools.dense import PAD_TO, Embedder
    from synth.tools.embed import page_texts

    dense = config("dense").tools.dense
    table = pads.dataset(str(store.path("corpus/pages")), format="parquet").head(
        n_pages, columns=["title", "description", "paragraphs"])
    texts = page_texts(table, dense.text)
    emb = Embedder(dense.model, "cpu", dense.batch_size, threads)
    emb.encode_documents(texts[:64])  # loads the model
    lengths = [len(ids) for ids in emb.model.tokenizer(texts, truncation=True, max_length=emb.max_tokens)["input_ids"]]
    cpu0, t0 = _cpu_seconds(), time.perf_counter()
    emb.encode_documents(texts)
    wall, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu0
    params = sum(p.numel() for n, p in emb.model.named_parameters() if "embeddings" not in n)
    return {"pages": len(texts), "threads": threads, "pages_per_s": len(texts) / wall,
            "pages_per_cpu_s": len(texts) / cpu, "tokens_per_page": float(np.mean(lengths)),
            "padded_tokens_per_page": float(np.mean([-(-n // PAD_TO) * PAD_TO for n in lengths])),
            "non_embedding_params": int(params), "dim": emb.dim}


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def rankers_main(args) -> dict:
    """Time the agents' rankers against bm25s and FAISS flat on the demo corpus; print and return the figures."""
    from bench.retrieval import (K, BM25S, FlatBaseline, build, config, held_out, load_pages, metrics,
                                 page_frequencies, query_sets, rank_of)
    from synth.tools.dense import Embedder
    from synth.tools.rank import open_search

    load = os.getloadavg()
    t_start = time.perf_counter()
    store = build(args.out)
    pages = load_pages(store.root)
    df = page_frequencies(pages)
    evaluation = [p for p in pages if not held_out(p["page_id"])]
    sets = query_sets(evaluation, args.ranker_queries, seed=7, df=df)
    target: dict[str, str] = {}
    for qs in sets.values():
        for q, pid in qs:
            target.setdefault(q, pid)
    texts = list(target)  # each text once: the dense rankings remember answers
    warm = [q for qs in query_sets(evaluation, 20, seed=8, df=df).values() for q, _ in qs if q not in target]
    bm25s = BM25S(pages)
    dense_cfg = config("dense").tools.dense
    flat = FlatBaseline(Path(store.path("embed")), Embedder.from_config(dense_cfg), dense_cfg.query_max_tokens)
    names = ("bm25", "bm25+snippets", "bm25s", "dense", "faiss", "hybrid")
    per_run, found = [], {}
    for run in range(args.runs):
        indexes = {r: open_search(store, config(r).tools) for r in ("bm25", "dense", "hybrid")}
        for q in warm:
            for r in indexes:
                indexes[r].search_ids(q, K)
            bm25s.top(q), flat.top(q)
        engines = {"bm25": lambda q: indexes["bm25"].search_ids(q, K),
                   "bm25+snippets": lambda q: [h["page_id"] for h in indexes["bm25"].search(q, K)],
                   "bm25s": bm25s.top,
                   "dense": lambda q: indexes["dense"].search_ids(q, K),
                   "faiss": flat.top,
                   "hybrid": lambda q: indexes["hybrid"].search_ids(q, K)}
        res = {}
        for a, b in (("bm25", "bm25s"), ("dense", "faiss")):  # each against its baseline, interleaved
            lat_a, found[a], lat_b, found[b] = timed_pair(engines[a], engines[b], texts)
            res[a], res[b] = _rates(lat_a), _rates(lat_b)
        for name in ("bm25+snippets", "hybrid"):
            lat, found[name] = timed(engines[name], texts)
            res[name] = _rates(lat)
        per_run.append(res)
        if run + 1 < args.runs:  # the next run opens its own: free these first, not while it is timed
            del indexes, engines
            gc.collect()
        print(f"run {run + 1}: " + ", ".join(f"{n} {res[n]['qps']:,.1f} q/s" for n in names)
              + f"; load {os.getloadavg()[0]:.2f}")
    med = {n: {m: statistics.median(r[n][m] for r in per_run) for m in ("qps", "p50_ms", "p99_ms")} for n in names}
    quality = {n: metrics([rank_of(f, target[q]) for q, f in zip(texts, found[n])]) for n in names}
    titled = indexes["dense"]
    plain = [i for i, q in enumerate(texts) if not titled.has_title(q)]
    recall = float(np.mean([len(set(found["dense"][i][:K]) & set(found["faiss"][i][:K])) / max(len(found["faiss"][i][:K]), 1)
                            for i in plain]))
    # The flat index's search alone (the query already embedded), for the whole dump's plan.
    vecs = flat.embedder.encode_queries(texts[:200], max_tokens=flat.query_max_tokens)
    search_lat, _ = timed(lambda i: flat.index.search(vecs[i:i + 1], K), list(range(len(vecs))))
    embed_rates = {}
    for threads in (1, 2):
        rs = [embedding_rate(store, args.embed_pages, threads) for _ in range(args.runs)]
        embed_rates[threads] = {**rs[0], **{k: statistics.median(r[k] for r in rs) for k in ("pages_per_s", "pages_per_cpu_s")}}
    n_pages = len(pages)
    sizes = {"vectors_bytes_per_page": _size(store.path("embed")) / n_pages,
             "bm25_index_bytes_per_page": _size(store.path("index")) / n_pages}
    ratios = {"bm25/bm25s": med["bm25"]["qps"] / med["bm25s"]["qps"],
              "dense/faiss": med["dense"]["qps"] / med["faiss"]["qps"],
              "hybrid/bm25": med["hybrid"]["qps"] / med["bm25"]["qps"]}
    goals = {"bm25>=bm25s q/s at >= hit@10": bool(ratios["bm25/bm25s"] >= 1 and quality["bm25"]["hit10"] >= quality["bm25s"]["hit10"]),
             "dense>=0.95 faiss q/s at recall@10>=0.99": bool(ratios["dense/faiss"] >= 0.95 and recall >= 0.99)}

    print(f"\n{n_pages:,} pages; {len(texts):,} queries ({args.ranker_queries} a set of bench/retrieval.py's, seed 7), "
          f"one at a time, top {K}; median of {args.runs} runs; load average at the start "
          f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}, at the end {os.getloadavg()[0]:.2f}")
    print("| engine | queries/s | p50 ms | p99 ms | hit@1 | hit@10 | MRR@10 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in names:
        print(f"| {n} | {med[n]['qps']:,.1f} | {med[n]['p50_ms']:.2f} | {med[n]['p99_ms']:.2f} | "
              f"{quality[n]['hit1']:.3f} | {quality[n]['hit10']:.3f} | {quality[n]['mrr']:.3f} |")
    print(f"bm25 / bm25s: {ratios['bm25/bm25s']:.2f}x queries/s; dense / FAISS flat: {ratios['dense/faiss']:.3f}x at "
          f"recall@10 {recall:.4f} of the flat's top {K} ({len(plain)} queries that are no page's title); "
          f"hybrid / bm25: {ratios['hybrid/bm25']:.3f}x")
    print(f"FAISS flat search alone (query embedded): {np.mean(search_lat) * 1e3:.3f} ms a query over {n_pages:,} "
          f"vectors = {np.mean(search_lat) / n_pages * 1e9:.1f} ns a page; bm25s built in {bm25s.build_seconds:.1f} s")
    for t, r in embed_rates.items():
        print(f"embedding, {t} torch thread(s): {r['pages_per_s']:,.1f} pages/s, {r['pages_per_cpu_s']:,.1f} pages a CPU "
              f"second ({r['pages']:,} pages; {r['tokens_per_page']:.1f} tokens a page, {r['padded_tokens_per_page']:.1f} "
              f"padded; {r['non_embedding_params'] / 1e6:.1f} M non-embedding parameters, dim {r['dim']})")
    print(f"index size a page: vectors {sizes['vectors_bytes_per_page']:,.0f} B (float32 x {embed_rates[1]['dim']}), "
          f"the BM25 index {sizes['bm25_index_bytes_per_page']:,.0f} B")
    for g, ok in goals.items():
        print(f"goal {g}: {'met' if ok else 'MISSED'}")
    line = {"bench": "search", "mode": "rankers", "pages": n_pages, "queries": len(texts), "runs": args.runs,
            "engines": {n: {**{k: round(v, 3) for k, v in med[n].items()}, **quality[n]} for n in names},
            "ratios": {k: round(v, 3) for k, v in ratios.items()}, "dense_recall10": round(recall, 4),
            "flat_search_ms": round(float(np.mean(search_lat)) * 1e3, 4),
            "embedding": {str(t): {k: round(v, 2) for k, v in r.items()} for t, r in embed_rates.items()},
            "sizes": {k: round(v) for k, v in sizes.items()}, "goals": goals,
            "loadavg": [round(x, 2) for x in load], "loadavg_end": [round(x, 2) for x in os.getloadavg()],
            "seconds": round(time.perf_counter() - t_start, 1)}
    print(json.dumps(line))
    return line


def main(argv: list[str] | None = None) -> dict:
    """Generate the corpus, build the index, time both engines, print the figures and the JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--baseline-queries", type=int, default=50)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--rankers", action="store_true",
                    help="measure the agents' rankers on the demo corpus against bm25s and FAISS flat (docstring)")
    ap.add_argument("--ranker-queries", type=int, default=150, help="queries a set (--rankers)")
    ap.add_argument("--runs", type=int, default=3, help="runs, the median reported (--rankers)")
    ap.add_argument("--embed-pages", type=int, default=2000, help="pages embedded per run (--rankers)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "data" / "bench-retrieval",
                    help="the demo store (--rankers)")
    args = ap.parse_args(argv)
    if args.rankers:
        return rankers_main(args)

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
