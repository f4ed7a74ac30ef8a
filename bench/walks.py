"""Benchmark: hopforge's numba walker against a plain networkx random walk, side by side.

Both walk 8 hops, never revisit a page, chordless off.  The graph is a random
power-law digraph (Chung-Lu: endpoints drawn in proportion to Zipf-like weights,
duplicates and self-loops removed) with 1M nodes and 20M edges, held in hopforge's
CSR form.  networkx needs ~300 bytes per edge, so it walks the subgraph induced by a
random third of the nodes (~2M edges, same degree shape); ours is timed on both.

The last line is JSON: {"bench": "walks", "ours": steps/s, "baseline": steps/s, "ratio": r}.
Goals: ratio >= 20, ours >= 10M steps/s warm (compile time reported apart), <= 12 bytes per edge.

Usage: python bench/walks.py [--nodes 1000000] [--edges 20000000] [--walks 2000000] [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synth.graph.csr import CSRGraph, reverse_csr, sorted_unique  # noqa: E402
from synth.graph.walks import sample_walks, start_nodes, warm_up  # noqa: E402

HOPS = 8


def zipf_ranks(rng: np.random.Generator, n: int, exponent: float, size: int) -> np.ndarray:
    """``size`` ranks in ``[0, n)`` drawn with probability ~ (rank+1)^-exponent (inverse CDF of the continuous law)."""
    e = 1.0 - exponent
    u = rng.random(size)
    r = np.floor((u * ((n + 1.0) ** e - 1.0) + 1.0) ** (1.0 / e)).astype(np.int64) - 1
    return np.clip(r, 0, n - 1)


def power_law_graph(n: int, m: int, seed: int = 0) -> CSRGraph:
    """A Chung-Lu digraph with exactly ``m`` distinct edges: out-weights ~ rank^-0.5, in-weights ~ rank^-0.7."""
    rng = np.random.default_rng(seed)
    perm_out, perm_in = rng.permutation(n), rng.permutation(n)  # hubs sit anywhere, and out-hubs are not in-hubs
    keys = np.empty(0, dtype=np.int64)
    while keys.size < m:
        k = int((m - keys.size) * 1.15) + 1000
        src = perm_out[zipf_ranks(rng, n, 0.5, k)].astype(np.int64)
        dst = perm_in[zipf_ranks(rng, n, 0.7, k)].astype(np.int64)
        keep = src != dst
        keys = sorted_unique(np.concatenate([keys, (src[keep] << 32) | dst[keep]]))
    keys = np.sort(rng.choice(keys, m, replace=False))
    indices = (keys & 0xFFFFFFFF).astype(np.int32)
    indptr = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(keys >> 32, minlength=n), out=indptr[1:])
    del keys
    rindptr, rindices = reverse_csr(indptr, indices)
    return CSRGraph(indptr, indices, rindptr, rindices)


def induced_edges(g: CSRGraph, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges of ``g`` whose both ends are in the boolean mask ``keep``."""
    src = np.repeat(np.arange(g.num_nodes, dtype=np.int32), np.diff(g.indptr))
    sel = keep[src] & keep[g.indices]
    return src[sel], g.indices[sel]


def time_ours(g: CSRGraph, walks: int, repeats: int = 3) -> tuple[float, int, float]:
    """Best-of-``repeats`` warm steps/s of the hopforge kernel; also returns steps and walks completed per run."""
    allowed = np.ones(g.num_nodes, np.bool_)
    starts = start_nodes(g, allowed)
    best, steps, done = 0.0, 0, 0.0
    for r in range(repeats):
        b = sample_walks(g, allowed, HOPS, r * walks, walks, seed=0, max_attempts=1, chordless=False, starts=starts)
        steps = int(b.steps.sum())
        best = max(best, steps / b.seconds)
        done = float(b.ok.mean())
    return best, steps, done


