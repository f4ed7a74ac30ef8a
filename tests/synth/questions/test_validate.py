"""The question validators, one rule at a time, on hand-made bad questions over small corpora."""

import pytest

from flows.config import load_config
from flows.stages import INDEX
from synth.engine.records import Evidence, Hop, Question
from synth.engine.runner import run_stage
from synth.questions.links import LinkView, load_graph
from synth.questions.sources import parse_question
from synth.questions.validate import Failure, Validator, hop_clues, repairable
from synth.text.clues import covers
from synth.text.question_text import answer_tokens, content_words, leaked, sentences
from synth.teacher.tasks import QUESTION, Source


def _q(path, titles, text, subs, kind="walk"):
    return Question(question_id="q-test", kind=kind, source_id="w0", path=path, titles=titles, question=text,
                    answer=titles[-1], answer_aliases=[], answer_page_id=path[-1],
                    hops=[Hop(s, t, p) for s, t, p in zip(subs, titles[1:], path[1:])], teacher_model="t",
                    prompt_sha="x", seed=0, split="sft")


def _validator(store, path, index=None, min_depth=1.0):
    return Validator(LinkView.open(store, load_graph(store), path, path), index, k=5, min_depth=min_depth)


CHAIN = {
    "a": ("Alder", "Village in Ruritania", ["Alder sits by the river Bree, next to Birch."]),
    "b": ("Birch", "Market town", ["Birch trades timber with the Oxygen works, far to the east."]),
    "o": ("Oxygen", "Chemical element with atomic number 8 (O)", ["Oxygen is a gas that most life breathes."]),
}


def test_answer_description_repeated_in_the_question_or_the_last_sub_question(tmp_path, corpus):
    store = corpus(tmp_path, CHAIN, [("a", "b", "Birch"), ("b", "o", "Oxygen")])
    path, titles = ["a", "b", "o"], ["Alder", "Birch", "Oxygen"]
    v = _validator(store, path)
    good_subs = ["Which town sits by the river Bree?", "Which works trade timber far to the east?"]
    bad = _q(path, titles, "Start at Alder. Its town trades timber. Which chemical element with atomic number "
                           "eight is next?", good_subs)
    assert v.check(bad) is None  # "eight" is not the description's "8": only the core's exact words count
    bad = _q(path, titles, "Start at Alder. A town is next. Then a chemical element with atomic number 8.", good_subs)
    f = v.check(bad)
    assert f.reason == "answer_description" and "atomic number 8" in f.detail and f.hop == 1
    sub = _q(path, titles, "Start at Alder. A town is next. Then whatever the works trade with.",
             [good_subs[0], "Which chemical element with atomic number 8 (O) is it?"])
    assert v.check(sub).reason == "answer_description" and "last sub-question" in v.check(sub).detail
    # Two words of the description are no repeat of it.
    assert v.check(_q(path, titles, "Start at Alder. A town is next. Then some chemical element.", good_subs)) is None


def test_skippable_hop_in_the_order_the_question_uses(tmp_path, corpus):
    skip = corpus(tmp_path / "skip", CHAIN, [("a", "b", "Birch"), ("b", "o", "Oxygen"), ("a", "o", "river Bree")])
    path, titles = ["a", "b", "o"], ["Alder", "Birch", "Oxygen"]
    subs = ["Which town sits by the river Bree?", "Which works trade timber far to the east?"]
    text = "Start at Alder. Go to the timber town by the river. Then the works it trades with."
    f = _validator(skip, path).check(_q(path, titles, text, subs))
    assert f == Failure("skippable_hop", "'Alder' links straight to 'Oxygen'", 0)
    # A later entity linking back to an earlier one skips nothing.
    back = corpus(tmp_path / "back", CHAIN, [("a", "b", "Birch"), ("b", "o", "Oxygen"), ("o", "a", "Oxygen")])
    assert _validator(back, path).check(_q(path, titles, text, subs)) is None
    # A walk's chain is fixed: no rewrite removes its skip; a subgraph question can chain others.
    src = Source("walk", "w0", [], [], 0)
    assert not repairable(src, f) and repairable(Source("subgraph", "s0", [], [], 0), f)


