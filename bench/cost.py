"""Bench: the teacher's bill per kept SFT row, today's fixed n = 4 and the new defaults side by side in one run.

The demo pipeline (configs/demo.yaml) is built once up to its questions and tokenizer; then the same
questions are rolled out and filtered several ways, each in a copy of that folder with an empty call
cache (so every call is paid for and counted):

- ``fixed``: ``rollout.policy=fixed``, ``rollout.n=4``, observations in full (the former defaults);
- ``fixed+compress``: the same with ``rollout.compress_observations=true``;
- ``adaptive``: ``rollout.policy=adaptive`` (sample an sft question until ``keep_per_question`` answers are
  right, rl all n, eval ``eval_n``), observations in full;
- ``adaptive+compress``: the adaptive policy with compressed observations.

For each way: teacher calls and prompt / completion tokens of the rollout stage, kept SFT rows, calls and
prompt tokens per kept row, the kept rows' rubric mean and tool calls per row, the pass rate (of the first
sample of every question) and wall time, as the median of ``--repeats`` runs (3), with the load average.  Ratios
are against ``fixed``.  Last line: {"bench": "cost", ...} with the figures of every way.
Goals (issue "cost per kept row"): calls per kept row <= 0.5 of fixed's, prompt tokens per kept row
<= 0.3, kept rows >= 0.95 as many, rubric mean and tool calls per row within 5%.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow.dataset as ds  # noqa: E402

from flows.config import load_config  # noqa: E402
from flows.stages import PIPELINE  # noqa: E402
from synth.engine.store import Store  # noqa: E402

WAYS = {
    "fixed": ["rollout.policy=fixed", "rollout.n=4", "rollout.compress_observations=false"],
    "fixed+compress": ["rollout.policy=fixed", "rollout.n=4", "rollout.compress_observations=true"],
    "adaptive": ["rollout.policy=adaptive", "rollout.n=4", "rollout.compress_observations=false"],
    "adaptive+compress": ["rollout.policy=adaptive", "rollout.n=4", "rollout.compress_observations=true"],
}
CONFIG = ROOT / "configs/demo.yaml"


def build_base(out: Path, extra: list[str]) -> None:
    cfg = load_config(CONFIG, extra)
    names = [s.name for s in PIPELINE]
    todo = names[: names.index("questions") + 1] + ["tokenizer"]
    PIPELINE.run([PIPELINE[n] for n in todo], cfg, Store(out))


def one_way(base: Path, work: Path, overrides: list[str]) -> dict:
    """Roll out and filter the base's questions in a copy of it with an empty call cache."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(base, work, symlinks=True, ignore=shutil.ignore_patterns("cache"))
    cfg = load_config(CONFIG, overrides)
    store = Store(work)
    t0 = time.perf_counter()
    PIPELINE.run([PIPELINE["rollout"], PIPELINE["filter"]], cfg, store)
    wall = time.perf_counter() - t0
    rollout = json.loads((work / "reports" / "rollout.json").read_text())
    teacher = rollout.get("teacher") or {}
    rows = ds.dataset(work / "sft").to_table(columns=["rubric", "n_tool_calls"]).to_pylist()
    # pass@1 on the first sample of every question that has one (the adaptive policy's later samples are
    # drawn where the first ones failed, so a pass rate over all samples would not compare).
    first = set(ds.dataset(work / "traces").to_table(columns=["trace_id", "sample_index"]).filter(
        ds.field("sample_index") == 0).column("trace_id").to_pylist())
    verdicts = ds.dataset(work / "filter" / "verdicts").to_table(columns=["trace_id", "correct"]).to_pylist()
    firsts = [v["correct"] for v in verdicts if v["trace_id"] in first]
    kept = len(rows)
    calls = int(teacher.get("requests", 0))
    prompt = int(teacher.get("prompt_tokens", 0))
    return {
        "calls": calls, "prompt_tokens": prompt, "completion_tokens": int(teacher.get("completion_tokens", 0)),
        "traces": int(rollout["output"]), "kept_rows": kept,
        "calls_per_row": calls / kept if kept else float("nan"),
        "prompt_tokens_per_row": prompt / kept if kept else float("nan"),
        "rubric_mean": statistics.fmean(r["rubric"] for r in rows) if rows else float("nan"),
        "tool_calls_per_row": statistics.fmean(r["n_tool_calls"] for r in rows) if rows else float("nan"),
        "pass_at_1": statistics.fmean(firsts) if firsts else float("nan"), "wall_s": wall,
    }


def median_of(runs: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ways", default=",".join(WAYS), help="comma-separated subset of: " + ", ".join(WAYS))
    ap.add_argument("--set", action="append", default=[], help="extra config overrides for every way")
    args = ap.parse_args()
    ways = [w for w in args.ways.split(",") if w]
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        t0 = time.perf_counter()
        build_base(base, args.set)
        print(f"base (ingest .. questions, tokenizer): {time.perf_counter() - t0:.1f} s", flush=True)
        for way in ways:
            runs = []
            for i in range(args.repeats):
                runs.append(one_way(base, Path(tmp) / "work", [*args.set, *WAYS[way]]))
                print(f"  {way} run {i + 1}: {runs[-1]['calls']} calls, {runs[-1]['kept_rows']} rows, "
                      f"{runs[-1]['wall_s']:.1f} s", flush=True)
            results[way] = median_of(runs)
    load = os.getloadavg()
    ref = results.get("fixed")
    cols = ["calls", "prompt_tokens", "kept_rows", "calls_per_row", "prompt_tokens_per_row", "rubric_mean",
            "tool_calls_per_row", "pass_at_1", "wall_s"]
    print(f"\nmedian of {args.repeats}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| way | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for way, r in results.items():
        cells = []
        for c in cols:
            v = r[c]
            cell = f"{v:,.0f}" if c in ("calls", "prompt_tokens", "kept_rows") else f"{v:,.3f}"
            if ref and way != "fixed" and ref[c]:
                cell += f" ({v / ref[c]:.2f}×)"
            cells.append(cell)
        print(f"| {way} | " + " | ".join(cells) + " |")
    out = {"bench": "cost", "repeats": args.repeats, "load": [round(x, 2) for x in load],
           "ways": {w: {k: round(v, 4) for k, v in r.items()} for w, r in results.items()}}
    if ref:
        out["ratios"] = {w: {k: round(r[k] / ref[k], 4) for k in ("calls_per_row", "prompt_tokens_per_row",
                                                                 "kept_rows", "rubric_mean", "tool_calls_per_row")
                             if ref[k]} for w, r in results.items() if w != "fixed"}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
