"""The stage reports read as types: a report round-trips through its type, and an old or partial one reads with
defaults instead of failing."""

from __future__ import annotations

import json

from synth.engine.reports import (AdversaryCount, FilterReport, QuestionsReport, RolloutReport, RunReports,
                                  StageReport, WalksReport, read_reports)

FILTER = {
    "stage": "filter", "key": "8b25e029038030bf0c49", "input": 6, "output": 2, "dropped": {"held_out": 4},
    "seconds": 0.294, "chain": ["format", "correctness", "low_step"], "reason_order": ["format", "wrong_answer"],
    "band_by": "teacher", "band_model": "teacher:oracle-v1", "bands": {"all_right": 2, "all_wrong": 0, "rl_pool": 0},
    "bands_by_split": {"rl": {"all_right": 2, "all_wrong": 0, "rl_pool": 1}}, "bands_of_splits": ["rl"],
    "context": {"compress_observations": True, "keep_observations": 2, "policy": "full"},
    "reasoning": {"assistant_tokens": 2633, "mode": "inline", "reasoning_tokens": 0,
                  "share_of_assistant_tokens": 0.0, "traces": 2, "traces_with_reasoning": 0},
    "match": {"f1": 0, "none": 0, "other_page": 0, "page": 6, "qualified": 0},
    "answers": {"aliases": {"dropped": 1, "dropped_examples": [{"alias": "A", "answer": "B"}], "kept": 0,
                            "teacher": 1},
                "corpus": True, "other_titles": {"capped": 0, "min_f1": 0.8, "questions": 0, "titles": 0},
                "questions": 4},
    "preference": {"by_rejected": {"lower_rubric": 0, "wrong_answer": 0}, "pairs": 0, "prompt_mismatch": 0,
                   "without_rejected": 2},
    "pass": {"max_n": 2, "min_n": 1, "pass@1": 1.0, "pass@1_from": "first sample", "pass@n": 1.0, "questions": 4,
             "samples": 6},
    "guidance": {"rows": 0, "without_correct_rollout": 0}, "sft_rows": 2, "kept_rubric_mean": 1.0,
    "teacher": {"calls": 3, "requests": 3, "prompt_tokens": 10},
}

QUESTIONS = {
    "stage": "questions", "input": 62, "output": 4, "dropped": {"no_clue": 58},
    "repairs": {"answer_leak": {"attempted": 3, "repaired": 1}},
    "depth": {"kept": {"questions": 4, "mean_nominal": 3.0, "mean_effective": 3.0, "ratio": 1.0,
                       "full_depth_share": 1.0, "effective": {"3": 4}, "nominal": {"3": 4}},
              "checked": {"questions": 4, "mean_nominal": 3.0, "mean_effective": 3.0, "ratio": 1.0,
                          "full_depth_share": 1.0, "effective": {"3": 4}, "nominal": {"3": 4}},
              "adversaries": {"names": ["tool"], "checked": {"tool": {"entered": 1, "hops_caught": 2, "questions": 4,
                                                                       "full_depth_share": 0.75}},
                              "kept": {"tool": {"entered": 0, "hops_caught": 0, "questions": 4,
                                                "full_depth_share": 1.0}}}},
}


def test_a_report_round_trips_through_its_type() -> None:
    for cls, d in ((FilterReport, FILTER), (QuestionsReport, QUESTIONS)):
        r = cls.from_dict(json.loads(json.dumps(d)))
        assert json.dumps(r.to_dict()) == json.dumps(d)  # the same keys, values and order
        assert cls.from_dict(r.to_dict()) == r
    f = FilterReport.from_dict(FILTER)
    assert f.chain == ["format", "correctness", "low_step"] and f.bands_of_splits == ["rl"]
    assert f.bands_by_split["rl"].rl_pool == 1 and f.context.policy == "full" and f.sft_rows == 2
    assert f.answers.aliases.dropped_examples == [{"alias": "A", "answer": "B"}] and f.answers.other_titles.min_f1 == 0.8
    assert (f.pass_.pass_at_1, f.pass_.pass_at_n, f.pass_.first_from) == (1.0, 1.0, "first sample")
    assert f.teacher == {"calls": 3, "requests": 3, "prompt_tokens": 10} and f.judge is None
    q = QuestionsReport.from_dict(QUESTIONS)
    assert q.repairs["answer_leak"].repaired == 1
    assert q.depth.adversaries.checked["tool"] == AdversaryCount(4, 1, 2, 0.75)
    assert q.depth.kept.effective == {"3": 4}


