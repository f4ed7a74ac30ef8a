"""Benchmark: the corpus stages at scale, through the real CLI, for wall time and peak memory.

Usage: ``python bench/scale.py [--pages 1000000] [--anchors 30] [--walks 100000]
[--subgraphs 2000] [--work DIR] [--source FILE] [--keep]``

A synthetic KILT knowledge source in the real schema (:mod:`synth.corpus.synthetic`) is
written under ``bench/out/`` (git-ignored), then four commands run one after the
other, each in its own process, exactly as a user types them::

    hopforge ingest --kilt FILE --out DIR
    hopforge graph  --out DIR
    hopforge walk   --out DIR --set walk.num_walks=100000
    hopforge expand --out DIR --set expand.num_subgraphs=2000

with ``configs/demo.yaml`` and a few ``--set`` overrides.  Every step is measured
for wall time and peak resident memory.  The peak is the larger of two readings:
the RSS of the process and all its children, summed and polled every 50 ms with
psutil, and the kernel's own high-water mark of the child (``ru_maxrss`` from
``wait4``), which a short spike between two polls cannot escape.  The goal is a
peak of at most 4 GiB at every step.

The figures are then extrapolated to the full KILT dump (5,903,530 pages,
34.8 GiB): ingest in proportion to input bytes, graph in proportion to edges
(about 100M), walk and expand as measured (their counts are fixed).  The last
line printed is JSON::

    {"bench": "scale", "pages": N, "steps": {"ingest": {"wall_s": .., "peak_rss_gib": ..}, ...},
     "max_peak_rss_gib": .., "extrapolated_full_dump_s": ..}

The generated source and the output folder are removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.measure import GIB, Step, run_step  # noqa: E402
from bench.measure import gib as _gib  # noqa: E402
from bench.measure import timeline as _timeline  # noqa: E402
from synth.corpus.synthetic import write_synthetic_kilt  # noqa: E402

GOAL_GIB = 4.0
FULL_PAGES = 5_903_530
FULL_BYTES = 34.8 * GIB
FULL_EDGES = 100_000_000
CONFIG = "configs/demo.yaml"


def _hopforge() -> list[str]:
    script = Path(sys.executable).parent / "hopforge"
    return [str(script)] if script.exists() else [sys.executable, "-m", "flows.cli"]


def _rate(x: float, s: float) -> float:
    return x / max(s, 1e-9)


def main(argv: list[str] | None = None) -> dict:
    """Generate the source, run and measure the four steps, print the table, the extrapolation and JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=1_000_000, help="synthetic pages")
    ap.add_argument("--anchors", type=int, default=30, help="mean anchors per page")
    ap.add_argument("--walks", type=int, default=100_000, help="walk.num_walks")
    ap.add_argument("--subgraphs", type=int, default=2_000, help="expand.num_subgraphs (0 skips the step)")
    ap.add_argument("--max-in-degree", type=int, default=1000,
                    help="walk.max_in_degree: the synthetic targets are Pareto-skewed, so the first ~2%% of pages "
                         "collect over half the links; 1000 excludes only the strongest hubs")
    ap.add_argument("--work", type=Path, default=ROOT / "bench" / "out" / "scale", help="working folder (emptied)")
    ap.add_argument("--source", type=Path, default=None, help="reuse this KILT JSONL instead of generating one")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help="keep the source and the output folder")
    ap.add_argument("--set", dest="extra", action="append", default=[], help="extra config override (repeatable)")
    args = ap.parse_args(argv)

    work = args.work.resolve()
    out = work / "run"
    shutil.rmtree(out, ignore_errors=True)  # a fresh store, or every stage would be reused, not measured
    work.mkdir(parents=True, exist_ok=True)
    logs = work / "logs"
    logs.mkdir(exist_ok=True)

    if args.source is not None:
        src, gen_s = args.source.resolve(), 0.0
        print(f"source: {src} (given)", file=sys.stderr)
    else:
        src = work / f"kilt_synthetic_{args.pages}.jsonl"
        t = time.monotonic()
        gen = write_synthetic_kilt(src, args.pages, anchors_per_page=args.anchors, seed=args.seed)
        gen_s = time.monotonic() - t
        print(f"synthetic KILT: {gen['pages']:,} pages, {gen['anchors']:,} anchors, {gen['bytes'] / 1e6:,.0f} MB "
              f"in {gen_s:.0f}s -> {src}", file=sys.stderr)
    src_bytes = src.stat().st_size

    common = ["--config", CONFIG, "--out", str(out), "--set", f"corpus.source={src}",
              "--set", f"walk.max_in_degree={args.max_in_degree}", *[x for s in args.extra for x in ("--set", s)]]
    hf = _hopforge()
    steps = [
        Step("ingest", [*hf, "ingest", "--kilt", str(src), *common]),
        Step("graph", [*hf, "graph", *common]),
        Step("walks", [*hf, "walk", *common, "--set", f"walk.num_walks={args.walks}"]),
    ]
    if args.subgraphs:
        steps.append(Step("expand", [*hf, "expand", *common, "--set", f"expand.num_subgraphs={args.subgraphs}"]))

    try:
        for step in steps:
            print(f"running: hopforge {' '.join(step.argv[len(hf):])}", file=sys.stderr)
            run_step(step, logs / f"{step.name}.log")
            step.report = json.loads((out / "reports" / f"{step.name}.json").read_text())
            if step.report.get("key") != json.loads((out / "manifest.json").read_text())["stages"][step.name]["key"]:
                raise RuntimeError(f"{step.name}: report and manifest disagree")
            print(f"  {step.name}: {step.wall_s:.1f}s wall, {step.cpu_s:.1f}s CPU, peak {_gib(step.peak):.2f} GiB "
                  f"(polled tree {_gib(step.peak_tree):.2f} at {step.peak_at_s:.0f}s, kernel "
                  f"{_gib(step.peak_kernel):.2f}); RSS by twelfths: {_timeline(step)}", file=sys.stderr)
        result = summarise(args, steps, src_bytes, gen_s)
    finally:
        if not args.keep:
            if args.source is None:
                src.unlink(missing_ok=True)
            shutil.rmtree(out, ignore_errors=True)
    return result


