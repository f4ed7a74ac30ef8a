"""Step labels (E_t, pivot hops, grounded): by hand on a made trace, then in the pipeline's own tables.

The run is the RL world of ``helpers.rlrun`` (``hopforge run --until filter`` on the demo corpus): its
``traces``, ``sft`` and ``rl_pool`` must all carry the labels, and agree with each other and with the
measurements they are derived from (``gold_first_seen``, the grounded filter's verdicts).
"""

from __future__ import annotations

import pyarrow.dataset as ds
import pytest

from filters.config import FiltersConfig
from helpers.traces import call, make_question, make_trace
from synth.engine.records import Trace
from synth.rollout.labels import evidence_states, full_evidence_turn, label_rows, labels_of, step_labels
from synth.tools.grounding import grounding

MIN_GROUNDING = FiltersConfig().min_grounding


def test_labels_of_a_made_trace() -> None:
    q = make_question()
    trace = make_trace(question=q.question, calls=[call("search", query="Alpha Station"), call("open", page="p1"),
                                                   call("search", query="Zulu Quebec"), call("find", page="p2",
                                                                                             text="Delta")],
                       gold_first_seen=[1, 1, -1, 4])
    labels = step_labels(trace.conversation, trace.gold_first_seen, trace.n_turns, MIN_GROUNDING)
    assert [lab.turn for lab in labels] == list(range(1, trace.n_turns + 1))
    # turn 1 is decided with nothing seen; its observation shows path[0] and path[1]; turn 4's shows path[3]
    assert [lab.evidence_state for lab in labels] == [0, 1, 1, 1, 1]
    assert [lab.pivot_hops for lab in labels] == [[0, 1], [], [], [3], []]
    # the question names Alpha Station; the made observations show no page, so the open of p1 acted on nothing
    assert [lab.grounded for lab in labels] == [True, False, False, False, None]
    assert {s.turn for s in grounding(trace.conversation, MIN_GROUNDING) if not s.grounded} == {2, 3, 4}
    # the last gold page shows in turn 3: turns 4 and 5 are decided with all of them (E = 2)
    full = make_trace(gold_first_seen=[1, 2, 2, 3])
    assert [lab.evidence_state for lab in labels_of(full, MIN_GROUNDING)] == [0, 1, 1, 2, 2]
    assert full_evidence_turn([1, 2, 2, 3], full.n_turns) == 4  # the report's T_recover (without an answer)


def test_full_evidence_turn_is_the_first_turn_at_e2() -> None:
    assert full_evidence_turn([1, 2, 3, 4], 5) == 5  # turn 4's observation completes it; turn 5 decides with it
    assert full_evidence_turn([1, 2, 3, 4], 4) is None  # ... a turn the trace never had
    assert full_evidence_turn([1, 1, 1, 1], 6) == 2
    assert full_evidence_turn([1, 1, -1, 2], 9) is None  # a gold page never seen
    assert full_evidence_turn([0, 2], 3) == 3


def test_a_trace_written_before_labels_gets_them_computed_by_the_same_rule() -> None:
    trace = make_trace(gold_first_seen=[2, -1, 3, 3])
    row = trace.to_row()
    del row["step_labels"]  # a table from before the column existed
    old = Trace.from_row(row)
    assert old.step_labels == []
    computed = labels_of(old, MIN_GROUNDING)
    assert [lab.evidence_state for lab in computed] == evidence_states([2, -1, 3, 3], trace.n_turns)
    carried = Trace.from_row(dict(trace.to_row(), step_labels=label_rows(computed)))
    assert labels_of(carried, MIN_GROUNDING) == computed


def test_the_report_reads_evidence_state_from_the_labels_home() -> None:
    from synth.report import stage as report

    assert report.evidence_states is evidence_states


@pytest.fixture(scope="module")
def traces(rl_run) -> dict[str, dict]:
    return {t["trace_id"]: t for t in ds.dataset(rl_run / "traces").to_table().to_pylist()}


def test_every_trace_carries_its_labels(traces, rl_run) -> None:
    verdicts = {v["trace_id"]: v for v in ds.dataset(rl_run / "filter" / "verdicts").to_table().to_pylist()}
    pivots = 0
    for t in traces.values():
        labels = t["step_labels"]
        assert [lab["turn"] for lab in labels] == list(range(1, t["n_turns"] + 1))
        assert [lab["evidence_state"] for lab in labels] == evidence_states(t["gold_first_seen"], t["n_turns"])
        revealed = sorted(j for lab in labels for j in lab["pivot_hops"])
        assert revealed == [j for j, s in enumerate(t["gold_first_seen"]) if s >= 1]
        pivots += bool(revealed)
        # grounded agrees with the grounded filter's count for the same trace
        ungrounded_turns = sum(lab["grounded"] is False for lab in labels)
        assert (ungrounded_turns > 0) == (verdicts[t["trace_id"]]["ungrounded_steps"] > 0)
        assert labels[-1]["grounded"] is None or t["stop_reason"] != "answer"  # the answer turn calls no tool
    assert pivots > 0


def test_sft_and_rl_pool_rows_carry_their_traces_labels(traces, sft_rows, rl_rows, rl_run) -> None:
    assert sft_rows and rl_rows
    for r in sft_rows:
        assert r["step_labels"] == traces[r["trace_id"]]["step_labels"]
    correct = {v["trace_id"] for v in ds.dataset(rl_run / "filter" / "verdicts").to_table().to_pylist()
               if v["correct"]}
    for r in rl_rows:
        info = r["extra_info"]
        ref = traces[info["reference_trace_id"]]  # a band question has a correct teacher rollout
        assert ref["trace_id"] in correct and ref["question_id"] == info["question_id"]
        assert info["step_labels"] == ref["step_labels"]
