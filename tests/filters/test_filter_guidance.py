"""ACTGUIDE-RL's guidance and each rl_pool row's reference rollout, through the production filter stage.

The band here is the teacher's (the stage's default), so a question the teacher never answered has no
correct rollout to guide it by: it stays out and is counted.  A band measured on another model (the
student) can call a question all-wrong that the teacher did answer; ``filters.pool.write_rl_pool`` takes the band
counts as data, so the last test hands it such counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from filters.guidance import Reference
from helpers.filterstore import config, make_store, stages
from helpers.traces import call, make_question, make_trace
from synth.engine.runner import run_stage

GROUNDED = "Start at Alpha Station; its page p1 leads to p2 and p3, and on to Delta City. Which city?"
GOOD = [call("search", query="Alpha Station"), call("open", page="p1"), call("find", page="p2", text="Delta"),
        call("search", query="Delta City")]


def _run(root: Path, guidance: bool):
    questions = [make_question(q, split="rl") for q in ("q1", "q2", "q3")]
    traces = [
        # q1: two correct rollouts; t1a is shorter but acts on nothing it was shown (fails the chain), t1b is clean
        make_trace("t1a", "q1", sample_index=0, calls=GOOD[:3], split="rl"),
        make_trace("t1b", "q1", sample_index=1, calls=GOOD, question=GROUNDED, split="rl"),
        make_trace("t1c", "q1", sample_index=2, answer="Echo Town", split="rl"),
        # q2: never answered by the teacher
        make_trace("t2a", "q2", answer="Echo Town", split="rl"),
        make_trace("t2b", "q2", sample_index=1, answer="Foxtrot", split="rl"),
        # q3: always answered
        make_trace("t3a", "q3", calls=GOOD, question=GROUNDED, split="rl"),
    ]
    store = make_store(root, questions, traces)
    cfg = config()
    cfg.rl.guidance = guidance
    cfg.runner.allow_empty = True  # every question is an rl one, so `sft` is empty; rl_pool is what is looked at
    filt, _ = stages()
    outcome = run_stage(filt, cfg, store)
    rows = ds.dataset(store.root / "rl_pool").to_table().to_pylist()
    return outcome.report, {r["extra_info"]["question_id"]: r for r in rows}, {t.trace_id: t for t in traces}


GUIDED_ROOT: list[Path] = []


@pytest.fixture(scope="module")
def guided(tmp_path_factory):
    root = tmp_path_factory.mktemp("guided") / "run"
    GUIDED_ROOT[:] = [root]
    return _run(root, True)


def test_band_rows_name_their_best_correct_rollout_and_carry_its_labels(guided) -> None:
    report, rows, traces = guided
    assert set(rows) == {"q1"}  # q2 is all-wrong with nothing to guide it by; q3 is all-right
    info = rows["q1"]["extra_info"]
    # t1a is correct too, with fewer tool calls, but t1b passed the whole chain: the cleaner demonstration wins
    assert info["reference_trace_id"] == "t1b"
    assert [lab["turn"] for lab in info["step_labels"]] == list(range(1, traces["t1b"].n_turns + 1))
    assert [lab["pivot_hops"] for lab in info["step_labels"]][:3] == [[0], [1], [2]]
    assert info["guidance"] is None  # a band row is not guided
    assert report["guidance"] == {"rows": 0, "without_correct_rollout": 1}
    assert report["bands"] == {"rl_pool": 1, "all_wrong": 1, "all_right": 1}


def test_the_filter_keeps_every_pooled_questions_reference_for_the_student_band(guided) -> None:
    """``filter/references``: each question with a correct rollout (q1, q3; q2 has none), the same best rollout
    its rl_pool row names, with its tool calls: what the student band reads to name and guide its rows."""
    from filters.guidance import REFERENCES

    _, rows, traces = guided
    refs = {r["question_id"]: r for r in ds.dataset(GUIDED_ROOT[0] / REFERENCES).to_table().to_pylist()}
    assert sorted(refs) == ["q1", "q3"] and refs["q1"]["trace_id"] == rows["q1"]["extra_info"]["reference_trace_id"]
    assert refs["q1"]["step_labels"] == rows["q1"]["extra_info"]["step_labels"]
    assert [(c["name"], c["arguments"]) for c in json.loads(refs["q1"]["calls"])] == [(n, a) for n, a in GOOD]
    assert refs["q3"]["trace_id"] == "t3a" and refs["q1"]["passed_chain"] is True


def test_without_rl_guidance_no_all_wrong_question_is_counted(tmp_path) -> None:
    report, rows, _ = _run(tmp_path / "run", False)
    assert set(rows) == {"q1"} and report["guidance"] == {"rows": 0, "without_correct_rollout": 0}


def test_an_all_wrong_band_gets_the_teachers_tool_calls_as_guidance(tmp_path) -> None:
    """A band measured on a model that failed q1 every time (as a student-measured band may): with
    ``rl.guidance`` q1 enters with the tool calls of the teacher's best correct rollout, in order."""
    from filters.pool import write_rl_pool
    from filters.stage import _PerQuestion, load_questions
    from synth.engine.stage import StageContext
    from synth.engine.store import Store

    _run(tmp_path / "run", True)
    store = Store(tmp_path / "run")
    filt, _ = stages()
    questions = load_questions(store)
    ref = Reference("q1", "t1b", True, 1.0, 3, json.dumps([{"name": n, "arguments": a} for n, a in GOOD[:3]]),
                    [{"turn": 1, "evidence_state": 0, "pivot_hops": [0], "grounded": True}])
    per_q = {qid: _PerQuestion() for qid in ("q1", "q2")}
    for p in per_q.values():
        p.n, p.c = 8, 0  # all wrong, by the model that measured the band
    for guidance, expected in ((True, {"q1"}), (False, set())):
        cfg = config()
        cfg.rl.guidance = guidance
        ctx = StageContext(filt, cfg, store, f"test-{guidance}")
        extra = write_rl_pool(ctx, questions, per_q, False, "teacher", {"q1": ref}, lambda: None)
        counts = extra["bands"]
        rows = ds.dataset(ctx.out("rl_pool")).to_table().to_pylist()
        assert {r["extra_info"]["question_id"] for r in rows} == expected
        assert counts["all_wrong"] == 2
        if guidance:
            (row,) = rows
            calls = json.loads(row["extra_info"]["guidance"])
            assert [(c["name"], c["arguments"]) for c in calls] == [(n, a) for n, a in GOOD[:3]]
            assert row["extra_info"]["reference_trace_id"] == "t1b" and row["extra_info"]["c"] == 0
            assert extra["guidance"] == {"rows": 1, "without_correct_rollout": 1}  # q2 has no correct rollout: left out
