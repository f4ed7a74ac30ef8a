"""On a CUDA GPU: bf16 training with packing and the fastest attention installed (skipped without CUDA)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
ROOT = Path(__file__).resolve().parents[2]


def test_packed_bf16_training_on_gpu(tmp_path):
    import transformers

    from helpers.sftdata import TEST_INIT, make_dir
    from sft.batching import packed_attention_isolated, resolve_attn_implementation
    from sft.train import build_model, main, parse_args

    transformers.logging.set_verbosity_error()
    attn = resolve_attn_implementation("auto")
    d = make_dir(tmp_path / "d", n_rows=16, n_pages=120)
    rep = main(*parse_args(["--config", str(ROOT / "configs/sft/tiny.yaml"), "--data_dir", str(d), "--output_dir",
                            str(tmp_path / "out"), "--init_config", TEST_INIT, "--batching", "packed",
                            "--attn_implementation", "auto", "--bf16", "true", "--dtype", "bfloat16",
                            "--per_device_train_batch_size", "1", "--max_length", "4096", "--max_steps", "8",
                            "--eval_fraction", "0", "--disable_tqdm", "true"]))
    assert rep["attn_implementation"] == attn and rep["batching"]["mode"] == "packed (bfd)"
    assert rep["padding_fraction"] == 0.0 and rep["mask"]["tool_tokens_trained"] == 0
    losses = [p["loss"] for p in rep["loss"]]
    assert all(x == x for x in losses) and losses[-1] < losses[0]
    if "flash" not in attn:  # sdpa on GPU: check the block-diagonal mask on the device too
        from synth.tokenizer.tokens import load_tokenizer
        import json

        model = build_model(json.loads(TEST_INIT), load_tokenizer(d), attn, 0, "bfloat16").cuda()
        assert packed_attention_isolated(model)