STATES = {
    "m": ("Phase", "Form a substance takes", ["Common states are gas, liquid and solid, and plasma lights stars."]),
    "g": ("Gas", "State of matter", ["Gas is a compressible fluid that mixes with the air around it."]),
    "l": ("Liquid", "State of matter", ["Liquid flows."]),
    "s": ("Solid", "State of matter", ["Solid keeps its shape."]),
    "p": ("Plasma (physics)", "Ionised state of matter", ["Plasma glows."]),
    "r": ("Air", "Mixture of gases around Earth", ["Air is mostly nitrogen."]),
}
STATE_LINKS = [("m", "g", "gas"), ("m", "l", "liquid"), ("m", "s", "solid"), ("m", "p", "plasma"), ("g", "r", "air")]


@pytest.mark.parametrize("sub, ambiguous", [
    ("Which state of matter does the article mention?", "'Liquid'"),  # Liquid and Solid are states of matter too
    ("Which state of matter with no fixed volume is it?", "'Liquid'"),  # the bridge fits no better than Liquid
    ("What is next?", "names nothing"),  # no content word: fits any page
    ('Fill the blank in "Common states are ___, liquid and solid"?', None),  # evidence: fits no other page
])
def test_ambiguous_hop(tmp_path, corpus, sub, ambiguous):
    store = corpus(tmp_path, STATES, STATE_LINKS)
    path, titles = ["m", "g", "r"], ["Phase", "Gas", "Air"]
    q = _q(path, titles, "Start at Phase. Find the state. Then what it mixes with.",
           [sub, "What does the compressible fluid mix with all around?"])
    f = _validator(store, path).check(q)
    if ambiguous is None:
        assert f is None
    else:
        assert f.reason == "ambiguous_hop" and f.hop == 0 and ambiguous in f.detail


def test_ambiguous_backward_hop_compares_the_pages_linking_to_it(tmp_path, corpus):
    pages = {"x": ("Paris", "Capital of France", ["Paris is big."]),
             "c1": ("Lutetia Club", "Rowing club", ["Lutetia Club rows on the Seine in Paris."]),
             "c2": ("Seine Club", "Rowing club", ["Seine Club rows in Paris every spring."]),
             "z": ("Oar", "Rowing tool", ["An oar moves a boat."])}
    store = corpus(tmp_path, pages, [("c1", "x", "Paris"), ("c2", "x", "Paris"), ("c1", "z", "rows")])
    path, titles = ["x", "c1", "z"], ["Paris", "Lutetia Club", "Oar"]
    q = _q(path, titles, "Start at Paris. A rowing club mentions it. Its tool comes next.",
           ["Which rowing club mentions it?", "Which tool does that club row with on the Seine?"], kind="subgraph")
    f = _validator(store, path).check(q)
    assert f.reason == "ambiguous_hop" and "'Seine Club'" in f.detail and "linking to 'Paris'" in f.detail


def test_cover_rule():
    words = content_words("a state of matter with no fixed volume")
    assert covers(words, "State of matter") == 1.0
    assert covers(words, "Ionised state of matter") == 0.0  # two of three words: under three quarters
    assert covers(words, "Matter") == 1.0 and covers(content_words("a painter"), "Painter") == 1.0
    assert covers(words, "") == 0.0


ELEMENTS = {
    "a": ("Alder", "Village in Ruritania", ["Alder sits by the river Bree, next to Birch."]),
    "b": ("Birch", "Market town", ["Birch trades timber with the Europium mine, far to the east."]),
    "e": ("Europium", "Chemical element with atomic number 63 (Eu)",
          ["Europium is a silvery lanthanide metal that glows red in phosphors."]),
    **{f"f{i}": (f"Filler {i}", None, [f"Filler {i} is about rivers, towns, timber and trade number {i}."])
       for i in range(12)},
}


