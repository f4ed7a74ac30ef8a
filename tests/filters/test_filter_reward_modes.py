"""The reward modes of filters/reward.py on real ``rl_pool`` rows (the pipeline on the demo corpus).

Each row's ground truth, path and titles come from the pipeline; the solutions are written as verl's
reward managers hand them over (Qwen2.5 template decoded with ``skip_special_tokens=True``: tool calls in
``<tool_call>`` blocks, observations in ``<tool_response>`` blocks).  Expected values are computed from the
row and the published formula, never typed in.
"""

from __future__ import annotations

import json

import pytest

from filters.reward import compute_score
from synth.text.answers import normalize_answer


def call(name: str, **args) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def observation(obj) -> str:
    return "user\n<tool_response>\n" + json.dumps(obj, ensure_ascii=False) + "\n</tool_response>\nassistant\n"


SEARCH = call("search", query="a place") + observation([{"page_id": "0", "title": "Somewhere", "snippet": "..."}])


def solution(answer: str, *, names: list[str] = (), calls: int = 1, checks: int = 0) -> str:
    """``calls`` searches (the first turn's text names ``names``), ``checks`` check_answer calls, an answer."""
    turns = [f"I follow {' and then '.join(names)}. " if names else "Searching. "]
    turns += [SEARCH] * calls
    turns += [call("check_answer", answer=answer) + observation("Correct: this is the answer to the question.")] * checks
    return "".join(turns) + f"So the answer is <answer>{answer}</answer>"


@pytest.fixture(scope="module")
def row(rl_rows) -> dict:
    """A row whose path has two bridge entities (path[1], path[2]) and an answer of more than one word."""
    rows = [r for r in rl_rows if len(r["extra_info"]["path"]) >= 4]
    assert rows, "the demo run has no 3-hop rl_pool row"
    multi = [r for r in rows if len(normalize_answer(r["reward_model"]["ground_truth"]["target"][0]).split()) > 1]
    return (multi or rows)[0]


def _score(row: dict, text: str, **kw) -> dict:
    return compute_score(row["data_source"], text, row["reward_model"]["ground_truth"], row["extra_info"], **kw)


def _batch(rows: list[dict], texts: list[str], **kw) -> list[dict]:
    return compute_score(data_sources=[r["data_source"] for r in rows], solution_strs=texts,
                         ground_truths=[r["reward_model"]["ground_truth"] for r in rows],
                         extra_infos=[dict(r["extra_info"]) for r in rows], **kw)


def _gold(row: dict) -> str:
    return row["reward_model"]["ground_truth"]["target"][0]


def _bridges(row: dict) -> list[str]:
    return list(row["extra_info"]["titles"][1:-1])


def test_em_stays_the_default(row) -> None:
    right, wrong = solution(_gold(row)), solution("Nowhere In Particular")
    assert _score(row, right) == _score(row, right, mode="em")
    assert _score(row, right)["score"] == 1.0 and _score(row, wrong)["score"] == 0.0


def test_f1_is_token_f1_over_words(row) -> None:
    gold_words = normalize_answer(_gold(row)).split()
    first = gold_words[0]
    got = _score(row, solution(first + " Nowhere"), mode="f1")
    # one shared word: 2·n_int / (n_pred + n_truth)
    assert got["score"] == pytest.approx(2 * 1 / (2 + len(gold_words)))
    assert _score(row, solution(_gold(row)), mode="f1")["score"] == 1.0
    assert _score(row, solution("Nowhere"), mode="f1")["score"] == 0.0
    assert _score(row, solution(_gold(row)).replace("</answer>", ""), mode="f1")["score"] == 0.0  # format gate


def test_rubric_is_positive_only(row) -> None:
    bridges = _bridges(row)
    wrong_listing_all = solution("Nowhere In Particular", names=bridges)
    got = _score(row, wrong_listing_all, mode="rubric")
    assert got["raw_rubric"] == 1.0  # it does name every entity (the ungated diagnostic says so) ...
    assert got["score"] == 0.0 and got["rubric"] == 0.0  # ... and earns nothing for it, in no reward key either
    got = _batch([row, row], [wrong_listing_all, solution(_gold(row))], mode="rubric", rubric_weight=0.5)
    assert [g["score"] for g in got] == [0.0, 1.0]  # a wrong answer's entities do not set the group's scale


