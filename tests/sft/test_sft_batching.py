"""Batching: packing only where attention keeps samples apart; recipes and launch commands."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import sft.batching as batching
from sft.batching import decide_batching, packed_attention_isolated, packing_support
from synth.engine.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


def _tiny_model(attn: str):
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model("qwen2", vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                               num_attention_heads=2, num_key_value_heads=1)
    return AutoModelForCausalLM.from_config(cfg, attn_implementation=attn)


def _targs(**kw):
    base = dict(packing=False, padding_free=False, packing_strategy="bfd", train_sampling_strategy="random",
                max_length=100, device=SimpleNamespace(type="cpu"), per_device_train_batch_size=4,
                gradient_accumulation_steps=2)
    return SimpleNamespace(**{**base, **kw})


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_packed_samples_stay_apart(attn):
    assert packing_support(attn)[0]
    assert packed_attention_isolated(_tiny_model(attn))


def test_decide_batching():
    t = _targs()
    assert decide_batching("auto", t, "sdpa")["mode"] == "one row per micro-batch"  # CPU: no mask at all
    assert (t.per_device_train_batch_size, t.gradient_accumulation_steps) == (1, 8) and not t.packing
    t = _targs(device=SimpleNamespace(type="cuda"))
    assert decide_batching("auto", t, "sdpa")["mode"] == "length-grouped"  # correct but dense: not worth it
    assert t.train_sampling_strategy == "group_by_length" and not t.packing
    t = _targs()
    assert decide_batching("auto", t, "flash_attention_2")["mode"] == "packed (bfd)" and t.packing
    t = _targs(packing=True)
    assert decide_batching("auto", t, "sdpa", _tiny_model("sdpa"))["mode"] == "packed (bfd)"
    t = _targs(train_sampling_strategy="group_by_length")
    assert decide_batching("padded", t, "sdpa")["mode"] == "padded" and t.train_sampling_strategy == "random"
    with pytest.raises(InputError):
        decide_batching("sometimes", _targs(), "sdpa")


def test_unsafe_packing_falls_back_to_length_groups(monkeypatch):
    monkeypatch.setattr(batching, "packed_attention_isolated", lambda model: False)
    t = _targs()
    got = decide_batching("packed", t, "sdpa", model=object())
    assert got["mode"] == "length-grouped" and "unsafe" in got["why"]
    assert not t.packing and not t.padding_free and t.train_sampling_strategy == "group_by_length"
    t = _targs()
    assert decide_batching("packed", t, "some_kernel")["mode"] == "length-grouped"


def test_packed_training_on_cpu(tmp_path):
    """TRL's bfd packing over hopforge's pre-tokenized rows: no padding, masks intact."""
    import transformers

    from helpers.sftdata import TEST_INIT, make_dir
    from sft.train import main, parse_args

    transformers.logging.set_verbosity_error()
    d = make_dir(tmp_path / "d", n_rows=10, n_pages=120)
    rep = main(*parse_args(["--config", str(ROOT / "configs/sft/tiny.yaml"), "--data_dir", str(d), "--output_dir",
                            str(tmp_path / "out"), "--init_config", TEST_INIT, "--batching", "packed",
                            "--per_device_train_batch_size", "1", "--max_length", "3072", "--max_steps", "3",
                            "--eval_fraction", "0", "--disable_tqdm", "true"]))
    assert rep["batching"]["mode"] == "packed (bfd)" and rep["padding_fraction"] == 0.0
    assert rep["global_steps"] == 3 and rep["tokens_seen"] > 0
    assert rep["mask"]["tool_tokens_trained"] == 0


RECIPE_MODELS = {"qwen2.5-7b-lora": ("Qwen/Qwen2.5-", "qwen2.5"), "qwen2.5-1.5b-full": ("Qwen/Qwen2.5-", "qwen2.5"),
                 "qwen3-8b-lora": ("Qwen/Qwen3-", "qwen3"), "llama3.1-8b-lora": ("meta-llama/Llama-3.1-", "llama3"),
                 "gemma3-1b-full": ("google/gemma-3-", "gemma3"), "mistral-7b-v0.3-lora": ("mistralai/Mistral-", "mistral")}


@pytest.mark.parametrize("name", ["tiny", *RECIPE_MODELS])
def test_recipes_parse(name):
    from synth.tokenizer.chat_templates import TEMPLATES
    from sft.train import parse_args

    s, t, m = parse_args(["--config", str(ROOT / f"configs/sft/{name}.yaml"), "--output_dir", "/tmp/x",
                          "--bf16", "false"])
    assert t.assistant_only_loss and t.max_length >= 4096
    assert s.chat_template in TEMPLATES  # every recipe names a shipped template
    if name == "tiny":
        assert s.init_config["num_hidden_layers"] == 2 and s.chat_template == "tiny"
    else:
        prefix, template = RECIPE_MODELS[name]
        assert m.model_name_or_path.startswith(prefix) and s.chat_template == template
        assert m.attn_implementation == "flash_attention_2" and t.activation_checkpointing
    if name.endswith("lora"):
        assert m.use_peft and m.lora_r == 64 and 1e-4 <= t.learning_rate <= 2e-4 and s.merge_lora
    if name.endswith("full"):
        assert not m.use_peft and t.learning_rate == 1e-5
    if name.startswith("gemma3"):
        assert t.eos_token == "<end_of_turn>"
    if name.startswith("llama3"):
        assert t.pad_token == "<|finetune_right_pad_id|>"


def test_accelerate_command_and_overrides():
    from sft.train import accelerate_command, overrides_to_args

    cmd = accelerate_command("configs/sft/qwen2.5-7b-lora.yaml", "DIR", "DIR/student", "configs/accelerate/fsdp.yaml",
                             num_processes=16, num_machines=2, machine_rank=1, main_process_ip="10.0.0.1",
                             overrides=["learning_rate=2e-4"], python="python")
    assert cmd[:3] == ["python", "-m", "accelerate.commands.launch"]
    s = " ".join(cmd)
    assert "--config_file configs/accelerate/fsdp.yaml --num_processes 16 --num_machines 2 --machine_rank 1" in s
    assert "--main_process_ip 10.0.0.1" in s and s.endswith("--learning_rate 2e-4")
    assert "-m sft.train --config configs/sft/qwen2.5-7b-lora.yaml --data_dir DIR --output_dir DIR/student" in s
    with pytest.raises(InputError):
        accelerate_command("c", "d", "o", num_machines=2)
    with pytest.raises(InputError):
        overrides_to_args(["novalue"])
    for f in ("ddp", "fsdp", "zero3"):
        import yaml

        conf = yaml.safe_load((ROOT / f"configs/accelerate/{f}.yaml").read_text())
        assert conf["mixed_precision"] == "bf16" and conf["num_processes"] >= 1


def test_parse_tool_calls():
    from synth.teacher.hf import parse_tool_calls

    ok = parse_tool_calls('Let me look.\n<tool_call>\n{"name": "search", "arguments": {"query": "Paris"}}\n</tool_call>'
                          '<tool_call>{"name": "open", "arguments": "{\\"page\\": \\"1\\"}"}</tool_call>', "call_2")
    assert ok["content"] == "Let me look."
    assert [c["function"]["name"] for c in ok["tool_calls"]] == ["search", "open"]
    assert json.loads(ok["tool_calls"][0]["function"]["arguments"]) == {"query": "Paris"}
    assert ok["tool_calls"][1]["function"]["arguments"] == '{"page": "1"}' and ok["tool_calls"][1]["id"] == "call_2_1"
    assert parse_tool_calls("<answer>Paris</answer>") == {"role": "assistant", "content": "<answer>Paris</answer>"}
    for bad in ['<tool_call>{"name": "search", "arguments": {"query": </tool_call>',  # broken JSON
                '<tool_call>{"arguments": {}}</tool_call>',  # no name
                '<tool_call>{"name": "search", "arguments": [1]}</tool_call>',  # arguments not an object
                '<tool_call>{"name": "search", "arguments": {}}']:  # never closed
        got = parse_tool_calls(bad)
        assert got == {"role": "assistant", "content": bad}, bad
