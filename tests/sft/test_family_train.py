"""A Llama-3-style student trains on CPU through TRL with the shipped ``llama3`` template, and with the same
template stripped of its markers (masks derived from prefix renders); eos and end-of-turn follow the template
unless the recipe names an eos."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.familytok import family_tokenizer
from synth.tokenizer.chat_templates import load_template

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "sft" / "tiny.yaml"
LLAMA_INIT = ('{"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, '
              '"num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 4096, '
              '"tie_word_embeddings": true}')


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A hopforge DIR whose pinned tokenizer is Llama-3-style (eos ``<|end_of_text|>``, turns end ``<|eot_id|>``)."""
    import transformers

    from helpers.sftdata import pages
    from helpers.sftrows import make_rows, write_sft_table

    transformers.logging.set_verbosity_error()
    d = tmp_path_factory.mktemp("llama")
    family_tokenizer("llama3").save_pretrained(str(d / "tokenizer"))
    write_sft_table(make_rows(pages(120), 10, seed=4, max_hops=1, page_chars=300), d / "sft")
    return d


def _args(d: Path, out: Path, *extra: str):
    from sft.train import parse_args

    return parse_args(["--config", str(TINY), "--data_dir", str(d), "--output_dir", str(out),
                       "--init_config", LLAMA_INIT, "--chat_template", "llama3", "--max_length", "4096",
                       "--max_steps", "2", "--per_device_train_batch_size", "1", "--learning_rate", "5e-3",
                       "--eval_fraction", "0", "--disable_tqdm", "true", *extra])


def test_llama3_student_trains_with_the_shipped_template(data_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sft.train import main

    rep = main(*_args(data_dir, tmp_path / "out"))
    assert rep["template"] == "llama3" and len(rep["loss"]) == 2
    assert all(p["loss"] == p["loss"] for p in rep["loss"])  # finite
    mask = json.loads((tmp_path / "out" / "mask_report.json").read_text())
    assert mask["ok"] and mask["eot_token"] == "<|eot_id|>" and mask["mask_source"] == "generation markers"
    assert mask["tool_tokens_trained"] == 0 and mask["eot_untrained_turns"] == 0 and mask["rows_missing_tools"] == 0
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "out"))
    assert tok.eos_token == "<|eot_id|>"  # generation stops where a turn ends, not at <|end_of_text|>
    assert tok.chat_template == load_template("llama3")
    model = AutoModelForCausalLM.from_pretrained(str(tmp_path / "out"))
    eot_id = tok.convert_tokens_to_ids("<|eot_id|>")
    assert model.config.eos_token_id == eot_id
    gen_eos = model.generation_config.eos_token_id
    assert eot_id in (gen_eos if isinstance(gen_eos, list) else [gen_eos])


def test_a_template_without_markers_trains_on_derived_masks(data_dir, tmp_path):
    from trl import SFTTrainer

    from sft.train import build_model, prepare

    bare = tmp_path / "llama3_bare.jinja"
    bare.write_text(load_template("llama3").replace("{%- generation %}", "").replace("{%- endgeneration %}", ""))
    s, t, m = _args(data_dir, tmp_path / "bare", "--chat_template", str(bare))
    prep = prepare(s, t, m)
    assert prep.mask_report["ok"] and prep.mask_report["mask_source"] == "prefix renders"
    assert t.assistant_only_loss and not prep.assistant_only_loss  # prepare leaves its arguments alone
    prep.configure(t)
    assert not t.assistant_only_loss  # TRL must not swap in a template of its own; the masks are in the column
    marked = prepare(*_args(data_dir, tmp_path / "marked"))
    assert prep.train["assistant_masks"] == marked.train["assistant_masks"]  # same masks, either way

    tok = prep.tokenizer
    trainer = SFTTrainer(model=build_model(json.loads(LLAMA_INIT), tok, "sdpa", 0), args=t,
                         train_dataset=prep.train, processing_class=tok)
    eot_id = tok.convert_tokens_to_ids("<|eot_id|>")
    for ex, masks in zip(trainer.train_dataset, prep.train["assistant_masks"]):
        assert [lab != -100 for lab in ex["labels"]] == [bool(x) for x in masks]  # TRL trains exactly the derived mask
        trained = [i for i, lab in zip(ex["input_ids"], ex["labels"]) if lab != -100]
        assert '"snippet"' not in tok.decode(trained) and eot_id in trained
    result = trainer.train()
    assert result.global_step == 2


def test_recipe_eos_is_honoured_and_gemma_auto_resolves(data_dir, tmp_path):
    from sft.train import prepare

    s, t, m = _args(data_dir, tmp_path / "eos", "--eos_token", "<|end_of_text|>")
    prep = prepare(s, t, m)
    prep.configure(t)
    assert prep.tokenizer.eos_token == "<|end_of_text|>" and t.eos_token == "<|end_of_text|>"
    assert prep.eot == "<|eot_id|>" and prep.mask_report["eot_untrained_turns"] == 0

    # A Gemma tokenizer whose own template has no markers: auto picks the shipped gemma3 template, and the
    # end of turn is <end_of_turn>, whatever the eos (<eos>).
    gemma = tmp_path / "gemma"
    own = load_template("gemma3").replace("{%- generation %}", "").replace("{%- endgeneration %}", "")
    family_tokenizer("gemma3", own).save_pretrained(str(gemma))
    s, t, m = _args(data_dir, tmp_path / "gemma_out", "--tokenizer_path", str(gemma), "--chat_template", "auto")
    prep = prepare(s, t, m)
    assert t.eos_token is None  # untouched until configured
    prep.configure(t)
    assert prep.template_name == "gemma3" and prep.eot == "<end_of_turn>"
    assert prep.tokenizer.eos_token == "<end_of_turn>" and t.eos_token == "<end_of_turn>"
    assert prep.mask_report["ok"] and prep.mask_report["tool_tokens_trained"] == 0
