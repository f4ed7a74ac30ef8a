"""Every validator's drop reason counted by the stage, and the one repair request: fixed, or not."""

import json
import re

import pyarrow.dataset as ds
import pytest

from flows.config import load_config
from flows.stages import INDEX, QUESTIONS
from helpers.openai_server import Reply, serve
from synth.engine.runner import run_stage

FILLERS = {f"f{i}": (f"Filler {i}", None, [f"Filler {i}: a place that locals visit often, number {i}."])
           for i in range(12)}
# One 2-hop walk per check; the bad question for each walk fails exactly that check.
PAGES = {
    "s1": ("Alpha Start", "Village", ["Alpha Start lies near Mid One, a town."]),
    "m1": ("Mid One", "Town", ["Mid One trades with Lutetia works."]),
    "e1": ("Lutetia", "Silvery lanthanide metal", ["Lutetia is hard and dense."]),
    "s2": ("Beta Start", "Village", ["Beta Start lies near Mid Two, a town, and near Harbour End."]),
    "m2": ("Mid Two", "Town", ["Mid Two ships to Harbour End."]),
    "e2": ("Harbour End", "Harbour", ["Harbour End has cranes."]),
    "s3": ("Gamma Start", "Village", ["Gamma Start sells Vapour and Flowing stuff."]),
    "g3": ("Vapour", "State of matter", ["Vapour rises to Delta End."]),
    "l3": ("Flowing", "State of matter", ["Flowing pours."]),
    "e3": ("Delta End", "Lighthouse", ["Delta End shines."]),
    "s4": ("Epsilon Start", "Village", ["Epsilon Start lies near Mid Four, a town."]),
    "m4": ("Mid Four", "Town", ["Mid Four mines Zorblax in the hills."]),
    "e4": ("Zorblax", "Fictional crystal", ["Zorblax is a quintessence crystal from the caves of Quorn."]),
    "s5": ("Zeta Start", "Village", ["Zeta Start lies near Mid Five, a town."]),
    "m5": ("Mid Five", "Town", ["Mid Five remembers the Flood of 1907 well."]),
    "e5": ("Flood of 1907", "Disaster", ["The flood drowned the valley."]),
    "s6": ("Eta Start", "Village", ["Eta Start lies near Mid Six, a town."]),
    "m6": ("Mid Six", "Town", ["Mid Six sends its goods to Omega End."]),
    "e6": ("Omega End", "Port", ["Omega End is a port."]),
    **FILLERS,
}
LINKS = [("s1", "m1", "Mid One"), ("m1", "e1", "Lutetia"), ("s2", "m2", "Mid Two"), ("m2", "e2", "Harbour End"),
         ("s2", "e2", "Harbour End"), ("s3", "g3", "Vapour"), ("s3", "l3", "Flowing"), ("g3", "e3", "Delta End"),
         ("s4", "m4", "Mid Four"), ("m4", "e4", "Zorblax"), ("s5", "m5", "Mid Five"), ("m5", "e5", "Flood of 1907"),
         ("s6", "m6", "Mid Six"), ("m6", "e6", "Omega End")]
WALKS = [["s1", "m1", "e1"], ["s2", "m2", "e2"], ["s3", "g3", "e3"], ["s4", "m4", "e4"], ["s5", "m5", "e5"],
         ["s6", "m6", "e6"]]
HOP = "Which place that locals visit often comes next along the road?"
BAD = {  # start title -> (question, the two sub-questions): the mistake each walk's question makes
    "Alpha Start": ("Start at Alpha Start. Go to the town nearby. Then a silvery lanthanide metal. Which is it?",
                    [HOP, HOP]),
    "Beta Start": (None, [HOP, HOP]),  # a fine question: the walk itself can be skipped
    "Gamma Start": (None, ["Which state of matter does it sell?", HOP]),
    "Epsilon Start": (None, [HOP, "Which quintessence crystal comes from the caves of Quorn?"]),
    "Zeta Start": ("Start at Zeta Start. Go to the town nearby. Then the flood of that town in 1907. Which is it?",
                   [HOP, HOP]),
}
REASONS = {"Alpha Start": "answer_description", "Beta Start": "skippable_hop", "Gamma Start": "ambiguous_hop",
           "Epsilon Start": "clue_shortcut", "Zeta Start": "answer_leak"}


def _handler(fixes: bool):
    def handle(req):
        user = req["messages"][-1]["content"]
        titles = re.findall(r"^\d+\. (.+?) \(", user, re.M)
        good = (f"Start at {titles[0]}. Next find the place that locals visit often. Then the next such place "
                f"down the road. Which place is it?")
        question, subs = BAD.get(titles[0], (good, [HOP, HOP]))
        if "A check rejected that answer" in user and fixes:
            question, subs = good, [HOP, HOP]
        obj = {"question": question or good, "answer": titles[-1], "answer_aliases": [],
               "hops": [{"sub_question": s, "bridge": t} for s, t in zip(subs, titles[1:])]}
        return Reply(content=json.dumps(obj))
    return handle


@pytest.fixture
def store(tmp_path, corpus):
    s = corpus(tmp_path, PAGES, LINKS, walks=WALKS)
    run_stage(INDEX, load_config(None, []), s, progress=False)
    return s


