"""Benchmark: the corpus stages at scale, through the real CLI, for wall time, peak memory and disk.

Usage: ``python bench/scale.py [--pages 1000000] [--anchors 18] [--walks 100000,1000000]
[--subgraphs 2000] [--gzip] [--fit] [--min-free-gib 15] [--work DIR] [--source FILE] [--keep]``

A synthetic KILT knowledge source in the real schema (:mod:`synth.corpus.synthetic`) is
streamed to disk under ``bench/out/`` (git-ignored; ``--gzip`` writes it compressed), then
the corpus commands run one after the other, each in its own process, exactly as a user
types them::

    hopforge ingest --kilt FILE --out DIR
    hopforge graph  --out DIR
    hopforge walk   --out DIR --set walk.num_walks=100000
    hopforge expand --out DIR --set expand.num_subgraphs=2000
    hopforge walk   --out DIR --set walk.num_walks=1000000
    hopforge index  --out DIR

with ``configs/demo.yaml`` and a few ``--set`` overrides (a changed ``walk.num_walks``
changes the walk stage's key, so the second walk runs again rather than being reused).
A step after the graph that fails (walk, expand, index: nothing else reads them) is reported
as FAILED with its time and peak up to the failure, and the others still run.
The child processes run this checkout's code (``python -m flows.cli`` with the repo root
first on ``PYTHONPATH``), not whatever ``hopforge`` script the interpreter has installed.

Every step is measured for wall time, CPU time, peak resident memory and disk.  The
peak is the larger of two readings: the RSS of the process and all its children, summed
and polled every 50 ms with psutil, and the kernel's own high-water mark of the child
(``ru_maxrss`` from ``wait4``), which a short spike between two polls cannot escape.  Disk
is what the step's output folders hold when it ends (the index separately), and the
largest the whole output folder grew to while it ran (polled once a second), since a
merge or a spill may need more room than it leaves.  The goal is a peak RSS of at most
8 GiB at every step.

Anchors: ``--anchors 18`` gives about 16.9 edges a page after resolution and deduplication
(1M pages x 30 anchors gave 28.0M edges), so 5,903,530 pages get about 100M edges, the
link density of the real dump.

Before it writes anything the bench estimates the disk the run needs (the source, from a
small sample written with the same settings; the outputs in proportion to it, from the
ratios measured in ``bench/RESULTS.md``) and checks it against the free space of the
working folder's file system, leaving ``--min-free-gib`` (15 GiB) free for everything else
that shares the disk.  If it does not fit, it stops with the largest page count that does,
or, with ``--fit``, runs that page count instead.  Anything not measured (the pages above
the size that ran) is extrapolated to the full KILT dump (5,903,530 pages): ingest and
index by pages, graph by edges, walk and expand as measured.  The last line printed is
JSON::

    {"bench": "scale", "pages": N, "steps": {"ingest": {"wall_s": .., "cpu_s": .., "peak_rss_gib": ..,
     "disk_gib": .., "disk_peak_gib": ..}, ...}, "source_gib": .., "index_gib": .., "max_peak_rss_gib": ..}

The generated source and the output folder are removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.measure import GIB, Step, du, run_step  # noqa: E402
from bench.measure import gib as _gib  # noqa: E402
from bench.measure import timeline as _timeline  # noqa: E402
from flows.stages import BY_NAME  # noqa: E402
from synth.corpus.synthetic import write_synthetic_kilt  # noqa: E402

GOAL_GIB = 8.0
FULL_PAGES = 5_903_530
FULL_EDGES = 100_000_000
CONFIG = "configs/demo.yaml"
SAMPLE_PAGES = 5_000
# Bytes the output folder grows to (at its largest, during the run), per byte of uncompressed
# source, with these defaults (bench/RESULTS.md): 0.45 measured at 100k and 1M pages; at the
# whole dump 0.39 up to the index's failure, ~0.75 once its scratch and the index itself are added.
OUT_PER_SOURCE_BYTE = 0.75
MARGIN = 1.15


def _hopforge() -> list[str]:
    """This checkout's CLI (an installed ``hopforge`` script may import another copy of the code)."""
    return [sys.executable, "-m", "flows.cli"]