def summarise(args, steps: list[Step], src_bytes: int, gen_s: float) -> dict:
    """Print the per-step table and the extrapolation; return (and print, last) the JSON result."""
    by = {s.name: s for s in steps}
    ing, gr, wk = by["ingest"].report, by["graph"].report, by["walks"].report
    pages, links, edges = ing["output"], gr["input"], gr["output"]
    rows = [
        ("ingest", by["ingest"], f"{_rate(pages, by['ingest'].wall_s):,.0f} pages/s, "
                                 f"{_rate(src_bytes / 1e6, by['ingest'].wall_s):,.1f} MB/s"),
        ("graph", by["graph"], f"{_rate(links, by['graph'].wall_s) / 1e6:,.2f} M links/s, "
                               f"{_rate(pages, by['graph'].wall_s):,.0f} pages/s"),
        ("walk", by["walks"], f"{_rate(wk['output'], by['walks'].wall_s):,.0f} walks/s "
                              f"(kernel {wk['walks']['kernel_seconds']:.1f}s, "
                              f"compile {wk['walks']['compile_seconds']:.1f}s)"),
    ]
    if "expand" in by:
        rows.append(("expand", by["expand"], f"{_rate(by['expand'].report['output'], by['expand'].wall_s):,.0f} "
                                             "subgraphs/s"))
    print(f"\nscale: {pages:,} pages, {ing['links']['input']:,} anchors -> {links:,} links -> {edges:,} edges; "
          f"source {src_bytes / 1e6:,.0f} MB (generated in {gen_s:.0f}s)")
    print(f"{'step':8}{'wall s':>9}{'CPU s':>9}{'peak GiB':>10}{'ok':>4}   throughput")
    for name, s, thr in rows:
        print(f"{name:8}{s.wall_s:9.1f}{s.cpu_s:9.1f}{_gib(s.peak):10.2f}{'' if s.peak <= GOAL_GIB * GIB else ' !':>4}"
              f"   {thr}")

    # Ingest is a linear scan of the source; the graph build a join + sort over the edges;
    # walk and expand do a fixed number of slots (but see their evidence scans, below).
    scaled = {
        "ingest": by["ingest"].wall_s * FULL_BYTES / src_bytes,
        "graph": by["graph"].wall_s * FULL_EDGES / max(edges, 1),
        "walks": by["walks"].wall_s,
    }
    if "expand" in by:
        scaled["expand"] = by["expand"].wall_s
    total = sum(scaled.values())
    print(f"\nfull KILT dump ({FULL_PAGES:,} pages, {FULL_BYTES / GIB:.1f} GiB, ~{FULL_EDGES / 1e6:.0f}M edges):")
    print(f"  ingest x{FULL_BYTES / src_bytes:.2f} (bytes) = {scaled['ingest'] / 60:.1f} min;  "
          f"graph x{FULL_EDGES / max(edges, 1):.2f} (edges) = {scaled['graph'] / 60:.1f} min;  "
          f"walk {scaled['walks'] / 60:.1f} min (fixed at {wk['output']:,} walks)"
          + (f";  expand {scaled['expand'] / 60:.1f} min (fixed)" if "expand" in by else ""))
    print(f"  total ~{total:,.0f} s = {total / 60:.1f} min")
    # Walk's kernel is fixed work, but its evidence lookup scans all of corpus/links and
    # corpus/pages once per chunk of walks, so that part grows with the corpus.
    w = wk["walks"]
    fixed = w["kernel_seconds"] + w["compile_seconds"]
    walk_scaled = fixed + (by["walks"].wall_s - fixed) * FULL_BYTES / src_bytes
    print(f"  if walk's evidence scans grow with the corpus (they read every link and page per chunk): "
          f"walk ~{walk_scaled / 60:.1f} min, total ~{(total - scaled['walks'] + walk_scaled) / 60:.1f} min")
    peak = max(s.peak for s in steps)
    print(f"peak RSS goal <= {GOAL_GIB:.0f} GiB at every step: {'met' if peak <= GOAL_GIB * GIB else 'NOT met'} "
          f"(max {_gib(peak):.2f} GiB)")
    result = {
        "bench": "scale",
        "pages": pages,
        "steps": {name: {"wall_s": round(s.wall_s, 2), "peak_rss_gib": round(_gib(s.peak), 3),
                         "cpu_s": round(s.cpu_s, 1)} for name, s in zip([r[0] for r in rows], [r[1] for r in rows])},
        "max_peak_rss_gib": round(_gib(peak), 3),
        "extrapolated_full_dump_s": round(total),
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