def test_a_changed_field_is_written_over_what_was_read() -> None:
    import dataclasses

    r = dataclasses.replace(FilterReport.from_dict(FILTER), output=3)
    assert r.to_dict()["output"] == 3 and r.to_dict()["kept_rubric_mean"] == 1.0  # keys it does not type stay
    assert FilterReport(output=1, chain=["format"]).to_dict() == {"output": 1, "chain": ["format"]}


def test_an_old_or_partial_report_reads_with_defaults() -> None:
    f = FilterReport.from_dict({"stage": "filter", "output": 3})
    assert f.output == 3 and f.input is None and f.dropped == {} and f.chain is None and f.reason_order == []
    assert f.context is None and f.reasoning is None and f.pass_ is None and f.bands_by_split == {}
    # A value of the wrong kind is a default too, never an error.
    bad = FilterReport.from_dict({"chain": 5, "input": "six", "context": [], "bands_by_split": {"rl": 3},
                                  "pass": {"questions": "x", "pass@1": None}})
    assert bad.chain is None and bad.input is None and bad.context is None and bad.bands_by_split == {}
    assert bad.pass_.questions is None and bad.pass_.pass_at_1 is None
    # An empty nested fact is false, as ``report.get(k) or {}`` was.
    assert not FilterReport.from_dict({"context": {}}).context
    q = QuestionsReport.from_dict({"depth": {"kept": {"questions": 2}}, "repairs": {"odd": 5}})
    assert q.depth.kept.questions == 2 and q.depth.checked.questions is None and q.depth.adversaries.names == []
    assert q.repairs == {} and q.decontamination is None
    assert RolloutReport.from_dict({}).reasoning is None and WalksReport.from_dict(None).repeats is None
    assert StageReport.from_dict({"input": 1}).to_dict() == {"input": 1}


def test_run_reports_type_each_stage(tmp_path) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "filter.json").write_text(json.dumps(FILTER))
    (tmp_path / "reports" / "graph.json").write_text(json.dumps({"stage": "graph", "input": 5, "output": 5}))
    (tmp_path / "reports" / "broken.json").write_text("{not json")
    rr = read_reports(tmp_path)
    assert isinstance(rr.filter, FilterReport) and rr.filter.output == 2
    assert type(rr.get("graph")) is StageReport and rr.get("graph").output == 5
    assert rr.questions is None and rr.get("broken") is None and "broken" not in rr
    assert rr.teacher("filter") == FILTER["teacher"] and rr.teacher("graph") is None and rr.teacher("nope") is None
    assert sorted(rr) == ["filter", "graph"] and RunReports.of(rr) is rr
    assert RunReports.of({"walks": {"repeats": {"answer": {"1": 2}}}}).walks.repeats.answer == {"1": 2}
    assert read_reports(tmp_path / "missing").get("filter") is None


def test_shard_summaries_travel_as_json_and_old_marks_still_read() -> None:
    from sft.rlband import RlBandShard
    from synth.engine.stage import FailedItem
    from synth.questions.stage import QuestionsShard
    from synth.rollout.stage import RolloutShard

    q = QuestionsShard(input=3, kept=1, dropped={"no_clue": 2}, depths=[[3, 2, {"tool": 1}]], paid_calls=4,
                       teacher={"calls": 4})
    r = RolloutShard(input=2, stop_reasons={"answer": 2}, samples={"sft": 2}, turns=5, tool_calls=3)
    b = RlBandShard(model="student:m", facts=[{"question_id": "q1", "n": 2, "c": 1}],
                    failed=[FailedItem("q2", "teacher_failed", "x")], turns=4, cut=1)
    for s in (q, r, b):
        d = json.loads(json.dumps(s.to_dict()))  # what a worker sends back and a shard's mark holds
        assert type(s).from_dict(d) == s
    assert b.to_dict()["failed"] == [{"id": "q2", "reason": "teacher_failed", "detail": "x"}]
    # A mark written before a field existed reads with its default; a key no field names is left out.
    old = QuestionsShard.from_dict({"input": 3, "kept": 1, "dropped": {}, "failed": {}, "retired": 1})
    assert old.kept_adversaries == {} and old.paid_calls == 0 and old.decontamination is None
    assert RlBandShard.from_dict({"model": "m", "facts": [], "failed": ["FailedItem(id='q', ...)"]}).failed == []
