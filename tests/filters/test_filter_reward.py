"""filters/reward.py on hand-written solutions: format, the correctness filter's matching, the evidence term.

Solutions are written as verl hands them to the reward: the response decoded with
``skip_special_tokens=True`` under the Qwen2.5 template (so ``<|im_start|>``/``<|im_end|>`` are gone,
the role names stay as words, and observations sit in ``<tool_response>`` blocks).
"""

from __future__ import annotations

import json

import pytest

from filters.correctness import grade, grade_answer
from filters.reward import DIAGNOSTIC_KEYS, MIN_F1, REWARD_KEYS, compute_score, evidence_share, parse_solution
from helpers.traces import make_question

GT = {"target": ["Delta City", "Delta"]}
EXTRA = {"question_id": "q1", "index": 0, "path": ["p0", "p1", "p2", "p3"], "split": "rl"}


def call(name: str, **args) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def observation(obj) -> str:
    return "user\n<tool_response>\n" + json.dumps(obj, ensure_ascii=False) + "\n</tool_response>\nassistant\n"


def solution(*turns: str, answer: str | None = "Delta City") -> str:
    final = f"I have it. <answer>{answer}</answer>" if answer is not None else "I am not sure."
    return "".join(turns) + final


SEARCH = call("search", query="Alpha Station") + observation([{"page_id": "p0", "title": "Alpha Station",
                                                                "snippet": "..."}])
OPEN = call("open", page="p1") + observation({"page_id": "p1", "title": "Bravo Harbour", "offset": 0,
                                               "next_offset": None, "total_chars": 10, "text": "Bravo"})


def score(text: str, **kw) -> dict:
    return compute_score("hopforge", text, GT, EXTRA, **kw)


def test_a_correct_well_formed_solution_scores_one_and_a_wrong_one_zero() -> None:
    good = score(solution(SEARCH, OPEN))
    assert good["score"] == 1.0 and good["acc"] == 1.0 and good["format_ok"] == 1.0 and good["em"] == 1.0
    assert good["tool_calls"] == 2 and good["raw_bad_tool_calls"] == 0
    assert set(good) == set(REWARD_KEYS) | set(DIAGNOSTIC_KEYS)
    assert all(k.startswith("raw_") for k in DIAGNOSTIC_KEYS) and not any(k.startswith("raw_") for k in REWARD_KEYS)
    wrong = score(solution(SEARCH, OPEN, answer="Echo Town"))
    assert wrong["score"] == 0.0 and wrong["acc"] == 0.0 and wrong["format_ok"] == 1.0
    assert score(solution(answer="delta"))["score"] == 1.0  # an alias, after normalisation
    assert score(solution(answer="the Delta City."))["score"] == 1.0  # articles and punctuation


def test_answer_matching_is_the_correctness_filters() -> None:
    q = make_question(answer="Delta City", aliases=["Delta"])
    for pred in ("Delta City", "delta city", "Delta City Harbour", "Delta Harbour", "Echo", ""):
        for min_f1 in (0.5, MIN_F1, 1.0):
            rule = grade(pred, q, min_f1).rule_correct
            assert grade_answer(pred, GT["target"], min_f1).rule_correct == rule
            got = score(solution(answer=pred), min_f1=min_f1)
            assert got["acc"] == (1.0 if rule else 0.0), (pred, min_f1)
    assert MIN_F1 == 0.8  # filters.min_f1's default
    # F1("Delta City Harbour", "Delta City") = 0.8: correct at the default threshold, not at a stricter one
    assert score(solution(answer="Delta City Harbour"))["score"] == 1.0
    assert score(solution(answer="Delta City Harbour"), min_f1=0.9)["score"] == 0.0


@pytest.mark.parametrize("text, why", [
    (solution(SEARCH, answer=None), "the last turn has no <answer>"),
    (solution("<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"x\"\n</tool_call>" + observation([])),
     "not a JSON object"),
    (solution(call("browse", url="x") + observation({"error": "?"})), "unknown tool 'browse'"),
    (solution("<tool_call>\n{\"name\": \"open\", \"arguments\": \"p1\"}\n</tool_call>" + observation({})),
     "arguments are not a JSON object"),
    (SEARCH + "<answer>Delta City</answer> then <tool_call>\n{\"name\": \"open\"", "never closed"),
    (SEARCH + call("open", page="p1") + "<answer>Delta City</answer>", "the last turn makes a tool call"),
    # cut inside an observation (the response ran out of tokens)
    (SEARCH + "I will open it." + call("open", page="p1") + "user\n<tool_response>\n{\"page_id\": \"p1\", \"ti",
     "no <answer>"),
])
def test_a_malformed_solution_scores_zero_whatever_its_answer(text: str, why: str) -> None:
    got = score(text)
    assert got["score"] == 0.0 and got["format_ok"] == 0.0 and got["acc"] == 0.0
    assert any(why in p for p in parse_solution(text).problems), parse_solution(text).problems


