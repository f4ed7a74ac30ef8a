"""Benchmark: SFT of the tiny student on CPU, plain padded batches against the best correct alternative.

The same tiny model (configs/sft/tiny.yaml), the same rows and the same number of steps, trained
through ``sft.train.main`` (TRL ``SFTTrainer``, assistant-only loss) several ways, side by side:

* ``plain``: random batches of ``--batch`` rows padded to their longest row (the baseline);
* ``rows``: one row per micro-batch, ``--batch`` micro-batches accumulated per step: no padding
  and no attention mask, so sdpa keeps its fused causal kernel (what ``batching: auto`` picks on CPU);
* ``grouped``: batches of rows of similar length (``train_sampling_strategy=group_by_length``);
* ``packed``: TRL ``bfd`` packing, padding-free, one pack of <= max_length tokens a step; with
  ``sdpa`` transformers keeps the samples apart with a block-diagonal mask (checked at start-up).

All three alternatives are correct; ``ours`` is the fastest of them.  Tokens/s counts the rows'
real tokens; the padding fraction is pad tokens over all tokens the model was fed.  The steps of
each way are split into interleaved segments, so load drift on a shared machine hits every way.  Rows come from
``data/demo/sft`` when a demo run made one, else realistic synthetic tool-calling traces over the
demo corpus pages (``helpers.sftrows``).

The last line is JSON: {"bench": "sft_cpu", "ours": tok/s, "baseline": tok/s, "ratio": r,
"padding_plain": f, "padding_ours": f, ...}.  Goal: padding <= 10% the better way.

Usage: python bench/sft_cpu.py [--steps 50] [--rows 300] [--batch 2] [--segments 2] [--ways plain,rows,grouped,packed]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

TINY = ROOT / "configs" / "sft" / "tiny.yaml"


def build_data(root: Path, n_rows: int) -> Path:
    """A DIR with ``sft`` and ``tokenizer``: the demo run's if present, else synthetic rows."""
    demo = ROOT / "data" / "demo"
    if (demo / "sft").exists() and (demo / "tokenizer").exists():
        print(f"rows: {demo / 'sft'} (demo run)")
        return demo
    import pyarrow as pa

    from helpers.sftrows import demo_pages, make_rows, write_sft_table
    from synth.engine.records import PAGE_SCHEMA
    from synth.tokenizer.tokens import train_demo_tokenizer

    pages = demo_pages()
    table = pa.Table.from_pylist([dict(p, description=None, aliases=None, wikidata_id=None, categories=None,
                                       url=None, n_chars=sum(map(len, p["paragraphs"]))) for p in pages],
                                 schema=PAGE_SCHEMA)
    train_demo_tokenizer(table, root / "tokenizer")
    write_sft_table(make_rows(pages, n_rows, seed=7), root / "sft")
    print(f"rows: {n_rows} synthetic tool-calling traces over {len(pages)} demo pages")
    return root


WAYS = {
    "plain": ["--batching", "padded"],
    "rows": ["--batching", "rows"],  # one row per micro-batch, the batch folded into gradient accumulation
    "grouped": ["--batching", "grouped"],
    "packed": ["--batching", "packed", "--packing_strategy", "bfd", "--per_device_train_batch_size", "1"],
}


def run(way: str, data: Path, out: Path, steps: int, batch: int, seed: int) -> dict:
    """Train ``steps`` steps one way; returns tokens, padding and timings."""
    from sft.train import main, parse_args

    args = ["--config", str(TINY), "--data_dir", str(data), "--output_dir", str(out / f"{way}-{seed}"),
            "--max_steps", str(steps), "--eval_fraction", "0", "--logging_steps", str(max(1, steps // 4)),
            "--per_device_train_batch_size", str(batch), "--disable_tqdm", "true", "--seed", str(seed)] + WAYS[way]
    r = main(*parse_args(args))
    return {"tokens": r["tokens_seen"], "fed": r["batch_tokens"], "runtime": r["train_runtime_s"],
            "loss": r["final_loss"], "mode": r["batching"]["mode"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--rows", type=int, default=300)
    ap.add_argument("--batch", type=int, default=2, help="rows per step for plain and grouped batches")
    ap.add_argument("--ways", default="plain,rows,grouped,packed")
    ap.add_argument("--segments", type=int, default=2, help="interleaved segments the steps are split into")
    a = ap.parse_args()
    import logging

    import transformers

    transformers.logging.set_verbosity_error()
    logging.getLogger("hopforge").setLevel(logging.ERROR)
    import datasets

    datasets.disable_progress_bars()
    ways = a.ways.split(",")
    seg = [a.steps // a.segments + (1 if i < a.steps % a.segments else 0) for i in range(a.segments)]
    parts: dict[str, list[dict]] = {w: [] for w in ways}
    with tempfile.TemporaryDirectory(prefix="hopforge-sft-bench-") as tmp:
        data = build_data(Path(tmp) / "data", a.rows)
        for i, n in enumerate(seg):  # interleaved segments: load drift on a shared machine hits every way alike
            for w in ways:
                parts[w].append(run(w, data, Path(tmp) / "runs", n, a.batch, seed=i))
    results = {}
    for w, ps in parts.items():
        tok, fed, rt = sum(p["tokens"] for p in ps), sum(p["fed"] for p in ps), sum(p["runtime"] for p in ps)
        results[w] = {"way": w, "tokens_per_second": round(tok / rt, 1), "padding_fraction": round(1 - tok / fed, 6),
                      "segments_tok_s": [round(p["tokens"] / p["runtime"]) for p in ps], "mode": ps[0]["mode"]}
        print(f"{w:8s} {results[w]['tokens_per_second']:>9.1f} tok/s  padding {results[w]['padding_fraction']:.1%}  "
              f"tokens {tok}  fed {fed}  train {rt:.1f}s  per segment {results[w]['segments_tok_s']}  "
              f"({ps[0]['mode']})", flush=True)
    base = results.get("plain")
    alts = [r for w, r in results.items() if w != "plain"]
    best = max(alts, key=lambda r: r["tokens_per_second"]) if alts else base
    out = {"bench": "sft_cpu", "ours": best["tokens_per_second"], "baseline": base["tokens_per_second"] if base else None,
           "ratio": round(best["tokens_per_second"] / base["tokens_per_second"], 3) if base else None,
           "padding_plain": base["padding_fraction"] if base else None, "padding_ours": best["padding_fraction"],
           "ours_way": best["way"], "steps": a.steps, "threads": __import__("torch").get_num_threads(),
           **{f"{w}_tok_s": r["tokens_per_second"] for w, r in results.items()},
           **{f"padding_{w}": r["padding_fraction"] for w, r in results.items() if w not in ("plain",)}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
