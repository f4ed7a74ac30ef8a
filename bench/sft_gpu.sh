#!/usr/bin/env bash
# Benchmark: SFT of a Qwen2-0.5B-shaped student on one GPU, padded batches against true packing.
#
# A model with Qwen2-0.5B's shapes (24 layers, hidden 896, 14 heads / 2 KV heads, MLP 4864,
# vocab 151936, tied embeddings) is built from config (random init: no download), and trained
# for 50 steps at 8k tokens per step through sft.train.main (TRL SFTTrainer, assistant-only
# loss, bf16, the fastest attention installed: flash-attention 3, then 2, then sdpa):
#
#   padded : ~3 rows per step, padded to the longest (random batches)
#   packed : TRL bfd packing, padding-free, one <= 8192-token pack per step
#
# For each it prints tokens/s (the rows' real tokens), MFU, peak GPU memory, the padding fraction
# of the tokens fed and, for packing, how full the packs are.  MFU counts model FLOPs only:
# 6 x (decoder parameters) per token, 6 x n_layers x hidden x sum(l_i^2) for causal attention over
# each sample (padding and cross-sample attention are not useful work), and 6 x vocab x hidden per
# labelled position (TRL's fused LM head scores only those on GPU).  Peak bf16 dense TFLOPS comes
# from the GPU name (H100/H200 989, A100 312, L40S 362, A10G 125, L4 121, RTX 4090 165) or PEAK_TFLOPS.
# Rows: realistic synthetic tool-calling traces (helpers.sftrows) over the demo corpus pages when the
# demo package is installed, else over generated pages; the demo BPE tokenizer is trained on them.
#
# Installs nothing; uses the repository's .venv when present.  The last line is JSON:
#   {"bench": "sft_gpu", "ours": packed tok/s, "baseline": padded tok/s, "ratio": r, "mfu_packed": ...,
#    "mfu_padded": ..., "peak_gb_packed": ..., "peak_gb_padded": ..., "padding_packed": ..., "padding_padded": ...}
#
# Usage: bash bench/sft_gpu.sh [STEPS] [ROWS]        (defaults 50 and 600; env WAYS=padded,packed)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
export STEPS=${1:-50} ROWS=${2:-600} WAYS=${WAYS:-padded,packed}
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec "$PY" - <<'PYEOF'
import json, os, random, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, os.getcwd())
import torch

if not torch.cuda.is_available():
    print("sft_gpu: no CUDA device; nothing to measure", file=sys.stderr)
    print(json.dumps({"bench": "sft_gpu", "skipped": "no CUDA device"}))
    sys.exit(0)

import datasets
import transformers
import pyarrow as pa

transformers.logging.set_verbosity_error()
datasets.disable_progress_bars()

from sft.batching import PaddingCounter, resolve_attn_implementation
from helpers.sftrows import make_rows, write_sft_table
from synth.engine.records import PAGE_SCHEMA
from synth.tokenizer.tokens import train_demo_tokenizer
import sft.train as train

STEPS, ROWS, MAX_LEN = int(os.environ["STEPS"]), int(os.environ["ROWS"]), 8192
QWEN2_05B = {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
             "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936,
             "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
             "tie_word_embeddings": True}
PEAKS = {"H200": 989e12, "H100": 989e12, "H800": 989e12, "A100": 312e12, "A800": 312e12, "L40S": 362e12,
         "A10G": 125e12, "L4": 121e12, "4090": 165e12}


def peak_flops() -> float:
    if os.environ.get("PEAK_TFLOPS"):
        return float(os.environ["PEAK_TFLOPS"]) * 1e12
    name = torch.cuda.get_device_name(0)
    for k, v in PEAKS.items():
        if k in name:
            return v
    return float("nan")


def pages() -> list[dict]:
    try:
        from helpers.sftrows import demo_pages
        return demo_pages()
    except Exception:  # the demo package is optional: generate prose-like pages
        rng = random.Random(0)
        words = [("".join(rng.choice("aeioustrnlmdkpbg") for _ in range(rng.randint(2, 9)))) for _ in range(5000)]
        return [{"page_id": str(i), "title": " ".join(rng.sample(words, 2)).title(),
                 "paragraphs": [" ".join(rng.choice(words) for _ in range(rng.randint(60, 400))) + "."]}
                for i in range(3000)]


