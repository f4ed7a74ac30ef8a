"""Benchmark: the entity and path check on 1M synthetic walks against a 100k-question benchmark index.

The corpus is ``--pages`` synthetic pages (KILT-like numeric ids, titles ``Page <id>``, a third
with an alias).  The benchmark has ``--questions`` questions in HotpotQA's shape: 2-4 supporting
pages, 8 linked (distractor) pages, and an answer that is a page's title for most of them.  The
walks (``--walks``, ``--hops`` hops) are random, and a planted 1% retrace a question (two
consecutive supporting pages) and 1% end at an answer after one of its pages.

* **ours**: :func:`synth.decontam.check.last_answers`, :func:`probe_paths` and :func:`match` over
  all the walks (Arrow and numpy), as the questions stage runs them; the index is built once
  beforehand (timed apart, with the time to read it back: a run builds it once per benchmark
  content and corpus).
* **baseline**: a plain per-walk Python check with hashed sets built beforehand (consecutive pairs
  looked up in a set of supporting-page pairs; the answer's questions' page sets scanned), timed on a
  ``--sample`` subsample and extrapolated; both must give the same verdicts on it.

Median of 3 runs each, with the load average before and after.  The last line is JSON:
{"bench": "decontaminate", "ours_s": ..., "baseline_s": ..., "ratio": ..., ...}.  Goal: ours <= 10 s.

Usage: python bench/decontaminate.py [--walks 1000000] [--questions 100000] [--pages 2000000]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synth.decontam import saved  # noqa: E402
from synth.decontam.check import last_answers, match, probe_paths  # noqa: E402
from synth.decontam.formats import BenchQuestion  # noqa: E402
from synth.decontam.index import BenchIndex, Benchmark  # noqa: E402
from synth.text.answers import normalize_answer  # noqa: E402

GOAL_S = 10.0


def title(pid: int) -> str:
    return f"Page {pid}"


def make_benchmark(rng: np.random.Generator, n: int, pages: int) -> list[BenchQuestion]:
    """HotpotQA-shaped questions: supporting and linked pages drawn at random, answers mostly page titles."""
    qs = []
    for i in range(n):
        k = int(rng.integers(2, 5))
        sup = rng.choice(pages, k + 8, replace=False)
        answer = title(int(rng.integers(pages))) if rng.random() < 0.8 else f"{int(rng.integers(1800, 2024))}"
        qs.append(BenchQuestion(f"q{i}", f"question {i}", [answer], [title(int(p)) for p in sup[:k]],
                                [title(int(p)) for p in sup[k:]]))
    return qs


def make_walks(rng: np.random.Generator, qs: list[BenchQuestion], n: int, hops: int, pages: int) -> np.ndarray:
    """``n`` random walks of ``hops`` hops (page ids), 1% retracing a question's pair, 1% ending at its answer."""
    walks = rng.integers(0, pages, size=(n, hops + 1))
    idx = rng.choice(n, n // 50, replace=False)
    for j, w in enumerate(idx):
        q = qs[int(rng.integers(len(qs)))]
        if j % 2 == 0:
            at = int(rng.integers(hops))
            walks[w, at], walks[w, at + 1] = (int(t.split()[1]) for t in q.supporting[:2])
        elif q.answers[0].startswith("Page "):
            walks[w, -1] = int(q.answers[0].split()[1])
            walks[w, 0] = int(q.linked[0].split()[1])
    return walks


def arrow_walks(walks: np.ndarray, aliased: np.ndarray) -> tuple[pa.ListArray, pa.Array, pa.ListArray]:
    n, width = walks.shape
    flat = pa.array(walks.ravel()).cast(pa.string())
    paths = pa.ListArray.from_arrays(pa.array(np.arange(0, n * width + 1, width, dtype=np.int32)), flat)
    last = pa.array(walks[:, -1]).cast(pa.string())
    titles = pa.compute.binary_join_element_wise("Page ", last, "")
    alias = pa.compute.binary_join_element_wise("P. ", last, "")
    # Every walk's last page has its title; a third of the pages also carry an alias.
    has = aliased[walks[:, -1]]
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(1 + has.astype(np.int32), out=offsets[1:])
    values = np.empty(offsets[-1], dtype=object)
    values[offsets[:-1]] = titles.to_numpy(zero_copy_only=False)
    values[offsets[:-1][has] + 1] = alias.filter(pa.array(has)).to_numpy(zero_copy_only=False)
    return paths, last, pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.string()))


def ours(index: BenchIndex, paths, last, names) -> np.ndarray:
    level, _ = match(index, probe_paths(index, paths, last_answers(index, last, names)), len(last))
    return level