def time_networkx(src: np.ndarray, dst: np.ndarray, seconds: float, seed: int = 0) -> tuple[float, int, float]:
    """Steps/s of a plain networkx walk (successors + random.choice, no revisits) for about ``seconds``."""
    import networkx as nx

    t0 = time.perf_counter()
    G = nx.DiGraph()
    G.add_edges_from(zip(src.tolist(), dst.tolist()))
    build_s = time.perf_counter() - t0
    rnd = random.Random(seed)
    nodes = list(G.nodes)
    steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(1000):
            cur = rnd.choice(nodes)
            seen = {cur}
            for _ in range(HOPS):
                succ = [v for v in G.successors(cur) if v not in seen]
                if not succ:
                    break
                cur = rnd.choice(succ)
                seen.add(cur)
                steps += 1
    elapsed = time.perf_counter() - t0
    return steps / elapsed, steps, build_s


def cold_compile_seconds() -> float:
    """Seconds to compile the walk kernel from scratch, measured in a child process with an empty numba cache."""
    code = ("import time, numpy as np; from synth.graph.walks import warm_up; from synth.graph.csr import CSRGraph; "
            "g = CSRGraph.from_edges(3, [0, 1], [1, 2]); t = time.perf_counter(); "
            "warm_up(g, np.ones(3, np.bool_), chordless=False); print(time.perf_counter() - t)")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                             check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    """Build the graph, time both walkers, print the figures and the JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--edges", type=int, default=20_000_000)
    ap.add_argument("--walks", type=int, default=2_000_000, help="walks per timed run of ours")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long the networkx walk runs")
    args = ap.parse_args(argv)

    import numba

    t0 = time.perf_counter()
    g = power_law_graph(args.nodes, args.edges)
    gen_s = time.perf_counter() - t0
    st = g.stats()
    print(f"graph: {g.num_nodes:,} nodes, {g.num_edges:,} edges, generated in {gen_s:.1f}s")
    print(f"  out-degree p50/p90/p99/max: {st['out_p50']:.0f}/{st['out_p90']:.0f}/{st['out_p99']:.0f}/{st['out_max']}"
          f"  in-degree: {st['in_p50']:.0f}/{st['in_p90']:.0f}/{st['in_p99']:.0f}/{st['in_max']}")
    print(f"  CSR memory (forward + reverse): {g.nbytes / 2**20:.1f} MiB = {st['bytes_per_edge']:.2f} bytes/edge")

    cold_s = cold_compile_seconds()
    load_s = warm_up(g, np.ones(g.num_nodes, np.bool_), chordless=False)
    print(f"numba: {numba.get_num_threads()} threads; kernel compile {cold_s:.2f}s cold, {load_s:.2f}s from cache "
          "(both excluded below)")
    ours, steps, done = time_ours(g, args.walks)
    print(f"ours, full graph:   {ours / 1e6:8.2f} M steps/s  ({steps:,} steps, {done:.1%} of walks reach {HOPS} hops)")

    keep = np.zeros(g.num_nodes, np.bool_)
    keep[np.random.default_rng(1).permutation(g.num_nodes)[: int(g.num_nodes * (0.1 ** 0.5))]] = True
    src, dst = induced_edges(g, keep)
    sub = CSRGraph.from_edges(g.num_nodes, src, dst)
    ours_sub, _, _ = time_ours(sub, args.walks // 2)
    print(f"ours, slice ({src.size:,} edges): {ours_sub / 1e6:8.2f} M steps/s")
    base, bsteps, build_s = time_networkx(src, dst, args.seconds)
    print(f"networkx, slice:    {base / 1e6:8.3f} M steps/s  ({bsteps:,} steps; DiGraph built in {build_s:.1f}s)")
    ratio = ours / base
    print(f"ratio ours(full) / networkx(slice): {ratio:.1f}x   ours(slice) / networkx(slice): {ours_sub / base:.1f}x")
    result = {"bench": "walks", "ours": round(ours), "baseline": round(base), "ratio": round(ratio, 2)}
    ok = ratio >= 20 and ours >= 10e6 and st["bytes_per_edge"] <= 12
    print(f"goals (ratio >= 20, >= 10M steps/s, <= 12 bytes/edge): {'met' if ok else 'NOT met'}")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
