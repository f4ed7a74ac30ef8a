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
    return load_config(None, ["teacher.backend=openai", f"teacher.base_url={url}", "teacher.model=m",
                              "teacher.max_retries=0", "questions.from_subgraphs=false"])


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


def test_oracle_questions_pass_and_repairs_choose_other_clues(store):
    from synth.teacher.oracle import OracleModel
    from synth.teacher.tasks import QUESTION, REPAIR
    from synth.questions.sources import load_sources

    cfg = load_config(None, ["questions.from_subgraphs=false"])
    rep = run_stage(QUESTIONS, cfg, store, progress=False).report
    assert rep["input"] == rep["output"] + sum(rep["dropped"].values())
    assert rep["dropped"].get("skippable_hop") == 1  # the Beta walk; the oracle cannot unlink pages

    class Ctx:
        pass

    ctx = Ctx()
    ctx.store, ctx.cfg = store, cfg
    src = next(s for s in load_sources(ctx) if s.entities[0]["title"] == "Alpha Start")
    oracle = OracleModel(cfg.teacher)
    first = json.loads(oracle._question([], None, 0, QUESTION.hint(source=src, seed=src.seed))["content"])
    again = json.loads(oracle._repair([], None, 0, REPAIR.hint(source=src, seed=src.seed, reason="clue_shortcut",
                                                                 hop=1, of="question"))["content"])
    assert first["hops"][0] == again["hops"][0]  # the hop the check did not name keeps its clue
    assert first["hops"][1]["sub_question"] != again["hops"][1]["sub_question"]