def baseline_index(qs: list[BenchQuestion]) -> tuple[set, dict]:
    """The baseline's own index, built once (timed apart, as ours is): pairs and pages by answer."""
    pairs: set[frozenset] = set()
    by_answer: dict[str, list[set[str]]] = {}
    for q in qs:
        sup = [t.split()[1] for t in q.supporting]
        pairs.update(frozenset((a, b)) for i, a in enumerate(sup) for b in sup[i + 1:])
        by_answer.setdefault(normalize_answer(q.answers[0]), []).append(
            set(sup) | {t.split()[1] for t in q.linked})
    return pairs, by_answer


def baseline(prepared: tuple[set, dict], walks: np.ndarray, aliased: np.ndarray) -> list[int]:
    """The rules per walk in plain Python, over the hashed sets and dicts of :func:`baseline_index`."""
    pairs, by_answer = prepared
    out = []
    for w in walks.tolist():
        ids = [str(p) for p in w]
        if any(frozenset((a, b)) in pairs for a, b in zip(ids, ids[1:]) if a != b):
            out.append(1)
            continue
        names = [title(w[-1])] + ([f"P. {w[-1]}"] if aliased[w[-1]] else [])
        hit = any(any(p in pages for p in ids[:-1] if p != ids[-1])
                  for n in names for pages in by_answer.get(normalize_answer(n), ()))
        out.append(2 if hit else 0)
    return out


def timed(fn, runs: int = 3) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--walks", type=int, default=1_000_000)
    ap.add_argument("--questions", type=int, default=100_000)
    ap.add_argument("--pages", type=int, default=2_000_000)
    ap.add_argument("--hops", type=int, default=4)
    ap.add_argument("--sample", type=int, default=50_000, help="walks the baseline is timed on")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    load_before = os.getloadavg()
    qs = make_benchmark(rng, args.questions, args.pages)
    aliased = rng.random(args.pages) < 1 / 3
    t0 = time.perf_counter()
    index = BenchIndex([Benchmark("hotpotqa", "synthetic", "-", qs)],
                       lambda ts: {t: t.split()[1] for t in ts if t.startswith("Page ")})
    build_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:  # what a rerun over the same files and corpus pays instead
        saved.save(index, Path(tmp) / "index")
        t0 = time.perf_counter()
        saved.load(Path(tmp) / "index", index.benchmarks)
        load_s = time.perf_counter() - t0
    walks = make_walks(rng, qs, args.walks, args.hops, args.pages)
    paths, last, names = arrow_walks(walks, aliased)
    print(f"index: {args.questions:,} questions, {len(index.pages):,} pages, {len(index.pair_keys):,} path keys, "
          f"{len(index.entity_keys):,} entity keys; built in {build_s:.2f}s, read back in {load_s:.2f}s (once per "
          "content and corpus)")

    ours_s, level = timed(lambda: ours(index, paths, last, names))
    counts = np.bincount(level, minlength=3)
    print(f"ours:     {ours_s:6.2f} s for {args.walks:,} walks  (path {counts[1]:,}, entity {counts[2]:,}, "
          f"clean {counts[0]:,})")
    sample = walks[: args.sample]
    prepared = baseline_index(qs)
    base_sub_s, base = timed(lambda: baseline(prepared, sample, aliased))
    sub_paths, sub_last, sub_names = arrow_walks(sample, aliased)
    same = base == ours(index, sub_paths, sub_last, sub_names).tolist()
    base_s = base_sub_s * args.walks / len(sample)
    print(f"baseline: {base_s:6.2f} s extrapolated from {base_sub_s:.2f} s on {len(sample):,} walks "
          f"(its dicts and sets built beforehand); same verdicts on the sample: {same}")
    ratio = base_s / ours_s
    load_after = os.getloadavg()
    print(f"ratio baseline / ours: {ratio:.1f}x   load average before {load_before[0]:.2f}, after {load_after[0]:.2f}"
          f" (cores: {os.cpu_count()})")
    ok = ours_s <= GOAL_S and same
    print(f"goal (<= {GOAL_S:g} s for {args.walks:,} walks, same verdicts): {'met' if ok else 'NOT met'}")
    result = {"bench": "decontaminate", "walks": args.walks, "questions": args.questions, "ours_s": round(ours_s, 3),
              "baseline_s": round(base_s, 2), "ratio": round(ratio, 1), "index_build_s": round(build_s, 2),
              "index_load_s": round(load_s, 2),
              "same_verdicts": same, "loadavg": [round(load_before[0], 2), round(load_after[0], 2)], "goal_met": ok}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
