"""The LLM judge can only add a verdict: it rescues near misses, never overturns the rule."""

from __future__ import annotations

import pytest

from filters.base import FilterContext, FilterRunner, build_chain
from filters.config import FiltersConfig
from filters.correctness import combine, grade, judge_messages, parse_judge, run_judge
from helpers.traces import make_question, make_trace
from helpers.fakejudge import FakeJudge
from synth.teacher.client import Teacher, TeacherConfig


def teacher(backend) -> Teacher:
    return Teacher(TeacherConfig(max_retries=0), None, backend=backend)


def test_combination_rule() -> None:
    assert combine(True, 1.0, False) is True  # the judge never overturns a rule match
    assert combine(False, 0.5, True) is True  # it rescues a near miss
    assert combine(False, 0.0, True) is False  # but not an answer sharing no word with the gold
    assert combine(False, 0.5, None) is False and combine(False, 0.5, False) is False


def test_judge_prompt_and_parse() -> None:
    q = make_question(aliases=["Delta"])
    msgs = judge_messages(q, "Delta C.")
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert "Gold answer: Delta City" in msgs[1]["content"] and "Delta C." in msgs[1]["content"]
    assert "Gold aliases: Delta" in msgs[1]["content"]
    assert parse_judge('```json\n{"correct": true}\n```') is True
    assert parse_judge('{"correct": "no"}') is False
    assert parse_judge("yes!") is None and parse_judge('{"verdict": 1}') is None


def test_judge_only_adds_through_the_filter() -> None:
    q = make_question()
    rows = [make_trace("hit", answer="Delta City"),  # rule: exact match; judge says wrong -> still correct
            make_trace("near", answer="Delta"),  # F1 0.67 < 0.8; judge says right -> rescued
            make_trace("far", answer="Echo Town"),  # F1 0; judge says right -> still wrong
            make_trace("failed", answer="City of Delta"),  # judge call fails -> rule (F1 0.8 -> correct)
            make_trace("garbled", answer="Delta town")]  # judge reply unreadable -> rule (F1 0.5 -> wrong)
    backend = FakeJudge(yes={"Delta", "Echo Town"}, fail={"City of Delta"}, garble={"Delta town"})
    t = teacher(backend)
    fcfg = FiltersConfig(chain=["correctness"], judge=True)
    grades = {r.trace_id: grade(r.final_answer, q, fcfg.min_f1) for r in rows}
    verdicts, counts = run_judge(t, [(q, r.final_answer) for r in rows])
    for r, v in zip(rows, verdicts):
        grades[r.trace_id].judge_correct = v
    assert counts == {"asked": 5, "failed": 1, "unparsed": 1}
    assert {tid: (g.rule_correct, g.judge_correct, g.correct) for tid, g in grades.items()} == {
        "hit": (True, False, True),
        "near": (False, True, True),
        "far": (False, True, False),
        "failed": (True, None, True),
        "garbled": (False, None, False),
    }
    ctx = FilterContext({"q1": q}, grades=grades)
    runner = FilterRunner(build_chain(fcfg.chain, fcfg))
    kept = [r.trace_id for r in runner.run(rows, ctx)]
    assert kept == ["hit", "near", "failed"]
    assert runner.dropped == {"wrong_answer": 2}
    far = next(d for r, _, d in runner.rejects if r.trace_id == "far")
    assert "judge correct" in far  # both verdicts are visible in the reject detail
    assert backend.seen[0].task.name == "judge" and backend.seen[0].answer == "Delta City"
    assert t.stats.as_dict()["completed"] == 4


def test_grade_without_answer_or_question() -> None:
    assert not grade(None, make_question(), 0.8).rule_correct
    assert not grade("  ", make_question(), 0.8).rule_correct
    assert not grade("Delta City", None, 0.8).rule_correct


@pytest.mark.parametrize("pred,f1", [("Delta", 2 / 3), ("delta city", 1.0), ("Echo", 0.0)])
def test_f1_is_recorded(pred: str, f1: float) -> None:
    assert grade(pred, make_question(), 0.8).f1 == pytest.approx(f1)