def test_answers_in_observations_or_reasoning_do_not_count() -> None:
    # a page that happens to contain "<answer>" is an observation, not the student's answer
    trap = call("open", page="p3") + observation({"page_id": "p3", "title": "Delta City", "offset": 0,
                                                  "text": "<answer>Delta City</answer>"})
    assert score(solution(trap, answer=None))["score"] == 0.0
    thinking = solution(SEARCH, answer=None).replace("I am not sure.",
                                                     "<think>maybe <answer>Delta City</answer></think> no idea")
    assert score(thinking)["score"] == 0.0
    last = solution(SEARCH).replace("I have it.", "<think><answer>Echo</answer></think>")
    assert score(last)["score"] == 1.0


def test_evidence_term_counts_gold_pages_read() -> None:
    by_title = call("open", page="Charlie (planet)") + observation(
        {"page_id": "p2", "title": "Charlie (planet)", "offset": 0, "next_offset": 2000, "total_chars": 5000,
         "text": "...(truncated)..."})
    found = call("find", page="p3", text="harbour") + observation(
        {"page_id": "p3", "title": "Delta City", "text": "harbour", "total": 0, "passages": []})
    sol = parse_solution(solution(SEARCH, OPEN, by_title, found))
    # p1 by id in the call, p2 by the observation of an open by title, p3 by find; p0 only searched
    assert set(sol.read_page_ids) >= {"p1", "p2", "p3"} and "p0" not in sol.read_page_ids
    assert evidence_share(sol.read_page_ids, EXTRA["path"]) == 0.75
    off = score(solution(SEARCH, OPEN, by_title, found))
    assert off["score"] == 1.0 and off["evidence"] == 0.75  # measured, not rewarded, by default
    on = score(solution(SEARCH, OPEN, by_title, found), evidence_weight=0.2)
    assert on["score"] == pytest.approx(1.15)
    # positive-only: a wrong answer that read p1 gets no evidence credit (it used to get 0.2 · 1/4)
    wrong = score(solution(SEARCH, OPEN, answer="Echo"), evidence_weight=0.2)
    assert wrong["score"] == 0.0 and wrong["acc"] == 0.0
    assert wrong["evidence"] == 0.0 and wrong["raw_evidence"] == 0.25  # measured, in the raw_ diagnostic only
    malformed = score(solution(SEARCH, OPEN, answer=None), evidence_weight=0.2)
    assert malformed["score"] == 0.0  # no shaping for a solution that never answers


def test_a_right_answer_with_evidence_gets_the_documented_amount() -> None:
    # p1 (open by id) and p3 (find) of the four gold pages p0..p3: share 2/4; weight 0.4 -> 1 + 0.4 · 0.5 = 1.2
    found = call("find", page="p3", text="harbour") + observation(
        {"page_id": "p3", "title": "Delta City", "text": "harbour", "total": 0, "passages": []})
    for mode in ("em", "f1", "rubric"):
        got = score(solution(SEARCH, OPEN, found), evidence_weight=0.4, mode=mode)
        assert got["evidence"] == 0.5 and got["acc"] == 1.0
        assert got["score"] == pytest.approx(1.2 if mode != "rubric" else 1.2 + 0.5 * got["rubric"]), mode
    # the same reading with a wrong answer: nothing from the evidence term, in any mode
    for mode in ("em", "f1", "rubric"):
        got = score(solution(SEARCH, OPEN, found, answer="Echo Town"), evidence_weight=0.4, mode=mode)
        assert got["score"] == 0.0 and got["evidence"] == 0.0 and got["raw_evidence"] == 0.5, mode
    gain = {"baselines": {"closed_book": {"answer": "Echo"}, "rag": {"answer": "Delta City"}}}
    extra = dict(EXTRA, **gain)
    right = compute_score("hopforge", solution(SEARCH, OPEN, found), GT, extra, mode="gain", evidence_weight=0.4)
    assert right["score"] == pytest.approx(0.5 + 1 - 0.5 * 1 + 0.4 * 0.5)  # ½ + S(a) − ½·max(0, 1) + 0.4 · 2/4
    wrong = compute_score("hopforge", solution(SEARCH, OPEN, found, answer="Echo Town"), GT, extra, mode="gain",
                          evidence_weight=0.4)
    assert wrong["score"] == pytest.approx(0.5 + 0 - 0.5 * 1) and wrong["evidence"] == 0.0  # ½ + 0 − ½, no evidence


