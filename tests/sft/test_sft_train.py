"""End to end on CPU: the tiny recipe trains on realistic tool-calling rows through TRL, with checked
masks, dropped (not truncated) long rows, a held-out question split, and a checkpoint that reloads,
generates, and serves as a ``teacher.backend: hf`` model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from helpers.sftrows import SYSTEM_PROMPT
from synth.engine.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "sft" / "tiny.yaml"


def _long_row() -> dict:
    """A trace with one huge observation: longer than max_length, so it must be dropped whole."""
    big = json.dumps({"page_id": "1", "title": "Long", "text": "harbour lighthouse keeper " * 900})
    calls = [{"id": "c0", "type": "function", "function": {"name": "open", "arguments": json.dumps({"page": "Long"})}}]
    msgs = [{"role": "system", "content": SYSTEM_PROMPT, "tool_calls": None, "tool_call_id": None, "name": None},
            {"role": "user", "content": "What is long?", "tool_calls": None, "tool_call_id": None, "name": None},
            {"role": "assistant", "content": None, "tool_calls": calls, "tool_call_id": None, "name": None},
            {"role": "tool", "content": big, "tool_calls": None, "tool_call_id": "c0", "name": "open"},
            {"role": "assistant", "content": "<answer>Long</answer>", "tool_calls": None, "tool_call_id": None,
             "name": None}]
    from synth.tools.schema import tool_schemas_json

    return {"messages": msgs, "tools": tool_schemas_json(), "question_id": "q-long", "trace_id": "q-long-t0",
            "rubric": 1.0, "n_tool_calls": 1, "teacher_model": "synthetic", "split": "sft"}


def _args(d: Path, out: Path, *extra: str):
    from helpers.sftdata import TEST_INIT
    from sft.train import parse_args

    return parse_args(["--config", str(TINY), "--data_dir", str(d), "--output_dir", str(out),
                       "--init_config", TEST_INIT, "--max_length", "3072", "--max_steps", "12",
                       "--per_device_train_batch_size", "2", "--learning_rate", "5e-3", "--eval_fraction", "0.15",
                       "--disable_tqdm", "true", *extra])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    import transformers

    from helpers.sftdata import make_dir
    from sft.train import main

    transformers.logging.set_verbosity_error()
    d = make_dir(tmp_path_factory.mktemp("sft"), n_rows=24, extra_rows=[_long_row()])
    out = d / "student"
    return d, out, main(*_args(d, out))


def test_loss_decreases_and_funnel_adds_up(run):
    _, out, rep = run
    losses = [p["loss"] for p in rep["loss"]]
    assert len(losses) == 12
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.3, losses
    f = rep["funnel"]
    assert f["input"] == 25 and f["dropped"]["too_long"] == 1  # the long row: dropped, not truncated
    assert f["output"] + sum(f["dropped"].values()) == f["input"]
    assert f["dropped"]["held_out"] >= 1 and rep["held_out_question_ids"]
    assert rep["eval_loss"] is not None and rep["tokens_per_second"] > 0
    assert rep["batching"]["mode"] == "one row per micro-batch" and rep["padding_fraction"] == 0.0
    assert 0 < rep["trained_token_fraction"] < 0.5
    saved = json.loads((out / "train_report.json").read_text())
    assert saved["held_out_question_ids"] == rep["held_out_question_ids"]
    assert (out / "loss.png").stat().st_size > 1000


def test_masks_reported_exact(run):
    _, out, rep = run
    mask = json.loads((out / "mask_report.json").read_text())
    assert mask["tool_tokens_trained"] == 0 and mask["eot_untrained_turns"] == 0
    assert mask["prompt_tokens_trained"] == 0 and mask["too_long"] == 1
    assert mask["trained_tokens"] > 0 and mask["masked_tokens"] > mask["trained_tokens"]


def test_trained_labels_match_the_checked_masks(run):
    """What TRL trains on is exactly the checked mask: tool tokens -100, every <|im_end|> of the agent trained."""
    from trl import SFTConfig, SFTTrainer

    from sft.train import build_model, prepare

    d, out, _ = run
    s, t, m = _args(d, out / "probe", "--eval_fraction", "0")
    prep = prepare(s, t, m)
    tok = prep.tokenizer
    cfg = SFTConfig(output_dir=str(out / "probe"), assistant_only_loss=True, max_length=3072, report_to="none",
                    bf16=False, activation_checkpointing=False)
    model = build_model(json.loads(s.init_config), tok, "sdpa", 0)
    trainer = SFTTrainer(model=model, args=cfg, train_dataset=prep.train, processing_class=tok)
    eot = tok.convert_tokens_to_ids("<|im_end|>")
    start = tok.convert_tokens_to_ids("<|im_start|>")
    for ex in trainer.train_dataset:
        ids, labels = ex["input_ids"], ex["labels"]
        text_trained = tok.decode([i for i, lab in zip(ids, labels) if lab != -100])
        assert '"snippet"' not in text_trained and SYSTEM_PROMPT[:40] not in text_trained
        # every <|im_end|> that closes an assistant turn is trained; the others are not
        for k, i in enumerate(ids):
            if i == eot:
                opener = max(j for j in range(k) if ids[j] == start)
                role = tok.decode(ids[opener + 1:opener + 6])
                assert (labels[k] != -100) == role.startswith("assistant"), (k, role)


def test_checkpoint_reloads_and_generates(run):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _, out, _ = run
    model = AutoModelForCausalLM.from_pretrained(str(out))
    tok = AutoTokenizer.from_pretrained(str(out))
    assert "{%- generation %}" in tok.chat_template  # the training template travels with the checkpoint
    prompt = tok.apply_chat_template([{"role": "user", "content": "Who founded Hilton Hotels?"}],
                                     add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        gen = model.generate(**prompt, max_new_tokens=8, do_sample=False)
    assert gen.shape[1] > prompt["input_ids"].shape[1]


def test_hf_teacher_backend_serves_the_checkpoint(run):
    from synth.teacher.hf import HFChatModel
    from synth.tools.schema import TOOL_SCHEMAS

    _, out, _ = run
    m = HFChatModel(out, max_new_tokens=12)
    msgs = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "Who founded Hilton Hotels?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c0", "type": "function", "function": {"name": "search", "arguments": '{"query": "Hilton"}'}}]},
            {"role": "tool", "content": '[{"page_id": "1", "title": "Conrad Hilton"}]', "tool_call_id": "c0",
             "name": "search"}]
    r1 = asyncio.run(m.chat(msgs, TOOL_SCHEMAS, sample_index=0))
    r2 = asyncio.run(m.chat(msgs, TOOL_SCHEMAS, sample_index=0))
    assert r1.message == r2.message and r1.model.startswith("hf:")
    assert r1.usage["prompt_tokens"] > 100 and 0 < r1.usage["completion_tokens"] <= 12
    assert r1.finish_reason in ("stop", "length", "tool_calls")
    asyncio.run(m.aclose())

    # Registered as `teacher.backend: hf` (TeacherConfig's Literal does not list it yet: build it unvalidated).
    from synth.teacher.client import make_backend, register_backend
    from synth.teacher.config import TeacherConfig

    register_backend("hf", "synth.teacher.hf:make_hf")
    cfg = TeacherConfig.model_construct(**{**TeacherConfig().model_dump(), "backend": "hf", "model": str(out),
                                           "temperature": 1.0, "max_tokens": 6})
    sampled = make_backend(cfg, seed=3)
    s1 = asyncio.run(sampled.chat(msgs, TOOL_SCHEMAS, sample_index=1))
    s2 = asyncio.run(sampled.chat(msgs, TOOL_SCHEMAS, sample_index=1))
    assert s1.message == s2.message and s1.usage["completion_tokens"] <= 6  # seeded by sample_index


def test_missing_table_and_bad_recipe_exit_2(tmp_path):
    from typer.testing import CliRunner

    from flows.cli import app

    res = CliRunner().invoke(app, ["sft", "--config", str(TINY), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "error" in res.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("no_such_key: 1\n")
    res = CliRunner().invoke(app, ["sft", "--config", str(bad), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "no_such_key" in res.output


def test_validate_only_fails_on_a_template_that_trains_nothing(run, tmp_path):
    from synth.tokenizer.chat_templates import load_template
    from sft.train import main

    d, _, _ = run
    empty = tmp_path / "empty.jinja"  # markers around nothing: the template claims masks and gives none
    empty.write_text(load_template("tiny").replace("{%- generation %}", "{%- generation %}{%- endgeneration %}", 1)
                     .replace("{%- endgeneration %}\n        {{- '\\n' }}", "{{- '\\n' }}"))
    with pytest.raises(InputError, match="trace_id=.*no token is trained"):
        main(*_args(d, tmp_path / "o", "--chat_template", str(empty), "--validate_only", "true"))
    report = json.loads((tmp_path / "o" / "mask_report.json").read_text())
    assert report["ok"] is False and report["rows_without_trained_tokens"] == report["rows_checked"]


def test_student_stage_funnel(run):
    from helpers.sftdata import TEST_INIT
    from sft.stage import recipe_identity, run_sft
    from flows.config import Config
    from synth.engine.stage import Stage, StageContext
    from synth.engine.store import Store

    d, _, _ = run
    overrides = [f"init_config={TEST_INIT}", "max_steps=2", "max_length=3072", "eval_fraction=0.15",
                 "disable_tqdm=true"]

    cfg = Config()
    cfg.sft.overrides = overrides
    from flows.stages import SFT

    ctx = StageContext(Stage(name="student", entry=run_sft, sections=SFT.sections, outputs=("student",)), cfg,
                       Store(d), "k", progress=False)
    res = run_sft(ctx)
    res.check("student")
    assert res.input == 25 and res.dropped["too_long"] == 1 and res.dropped["held_out"] >= 1
    assert res.extra["mask"] == {"tool_tokens_trained": 0, "eot_untrained_turns": 0}
    assert (ctx.staging / "student" / "model.safetensors").exists()
    assert recipe_identity(cfg) == recipe_identity(cfg) != recipe_identity(Config())


def test_lora_on_a_pretrained_checkpoint_is_merged(run, tmp_path):
    """The real-model path: model_name_or_path (here the tiny student), LoRA through peft, merged at save."""
    import torch
    from transformers import AutoModelForCausalLM

    from sft.train import main, parse_args

    d, out, _ = run
    rep = main(*parse_args(["--config", str(TINY), "--data_dir", str(d), "--output_dir", str(tmp_path / "lora"),
                            "--init_config", "", "--model_name_or_path", str(out), "--chat_template", "auto",
                            "--use_peft", "true", "--lora_r", "4", "--lora_alpha", "8",
                            "--lora_target_modules", "q_proj", "v_proj", "--learning_rate", "1e-2",
                            "--max_steps", "2", "--max_length", "3072", "--eval_fraction", "0",
                            "--disable_tqdm", "true"]))
    assert rep["checkpoint"]["kind"] == "merged_lora" and rep["trainable_parameters"] < rep["parameters"] / 5
    assert rep["template"] == "tokenizer"  # the student's own template already has the markers
    merged = AutoModelForCausalLM.from_pretrained(str(tmp_path / "lora"))
    base = AutoModelForCausalLM.from_pretrained(str(out))
    assert not any("lora" in k for k in merged.state_dict())
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(merged.state_dict()[q], base.state_dict()[q])  # the adapter was merged in


def _validate(d: Path, out: Path) -> dict:
    from sft.train import main

    main(*_args(d, out, "--validate_only", "true"))
    return json.loads((out / "mask_report.json").read_text())


def test_rows_counted_by_the_filter_are_not_counted_again(run, tmp_path, monkeypatch):
    """The token counts the length filter cached (same tokenizer, same template) are the sft stage's lengths:
    a row they put over max_length is dropped without being tokenized, and the figures are those of a stage
    that tokenizes every row, which records its exact lengths for the next stage in turn."""
    import shutil

    import pyarrow.dataset as ds
    import trl.data_utils

    from sft.rows import parse_tools
    from synth.tokenizer.chat_templates import load_template
    from synth.tokenizer.counts import TokenCounts, conversation_digest
    from synth.tokenizer.tokens import load_tokenizer

    d, _, _ = run
    rows = ds.dataset(d / "sft", format="parquet").to_table(columns=["messages", "tools"]).to_pylist()
    items = [(r["messages"], parse_tools(r["tools"])) for r in rows]
    tok = load_tokenizer(d / "tokenizer")
    tok.chat_template = load_template("tiny")  # the recipe's training template
    exact = [len(tok.apply_chat_template(m, tools=t, tokenize=True, return_dict=True)["input_ids"]) for m, t in items]
    too_long = sum(n > 3072 for n in exact)
    assert too_long >= 1 and len(rows) - too_long >= 20

    # Without a cache: every row is tokenized, and its exact length recorded.
    cold = shutil.copytree(d, tmp_path / "cold", ignore=shutil.ignore_patterns(".cache", "student", "runs"))
    report = _validate(cold, tmp_path / "o1")
    assert report["token_counts"] == {"cached": 0, "recorded": len(rows)}
    recorded = TokenCounts(tok, cold)
    assert recorded.known([conversation_digest(m, t) for m, t in items]) == exact

    # The filter's way: counted in a batch, cached under the same tokenizer and template.
    warm = shutil.copytree(d, tmp_path / "warm", ignore=shutil.ignore_patterns(".cache", "student", "runs"))
    counts = TokenCounts(tok, warm)
    assert counts.count(items) == exact
    counts.flush()
    calls = []
    real = trl.data_utils._tokenize
    monkeypatch.setattr(trl.data_utils, "_tokenize", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = _validate(warm, tmp_path / "o2")
    assert len(calls) == len(rows) - too_long  # the long rows were dropped on their cached count
    assert again["token_counts"] == {"cached": len(rows), "recorded": 0}
    same = {k: v for k, v in report.items() if k != "token_counts"}
    assert {k: v for k, v in again.items() if k != "token_counts"} == same and same["too_long"] == too_long
