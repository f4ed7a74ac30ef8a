"""Run every benchmark, one after the other, and say at the end what each measured and whether it ran.

``make bench`` runs this at the **suite sizes**: every bench finishes, the whole suite in about an hour
on 2 cores, and each still runs hopforge and its baseline side by side in one run.  ``make bench-scale``
(``--scale``) runs each bench at its own defaults, the sizes ``bench/RESULTS.md`` quotes for the whole
dump (1M-page corpora, 400k traces): hours, and 15 GiB of free disk.

Each bench runs in its own process; its output goes to the terminal and to ``LOGS/<bench>.log``, and
its last JSON line (every bench prints one) is kept.  A bench that fails does not stop the others: the
summary names it, and the exit status is 1.  The summary (a table, and ``LOGS/summary.json``) gives each
bench's wall time, the load average before it, and its JSON figures.

Usage: python bench/suite.py [--scale] [--only a,b] [--skip a,b] [--logs DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synth.engine.store import atomic_write_json  # noqa: E402

# (bench, its arguments at the suite sizes).  ``--scale`` drops the arguments: each bench's defaults are
# its full size.  The demo-run benches (filter, questions_audit, context, downstream) read data/demo.
SUITE: list[tuple[str, list[str]]] = [
    ("cli", []),
    ("walks", ["--nodes", "200000", "--edges", "4000000", "--walks", "400000", "--seconds", "5"]),
    ("ingest", ["50", "--repeats", "3"]),
    ("search", ["--pages", "100000"]),
    ("snippets", []),
    ("retrieval", ["--queries", "1000"]),
    ("teacher", ["--n", "1600"]),
    ("rollout", ["--questions", "512", "--concurrency", "256", "--latency", "1"]),
    ("questions", []),
    ("questions_audit", []),
    ("decontaminate", ["--walks", "100000", "--questions", "10000", "--pages", "200000", "--sample", "10000"]),
    ("filter", []),
    ("assemble", ["--samples", "500"]),
    ("context", []),
    ("incremental", []),
    ("cost", []),
    ("explorer", ["--questions", "10000"]),
    ("downstream", ["--questions", "1000", "--traces", "4000"]),
    ("sft_cpu", ["--steps", "20"]),
    ("scale", ["--pages", "100000", "--walks", "100000", "--subgraphs", "200"]),
]


def last_json(text: str) -> dict | None:
    """The last line of ``text`` that parses as a JSON object (every bench ends with one)."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def run_one(name: str, args: list[str], logs: Path, bench_dir: Path = ROOT / "bench") -> dict:
    """Run ``bench_dir/<name>.py`` with ``args``, teeing its output to the terminal and its log."""
    load = os.getloadavg()
    cmd = [sys.executable, str(bench_dir / f"{name}.py"), *args]
    print(f"== bench/{name}.py {' '.join(args)}  (load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})",
          flush=True)
    t0 = time.perf_counter()
    lines: list[str] = []
    log = logs / f"{name}.log"
    tmp = log.with_suffix(".log.tmp")
    with open(tmp, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1)
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            fh.write(line)
            lines.append(line)
        rc = proc.wait()
    os.replace(tmp, log)
    wall = time.perf_counter() - t0
    figures = last_json("".join(lines))
    ok = rc == 0 and figures is not None
    why = "" if ok else (f"exit {rc}" if rc else "no JSON line at the end")
    return {"bench": name, "args": args, "ok": ok, "why": why, "wall_s": round(wall, 1),
            "load_before": [round(x, 2) for x in load], "figures": figures, "log": str(log)}


def headline(figures: dict | None) -> str:
    """A few of a bench's JSON figures for the summary table (ratio first, when it has one)."""
    if not figures:
        return ""
    keys = [k for k in figures if k != "bench" and isinstance(figures[k], (int, float, str, bool))]
    keys.sort(key=lambda k: k != "ratio")  # stable: the rest keep the bench's order
    return ", ".join(f"{k} {figures[k]}" for k in keys[:4])


def main(argv: list[str] | None = None, suite: list[tuple[str, list[str]]] | None = None,
         bench_dir: Path = ROOT / "bench") -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", action="store_true", help="each bench at its own (full) defaults")
    ap.add_argument("--only", default="", help="comma-separated benches to run (default: all)")
    ap.add_argument("--skip", default="", help="comma-separated benches not to run")
    ap.add_argument("--logs", type=Path, default=ROOT / "bench" / "out" / "suite", help="where the logs go")
    args = ap.parse_args(argv)
    suite = SUITE if suite is None else suite
    known = [name for name, _ in suite]
    missing = sorted({p.stem for p in bench_dir.glob("*.py")} - set(known) - {"suite", "measure"})
    if missing:  # a bench nobody added to the suite would silently never run
        print(f"bench/suite.py: not in SUITE: {', '.join(missing)}", file=sys.stderr)
        return 2
    only = [b for b in args.only.split(",") if b]
    skip = [b for b in args.skip.split(",") if b]
    unknown = [b for b in only + skip if b not in known]
    if unknown:
        print(f"bench/suite.py: unknown bench {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    args.logs.mkdir(parents=True, exist_ok=True)
    results = []
    for name, suite_args in suite:
        if (only and name not in only) or name in skip:
            continue
        results.append(run_one(name, [] if args.scale else suite_args, args.logs, bench_dir))
    size = "full (--scale)" if args.scale else "suite"
    print(f"\n== summary: {len(results)} benches at the {size} sizes")
    width = max((len(r["bench"]) for r in results), default=5)
    for r in results:
        status = "ok  " if r["ok"] else "FAIL"
        load = r["load_before"][0]
        print(f"{status} {r['bench']:<{width}} {r['wall_s']:>8.1f} s  load {load:>5.2f}  "
              f"{headline(r['figures']) if r['ok'] else r['why'] + ' (' + r['log'] + ')'}")
    summary = args.logs / "summary.json"
    atomic_write_json(summary, {"scale": args.scale, "results": results})
    failed = [r["bench"] for r in results if not r["ok"]]
    print(f"{len(results) - len(failed)} ran, {len(failed)} failed{': ' + ', '.join(failed) if failed else ''}; "
          f"figures in {summary}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
