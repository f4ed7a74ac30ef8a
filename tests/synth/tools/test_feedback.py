"""CAPF's check_answer verdicts (synth/tools/feedback.py) on a made chain: correct, partially right, wrong."""

from __future__ import annotations

import pytest

from helpers.traces import make_question
from synth.tools.feedback import check

Q = make_question(aliases=["Delta"])  # Alpha Station -> Bravo Harbour -> Charlie (planet) -> Delta City
CHAIN = Q.titles


@pytest.mark.parametrize("candidate", ["Delta City", "delta city.", "The Delta City", "Delta"])
def test_the_answer_or_an_alias_is_correct(candidate: str) -> None:
    assert check(candidate, Q.golds, CHAIN)[0] == "correct"


def test_a_bridge_entity_is_partially_right_and_says_which_step() -> None:
    verdict, text = check("Bravo Harbour", Q.golds, CHAIN)
    assert verdict == "partial" and "step 1 of 3" in text and "2 more step" in text
    verdict, text = check("Charlie", Q.golds, CHAIN)  # the title without its "(planet)" qualifier
    assert verdict == "partial" and "step 2 of 3" in text
    verdict, text = check("alpha station", Q.golds, CHAIN)
    assert verdict == "partial" and "starts from" in text
    for _, text in (check(t, Q.golds, CHAIN) for t in CHAIN[:-1]):
        assert "Delta" not in text  # the guidance never gives the answer away


@pytest.mark.parametrize("candidate", ["", "   ", None, "Echo Town", "Bravo"])
def test_anything_else_is_wrong(candidate) -> None:
    assert check(candidate, Q.golds, CHAIN)[0] == "wrong"


def test_the_threshold_is_the_correctness_filters() -> None:
    # F1("Delta City Harbour", "Delta City") = 0.8
    assert check("Delta City Harbour", ["Delta City"], CHAIN, min_f1=0.8)[0] == "correct"
    assert check("Delta City Harbour", ["Delta City"], CHAIN, min_f1=0.9)[0] == "wrong"
