"""Bench: what the question validators cost, against the whole questions stage, with the oracle teacher.

Builds (or reuses) a demo store up to the search index -- ``hopforge run --config
configs/demo.yaml --until index`` on the embedded demo corpus (~10k real Wikipedia
summaries) -- then runs the ``questions`` stage ``--runs`` times from scratch (forced,
the teacher's call cache emptied first, so every question is written, validated and
repaired anew).  Each run's report carries the stage's wall time and the validators' own
(``validators.seconds``: the link view and index they read, and every check of every
question, repaired ones included, the effective-depth searches among them; per check in
``seconds_<reason>``).  Each run is a
fresh process, as in a real run: a stage repeated in one process would find the word
caches of the writer and of the checks already warm.  CPU seconds are measured too
(the checking thread's, against the whole process's), the steadier figure on shared cores.  The figure is the
ratio of the two, run by run; the median of the runs is reported with the load average,
since the cores here are shared and wall times move with other people's work (both
parts of a run move together, so the ratio is the steadier figure).

The phrasing figure is the number of distinct sentence skeletons of the kept questions
(:mod:`synth.questions.skeletons`).  Measured the same way on the demo with the writer
before evidence clues (fixed templates over page descriptions): 95 skeletons, the 20
most common covering 90% of sentences.

A real run pays fixed costs too (imports, hashing the stage's code for its key, opening
the graph and the index), which a bigger run spreads thinner; so each run is paired with
a run of a few questions (``walk.num_walks=8``, no subgraphs) on the same corpus, and
``marginal_cpu_ratio`` is the validators' share of the CPU time the questions add beyond
those fixed costs: the figure for a run of many shards.

The last line is JSON: {"bench": "questions", "ratio": r, "cpu_ratio": c, "marginal_cpu_ratio": m,
"validators_ms_per_question": v, "stage_ms_per_question": s, "goal": 0.25, ...}.  Goal: ratio <= 0.25 (the
validators, effective depth's searches included, at most a quarter of the stage with the oracle teacher).

Usage: python bench/questions.py [--out data/bench-questions] [--runs 3] [--set key=value ...]
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

from flows.config import load_config  # noqa: E402
from flows.stages import PIPELINE, QUESTIONS  # noqa: E402
from synth.engine.runner import run_stage  # noqa: E402
from synth.engine.store import Store  # noqa: E402

BEFORE_SKELETONS = 95  # the template writer on the demo, counted as the module docstring says


def build(out: Path, overrides: list[str]) -> Store:
    """The demo store up to the index (reused when its stages are current)."""
    cfg = load_config(str(ROOT / "configs" / "demo.yaml"), overrides)
    store = Store(out)
    for stage in PIPELINE.upto("index"):
        run_stage(stage, cfg, store, progress=False)
    return store


def child(out: str, overrides: list[str]) -> None:
    """In a fresh process: one forced questions stage; prints its report and CPU seconds as JSON."""
    cfg = load_config(str(ROOT / "configs" / "demo.yaml"), overrides)
    c0 = time.process_time()
    report = run_stage(QUESTIONS, cfg, Store(out), force=True, progress=False).report
    print(json.dumps({"report": report, "cpu_s": time.process_time() - c0}))


def one_run(store: Store, overrides: list[str]) -> tuple[dict, float]:
    """One questions stage as a run makes it -- a fresh process, an empty call cache -- and its CPU seconds.

    A fresh process, because one run writes the questions once: a second stage in the same
    process would find the writer's and the checks' word caches warm and cost less than a run does.
    """
    shutil.rmtree(store.root / "cache", ignore_errors=True)
    cmd = [sys.executable, __file__, "--child", "--out", str(store.root)] + [f"--set={o}" for o in overrides]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
    last = json.loads(done.stdout.strip().splitlines()[-1])
    return last["report"], last["cpu_s"]


# a run of a few sources: almost all fixed cost (it may keep no question, which is fine here)
TINY = ["walk.num_walks=8", "expand.num_subgraphs=0", "runner.allow_empty=true"]


def _row(rep: dict, cpu: float) -> dict:
    v = rep["validators"]
    return {"stage_s": rep["seconds"], "validators_s": v["seconds"], "ratio": v["seconds"] / rep["seconds"],
            "cpu_s": cpu, "validators_cpu_s": v["cpu_seconds"], "cpu_ratio": v["cpu_seconds"] / cpu,
            "sources": rep["input"], "checked": v["checked"], "searches": v["searches"],
            "pruned": v["searches_remembered"], "by_check": {k[8:]: round(t, 3) for k, t in v.items()
                                                         if k.startswith("seconds_")}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "data" / "bench-questions"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override key=value")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.out, args.overrides)
    store = build(Path(args.out), args.overrides)
    tiny = build(Path(args.out + "-tiny"), args.overrides + TINY)
    rows, fixed = [], []
    for i in range(args.runs):
        rows.append(_row(*one_run(store, args.overrides)))
        fixed.append(_row(*one_run(tiny, args.overrides + TINY)))
        r = rows[-1]
        print(f"run {i + 1}: stage {r['stage_s']:.3f} s, validators {r['validators_s']:.3f} s ({r['ratio']:.1%}; "
              f"CPU {r['validators_cpu_s']:.3f} of {r['cpu_s']:.3f} s, {r['cpu_ratio']:.1%}); {r['checked']} checks, "
              f"{r['searches']} searches sent, {r['pruned']} answered from memory; by check {r['by_check']}; "
              f"a {fixed[-1]['sources']}-question run: CPU {fixed[-1]['cpu_s']:.3f} s")
    med = statistics.median
    n = rows[-1]["sources"]
    # Per question, once a process's fixed costs (imports, code hashing, opening graph and index) are paid:
    # the difference between this run and a run of a few questions, run by run.
    marginal = [(r["validators_cpu_s"] - f["validators_cpu_s"]) / (r["cpu_s"] - f["cpu_s"])
                for r, f in zip(rows, fixed)]
    last = json.loads((Path(args.out) / "reports" / "questions.json").read_text())
    result = {
        "bench": "questions",
        "ratio": round(med(r["ratio"] for r in rows), 4),
        "cpu_ratio": round(med(r["cpu_ratio"] for r in rows), 4),
        "marginal_cpu_ratio": round(med(marginal), 4),
        "stage_s": round(med(r["stage_s"] for r in rows), 3),
        "validators_s": round(med(r["validators_s"] for r in rows), 3),
        "stage_ms_per_question": round(1e3 * med(r["stage_s"] for r in rows) / n, 3),
        "validators_ms_per_question": round(1e3 * med(r["validators_s"] for r in rows) / n, 3),
        "questions_in": n, "output": last["output"], "dropped": last["dropped"], "repairs": last["repairs"],
        "skeletons": last["phrasing"]["skeletons"], "skeletons_before": BEFORE_SKELETONS,
        "top20_share": last["phrasing"]["top20_share"],
        "runs": args.runs, "goal": 0.25, "loadavg": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
    }
    print(f"validators: {result['validators_ms_per_question']} ms a question, {result['ratio']:.1%} of the stage "
          f"({result['stage_ms_per_question']} ms a question; CPU {result['cpu_ratio']:.1%}; past fixed costs, "
          f"CPU {result['marginal_cpu_ratio']:.1%}); goal <= 25%; load {result['loadavg']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
