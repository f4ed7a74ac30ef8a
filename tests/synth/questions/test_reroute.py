"""The answer cap's second routing pass: a walk that the cap drops (its routed answer already answers
``walk.max_answer_repeats`` questions) is routed again to another, named, answer instead of being lost; the
stage's table and report stay consistent.  On a copy of the demo store, its first 3-hop walks routed, cap 1."""

from collections import Counter

import pyarrow.dataset as ds
import pytest

from flows.stages import QUESTIONS
from helpers.demostore import copy_demo_store
from synth.engine.runner import run_stage
from synth.text.parse import entity_type, is_named


@pytest.fixture(scope="module")
def capped(demo_store, tmp_path_factory):
    store, cfg = demo_store
    copy = copy_demo_store(store, tmp_path_factory.mktemp("reroute") / "store", walks=150)
    cfg = cfg.model_copy(deep=True)
    cfg.questions.route, cfg.questions.from_subgraphs, cfg.walk.max_answer_repeats = True, False, 1
    report = run_stage(QUESTIONS, cfg, copy, progress=False).report
    questions = ds.dataset(copy.root / "questions").to_table().to_pylist()
    rejects = ds.dataset(copy.root / "rejects/questions").to_table().to_pylist()
    pages = {r["page_id"]: r for r in ds.dataset(copy.root / "corpus/pages").to_table(
        columns=["page_id", "title", "paragraphs"]).to_pylist()}
    return report, questions, rejects, pages


def test_walks_the_cap_dropped_are_routed_again_to_other_named_answers(capped):
    report, questions, rejects, pages = capped
    second = report["routing"]["answer_repeat_rerouted"]
    capped_ids = {r["record_id"] for r in rejects if r["reason"] == "answer_repeat"}
    # every walk the cap dropped was tried again; some got a question, the others keep their reject
    assert second["walks"] == second["kept"] + len(capped_ids) > 0, (second, len(capped_ids))
    assert second["kept"] > 0 and second["written"] >= second["kept"]
    assert report["dropped"].get("answer_repeat", 0) == len(capped_ids)
    assert report["output"] == len(questions)
    assert report["input"] == report["output"] + sum(report["dropped"].values())
    ids = [q["question_id"] for q in questions]
    assert len(ids) == len(set(ids)) and not capped_ids & set(ids)
    # the cap holds over both passes: no page answers two questions
    per_answer = Counter(q["answer_page_id"] for q in questions)
    assert max(per_answer.values()) == 1, per_answer.most_common(3)


def test_a_second_pass_question_ends_on_a_named_entity_and_is_checked_like_any_other(capped):
    report, questions, rejects, pages = capped
    second = report["routing"]["answer_repeat_rerouted"]["kept"]
    named = [is_named(entity_type(pages[q["answer_page_id"]]["title"],
                                  ((pages[q["answer_page_id"]]["paragraphs"] or [""])[0] or "")[:400]))
             for q in questions]
    assert sum(named) >= second  # the second pass ends only on named entities; the first prefers them
    # every question, of either pass, went through the validators: each hop needed against every adversary
    assert all(q["effective_depth"] == len(q["hops"]) == 3 for q in questions), \
        Counter((len(q["hops"]), q["effective_depth"]) for q in questions)