class FlopCounter(PaddingCounter):
    """Counts what the model really had to compute: per-sample squared lengths and labelled positions."""

    def __init__(self, collator):
        super().__init__(collator)
        self.sq = 0
        self.labelled = 0
        self.packs = 0

    def __call__(self, examples):
        batch = super().__call__(examples)
        for e in examples:
            lens = e.get("seq_lengths") or [len(e["input_ids"])]
            self.sq += sum(int(n) ** 2 for n in lens)
            self.packs += 1
        self.labelled += int((batch["labels"] != -100).sum())
        return batch


def run(way: str, data: Path, out: Path) -> dict:
    holder = {}

    def counter(collator):
        holder["c"] = FlopCounter(collator)
        return holder["c"]

    extra = (["--batching", "packed", "--packing_strategy", "bfd", "--per_device_train_batch_size", "1"]
             if way == "packed" else ["--batching", "padded", "--per_device_train_batch_size", "3"])
    args = ["--data_dir", str(data), "--output_dir", str(out / way), "--init_config", json.dumps(QWEN2_05B),
            "--chat_template", "tiny", "--attn_implementation", "auto", "--max_length", str(MAX_LEN),
            "--max_steps", str(STEPS), "--learning_rate", "1e-4", "--warmup_steps", "0.05",
            "--lr_scheduler_type", "cosine", "--bf16", "true", "--dtype", "bfloat16", "--activation_checkpointing", "false",
            "--assistant_only_loss", "true", "--eval_fraction", "0", "--logging_steps", "10",
            "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true",
            "--dataloader_num_workers", "0", "--seed", "0", *extra]
    s, t, m = train.parse_args(args)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    rep = train.main(s, t, m, collator_wrapper=counter)
    c = holder["c"]
    runtime = rep["train_runtime_s"]
    d, L, V = QWEN2_05B["hidden_size"], QWEN2_05B["num_hidden_layers"], QWEN2_05B["vocab_size"]
    kv = d // QWEN2_05B["num_attention_heads"] * QWEN2_05B["num_key_value_heads"]
    dec_params = L * (d * d * 2 + d * kv * 2 + 3 * d * QWEN2_05B["intermediate_size"])
    flops = 6 * dec_params * c.real + 6 * L * d * c.sq + 6 * V * d * c.labelled
    mfu = flops / runtime / peak_flops()
    res = {"way": way, "tok_s": round(c.real / runtime, 1), "mfu": round(mfu, 4),
           "peak_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2),
           "padding": round(1 - c.real / c.padded, 4) if c.padded else None,
           "pack_fill": round(c.real / (c.packs * MAX_LEN), 4) if way == "packed" and c.packs else None,
           "attn": rep["attn_implementation"], "final_loss": rep["final_loss"], "tokens": c.real,
           "steps": rep["global_steps"], "wall_s": round(time.time() - t0, 1)}
    print(f"{way:7s} {res['tok_s']:>10.1f} tok/s  MFU {res['mfu']:.1%}  peak {res['peak_gb']} GiB  "
          f"padding {res['padding']:.1%}" + (f"  pack fill {res['pack_fill']:.1%}" if res["pack_fill"] else "")
          + f"  attn {res['attn']}  loss {res['final_loss']}", flush=True)
    return res


print(f"GPU {torch.cuda.get_device_name(0)}, attention {resolve_attn_implementation('auto')}, torch {torch.__version__}, "
      f"transformers {transformers.__version__}", flush=True)
with tempfile.TemporaryDirectory(prefix="hopforge-sft-gpu-") as tmp:
    data = Path(tmp) / "data"
    ps = pages()
    table = pa.Table.from_pylist([dict(p, description=None, aliases=None, wikidata_id=None, categories=None,
                                       url=None, n_chars=sum(map(len, p["paragraphs"]))) for p in ps],
                                 schema=PAGE_SCHEMA)
    train_demo_tokenizer(table, data / "tokenizer")
    write_sft_table(make_rows(ps, ROWS, seed=11, max_hops=5), data / "sft")
    results = {w: run(w, data, Path(tmp) / "runs") for w in os.environ["WAYS"].split(",")}
pk, pd = results.get("packed"), results.get("padded")
out = {"bench": "sft_gpu", "ours": pk and pk["tok_s"], "baseline": pd and pd["tok_s"],
       "ratio": round(pk["tok_s"] / pd["tok_s"], 3) if pk and pd else None}
for w, r in results.items():
    out.update({f"mfu_{w}": r["mfu"], f"peak_gb_{w}": r["peak_gb"], f"padding_{w}": r["padding"]})
if pk:
    out["pack_fill"] = pk["pack_fill"]
print(json.dumps(out))
PYEOF