@pytest.fixture
def indexed(tmp_path, corpus):
    store = corpus(tmp_path, ELEMENTS, [("a", "b", "Birch"), ("b", "e", "Europium")])
    run_stage(INDEX, load_config(None, []), store, progress=False)
    from synth.tools.search import SearchIndex

    return store, SearchIndex.open(store.path("index"))


def test_clue_shortcut_searches_each_sub_question_and_the_final_clue(indexed):
    store, index = indexed
    path, titles = ["a", "b", "e"], ["Alder", "Birch", "Europium"]
    v = _validator(store, path, index, min_depth=0.0)  # this test is about the answer page; depth is measured only
    subs = ["Which town sits by the river Bree?", "Which mine does the timber town trade with far to the east?"]
    ok = _q(path, titles, "Start at Alder. Find the town by the river. Then the mine it trades with. Which is it?",
            subs)
    assert v.check(ok) is None
    # ... and it is shallow: hop 2's clue quotes Birch's own page, so one search enters the chain there.
    assert ok.effective_depth == 1 and "'Birch'" in ok.entry
    sent = v.depth.searches
    bad_sub = _q(path, titles, ok.question, [subs[0], "Which silvery lanthanide metal glows red in phosphors?"])
    f = v.check(bad_sub)
    assert f.reason == "clue_shortcut" and f.hop == 1 and "hop 2's clue" in f.detail
    # The shortcut check reads the effective-depth searches: only the new clue was searched, once by each
    # adversary (the tool, the body ranking, and its keywords with both).
    assert v.depth.searches == sent + 4
    bad_final = _q(path, titles, "Start at Alder. Find the town by the river. The next one glows red in phosphors, "
                                 "a silvery lanthanide metal. What is it?", subs)
    f = v.check(bad_final)
    assert f.reason == "clue_shortcut" and "the final clue" in f.detail
    assert hop_clues(bad_final)[1].startswith("The next one glows red")


def test_answer_leak_names_and_distinctive_tokens(tmp_path, corpus):
    eu = {"title": "Europium", "description": "Chemical element with atomic number 63 (Eu)", "aliases": None}
    assert set(answer_tokens(eu)) == {("63", False), ("Eu", True)}
    monet = {"title": "Claude Monet", "description": "French painter (1840–1926)", "aliases": ["Oscar-Claude Monet"]}
    assert {"Monet", "1840", "1926"} <= {t for t, _ in answer_tokens(monet)}
    assert leaked("The painter Monet of Giverny.", monet) == "Monet"
    assert leaked("A monetary union.", monet) is None and leaked("In 1840 he was born.", monet) == "1840"
    assert leaked("Its symbol is Eu.", eu) == "Eu" and leaked("A Europe-wide union.", eu) is None
    assert leaked("atomic number 63", eu) == "63" and leaked("atomic number 630", eu) is None
    assert answer_tokens({"title": "DNA", "description": None}) == [("DNA", True)]
    # A token of the start entity's title, which the question must write, does not count.
    race = {"title": "1907 Tour de France", "description": "Cycling race", "aliases": None}
    assert leaked("Start at the 1907 Paris Salon. Then ...", race, named=["1907 Paris Salon"]) is None
    assert leaked("Start at Paris. It was 1907.", race, named=["Paris"]) == "1907"