def test_rubric_is_normalised_by_the_group_max(rl_rows, row) -> None:
    lam = 0.4
    b = _bridges(row)
    texts = [solution(_gold(row), names=b), solution(_gold(row), names=b[:1]), solution("Nowhere", names=b),
             solution(_gold(row))]
    got = _batch([row] * 4, texts, mode="rubric", rubric_weight=lam)
    shares = [g["rubric"] for g in got]
    assert shares == [1.0, 1 / len(b), 0.0, 0.0]  # the wrong answer's share is gated to 0 (positive-only)
    assert [g["raw_rubric"] for g in got] == [1.0, 1 / len(b), 1.0, 0.0]
    assert [g["score"] for g in got] == pytest.approx([1 + lam, 1 + lam * shares[1], 0.0, 1.0])
    # another question in the same step is its own group: its best correct response sets its own scale
    other = next(r for r in rl_rows if r["extra_info"]["question_id"] != row["extra_info"]["question_id"]
                 and len(r["extra_info"]["path"]) >= 4)
    ob = _bridges(other)
    mixed = _batch([row, other, row], [texts[1], solution(_gold(other), names=ob[:1]), texts[0]], mode="rubric",
                   rubric_weight=lam)
    assert mixed[1]["score"] == pytest.approx(1 + lam)  # its group max is its own share
    assert mixed[0]["score"] == pytest.approx(1 + lam * shares[1]) and mixed[2]["score"] == pytest.approx(1 + lam)
    # alone (verl's per-response manager) the share is normalised by the largest possible, 1
    assert _score(row, texts[1], mode="rubric", rubric_weight=lam)["score"] == pytest.approx(1 + lam * shares[1])


def test_gain_against_stored_baselines(row) -> None:
    gold = _gold(row)

    def with_baselines(closed: str | None, rag: str | None) -> dict:
        extra = dict(row["extra_info"], baselines={"closed_book": {"answer": closed, "acc": None, "f1": None},
                                                    "rag": {"answer": rag, "acc": None, "f1": None}})
        return dict(row, extra_info=extra)

    neither, closed_right, rag_right = with_baselines("I don't know", "Nowhere"), with_baselines(gold, "x"), \
        with_baselines(None, gold)
    right, wrong = solution(gold), solution("Nowhere In Particular")
    assert _score(neither, right, mode="gain")["score"] == 1.5  # ½ + 1 − ½·0
    assert _score(closed_right, right, mode="gain")["score"] == 1.0  # ½ + 1 − ½·1: planning added nothing
    assert _score(rag_right, right, mode="gain")["score"] == 1.0
    assert _score(rag_right, wrong, mode="gain")["score"] == 0.0  # ½ + 0 − ½
    assert _score(neither, wrong, mode="gain")["score"] == 0.5
    # S may be the token F1, for the policy's answer and the baselines alike
    half = normalize_answer(gold).split()[0]
    f1_base = with_baselines(half, None)
    s_half = _score(row, solution(half), mode="f1")["score"]
    assert _score(f1_base, right, mode="gain", gain_score="f1")["score"] == pytest.approx(0.5 + 1 - 0.5 * s_half)
    with pytest.raises(ValueError, match="baselines"):
        _score(row, right, mode="gain")  # a row built without rl.baselines


@pytest.mark.parametrize("calls", [1, 2, 3, 5])
def test_step_penalty_from_the_third_tool_call(row, calls: int) -> None:
    weight, alpha = 0.05, 2.0
    got = _score(row, solution(_gold(row), calls=calls), step_weight=weight, step_alpha=alpha)
    expected = sum(weight * alpha ** (t - 3) for t in range(3, calls + 1))
    assert got["tool_calls"] == calls and got["penalty"] == pytest.approx(expected)
    assert got["score"] == pytest.approx(1.0 - expected)
    assert (got["penalty"] == 0.0) == (calls < 3)
    assert _score(row, solution(_gold(row), calls=calls))["penalty"] == 0.0  # off by default


def test_privileged_feedback_attenuates_by_rho_per_check(row) -> None:
    for checks in (0, 1, 3):
        got = _score(row, solution(_gold(row), checks=checks), rho_pf=0.8)
        assert got["check_calls"] == checks and got["format_ok"] == 1.0
        assert got["score"] == pytest.approx(0.8 ** checks)
    # composes with the other modes: the rubric's return is attenuated the same way
    b = _bridges(row)
    plain = _score(row, solution(_gold(row), names=b), mode="rubric")["score"]
    checked = _score(row, solution(_gold(row), names=b, checks=2), mode="rubric", rho_pf=0.5)["score"]
    assert checked == pytest.approx(plain * 0.25)


def test_unknown_modes_are_refused(row) -> None:
    with pytest.raises(ValueError, match="allowed: em, f1, rubric, gain"):
        _score(row, solution(_gold(row)), mode="rubrik")
