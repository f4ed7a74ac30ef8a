"""`hopforge eval`: the tiny student in the same rollout harness, end to end (accuracy near zero is
expected; the harness is what is tested)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flows.config import load_config
from synth.corpus.demo import build_demo_corpus
from flows.stages import PIPELINE
from synth.engine.store import Store

ROOT = Path(__file__).resolve().parents[2]
# Routed walks (questions.route): most 3-hop walks then get a question.
SMALL = ["walk.num_walks=100", "walk.hops=3", "questions.route=true", "expand.num_subgraphs=0", "rollout.n=2", "assemble.lengths=[2048]",
         "sft.overrides=[max_steps=4, eval_fraction=0.3]", "eval.max_turns=3",
         "eval.max_new_tokens=24", "filters.min_tool_calls=2", "questions.splits={sft: 0.6, rl: 0.1, eval: 0.3}"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("eval")
    src = out / "demo.jsonl"
    build_demo_corpus(src)
    cfg = load_config(ROOT / "configs/demo.yaml", SMALL + [f"corpus.source={src}"])
    outcomes = PIPELINE.run(PIPELINE, cfg, Store(out))
    assert [o.name for o in outcomes][-3:] == ["sft", "eval", "rl_band"]
    return out, cfg


def _check_metrics(m, n_turns_max):
    assert 0 <= m["answer_rate"] <= 1 and 0 <= m["accuracy"] <= m["answer_rate"]
    erf = m["erf"]["fraction"]
    assert erf == sorted(erf) and len(erf) == n_turns_max + 1 and erf[-1] == m["recovered"]


def test_eval_stage_writes_student_and_teacher_numbers(trained):
    out, cfg = trained
    import pyarrow.dataset as ds

    report = json.loads((out / "eval" / "eval_report.json").read_text())
    questions = ds.dataset(out / "questions").to_table(columns=["question_id", "split"]).to_pylist()
    held = {q["question_id"] for q in questions if q["split"] == "eval"}
    assert report["held_out_questions"] == len(held) > 0
    # The eval questions never reached a training table.
    sft_ids = set(ds.dataset(out / "sft").to_table(columns=["question_id"])["question_id"].to_pylist())
    trained_on = json.loads((out / "student" / "train_report.json").read_text())
    assert not held & sft_ids and sft_ids and not held & set(trained_on.get("held_out_question_ids") or [])
    student, teacher = report["student"], report["teacher"]
    assert student["questions"] == report["evaluated_questions"] == teacher["questions"]
    assert student["traces"] == report["evaluated_questions"] * cfg.eval.n
    t_max = len(student["erf"]["t"]) - 1
    _check_metrics(student, t_max)
    _check_metrics(teacher, t_max)
    # Every student turn was seen by the truncation count; a trajectory that ended cut was counted there.
    cut = student["truncation"]
    assert cut["max_new_tokens"] == cfg.eval.max_new_tokens
    assert 0 <= student["truncated_traces"] <= cut["cut_turns"] <= cut["turns"]
    assert sum(student["stop_reasons"].values()) == student["traces"]
    assert teacher["answer_rate"] > 0.5 and teacher["format_valid_tool_call_rate"] > 0.9
    # The student's trajectories went through the real harness: valid traces with the budget respected.
    import pyarrow.parquet as pq

    traces = pq.read_table(out / "eval" / "traces.parquet").to_pylist()
    assert cut["turns"] == sum(t["n_turns"] for t in traces)
    assert {t["question_id"] for t in traces} <= set(held)
    for t in traces:
        msgs = json.loads(t["messages"])
        assert msgs[0]["role"] == "system" and msgs[1]["role"] == "user" and 1 <= t["n_turns"] <= cfg.eval.max_turns
        assert t["teacher_model"].startswith(str(out / "student")) or "student" in t["teacher_model"]


def test_eval_cli_on_a_checkpoint(trained):
    out, _ = trained
    r = subprocess.run([sys.executable, "-m", "flows.cli", "eval", "--out", str(out), "--model", str(out / "student"),
                        "--set", f"corpus.source={out / 'demo.jsonl'}", "--set", "eval.max_turns=2",
                        "--set", "eval.max_new_tokens=16", "--set", "eval.max_questions=2"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((out / "evals" / "student" / "eval_report.json").read_text())
    assert report["evaluated_questions"] == 2 and report["student"]["traces"] == 2


def test_eval_refuses_a_folder_that_is_not_a_checkpoint(tmp_path, trained):
    out, _ = trained
    r = subprocess.run([sys.executable, "-m", "flows.cli", "eval", "--out", str(out), "--model", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "not a transformers checkpoint" in r.stderr + r.stdout


def test_turn_counter_counts_turns_cut_at_the_budget():
    from sft.evaluate import TurnCounter
    from synth.teacher.types import ChatResponse

    def turn(finish, used):
        return ChatResponse({"role": "assistant", "content": "x"}, {"prompt_tokens": 9, "completion_tokens": used},
                            finish)

    c = TurnCounter(512)
    assert c.report() == {"max_new_tokens": 512, "turns": 0, "cut_turns": 0, "cut_rate": None}
    for resp in (turn("stop", 40), turn("tool_calls", 80), turn("stop", 512),  # ended on a stop: not cut
                 turn("length", 512), turn("length", 3),  # the server says so
                 turn("tool_calls", 512), turn(None, 600)):  # the whole budget used without a stop (hf)
        c.note(resp)
    assert c.report() == {"max_new_tokens": 512, "turns": 7, "cut_turns": 4, "cut_rate": round(4 / 7, 4)}


def test_eval_default_budget_fits_a_tool_call_or_an_answer():
    from sft.config import EvalConfig

    assert EvalConfig().max_new_tokens >= 512