def test_parse_question_drops_a_token_leak():
    ev = [Evidence("a", "b", 1, ELEMENTS["a"][2][0], "Birch"), Evidence("b", "e", 1, ELEMENTS["b"][2][0], "Europium")]
    src = Source("walk", "w0", [dict(page_id=p, title=ELEMENTS[p][0], description=ELEMENTS[p][1], aliases=None)
                                for p in "abe"], ev, 0)
    qcfg = load_config(None, []).questions
    reply = ('{"question": "Start at Alder. Find the town by the river. Then the metal with symbol Eu it trades in.",'
             ' "answer": "Europium", "answer_aliases": [], "hops": [{"sub_question": "x", "bridge": "Birch"},'
             ' {"sub_question": "y", "bridge": "Europium"}]}')
    q, reason, detail = parse_question(src, reply, qcfg, "m", QUESTION)
    assert q is None and reason == "answer_leak" and "'Eu'" in detail


def test_sentences_keep_titles_whole():
    text = "Start at St. Louis. Then the river. Which one?"
    assert sentences(text) == ["Start at St.", "Louis.", "Then the river.", "Which one?"]
    assert sentences(text, protect=["St. Louis"]) == ["Start at St. Louis.", "Then the river.", "Which one?"]


# ---- effective depth ---------------------------------------------------------------------------------------

WOODS = {
    "a": ("Alder", "Village in Ruritania", ["Alder sits by the river Bree, next to Birch."]),
    "b": ("Birch", "Market town", ["Birch trades timber with the Cedar sawmill, far to the east of the hills."]),
    "c": ("Cedar", "Sawmill", ["Cedar cuts logs for the Europium mine on the moor."]),
    "e": ("Europium", "Chemical element with atomic number 63 (Eu)",
          ["Europium is a silvery lanthanide metal that glows red in phosphors."]),
    **{f"f{i}": (f"Filler {i}", "Place", [f"Filler {i} is about rivers, towns, hills and trade number {i}."])
       for i in range(12)},
}
WOOD_PATH, WOOD_TITLES = ["a", "b", "c", "e"], ["Alder", "Birch", "Cedar", "Europium"]
BLURRY = ["Which coastal settlement is it near?", "Which forestry works does that place deal with?",
          "Which mineral deposit does that one work?"]


@pytest.fixture
def woods(tmp_path, corpus):
    store = corpus(tmp_path, WOODS, [("a", "b", "Birch"), ("b", "c", "Cedar"), ("c", "e", "Europium")])
    run_stage(INDEX, load_config(None, []), store, progress=False)
    from synth.tools.search import SearchIndex

    return store, SearchIndex.open(store.path("index"))


def _woods_q(text: str, subs: list[str] = BLURRY) -> Question:
    return _q(WOOD_PATH, WOOD_TITLES, text, subs)


def test_blurry_clues_need_every_hop(woods):
    store, index = woods
    v = _validator(store, WOOD_PATH, index)
    q = _woods_q("Start at Alder. It is near a coastal settlement. That one deals with forestry works. Then a mineral deposit. Which is it?")
    assert v.check(q) is None
    assert (q.effective_depth, q.entry) == (3, None)
    assert [(d.nominal, d.effective) for d in v.depths] == [(3, 3)]


@pytest.mark.parametrize("hop, how, sub, sentence, entered", [
    # a verbatim quote of a later page, in the hop's sentence: one search enters at the page it is read on
    (2, "quote", None, 'Then a mineral deposit: its text says "cuts logs for the mine on the moor".', 2),
    # a unique description (what the page itself says) as the sub-question: one search finds the page it leads to
    (1, "sub-question", "Which sawmill far to the east of the hills trades timber?", None, 1),
    # the same, in the hop's sentence
    (0, "sentence", None, "It is near a coastal town that trades timber far to the east of the hills.", 1),
])
def test_a_later_hop_one_search_finds_is_an_entry_point(woods, hop, how, sub, sentence, entered):
    store, index = woods
    v = _validator(store, WOOD_PATH, index)
    sents = ["Start at Alder.", "It is near a coastal settlement.", "That one deals with forestry works.",
             "Then a mineral deposit.", "Which is it?"]
    if sentence is not None:
        sents[hop + 1] = sentence
    subs = list(BLURRY)
    if sub is not None:
        subs[hop] = sub
    q = _woods_q(" ".join(sents), subs)
    f = v.check(q)
    assert f is not None and f.reason == "enterable_hop" and f.hop == hop
    assert f"hop {hop + 1}'s {how}" in f.detail and f"page {entered} of the chain" in f.detail
    assert q.effective_depth == 3 - entered and q.entry is not None and repr(WOOD_TITLES[entered]) in q.entry


