"""The ``preference`` table: DPO pairs from the rollouts the filter already has, in TRL's format, which
``datasets`` loads and TRL's ``DPOTrainer`` trains on (one step of a tiny student)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from filters.bestofn import Candidate
from filters.preference import LOWER_RUBRIC, WRONG_ANSWER, Loser, pair
from helpers.filterstore import config, make_store, stages
from helpers.traces import call, make_question, make_trace
from synth.engine.records import PREFERENCE_SCHEMA
from synth.engine.runner import run_stage


def test_pairs_prefer_a_wrong_answer_then_a_lower_rubric() -> None:
    kept = [Candidate("a1", "qa", 4, 0.9), Candidate("b1", "qb", 4, 0.9), Candidate("c1", "qc", 4, 0.5)]
    wrong = [Loser("qa", 3, "a-w3"), Loser("qa", 1, "a-w1")]
    losers = [Candidate("a2", "qa", 4, 0.1), Candidate("b2", "qb", 4, 0.4), Candidate("b3", "qb", 4, 0.2),
              Candidate("c2", "qc", 4, 0.5)]  # c2's rubric is no lower than c1's: no pair
    p = pair(kept, wrong, losers)
    assert p.pairs == {"a1": ("a-w1", WRONG_ANSWER), "b1": ("b3", LOWER_RUBRIC)}
    assert p.without_rejected == 1
    assert pair(reversed(kept), reversed(wrong), reversed(losers)).pairs == p.pairs  # order-free


# Reads only Bravo Harbour of the two bridge entities: a lower rubric than the default calls.
PARTIAL = [call("search", query="Alpha Station"), call("open", page="p1"), call("search", query="Delta"),
           call("search", query="Delta City", k=3), call("open", page="p3", offset=2000)]
# make_trace's observations are placeholders, so the question names what the default calls act on (grounded).
GROUNDED = "Start at Alpha Station; its page p1 leads to p2 and p3, and on to Delta City. Which city?"


def trace(*args, **kw):
    return make_trace(*args, question=GROUNDED, **kw)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Three sft questions: q1 answered wrong once then right; q2 right twice (the second names fewer bridge
    entities, so it loses best-of-n); q3 right once.  Plus an rl question, whose traces are never paired."""
    root = tmp_path_factory.mktemp("pref") / "run"
    qs = [make_question(q) for q in ("q1", "q2", "q3")] + [make_question("q4", split="rl")]
    mention_all = ["Searching Alpha Station.", "Bravo Harbour next.", "Charlie (planet) it is.", "Delta City."]
    traces = [
        trace("t1w", "q1", sample_index=0, answer="Echo Town", thoughts=mention_all),
        trace("t1r", "q1", sample_index=1, thoughts=mention_all),
        trace("t2a", "q2", sample_index=0, thoughts=mention_all),
        trace("t2b", "q2", sample_index=1, calls=PARTIAL),
        trace("t3", "q3", sample_index=0, thoughts=mention_all),
        trace("t4w", "q4", sample_index=0, answer="Echo Town", split="rl"),
        trace("t4r", "q4", sample_index=1, split="rl"),
    ]
    store = make_store(root, qs, traces)
    filt, _ = stages()
    run_stage(filt, config(max_tokens=100_000, keep_per_question=1), store)
    return store, {t.trace_id: t for t in traces}


def test_each_kept_trace_is_paired_with_another_rollout_of_its_question(run) -> None:
    store, traces = run
    t = ds.dataset(store.path("preference")).to_table()
    assert t.schema.equals(PREFERENCE_SCHEMA)
    rows = {r["question_id"]: r for r in t.to_pylist()}
    assert set(rows) == {"q1", "q2"}  # q3 has no other rollout; q4 is no sft question
    q1, q2 = rows["q1"], rows["q2"]
    assert (q1["chosen_trace_id"], q1["rejected_trace_id"], q1["rejected_reason"]) == ("t1r", "t1w", "wrong_answer")
    assert q1["rejected_answer"] == "Echo Town" and q1["rejected_rubric"] is None
    assert (q2["chosen_trace_id"], q2["rejected_trace_id"], q2["rejected_reason"]) == ("t2a", "t2b", "lower_rubric")
    assert q2["rejected_rubric"] < q2["chosen_rubric"]
    sft = {r["trace_id"]: r for r in ds.dataset(store.path("sft")).to_table().to_pylist()}
    for r in rows.values():
        # chosen is the kept SFT row after its prompt; the prompt is the system and user messages
        row = sft[r["chosen_trace_id"]]
        assert r["prompt"] + r["chosen"] == row["messages"] and [m["role"] for m in r["prompt"]] == ["system", "user"]
        assert r["chosen"][0]["role"] == "assistant" and r["rejected"][0]["role"] == "assistant"
        assert r["rejected"][-1]["content"] != r["chosen"][-1]["content"] or r["rejected_reason"] == "lower_rubric"
        assert json.loads(r["tools"]) == json.loads(row["tools"])
    report = json.loads((store.root / "reports" / "filter.json").read_text())["preference"]
    assert report == {"pairs": 2, "by_rejected": {"wrong_answer": 1, "lower_rubric": 1}, "without_rejected": 1,
                      "prompt_mismatch": 0}


def test_the_table_loads_with_datasets_and_trains_one_dpo_step(run, tmp_path) -> None:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    from helpers.sftdata import TEST_INIT
    from sft.rows import sft_files
    from sft.train import build_model

    store, _ = run
    data = Dataset.from_parquet(sft_files(store.path("preference")), cache_dir=str(tmp_path / "cache"))
    assert data.column_names[:4] == ["prompt", "chosen", "rejected", "tools"] and len(data) == 2
    tok = AutoTokenizer.from_pretrained(str(store.path("tokenizer")))
    model = build_model(json.loads(TEST_INIT), tok, "sdpa", seed=0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    args = DPOConfig(output_dir=str(tmp_path / "dpo"), max_steps=1, per_device_train_batch_size=2, learning_rate=1e-3,
                     report_to="none", logging_steps=1, save_strategy="no", bf16=False, use_cpu=True, max_length=None,
                     dataloader_num_workers=0, disable_tqdm=True)
    # The reference is a frozen copy (a model built from a config has no path TRL could load one from).
    trainer = DPOTrainer(model=model, ref_model=copy.deepcopy(model), args=args, train_dataset=data,
                         processing_class=tok)
    result = trainer.train()
    assert result.global_step == 1
    log = next(e for e in trainer.state.log_history if "loss" in e)
    assert torch.isfinite(torch.tensor(log["loss"]))
    assert any(not torch.equal(before[n], p.detach()) for n, p in trainer.model.named_parameters())
