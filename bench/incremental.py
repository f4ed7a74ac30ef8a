"""Bench: incremental rebuilds of the demo pipeline, three ways side by side in one run.

1. cold: an empty output folder;
2. again with nothing changed (every stage reused, zero teacher calls);
3. again after a change to a filter threshold (only the stages downstream of the
   filter rerun; no teacher call is paid again).

It runs the same pipeline the `synth/demo` deployment runs (``flows.stages.PIPELINE.run``, which the
flow wraps) on configs/demo.yaml.  Prints wall time and teacher calls of each
way.  Last line: {"bench": "incremental", "ours": noop_s, "baseline": cold_s, "ratio": noop/cold,
"noop_calls": 0, "filter_change_calls": 0, ...}.  Goals: ratio <= 0.10 with 0 calls; 0 calls for the change.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flows.config import load_config  # noqa: E402
from flows.stages import PIPELINE  # noqa: E402
from synth.engine.store import Store  # noqa: E402


def timed(out: Path, overrides: list[str]) -> tuple[float, int, list[str]]:
    cfg = load_config(ROOT / "configs/demo.yaml", overrides)
    t0 = time.perf_counter()
    outcomes = PIPELINE.run(PIPELINE.stages, cfg, Store(out))
    wall = time.perf_counter() - t0
    return wall, sum(o.teacher_calls for o in outcomes), [o.name for o in outcomes if not o.reused]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], help="extra config overrides for all three runs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo"
        cold, cold_calls, _ = timed(out, args.set)
        noop, noop_calls, noop_ran = timed(out, args.set)
        change, change_calls, change_ran = timed(out, args.set + ["filters.min_f1=0.9"])
    print(f"cold:            {cold:8.2f} s  {cold_calls:6d} teacher calls")
    print(f"unchanged rerun: {noop:8.2f} s  {noop_calls:6d} teacher calls  ({noop / cold:.1%} of cold; reran: {noop_ran or 'nothing'})")
    print(f"filter change:   {change:8.2f} s  {change_calls:6d} teacher calls  (reran: {', '.join(change_ran)})")
    print(json.dumps({"bench": "incremental", "ours": round(noop, 3), "baseline": round(cold, 3),
                      "ratio": round(noop / cold, 4), "cold_calls": cold_calls, "noop_calls": noop_calls,
                      "filter_change_s": round(change, 3), "filter_change_calls": change_calls}))


if __name__ == "__main__":
    main()
