"""Bench: what ``sft.context`` costs in tokens, ``full`` against ``as_seen``, on a run folder's kept traces.

The kept traces of ``--out DIR`` (``DIR/sft``'s trace ids, read from ``DIR/traces``) are turned into SFT rows
both ways (:func:`filters.sftrows.sft_rows`, with the run's ``rollout.keep_observations``), rendered through
DIR/tokenizer's chat template and counted:

- **training**: rows, tokens the trainer processes (the rendered rows), tokens trained (the loss mask of the
  sft stage's check, :mod:`sft.masking`), the longest row;
- **harness**: the context tokens the policy is sent over a trajectory, summed over its turns (what the
  student's eval, its band and an RL rollout pay per trajectory under the same policy): every observation in
  full, or the teacher's compression (:func:`synth.rollout.loop.teacher_view`).

Wall time of building and counting the rows of each policy is the median of ``--repeats`` runs (3), with the
load average.  Last line: ``{"bench": "context", ...}``.

    python bench/context.py --out data/demo
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
import pyarrow.dataset as ds  # noqa: E402

POLICIES = ("full", "as_seen")


def kept_traces(out: Path) -> list:
    from synth.engine.records import Trace

    ids = sorted(set(ds.dataset(out / "sft").to_table(columns=["trace_id"]).column("trace_id").to_pylist()))
    t = ds.dataset(out / "traces").to_table(filter=ds.field("trace_id").isin(pa.array(ids, pa.string())))
    return [Trace.from_row(r) for r in t.to_pylist()]


def measure(traces: list, policy: str, keep: int, tokenizer, counts, check: bool) -> dict:
    """The figures of one policy (see the module docstring)."""
    from filters.sftrows import sft_messages, sft_rows
    from synth.rollout.loop import teacher_view

    rows = [r for t in traces for r in sft_rows(t, 1.0, context=policy, compress=True, keep=keep)]
    lengths = counts.count([(r["messages"], json.loads(r["tools"])) for r in rows])
    harness = 0
    for t in traces:
        msgs, tools = sft_messages(t), json.loads(t.tools)
        prefixes = [teacher_view(msgs[:i], policy == "as_seen", keep) for i, m in enumerate(msgs)
                    if m["role"] == "assistant"]
        harness += sum(n or 0 for n in counts.count([(p, tools) for p in prefixes]))
    out = {"rows": len(rows), "rows_per_trace": round(len(rows) / len(traces), 3), "tokens": sum(lengths),
           "longest_row": max(lengths), "harness_context_tokens_per_trace": round(harness / len(traces), 1)}
    if check:
        from sft.masking import check_rows

        report = check_rows(rows, tokenizer, tokenizer.chat_template)
        assert report["ok"], report["failures"][:1]
        out["trained_tokens"] = report["trained_tokens"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "demo", help="a run folder with sft and traces")
    ap.add_argument("--keep", type=int, default=None, help="observations kept in full (default: the demo "
                    "config's rollout.keep_observations)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from synth.engine.progress import quiet_library_progress

    quiet_library_progress()  # the mask check's datasets.map: a log line, not a bar per row
    from flows.config import load_config
    from synth.tokenizer.counts import TokenCounts
    from synth.tokenizer.tokens import load_tokenizer

    keep = args.keep or load_config(ROOT / "configs" / "demo.yaml", []).rollout.keep_observations
    tokenizer = load_tokenizer(args.out / "tokenizer", chat_template=True)
    traces = kept_traces(args.out)
    figures, seconds = {}, {}
    for policy in POLICIES:
        times = []
        for i in range(args.repeats):
            counts = TokenCounts(tokenizer, None)  # no cache: every run counts everything
            t0 = time.perf_counter()
            got = measure(traces, policy, keep, tokenizer, counts, check=False)
            times.append(time.perf_counter() - t0)
        figures[policy] = measure(traces, policy, keep, tokenizer, TokenCounts(tokenizer, None), check=True)
        seconds[policy] = statistics.median(times)
        assert got["tokens"] == figures[policy]["tokens"]
    load = os.getloadavg()
    full, seen = figures["full"], figures["as_seen"]
    print(f"{len(traces)} kept traces of {args.out}; keep_observations {keep}; median of {args.repeats}; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| policy | rows | rows/trace | tokens processed | tokens trained | longest row | harness context "
          "tokens/trajectory | build+count s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for p in POLICIES:
        f = figures[p]
        print(f"| {p} | {f['rows']:,} | {f['rows_per_trace']} | {f['tokens']:,} | {f['trained_tokens']:,} | "
              f"{f['longest_row']:,} | {f['harness_context_tokens_per_trace']:,} | {seconds[p]:.2f} |")
    ratio = {k: round(seen[k] / full[k], 3) for k in ("rows", "tokens", "trained_tokens", "longest_row",
                                                       "harness_context_tokens_per_trace")}
    print("as_seen / full: " + ", ".join(f"{k} {v}" for k, v in ratio.items()))
    print(json.dumps({"bench": "context", "traces": len(traces), "keep_observations": keep, "repeats": args.repeats,
                      "figures": figures, "seconds": {k: round(v, 3) for k, v in seconds.items()},
                      "as_seen_over_full": ratio, "load": [round(x, 2) for x in load]}))


if __name__ == "__main__":
    main()
