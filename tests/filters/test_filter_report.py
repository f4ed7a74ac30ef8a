"""The run report: index.md and figures on a small store; ERF and calibration against hand computation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from helpers.filterstore import config, make_store, publish, stages
from helpers.traces import call, make_question, make_trace
from synth.engine.runner import run_stage
from synth.report.stage import (build_report, calibration_by_teacher, calibration_of, erf_curve, evidence_states,
                          recovery_turn)
from synth.engine.store import Store

S = call("search", query="x")


def _calls(n: int) -> list:
    return [call("search", query=f"q{i}") for i in range(n)]


# Hand-computed cases (4 gold pages each; turns count assistant messages from 1):
#   X: seen at turns 1,2,3,4; answers (correctly) at turn 5.  States [0,1,1,1,2]: calibrated, CE 0.
#      Recovery: E = 2 first at turn 5 (turn 4's observation completed the evidence; turn 5 decides with it).
#   Y: page 3 never seen; answers (wrongly) at turn 4.  States [0,1,1,1]: over-confident at E=1.
#      CE = 3/4 * |1/3 - 0| = 0.25.  Never recovers.
#   Z: all seen at turn 1; answers at turn 6.  States [0,2,2,2,2,2]: 4 over-cautious turns.
#      CE = 5/6 * |1/5 - 1| = 2/3.  Recovers at turn 2 (its first turn at E = 2).
#   W: all seen by turn 2; never answers (5 turns).  States [0,1,2,2,2]: CE = 3/5 * |0 - 1| = 0.6.
#      Recovers at turn 3.
CASES = {
    "X": dict(calls=_calls(4), gold_first_seen=[1, 2, 3, 4], answer="Delta City"),
    "Y": dict(calls=_calls(3), gold_first_seen=[1, 1, -1, 2], answer="Echo"),
    "Z": dict(calls=_calls(5), gold_first_seen=[1, 1, 1, 1], answer="Delta City"),
    "W": dict(calls=_calls(4), gold_first_seen=[1, 2, 2, 2], answer=None),
}


def test_evidence_states_and_calibration_by_hand() -> None:
    assert evidence_states([1, 2, 3, 4], 5) == [0, 1, 1, 1, 2]
    assert evidence_states([1, 1, -1, 2], 4) == [0, 1, 1, 1]
    assert calibration_of([1, 2, 3, 4], 5, True) == {"ce": 0.0, "answer_state": 2, "over_cautious_turns": 0}
    assert calibration_of([1, 1, -1, 2], 4, True)["ce"] == pytest.approx(0.25)
    z = calibration_of([1, 1, 1, 1], 6, True)
    assert z["ce"] == pytest.approx(2 / 3) and z["over_cautious_turns"] == 4
    w = calibration_of([1, 2, 2, 2], 5, False)
    assert w["ce"] == pytest.approx(0.6) and w["answer_state"] is None and w["over_cautious_turns"] is None


def test_recovery_and_erf() -> None:
    # T_recover is the first turn decided at E = 2: the turn after the observation that completed the evidence
    assert recovery_turn([1, 2, 3, 4], 5, False) == 5
    assert recovery_turn([1, 2, 3, 4], 5, True) == 5
    assert recovery_turn([1, 2, 3, 4], 4, False) == math.inf  # turn 4's observation completed it; no turn after
    assert recovery_turn([1, 2, 3, 4], 4, True) == 4  # ... but a correct answer at turn 4 counts as recovered
    assert recovery_turn([1, 1, 1, 1], 6, True) == 2
    assert recovery_turn([1, 2, 2, 2], 5, False) == 3
    assert recovery_turn([1, 1, -1, 2], 4, False) == math.inf
    assert recovery_turn([1, 1, -1, 2], 4, True) == 4  # a correct answer counts as recovered
    assert recovery_turn([9, 9], 3, True) == 3
    # the same turn the step labels first say E = 2, on every case (recovery_turn reads evidence_states)
    for seen, n in (([1, 2, 3, 4], 5), ([1, 2, 3, 4], 4), ([1, 1, 1, 1], 6), ([1, 2, 2, 2], 5), ([1, 1, -1, 2], 4),
                    ([9, 9], 3), ([0, 3], 3), ([2, 1, 3], 7)):
        states = evidence_states(seen, n)
        first = states.index(2) + 1 if 2 in states else math.inf
        assert recovery_turn(seen, n, False) == first, (seen, n, states)
        assert recovery_turn(seen, n, True) == min(first, n)
    ts, vs = erf_curve([4, math.inf, 1, 2])
    assert ts == [0, 1, 2, 3, 4] and vs == [0.0, 0.25, 0.5, 0.5, 0.75]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    traces = [make_trace(k, "q1", sample_index=i, **kw) for i, (k, kw) in enumerate(CASES.items())]
    # A second teacher: seen at 1,1,2,3, correct answer at turn 4 -> recovers at 4 (E = 2 from turn 4), calibrated.
    traces.append(make_trace("V", "q2", calls=_calls(3), gold_first_seen=[1, 1, 2, 3], teacher_model="teacher-b"))
    reports = {
        "walks": {"stage": "walks", "input": 12, "output": 10, "dropped": {"dead_end": 2}},
        "questions": {"stage": "questions", "input": 10, "output": 2, "dropped": {"shortcut": 5, "too_easy": 3},
                      "teacher": {"calls": 20, "prompt_tokens": 4000, "completion_tokens": 1000,
                                  "cached_prompt_tokens": 0, "cost_usd": 0.5}},
        "rollout": {"stage": "rollout", "input": 2, "output": 5, "dropped": {},
                    "teacher": {"calls": 30, "prompt_tokens": 30000, "completion_tokens": 3000,
                                "cached_prompt_tokens": 500, "cost_usd": 1.5}},
    }
    store = make_store(root / "run", [make_question("q1"), make_question("q2")], traces, reports=reports)
    filt, rep = stages()
    run_stage(filt, config(chain=["format", "correctness"]), store)
    outcome = run_stage(rep, config(), store)
    return store, outcome


def test_report_writes_index_and_figures(run) -> None:
    store, outcome = run
    out = store.path("report")
    index = (out / "index.md").read_text()
    for png in ("funnel.png", "drops.png", "tool_calls.png", "tools.png", "pass_at_n.png", "erf.png",
                "calibration.png"):
        assert (out / png).stat().st_size > 1000, png
        assert f"]({png})" in index
    # Every question here chains 3 hops, and every trace was written with the same completion tokens: one value
    # each, said in a line rather than drawn as one bar.
    assert "Hops per question: one value, 3, for all " in index and not (out / "hops.png").exists()
    assert "Tokens per trace: one value, " in index and not (out / "tokens.png").exists()
    for heading in ("## Funnel", "## Questions", "## Traces", "## Evidence recovery", "## Calibration",
                    "## Teacher cost"):
        assert heading in index
    # Every drop reason of every stage is listed, in pipeline order.
    assert index.index("| walks |") < index.index("| questions |") < index.index("| rollout |") < index.index(
        "| filter |")
    for reason in ("dead_end 2", "shortcut 5", "too_easy 3", "wrong_answer 1", "not_best"):
        assert reason in index
    assert outcome.report["input"] == outcome.report["output"] == 5


def test_report_numbers_match_hand_computation(run) -> None:
    store, outcome = run
    s = outcome.report["summary"]
    a = s["calibration"]["teacher-a"]
    assert a["answered"] == 3
    assert a["over_confident_rate"] == pytest.approx(1 / 3, abs=1e-6)
    assert a["answered_at_E0"] == 0 and a["answered_at_E1"] == pytest.approx(1 / 3, abs=1e-6)
    assert a["over_cautious_mean_turns"] == pytest.approx(2.0)  # X: 0, Z: 4
    assert a["over_cautious_rate"] == pytest.approx(0.5)
    assert a["ce"] == pytest.approx((0 + 0.25 + 2 / 3 + 0.6) / 4, abs=1e-6)
    b = s["calibration"]["teacher-b"]
    assert b["over_confident_rate"] == 0 and b["ce"] == 0
    # ERF ends at the fraction of recovered traces: teacher-a 3 of 4 (Y never), teacher-b 1 of 1.
    assert s["erf"]["teacher-a"] == {"recovered": 0.75, "final": 0.75}
    assert s["erf"]["teacher-b"] == {"recovered": 1.0, "final": 1.0}
    # Cost: (0.5 + 1.5) USD over the kept SFT samples (one per question here: 2).
    kept = json.loads((store.root / "reports" / "filter.json").read_text())["output"]
    assert kept == 2
    assert s["per_kept_sample"]["cost_usd"] == pytest.approx(1.0)
    assert s["per_kept_sample"]["completion_tokens"] == pytest.approx(2000)
    # n differs by question (4 and 1), as the adaptive policy leaves it: pass@1 is the first sample's accuracy,
    # read here from the tables (mean c/n would be (2/4 + 1) / 2).
    import pyarrow.dataset as pads

    firsts = {t["trace_id"] for t in pads.dataset(store.root / "traces").to_table().to_pylist() if t["sample_index"] == 0}
    right = [v["correct"] for v in pads.dataset(store.root / "filter" / "verdicts").to_table().to_pylist()
             if v["trace_id"] in firsts]
    assert len(right) == 2 and s["pass@1"] == pytest.approx(sum(right) / len(right))


def test_erf_is_monotone(run) -> None:
    from synth.report.stage import erf_by_teacher, load_facts

    store, _ = run
    facts, _, _ = load_facts(store, 0.8)
    for curve in erf_by_teacher(facts).values():
        assert all(a <= b for a, b in zip(curve["erf"], curve["erf"][1:]))
        assert curve["erf"][-1] == curve["recovered"]


def test_report_skips_missing_tables(tmp_path: Path) -> None:
    from synth.engine.records import Trace

    store = Store(tmp_path / "run")
    publish(store, "rollout", {"traces": Trace.to_table([make_trace()])})
    rep = build_report(store, tmp_path / "out")
    index = (tmp_path / "out" / "index.md").read_text()
    assert "questions" in rep.skipped and "## Skipped" in index
    assert "## Evidence recovery" in index  # traces alone are enough for ERF and calibration
    empty = build_report(Store(tmp_path / "empty"), tmp_path / "out2")
    assert "traces" in empty.skipped and (tmp_path / "out2" / "index.md").exists()


def test_calibration_groups_by_teacher() -> None:
    from synth.report.stage import TraceFacts

    def f(tid, teacher, gfs, turns, answered):
        return TraceFacts(tid, "q", teacher, turns, turns - 1, gfs, answered, answered, 10)

    cal = calibration_by_teacher([f("1", "m1", [1], 2, True), f("2", "m2", [-1], 2, True)])
    assert cal["m1"]["over_confident_rate"] == 0 and cal["m2"]["over_confident_rate"] == 1


def test_a_run_written_before_tool_counts_still_reports_its_tool_mix(tmp_path: Path) -> None:
    """A traces table with the old n_search/n_open/n_find columns reads as tool counts."""
    import pyarrow as pa

    from synth.report.stage import load_facts

    store = Store(tmp_path / "run")
    rows = []
    for i, (s, o) in enumerate([(3, 1), (1, 2)]):
        row = make_trace(f"t{i}").to_row()
        del row["tool_counts"]
        rows.append({**row, "n_search": s, "n_open": o, "n_find": 0})
    publish(store, "rollout", {"traces": pa.Table.from_pylist(rows)})
    facts, _, _ = load_facts(store, 0.8)
    assert [f.tool_counts for f in facts] == [{"search": 3, "open": 1, "find": 0}, {"search": 1, "open": 2, "find": 0}]
