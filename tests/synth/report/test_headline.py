"""The headline figures (calls, tokens and cost per kept SFT row, by stage and split) against a small
run folder made by hand, where every figure can be summed here from the records themselves."""

from __future__ import annotations

from dataclasses import replace

import pytest

from helpers.filterstore import make_store
from helpers.traces import make_question, make_trace
from synth.report.headline import ALL, DROPPED, OTHER, read_headline
from synth.report.stage import build_report
from synth.teacher.config import Price

PRICE = {"prompt": 2.0, "completion": 8.0, "cached_prompt": 0.5}
KEPT = 2
DRAFTED = 8
# The questions stage: 5 accepted (3 sft, 1 rl, 1 eval) of 8 drafts.
Q_TEACHER = {"calls": 40, "requests": 30, "cache_hits": 10, "prompt_tokens": 6000, "completion_tokens": 1200,
             "cached_prompt_tokens": 2000, "cached_completion_tokens": 400, "server_cached_prompt_tokens": 1000,
             "cached_server_cached_prompt_tokens": 600}
EXTRA_CALLS, EXTRA_PROMPT = 3, 900  # rollout calls no committed trace holds (a trajectory that failed)


def _world():
    splits = {"q1": "sft", "q2": "sft", "q3": "sft", "q4": "rl", "q5": "eval"}
    questions = [make_question(q, split=s) for q, s in splits.items()]
    traces = []
    for i, (q, s) in enumerate([("q1", "sft"), ("q1", "sft"), ("q2", "sft"), ("q3", "sft"), ("q4", "rl"),
                                ("q4", "rl"), ("q5", "eval")]):
        t = make_trace(f"t{i}", q, sample_index=i, split=s, completion_tokens=100 + 10 * i)
        traces.append(replace(t, prompt_tokens=1000 + 100 * i, server_cached_prompt_tokens=50 * i,
                              n_turns=2 + i % 3))
    turns = sum(t.n_turns for t in traces)
    r_teacher = {"calls": turns + EXTRA_CALLS, "requests": turns + EXTRA_CALLS,
                 "prompt_tokens": sum(t.prompt_tokens for t in traces) + EXTRA_PROMPT,
                 "server_cached_prompt_tokens": sum(t.server_cached_prompt_tokens for t in traces),
                 "completion_tokens": sum(t.completion_tokens for t in traces)}
    reports = {"questions": {"stage": "questions", "input": DRAFTED, "output": 5, "dropped": {"prose": 3},
                             "teacher": Q_TEACHER},
               "rollout": {"stage": "rollout", "input": 5, "output": len(traces), "dropped": {},
                           "teacher": r_teacher},
               "filter": {"stage": "filter", "input": len(traces), "output": KEPT, "dropped": {}}}
    return questions, traces, reports


def _usd(prompt: float, cached: float, completion: float) -> float:
    return ((prompt - cached) * PRICE["prompt"] + cached * PRICE["cached_prompt"]
            + completion * PRICE["completion"]) / 1e6


def test_headline_figures_per_kept_row_by_stage_and_split(tmp_path) -> None:
    questions, traces, reports = _world()
    store = make_store(tmp_path / "run", questions, traces, reports=reports, tokenizer=False)
    h = read_headline(store.root, Price(**PRICE))
    assert h is not None and h.kept_sft_rows == KEPT
    cell = {(c.stage, c.split): c for c in h.cells}

    # rollout, by the traces' own split
    for split in ("sft", "rl", "eval"):
        mine = [t for t in traces if t.split == split]
        got = h.per_kept(cell["rollout", split])
        assert got["calls"] == pytest.approx(sum(t.n_turns for t in mine) / KEPT)
        assert got["prompt_tokens"] == pytest.approx(sum(t.prompt_tokens for t in mine) / KEPT)
        assert got["completion_tokens"] == pytest.approx(sum(t.completion_tokens for t in mine) / KEPT)
        want_cost = _usd(sum(t.prompt_tokens for t in mine), sum(t.server_cached_prompt_tokens for t in mine),
                         sum(t.completion_tokens for t in mine))
        assert got["cost_usd"] == pytest.approx(want_cost / KEPT, abs=1e-6)
    other = h.per_kept(cell["rollout", OTHER])
    assert other["calls"] == pytest.approx(EXTRA_CALLS / KEPT)
    assert other["prompt_tokens"] == pytest.approx(EXTRA_PROMPT / KEPT)

    # questions, apportioned per draft: 3 of 8 drafts are sft questions, 3 were dropped
    q_calls, q_prompt = Q_TEACHER["calls"], Q_TEACHER["prompt_tokens"] + Q_TEACHER["cached_prompt_tokens"]
    assert h.per_kept(cell["questions", "sft"])["calls"] == pytest.approx(q_calls * 3 / DRAFTED / KEPT)
    assert h.per_kept(cell["questions", "rl"])["prompt_tokens"] == pytest.approx(q_prompt * 1 / DRAFTED / KEPT)
    assert h.per_kept(cell["questions", DROPPED])["calls"] == pytest.approx(q_calls * 3 / DRAFTED / KEPT)

    # by split across stages, and the total
    sft = h.per_kept(cell[ALL, "sft"])
    assert sft["calls"] == pytest.approx((q_calls * 3 / DRAFTED + sum(t.n_turns for t in traces if t.split == "sft"))
                                         / KEPT)
    total = h.per_kept(h.total)
    r_calls = reports["rollout"]["teacher"]["calls"]
    assert (h.total.stage, h.total.split) == (ALL, ALL)
    assert total["calls"] == pytest.approx((q_calls + r_calls) / KEPT)
    q_completion = Q_TEACHER["completion_tokens"] + Q_TEACHER["cached_completion_tokens"]
    r = reports["rollout"]["teacher"]
    assert total["completion_tokens"] == pytest.approx((q_completion + r["completion_tokens"]) / KEPT)
    q_cached = Q_TEACHER["server_cached_prompt_tokens"] + Q_TEACHER["cached_server_cached_prompt_tokens"]
    want = _usd(q_prompt, q_cached, q_completion) + _usd(r["prompt_tokens"], r["server_cached_prompt_tokens"],
                                                         r["completion_tokens"])
    assert total["cost_usd"] == pytest.approx(want / KEPT, abs=1e-6)
    # no price: the same calls and tokens, no cost
    unpriced = read_headline(store.root)
    assert unpriced.per_kept(unpriced.total)["calls"] == total["calls"] and unpriced.total.cost_usd is None


def test_the_report_shows_the_headline_it_reads_from_the_one_place(tmp_path) -> None:
    questions, traces, reports = _world()
    store = make_store(tmp_path / "run", questions, traces, reports=reports, tokenizer=False)
    rep = build_report(store, store.root / "report", price=Price(**PRICE), explorer=False)
    want = read_headline(store.root, Price(**PRICE)).as_dict()
    assert rep.summary["headline"] == want
    index = (store.root / "report" / "index.md").read_text()
    assert "## Per kept SFT row" in index and "| rollout | sft |" in index and "| questions | dropped |" in index
    assert f"{want['per_kept_sft_row']['calls']:,.2f}" in index