def test_the_whole_question_is_searched_too(tmp_path, corpus):
    # Birch's page names the start: no clue alone finds it, but the whole question, which names the start, does.
    pages = dict(WOODS, b=("Birch", "Market town", ["Birch, a neighbour of Alder, trades timber with Cedar."]))
    store = corpus(tmp_path, pages, [("a", "b", "Birch"), ("b", "c", "Cedar"), ("c", "e", "Europium")])
    run_stage(INDEX, load_config(None, []), store, progress=False)
    from synth.tools.search import SearchIndex

    v = _validator(store, WOOD_PATH, SearchIndex.open(store.path("index")))
    q = _woods_q("Start at Alder. It is near a coastal settlement. That one deals with forestry works. "
                 "Then a mineral deposit. Which is it?")
    f = v.check(q)
    assert f.reason == "enterable_hop" and "the whole question" in f.detail and "'Birch'" in f.detail
    assert f.hop == 0  # the hop into the page found: its clue is the one to rewrite


def test_min_effective_depth_is_a_share_of_the_hops(woods):
    store, index = woods
    text = ('Start at Alder. It is near a coastal settlement. That one deals with forestry works. Then a mineral deposit, '
            '"cuts logs for the mine". Which?')
    assert _validator(store, WOOD_PATH, index).check(_woods_q(text)).reason == "enterable_hop"
    # 1 of 3 hops left (the quote enters at page 2): enough for a floor of 0.3, not for 0.4; with 0 it is
    # only measured.
    for floor, dropped in ((0.4, True), (0.3, False), (0.0, False)):
        q = _woods_q(text)
        f = _validator(store, WOOD_PATH, index, min_depth=floor).check(q)
        assert (f is not None) == dropped and q.effective_depth == 1


@pytest.mark.parametrize("text", [
    "Start at Alder. Follow the link to a town. Which element is it?",
    "Consider Alder. It trades with a town whose page names a gas. Which gas is it?",
    "Consider Alder. The article on it mentions a town. Which element does the trail reach?",
])
def test_a_question_with_navigation_language_is_refused(tmp_path, corpus, text):
    store = corpus(tmp_path, CHAIN, [("a", "b", "Birch"), ("b", "o", "Oxygen")])
    path, titles = ["a", "b", "o"], ["Alder", "Birch", "Oxygen"]
    subs = ["Which town sits by the river Bree?", "Which gas is traded with for timber?"]
    failure = _validator(store, path).check(_q(path, titles, text, subs))
    assert failure is not None and failure.reason == "navigation", failure


def test_a_sub_question_with_navigation_language_is_refused_and_facts_pass(tmp_path, corpus):
    store = corpus(tmp_path, CHAIN, [("a", "b", "Birch"), ("b", "o", "Oxygen")])
    path, titles = ["a", "b", "o"], ["Alder", "Birch", "Oxygen"]
    facts = "Consider Alder. It sits next to a market town. That town trades timber with a gas works. Which gas is it?"
    v = _validator(store, path)
    ok = v.check(_q(path, titles, facts, ["Which market town sits next to it?", "Which gas works trade timber?"]))
    assert ok is None or ok.reason != "navigation", ok
    bad = v.check(_q(path, titles, facts, ["Which town does the previous page link to?", "Which gas works trade timber?"]))
    assert bad is not None and bad.reason == "navigation" and bad.hop == 0, bad