def _child_env() -> dict[str, str]:
    """The repo root first on ``PYTHONPATH``, so the child processes run this checkout's code."""
    return {"PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


def _rate(x: float, s: float) -> float:
    return x / max(s, 1e-9)


def _count(n: int) -> str:
    """100000 -> '100k', 1000000 -> '1M'."""
    if n >= 1_000_000 and n % 100_000 == 0:
        return f"{n / 1e6:g}M"
    if n >= 1_000 and n % 100 == 0:
        return f"{n / 1e3:g}k"
    return str(n)


def parse_walks(text: str) -> list[int]:
    """``"100000,1000000"`` -> ``[100000, 1000000]``: one walk step per count, in order, each distinct."""
    counts = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    if not counts or any(c <= 0 for c in counts) or len(set(counts)) != len(counts):
        raise ValueError(f"--walks wants distinct positive counts separated by commas, not {text!r}")
    return counts


def source_bytes_per_page(anchors: int, seed: int, gzip: bool, pages: int = SAMPLE_PAGES) -> tuple[float, float]:
    """(bytes on disk, uncompressed bytes) a page of the synthetic source takes, from a sample."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("sample.jsonl.gz" if gzip else "sample.jsonl")
        gen = write_synthetic_kilt(path, pages, anchors_per_page=anchors, seed=seed)
        return path.stat().st_size / pages, gen["bytes"] / pages


def disk_needed(pages: int, per_page_file: float, per_page_raw: float) -> int:
    """Bytes a run of ``pages`` needs at its fullest: the source plus the output folder at its largest."""
    return int(MARGIN * pages * (per_page_file + OUT_PER_SOURCE_BYTE * per_page_raw))


def largest_fit(free: int, keep_free: int, per_page_file: float, per_page_raw: float, step: int = 10_000) -> int:
    """The largest page count (a multiple of ``step``) whose run leaves ``keep_free`` bytes free."""
    room = free - keep_free
    if room <= 0:
        return 0
    per_page = disk_needed(1_000_000, per_page_file, per_page_raw) / 1_000_000
    return int(room / per_page) // step * step


def plan_pages(args, work: Path) -> int:
    """The page count to run: ``--pages``, or with ``--fit`` the largest that fits; raises when it does not fit."""
    free = shutil.disk_usage(work).free
    keep = int(args.min_free_gib * GIB)
    if args.source is not None:
        return args.pages  # nothing to generate; the outputs' room is the user's call
    per_file, per_raw = source_bytes_per_page(args.anchors, args.seed, args.gzip)
    need = disk_needed(args.pages, per_file, per_raw)
    fit = largest_fit(free, keep, per_file, per_raw)
    print(f"disk: {args.pages:,} pages need ~{_gib(need):.1f} GiB (source {_gib(args.pages * per_file):.1f} GiB"
          f"{' gzip' if args.gzip else ''}, {per_raw / 1e3:.1f} kB a page uncompressed); "
          f"{_gib(free):.1f} GiB free, {args.min_free_gib:g} GiB to stay free -> at most {fit:,} pages",
          file=sys.stderr)
    if free - need >= keep:
        return args.pages
    if not args.fit:
        raise SystemExit(f"{args.pages:,} pages do not fit: ~{_gib(need):.1f} GiB needed, {_gib(free):.1f} GiB free "
                         f"and {args.min_free_gib:g} GiB must stay free. Run with --pages {fit} (or --fit), "
                         "--gzip, or a --work folder on a larger disk.")
    if fit <= 0:
        raise SystemExit(f"no page count fits: {_gib(free):.1f} GiB free, {args.min_free_gib:g} GiB must stay free")
    print(f"--fit: running {fit:,} pages instead of {args.pages:,}", file=sys.stderr)
    return fit


def main(argv: list[str] | None = None) -> dict:
    """Generate the source, run and measure the steps, print the table, the extrapolation and JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=1_000_000, help="synthetic pages")
    ap.add_argument("--anchors", type=int, default=18,
                    help="mean anchors per page (18: ~16.9 edges a page, ~100M at the full dump's page count)")
    ap.add_argument("--walks", type=parse_walks, default=[100_000, 1_000_000],
                    help="walk.num_walks, one walk step per comma-separated count (default 100000,1000000)")
    ap.add_argument("--subgraphs", type=int, default=2_000, help="expand.num_subgraphs (0 skips the step)")
    ap.add_argument("--no-index", dest="index", action="store_false", help="skip the index step")
    ap.add_argument("--max-in-degree", type=int, default=1000,
                    help="walk.max_in_degree: the synthetic targets are Pareto-skewed, so the first ~2%% of pages "
                         "collect over half the links; 1000 excludes only the strongest hubs")
    ap.add_argument("--gzip", action="store_true", help="write the synthetic source gzip-compressed")
    ap.add_argument("--fit", action="store_true", help="run the largest page count the disk holds instead of refusing")
    ap.add_argument("--min-free-gib", type=float, default=15.0,
                    help="free space the run must leave on the working folder's file system")
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
    pages = plan_pages(args, work)
    load = os.getloadavg()

    if args.source is not None:
        src, gen_s, raw_bytes = args.source.resolve(), 0.0, None
        print(f"source: {src} (given)", file=sys.stderr)
    else:
        src = work / f"kilt_synthetic_{pages}.jsonl{'.gz' if args.gzip else ''}"
    try:
        if args.source is None:
            t = time.monotonic()
            gen = write_synthetic_kilt(src, pages, anchors_per_page=args.anchors, seed=args.seed)
            gen_s, raw_bytes = time.monotonic() - t, gen["bytes"]
            print(f"synthetic KILT: {gen['pages']:,} pages, {gen['anchors']:,} anchors, {raw_bytes / 1e6:,.0f} MB "
                  f"({du(src) / 1e6:,.0f} MB on disk) in {gen_s:.0f}s -> {src}", file=sys.stderr)
        src_disk = du(src)

        common = ["--config", CONFIG, "--out", str(out), "--set", f"corpus.source={src}",
                  "--set", f"walk.max_in_degree={args.max_in_degree}", *[x for s in args.extra for x in ("--set", s)]]
        hf = _hopforge()
        child_env = _child_env()
        steps = [Step("ingest", [*hf, "ingest", "--kilt", str(src), *common]),
                 Step("graph", [*hf, "graph", *common])]
        walk_steps = [Step("walks", [*hf, "walk", *common, "--set", f"walk.num_walks={n}"], label=f"walk {_count(n)}")
                      for n in args.walks]
        steps.append(walk_steps[0])
        if args.subgraphs:
            steps.append(Step("expand",
                              [*hf, "expand", *common, "--set", f"expand.num_subgraphs={args.subgraphs}"]))
        steps.extend(walk_steps[1:])  # after expand, which reads the graph, not the walks
        if args.index:  # last: the longest step, and one nothing above reads
            steps.append(Step("index", [*hf, "index", *common]))

        for step in steps:
            print(f"running: hopforge {' '.join(step.argv[len(hf):])}", file=sys.stderr)
            try:
                try:
                    run_step(step, logs / f"{step.label.replace(' ', '_')}.log", env=child_env, out=out)
                finally:
                    step.disk = sum(du(out / rel) for rel in BY_NAME[step.name].outputs)
            except RuntimeError as e:
                if step.name in ("ingest", "graph"):
                    raise  # every later step reads them
                # The others read only the corpus and the graph: measure them anyway, and report the failure.
                step.error = next((x for x in reversed(str(e).splitlines()) if x.strip() and "Error" in x),
                                  str(e).splitlines()[0])[:300]
                print(f"  {step.label}: FAILED after {step.wall_s:.1f}s, peak {_gib(step.peak):.2f} GiB: {step.error}",
                      file=sys.stderr)
                continue
            step.report = json.loads((out / "reports" / f"{step.name}.json").read_text())
            if step.report.get("key") != json.loads((out / "manifest.json").read_text())["stages"][step.name]["key"]:
                raise RuntimeError(f"{step.label}: report and manifest disagree")
            print(f"  {step.label}: {step.wall_s:.1f}s wall, {step.cpu_s:.1f}s CPU, peak {_gib(step.peak):.2f} GiB "
                  f"(polled tree {_gib(step.peak_tree):.2f} at {step.peak_at_s:.0f}s, kernel "
                  f"{_gib(step.peak_kernel):.2f}); disk {_gib(step.disk):.2f} GiB (output folder "
                  f"{_gib(step.out_after):.2f}, at most {_gib(step.disk_peak):.2f}); RSS by twelfths: "
                  f"{_timeline(step)}", file=sys.stderr)
        result = summarise(args, steps, src_disk, raw_bytes, gen_s, load)
    finally:
        if not args.keep:
            if args.source is None:
                src.unlink(missing_ok=True)
            shutil.rmtree(out, ignore_errors=True)
    return result


