"""Bench: the whole ``hopforge filter --force`` process against its floor, side by side.

The floor is the least work the length filter's answer needs: every trace of ``DIR/traces``
rendered once through the run's chat template, with its tools, and the rendered texts
tokenized in batches by the fast tokenizer on every core (its Rust threads).  Reading the
traces is left out of the floor; rendering and tokenizing are in it.

The filter tokenizes less than that floor does: the tokenizer encodes the pieces between added
tokens apart, so the filter tokenizes each distinct piece once (``TokenCounter``), and the
traces of a run repeat most pieces (system prompt, tool schemas, questions, pages).  So the
bench also prints the **piece floor**: the same renders, cut at the added tokens, and each
distinct piece tokenized once in batches.  Against it, the ratio says how close the whole
process comes to the least work of the method it uses.

Ours: the wall time of ``hopforge filter --force --out DIR`` as its own process, start-up
(imports) included, with the run's token-count cache emptied first, so every trace is
counted again (``--warm`` keeps the cache, and shows what a filter change costs).  It runs
at ``runner.cpu_workers`` 1, 2 and all cores (``--workers``).

Each figure is the median of ``--repeats`` runs; the load average is printed at the start and
the end.  The ratio is floor seconds over ours: 1.0 would be a filter that does nothing but
the floor's work.  Goal: >= 0.8 with all cores.

The last line is JSON: {"bench": "filter", "floor_s": .., "piece_floor_s": .., "ours": {workers: s},
"ratio": {workers: r}, "piece_ratio": {workers: r}}.

Usage: python bench/filter.py [DIR] [--repeats 3] [--workers 1,2,0] [--warm] (DIR: data/demo, make demo's run)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def floor_seconds(out: Path) -> tuple[float, float, int, int]:
    """(seconds, piece-floor seconds, traces, tokens) of rendering every trace once and tokenizing the texts
    batched; the piece floor tokenizes each distinct piece between added tokens once instead."""
    import pyarrow.dataset as ds

    from filters.sftrows import sft_messages
    from synth.engine.records import Trace
    from synth.tokenizer.counts import segment_pattern
    from synth.tokenizer.tokens import load_tokenizer

    tok = load_tokenizer(out / "tokenizer", chat_template=True)
    backend = tok.backend_tokenizer
    traces = [Trace.from_row(r) for r in ds.dataset(str(out / "traces"), format="parquet").to_table().to_pylist()]
    items = [(sft_messages(t), json.loads(t.tools) or None) for t in traces]
    t0 = time.perf_counter()
    texts = [tok.apply_chat_template(m, tools=tools, tokenize=False) for m, tools in items]
    rendered = time.perf_counter() - t0
    n_tokens = 0
    for i in range(0, len(texts), 512):
        n_tokens += sum(len(e) for e in backend.encode_batch_fast(texts[i:i + 512], add_special_tokens=False))
    whole = time.perf_counter() - t0
    t1 = time.perf_counter()
    pattern = segment_pattern(backend)
    cut = [pattern.split(t)[0::2] if pattern is not None else [t] for t in texts]
    pieces = list(dict.fromkeys(p for c in cut for p in c if p))
    counts = {}
    for i in range(0, len(pieces), 512):
        chunk = pieces[i:i + 512]
        counts.update(zip(chunk, (len(e) for e in backend.encode_batch_fast(chunk, add_special_tokens=False))))
    assert sum(counts[p] for c in cut for p in c if p) + sum(len(c) - 1 for c in cut) == n_tokens
    return whole, rendered + time.perf_counter() - t1, len(traces), n_tokens


def ours_seconds(out: Path, workers: int, warm: bool) -> float:
    if not warm:
        shutil.rmtree(out / ".cache" / "token_counts", ignore_errors=True)
    cmd = [str(ROOT / ".venv" / "bin" / "hopforge"), "filter", "--force", "--out", str(out),
           "--set", f"runner.cpu_workers={workers}"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, nargs="?", default=ROOT / "data" / "demo",
                    help="a run folder with traces and a tokenizer (default: make demo's, data/demo)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", default="1,2,0", help="worker counts to run (0: all cores)")
    ap.add_argument("--warm", action="store_true", help="keep the token-count cache between runs")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    floors, piece_floors = [], []
    for _ in range(args.repeats):
        s, ps, n, toks = floor_seconds(args.out)
        floors.append(s)
        piece_floors.append(ps)
        print(f"floor: {s:.2f}s for {n} traces, {toks:,} tokens; piece floor {ps:.2f}s", flush=True)
    floor, piece_floor = statistics.median(floors), statistics.median(piece_floors)
    ours, ratio, piece_ratio = {}, {}, {}
    for w in [int(x) for x in args.workers.split(",")]:
        runs = []
        for _ in range(args.repeats):
            runs.append(ours_seconds(args.out, w, args.warm))
            print(f"hopforge filter --force, {w or os.cpu_count()} workers: {runs[-1]:.2f}s", flush=True)
        ours[w] = statistics.median(runs)
        ratio[w] = round(floor / ours[w], 3)
        piece_ratio[w] = round(piece_floor / ours[w], 3)
        print(f"workers={w or os.cpu_count()}: median {ours[w]:.2f}s, floor {floor:.2f}s, ratio {ratio[w]:.3f}; "
              f"piece floor {piece_floor:.2f}s, ratio {piece_ratio[w]:.3f}", flush=True)
    print(f"load average at end: {os.getloadavg()}", flush=True)
    print(json.dumps({"bench": "filter", "floor_s": round(floor, 3), "piece_floor_s": round(piece_floor, 3),
                      "ours": ours, "ratio": ratio, "piece_ratio": piece_ratio, "warm": args.warm}))


if __name__ == "__main__":
    main()