def _cfg(url):
    # The lexical adversaries: on a corpus of a few dozen pages, the dense one's top 10 is a third of it.
    return load_config(None, ["teacher.backend=openai", f"teacher.base_url={url}", "teacher.model=m",
                              "teacher.max_retries=0", "questions.from_subgraphs=false",
                              "questions.adversaries=[tool,body,keywords]"])


@pytest.mark.parametrize("fixes", [False, True])
def test_each_reason_counted_and_one_repair(store, monkeypatch, fixes):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    with serve(handler=_handler(fixes)) as srv:
        rep = run_stage(QUESTIONS, _cfg(srv.base_url), store, progress=False).report
        sent = srv.count
    repaired = ("answer_description", "ambiguous_hop", "clue_shortcut", "answer_leak")  # a walk's skip is not
    assert rep["input"] == 6 and rep["input"] == rep["output"] + sum(rep["dropped"].values())
    assert sent == 6 + len(repaired)  # one repair request each, never a second
    assert rep["repairs"] == {r: {"attempted": 1, "repaired": int(fixes)} for r in repaired}
    if fixes:
        assert rep["dropped"] == {"skippable_hop": 1} and rep["output"] == 5
    else:
        assert rep["dropped"] == {r: 1 for r in REASONS.values()} and rep["output"] == 1
        rejects = {r["source_id"]: r for r in ds.dataset(store.root / "rejects" / "questions").to_table().to_pylist()}
        for i, (start, reason) in enumerate(REASONS.items()):
            assert rejects[f"w{i}"]["reason"] == reason
    kept = ds.dataset(store.root / "questions").to_table().to_pylist()
    assert {q["titles"][0] for q in kept} >= {"Eta Start"}
    # The answer_leak is caught while parsing, before the checks, and so is its repair unless it fixes it.
    assert rep["validators"]["checked"] == 5 + 3 + int(fixes)


def test_oracle_repairs_rewrite_the_hop_the_check_names(tmp_path, demo_store):
    from synth.questions.links import LinkView, ShardCorpus, load_graph
    from synth.questions.sources import load_sources
    from synth.teacher.oracle import OracleModel
    from synth.teacher.tasks import QUESTION, REPAIR
    from synth.tools.search import SearchIndex

    store, cfg = demo_store

    class Ctx:
        pass

    ctx = Ctx()
    ctx.store, ctx.cfg = store, cfg
    sources = [s for s in load_sources(ctx) if s.kind == "walk"][:300]  # about one in ten gets a question at k = 5
    pages = {e["page_id"] for s in sources for e in s.entities}
    corpus = ShardCorpus(LinkView.open(store, load_graph(store), pages), SearchIndex.open(store.path("index")), 5)
    oracle = OracleModel(cfg.teacher)
    changed = 0
    for src in sources:
        first = json.loads(oracle.answer([], 0, QUESTION.hint(source=src, seed=src.seed, max_words=220,
                                                              corpus=corpus))["content"])
        if "hops" not in first:
            continue
        again = json.loads(oracle.answer([], 0, REPAIR.hint(
            source=src, seed=src.seed, reason="enterable_hop", hop=1, detail="hop 2's sentence ...", max_words=220,
            min_hops=3, corpus=corpus))["content"])
        if "hops" not in again:  # no other clue of hop 2 leaves the whole question unfound: declined, by name
            assert again["no_clue"] == 2
            continue
        assert [h for i, h in enumerate(first["hops"]) if i != 1] == [h for i, h in enumerate(again["hops"]) if i != 1]
        changed += first["hops"][1]["sub_question"] != again["hops"][1]["sub_question"]
    assert changed >= 5  # the named hop gets another clue wherever a second one qualifies


def test_a_repair_request_names_the_hop_and_the_search_that_entered_the_chain(store, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    seen = []
    quote = "Then the page that says it sends its goods"  # Mid Six's own words: one search finds Mid Six

    def handle(req):
        user = req["messages"][-1]["content"]
        seen.append(user)
        titles = re.findall(r"^\d+\. (.+?) \(", user, re.M)
        good = (f"Start at {titles[0]}. Next find the place that locals visit often. Then the next such place "
                f"down the road. Which place is it?")
        question = good
        if titles[0] == "Eta Start" and "A check rejected that answer" not in user:
            question = f'Start at {titles[0]}. {quote} "sends its goods to". Then the place that locals visit often. ' \
                       'Which place is it?'
        return Reply(content=json.dumps({"question": question, "answer": titles[-1], "answer_aliases": [],
                                         "hops": [{"sub_question": HOP, "bridge": t} for t in titles[1:]]}))

    with serve(handler=handle) as srv:
        rep = run_stage(QUESTIONS, _cfg(srv.base_url), store, progress=False).report
    assert rep["repairs"]["enterable_hop"] == {"attempted": 1, "repaired": 1}
    repair = next(u for u in seen if "A check rejected that answer (enterable_hop)" in u)
    # The request names the hop, how it was searched, the query and the page it found.
    assert "hop 1's quote ('sends its goods to')" in repair and "'Mid Six', page 1 of the chain" in repair
    kept = {q["titles"][0]: q for q in ds.dataset(store.root / "questions").to_table().to_pylist()}
    assert kept["Eta Start"]["effective_depth"] == 2 and kept["Eta Start"]["entry"] is None
