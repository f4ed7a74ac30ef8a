"""Bench: how fast the ``hopforge`` command answers, against the interpreter's own start, side by side in one run.

Each case runs ``--repeats`` times (3) in a fresh process, alternating with its floor, and the median wall
time is reported:

- ``hopforge --help``, ``hopforge filter --help`` (a command's help), ``hopforge run --bogus`` (an argument
  error, exit 2) and ``hopforge report --out EMPTY`` (a missing input, exit 2);
- the floor: ``python -c "import typer"``, the interpreter starting with the CLI framework and nothing of
  hopforge (what any typer command pays before it can print);
- for scale: ``python -c "import flows.stages, pyarrow.dataset, pandas, torch"``, what the CLI would pay
  if it imported every stage's libraries up front.

Goal (issue "real scale"): ``hopforge --help`` under 1 s, median of 3.  Prints the load average; the last
line is JSON: {"bench": "cli", "median_s": {...}, "goal_met": bool, "load": [...]}.

Usage: python bench/cli.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _hopforge() -> list[str]:
    script = Path(sys.executable).parent / "hopforge"
    return [str(script)] if script.exists() else [sys.executable, "-m", "flows.cli"]


def _time(argv: list[str], expect: int) -> float:
    env = dict(os.environ, COLUMNS="120", NO_COLOR="1", HF_HUB_OFFLINE="1")
    t0 = time.perf_counter()
    r = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != expect:
        raise SystemExit(f"{' '.join(argv)} exited {r.returncode}, expected {expect}:\n{r.stdout[-1000:]}{r.stderr[-1000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    hf = _hopforge()
    with tempfile.TemporaryDirectory() as empty:
        cases = {
            "hopforge --help": (hf + ["--help"], 0),
            "hopforge filter --help": (hf + ["filter", "--help"], 0),
            "hopforge run --bogus": (hf + ["run", "--bogus"], 2),
            "hopforge report --out EMPTY": (hf + ["report", "--out", empty], 2),
            "floor: python -c 'import typer'": ([sys.executable, "-c", "import typer"], 0),
            "every stage's libraries up front": (
                [sys.executable, "-c", "import flows.stages, pyarrow.dataset, pandas, torch"], 0),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.repeats):  # interleaved, so a burst of load hits every case alike
            for name, (argv, code) in cases.items():
                times[name].append(_time(argv, code))
    med = {name: statistics.median(t) for name, t in times.items()}
    floor = med["floor: python -c 'import typer'"]
    load = os.getloadavg()
    print(f"median of {args.repeats}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| case | median wall | runs | / floor |")
    print("| --- | ---: | --- | ---: |")
    for name, t in times.items():
        print(f"| {name} | {med[name]:.3f} s | {', '.join(f'{x:.2f}' for x in t)} | {med[name] / floor:.2f} |")
    goal = med["hopforge --help"] < 1.0
    print(f"hopforge --help: {med['hopforge --help']:.3f} s (goal < 1 s: {'met' if goal else 'NOT met'})")
    print(json.dumps({"bench": "cli", "repeats": args.repeats, "median_s": {k: round(v, 4) for k, v in med.items()},
                      "goal_met": goal, "load": [round(x, 2) for x in load]}))


if __name__ == "__main__":
    main()