@pytest.mark.parametrize("mode", ["em", "f1", "rubric", "gain"])
@pytest.mark.parametrize("broken", [
    SEARCH + OPEN + call("open", page="p3") + "<answer>Delta City</answer>",  # the last turn makes a tool call
    SEARCH + "<tool_call>\n{\"name\": \"browse\", \"arguments\": {\"url\": \"x\"}}\n</tool_call>"
    + observation({"error": "?"}) + OPEN + "I have it. <answer>Delta City</answer>",  # an unknown tool
    SEARCH + OPEN + "<tool_call>\n{\"name\": \"open\", \"arguments\": \"p2\"}\n</tool_call>" + observation({})
    + "I have it. <answer>Delta City</answer>",  # arguments not an object
])
def test_a_malformed_response_with_the_right_answer_is_zero_in_every_reward_component(broken: str, mode: str) -> None:
    """Any key of the dict may be a reward key (verl's GDPO normalises each of ``gdpo_reward_keys`` on its own):
    a malformed response must not earn F1, EM, evidence, rubric or tool-call credit through one."""
    sol = parse_solution(broken)
    assert not sol.format_ok and sol.answer == "Delta City" and {"p1"} <= set(sol.read_page_ids)
    extra = dict(EXTRA, titles=["Alpha Station", "Bravo Harbour", "Charlie (planet)", "Delta City"],
                 baselines={"closed_book": {"answer": "Echo"}, "rag": {"answer": "Echo"}})
    kw = dict(mode=mode, evidence_weight=0.5, step_weight=0.1 if mode != "rubric" else 0.0, rho_pf=0.8)
    got = compute_score("hopforge", broken, GT, extra, **kw)
    assert {k: got[k] for k in REWARD_KEYS} == dict.fromkeys(REWARD_KEYS, 0.0), mode
    # the ungated diagnostics still say what happened (named raw_, never a reward key)
    assert got["raw_f1"] == 1.0 and got["raw_evidence"] > 0 and got["raw_rubric"] > 0 and got["raw_tool_calls"] >= 2
    batch = compute_score(data_sources=["hopforge"] * 2, solution_strs=[broken, solution(SEARCH, OPEN)],
                          ground_truths=[GT, GT], extra_infos=[extra, extra], **kw)
    assert {k: batch[0][k] for k in REWARD_KEYS} == dict.fromkeys(REWARD_KEYS, 0.0), mode
    assert batch[1]["format_ok"] == 1.0 and batch[1]["f1"] == 1.0


def test_ground_truth_and_path_as_verl_batches_hand_them_over() -> None:
    np = pytest.importorskip("numpy")
    gt = {"target": np.array(["Delta City", "Delta"], dtype=object)}
    extra = dict(EXTRA, path=np.array(EXTRA["path"], dtype=object))
    got = compute_score("hopforge", solution(SEARCH, OPEN), gt, extra, evidence_weight=1.0)
    assert got["acc"] == 1.0 and got["evidence"] == 0.25
    assert compute_score("hopforge", solution(), ["Delta City"])["score"] == 1.0
    assert compute_score("hopforge", solution(), "Delta City", None)["score"] == 1.0


def test_the_reward_judges_near_misses_as_the_filter_did_without_the_corpus(tmp_path) -> None:
    """A near-miss teacher: for each rl question one rollout names another page of the corpus (or the right page in
    ASCII), one the gold title.  The filter, reading the corpus, and the reward, reading only the rl_pool row,
    agree on every rollout; token F1 alone would have taken every near miss."""
    import pyarrow.dataset as ds

    from helpers.answerworld import FOLDED, GOLDS, NEAR_MISS, answer_store
    from helpers.filterstore import config, stages
    from helpers.traces import make_trace
    from synth.engine.runner import run_stage
    from synth.text.answers import best_match

    traces = []
    for qid, (pid, title) in GOLDS.items():
        first = NEAR_MISS.get(qid) or FOLDED[qid]
        second = title if qid in NEAR_MISS else "Nowhere at all"
        for i, answer in enumerate((first, second)):
            traces.append(make_trace(f"{qid}-{i}", qid, sample_index=i, answer=answer, split="rl",
                                     gold_page_ids=["p-start", pid], gold_first_seen=[1, 2]))
    store = answer_store(tmp_path / "run", traces=traces, split="rl", tokenizer=True)
    filt, _ = stages()
    run_stage(filt, config(max_tokens=100_000), store)
    verdicts = {v["trace_id"]: v for v in ds.dataset(store.path("filter/verdicts")).to_table().to_pylist()}
    for qid, near in NEAR_MISS.items():
        assert best_match(near, [GOLDS[qid][1]])[1] >= 0.8  # F1 alone would accept it
        assert (verdicts[f"{qid}-0"]["correct"], verdicts[f"{qid}-0"]["match"]) == (False, "other_page"), qid
        assert verdicts[f"{qid}-1"]["match"] == "page"
    for qid in FOLDED:
        assert (verdicts[f"{qid}-0"]["correct"], verdicts[f"{qid}-0"]["match"]) == (True, "page"), qid
    rows = {r["extra_info"]["question_id"]: r for r in ds.dataset(store.path("rl_pool")).to_table().to_pylist()}
    assert set(rows) == set(GOLDS)  # one right and one wrong rollout each: all in the band
    for t in traces:
        row = rows[t.question_id]
        got = compute_score(row["data_source"], solution(answer=t.final_answer), row["reward_model"]["ground_truth"],
                            row["extra_info"], min_f1=0.8)
        assert got["acc"] == float(verdicts[t.trace_id]["correct"]), t.trace_id
    assert NEAR_MISS["q-ny"] in rows["q-ny"]["reward_model"]["ground_truth"]["other_titles"]
    with pytest.raises(ValueError, match="below 0.8"):  # a looser reward than the filter's is refused
        compute_score("hopforge", solution(answer="New York"), rows["q-ny"]["reward_model"]["ground_truth"],
                      rows["q-ny"]["extra_info"], min_f1=0.5)
