"""Best-of-n: entity rubric (positive-only, group-max normalised), then fewer tool calls, then trace id."""

from __future__ import annotations

import pytest

from filters.band import band, pass_at_k, pass_stats, prompt_messages
from filters.bestofn import Candidate, rubric_raw, select_best, title_variants
from helpers.traces import call, make_question, make_trace

Q = make_question()  # intermediate entities: p1 "Bravo Harbour", p2 "Charlie (planet)"


def test_rubric_counts_searched_opened_and_named_entities() -> None:
    none = make_trace(calls=[call("search", query="Alpha Station"), call("search", query="Delta City"),
                             call("find", page="p3", text="x")])
    assert rubric_raw(none, Q) == 0.0
    opened = make_trace(calls=[call("open", page="p1"), call("search", query="x"), call("search", query="y")])
    assert rubric_raw(opened, Q) == 0.5  # p1 by id
    searched = make_trace(calls=[call("search", query="charlie planet facts"), call("search", query="a"),
                                 call("search", query="b")])
    assert rubric_raw(searched, Q) == 0.5  # "Charlie" without its disambiguation, in a query
    named = make_trace(calls=[call("search", query="a"), call("search", query="b"), call("search", query="c")],
                       thoughts=["The chain goes through Bravo Harbour.", "", ""])
    assert rubric_raw(named, Q) == 0.5
    by_title = make_trace(calls=[call("open", page="Bravo Harbour"), call("find", page="Charlie (planet)", text="d"),
                                 call("search", query="c")])
    assert rubric_raw(by_title, Q) == 1.0
    # Mentions are whole phrases: "Bravo" alone, or "Charlies", is not the entity.
    partial = make_trace(calls=[call("search", query="bravo"), call("search", query="Charlies moons"),
                                call("search", query="c")])
    assert rubric_raw(partial, Q) == 0.0
    assert title_variants("Charlie (planet)") == ["Charlie (planet)", "Charlie"]


def test_no_intermediate_entity_scores_one() -> None:
    q = make_question(path=["a", "b"], titles=["A town", "B town"])
    assert rubric_raw(make_trace(calls=[call("search", query="x")]), q) == 1.0


def test_ranking_rubric_then_tool_calls_then_id() -> None:
    cands = [Candidate("t-c", "q", 4, 0.5), Candidate("t-b", "q", 5, 1.0), Candidate("t-a", "q", 6, 1.0),
             Candidate("t-z", "q", 5, 1.0), Candidate("t-y", "q", 3, 0.0)]
    assert select_best(cands, 1) == {"t-b"}  # highest rubric, then 5 < 6 calls, then id "t-b" < "t-z"
    assert select_best(cands, 3) == {"t-b", "t-z", "t-a"}
    assert select_best(cands, 4) == {"t-b", "t-z", "t-a", "t-c"}


def test_group_max_normalisation() -> None:
    g1 = [Candidate("a", "q1", 3, 0.25), Candidate("b", "q1", 3, 0.5)]
    g2 = [Candidate("c", "q2", 3, 0.0), Candidate("d", "q2", 3, 0.0)]
    kept = select_best(g1 + g2, 1)
    assert kept == {"b", "c"}
    assert [c.rubric for c in g1] == [0.5, 1.0]  # raw / group max
    assert [c.rubric for c in g2] == [0.0, 0.0]  # a zero maximum gives zero, not a division error
    assert [c.rubric_raw for c in g1] == [0.25, 0.5]  # the raw fraction is kept beside it


def test_band_edges() -> None:
    assert band(0, 4) == "all_wrong"
    assert band(4, 4) == "all_right"
    assert [band(c, 8) for c in range(1, 8)] == ["rl_pool"] * 7
    assert band(1, 1) == "all_right" and band(0, 1) == "all_wrong"
    with pytest.raises(ValueError):
        band(0, 0)


def test_pass_at_k() -> None:
    assert pass_at_k(4, 0, 1) == 0.0 and pass_at_k(4, 4, 2) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2)
    s = pass_stats([(4, 1), (4, 0), (4, 4)])
    assert s["pass@1"] == pytest.approx((0.25 + 0 + 1) / 3, abs=1e-6)
    assert s["pass@n"] == pytest.approx(2 / 3, abs=1e-6)
    assert s["pass@2"] == pytest.approx((0.5 + 0 + 1) / 3, abs=1e-6)
    assert "pass@8" not in s and s["pass@1_from"] == "mean c/n"


def test_pass_at_1_under_the_adaptive_policy_is_the_first_samples_accuracy() -> None:
    """Later samples are drawn only where the earlier ones failed, so mean c/n would count a question that
    stopped at its first correct sample as 1.0: with n differing by question, pass@1 reads sample 0 only."""
    # Sampled until one is right, up to 4: right at once; right at the third; never right; an eval question.
    s = pass_stats([(1, 1, True), (3, 1, False), (4, 0, False), (1, 1, True)])
    assert s["pass@1"] == pytest.approx(2 / 4) and s["pass@1_from"] == "first sample"
    biased = (1 + 1 / 3 + 0 + 1) / 4
    assert s["pass@1"] < biased
    assert s["pass@n"] == pytest.approx(3 / 4) and s["min_n"] == 1 and "pass@2" not in s


def test_prompt_is_the_harness_before_the_first_assistant_turn() -> None:
    msgs = make_trace().conversation.messages
    p = prompt_messages(msgs)
    assert [m["role"] for m in p] == ["system", "user"]
    assert p[0]["content"] == msgs[0].content and p[1]["content"] == msgs[1].content