def summarise(args, steps: list[Step], src_disk: int, raw_bytes: int | None, gen_s: float,
              load: tuple[float, float, float]) -> dict:
    """Print the per-step table and the extrapolation; return (and print, last) the JSON result."""
    by = {s.label: s for s in steps}
    ing, gr = by["ingest"].report, by["graph"].report
    raw_bytes = raw_bytes or ing.get("bytes")  # a given source: the bytes the ingest read, uncompressed
    pages, links, edges = ing["output"], gr["input"], gr["output"]

    def throughput(s: Step) -> str:
        r = s.report
        if s.error:
            return f"FAILED: {s.error}"
        if s.name == "ingest":
            return f"{_rate(pages, s.wall_s):,.0f} pages/s, {_rate((raw_bytes or src_disk) / 1e6, s.wall_s):,.1f} MB/s"
        if s.name == "graph":
            return f"{_rate(links, s.wall_s) / 1e6:,.2f} M links/s, {_rate(pages, s.wall_s):,.0f} pages/s"
        if s.name == "index":
            return f"{_rate(r['output'], s.wall_s):,.0f} pages/s ({r['output']:,} indexed)"
        if s.name == "walks":
            w = r["walks"]
            return (f"{_rate(r['output'], s.wall_s):,.0f} walks/s, {r['output']:,} kept "
                    f"(kernel {w['kernel_seconds']:.1f}s, compile {w['compile_seconds']:.1f}s)")
        return f"{_rate(r['output'], s.wall_s):,.0f} subgraphs/s"

    source_desc = (f"source {_gib(src_disk):.2f} GiB on disk"
                   + (f" ({_gib(raw_bytes):.2f} GiB uncompressed)" if raw_bytes and raw_bytes > 1.05 * src_disk else ""))
    print(f"\nscale: {pages:,} pages, {ing['links']['input']:,} anchors -> {links:,} links -> {edges:,} edges; "
          f"{source_desc}, generated in {gen_s:.0f}s; load average at the start "
          f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}, at the end "
          + " / ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"{'step':11}{'wall s':>9}{'CPU s':>9}{'peak GiB':>10}{'ok':>4}{'disk GiB':>10}{'max GiB':>9}   throughput")
    for s in steps:
        print(f"{s.label:11}{s.wall_s:9.1f}{s.cpu_s:9.1f}{_gib(s.peak):10.2f}"
              f"{'' if s.peak <= GOAL_GIB * GIB else ' !':>4}{_gib(s.disk):10.2f}{_gib(s.disk_peak):9.2f}   "
              f"{throughput(s)}")
    print("  disk: the step's output folders when it ended; max: the whole output folder at its largest during it")
    out_peak = max(s.disk_peak for s in steps)
    index_disk = by["index"].disk if "index" in by and not by["index"].error else 0
    print(f"disk: source {_gib(src_disk):.2f} GiB + output folder at most {_gib(out_peak):.2f} GiB "
          f"(index {_gib(index_disk):.2f} GiB) = {_gib(src_disk + out_peak):.2f} GiB at the fullest")

    result = {
        "bench": "scale",
        "pages": pages,
        "anchors": ing["links"]["input"],
        "edges": edges,
        "steps": {s.label: {"wall_s": round(s.wall_s, 2), "cpu_s": round(s.cpu_s, 1),
                            "peak_rss_gib": round(_gib(s.peak), 3), "disk_gib": round(_gib(s.disk), 3),
                            "disk_peak_gib": round(_gib(s.disk_peak), 3), **({"error": s.error} if s.error else {})}
                  for s in steps},
        "source_gib": round(_gib(src_disk), 3),
        "source_raw_gib": round(_gib(raw_bytes or src_disk), 3),
        "index_gib": round(_gib(index_disk), 3),
        "output_peak_gib": round(_gib(out_peak), 3),
        "max_peak_rss_gib": round(_gib(max(s.peak for s in steps)), 3),
        "load_average": [round(x, 2) for x in load],
    }
    if pages < FULL_PAGES:
        # Only what was not run is extrapolated: ingest and index scale with pages, the graph
        # with edges, walk and expand do a fixed number of slots; disk scales with pages.
        f_pages, f_edges = FULL_PAGES / pages, FULL_EDGES / max(edges, 1)
        scaled = {s.label: s.wall_s * (f_edges if s.name == "graph" else f_pages if s.name in ("ingest", "index")
                                       else 1.0) for s in steps}
        total = sum(scaled.values())
        print(f"\nnot measured: the full KILT dump ({FULL_PAGES:,} pages, ~{FULL_EDGES / 1e6:.0f}M edges), "
              f"extrapolated x{f_pages:.2f} by pages (graph x{f_edges:.2f} by edges):")
        print("  " + ";  ".join(f"{k} {v / 60:.1f} min" for k, v in scaled.items()) + f";  total ~{total / 60:.1f} min")
        print(f"  disk: source ~{_gib(src_disk * f_pages):.1f} GiB + output folder ~{_gib(out_peak * f_pages):.1f} GiB "
              f"(index ~{_gib(index_disk * f_pages):.1f} GiB)")
        result["extrapolated_full_dump"] = {"wall_s": round(total), "source_gib": round(_gib(src_disk * f_pages), 1),
                                            "output_peak_gib": round(_gib(out_peak * f_pages), 1)}
    peak = max(s.peak for s in steps)
    failed = [s.label for s in steps if s.error]
    if failed:
        print(f"FAILED: {', '.join(failed)} (their figures are up to the failure)")
        result["failed"] = failed
    print(f"peak RSS goal <= {GOAL_GIB:.0f} GiB at every step: {'met' if peak <= GOAL_GIB * GIB else 'NOT met'} "
          f"(max {_gib(peak):.2f} GiB)")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
