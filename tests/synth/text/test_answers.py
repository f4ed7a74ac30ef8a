"""The answer rule: Unicode folding, and page identity before token F1 (synth.text.answers)."""

from __future__ import annotations

import pytest

from synth.text.answers import (F1, NO_MATCH, OTHER_PAGE, PAGE, QUALIFIED, AnswerKey, answer_text, best_match, fold,
                                is_correct, judge)


@pytest.mark.parametrize("prediction,gold", [
    ("Zurich", "Zürich"),
    ("Albrecht Durer", "Albrecht Dürer"),
    ("Acid-base reaction", "Acid–base reaction"),  # hyphen for an en dash
    ("Acid base reaction", "Acid–base reaction"),
    ("STRASSE", "Straße"),
    ("O'Brien", "O’Brien"),  # a straight apostrophe for a curly one
])
def test_folded_forms_of_the_title_are_the_page(prediction: str, gold: str) -> None:
    j = judge(prediction, AnswerKey((gold,)), 0.8)
    assert (j.correct, j.em, j.basis) == (True, True, PAGE)


def test_folding_alone_leaves_ascii_words_as_they_were() -> None:
    assert fold("Zürich–Bern") == "zurich bern"
    assert answer_text("The Beatles") == answer_text("beatles")


@pytest.mark.parametrize("prediction,gold,other", [
    ("New York City", "New York", "New York City"),
    ("George Washington Carver", "George Washington", "George Washington Carver"),
    ("1998 FIFA World Cup Final", "1998 FIFA World Cup", "1998 FIFA World Cup Final"),
    ("List of rivers of Germany", "List of rivers of France", "List of rivers of Germany"),
    ("Milky Way (disambiguation)", "Milky Way", "Milky Way (disambiguation)"),
    ("Arctic Ocean (1757)", "Arctic Ocean", "Arctic Ocean (1757)"),
])
def test_the_title_of_another_page_is_wrong_however_close(prediction: str, gold: str, other: str) -> None:
    key = AnswerKey((gold,), (other,), 0.8)
    j = judge(prediction, key, 0.8)
    assert j.f1 >= 0.8  # token F1 alone would have accepted it
    assert (j.correct, j.basis) == (False, OTHER_PAGE)
    assert best_match(prediction, [gold])[1] >= 0.8


@pytest.mark.parametrize("prediction", ["Milky Way (disambiguation)", "Arctic Ocean (1757)"])
def test_a_qualifier_the_gold_page_lacks_names_another_page_without_the_corpus(prediction: str) -> None:
    gold = prediction.split(" (")[0]
    j = judge(prediction, AnswerKey((gold,)), 0.8)
    assert (j.correct, j.basis) == (False, QUALIFIED)


def test_a_qualified_gold_title_and_its_bare_form_are_the_page() -> None:
    key = AnswerKey(("Mercury (planet)", "Mercury"))
    assert judge("Mercury (planet)", key, 0.8).basis == PAGE
    assert judge("mercury", key, 0.8).basis == PAGE
    assert judge("Mercury (element)", key, 0.8).basis == QUALIFIED


def test_free_text_falls_back_to_token_f1() -> None:
    key = AnswerKey(("New York",), ("New York City",), 0.8)
    j = judge("New York state", key, 0.8)  # not a title of the corpus: free text, F1 0.8
    assert (j.correct, j.basis) == (True, F1)
    assert judge("the state", key, 0.8).basis == NO_MATCH
    assert judge("  ", key, 0.8) == judge(None, key, 0.8)
    assert not judge(None, key, 0.8).correct


def test_a_key_judged_below_its_own_threshold_is_refused() -> None:
    key = AnswerKey(("New York",), ("New York City",), 0.8)
    with pytest.raises(ValueError, match="min_f1 0.5 is below 0.8"):
        judge("New York", key, 0.5)
    assert judge("New York", key, 0.9).correct  # a stricter threshold needs no more titles


def test_is_correct_takes_a_key_or_gold_strings() -> None:
    assert is_correct("Zurich", ["Zürich"], 0.8)
    assert not is_correct("New York City", AnswerKey(("New York",), ("New York City",), 0.8), 0.8)
    assert is_correct("New York City", ["New York"], 0.8)  # without the corpus it cannot know


def test_ground_truth_round_trip_and_older_rows() -> None:
    key = AnswerKey(("Zürich", "Zurich"), ("Zürich (canton)",), 0.8)
    assert AnswerKey.from_ground_truth(key.ground_truth()) == key
    assert AnswerKey.from_ground_truth({"target": ["A", ""]}) == AnswerKey(("A",))
    assert AnswerKey.from_ground_truth(["A"]) == AnswerKey(("A",))
    assert AnswerKey.from_ground_truth("A") == AnswerKey(("A",))
