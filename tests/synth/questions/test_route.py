"""Clue-aware walks: a hop with no clue is re-routed through another link of the same page, never the walk
dropped for it, on the demo corpus (real link neighbourhoods, the real index and adversaries)."""

import pytest

from synth.engine.seeding import derive_seed
from synth.questions.config import search_depth
from synth.questions.links import LinkView, ShardCorpus, load_graph
from synth.questions.route import Router
from synth.questions.sources import load_sources
from synth.questions.validate import Validator
from synth.teacher.oracle.clues import ClueMaker
from synth.teacher.oracle.writer import NoClue, chain_question
from synth.text.parse import named_in, named_title
from synth.tools.search import SearchIndex


class _Ctx:
    def __init__(self, store, cfg):
        self.store, self.cfg = store, cfg


@pytest.fixture(scope="module")
def routed(demo_store):
    store, cfg = demo_store
    walks = [s for s in load_sources(_Ctx(store, cfg)) if s.kind == "walk"][:120]
    index = SearchIndex.open(store.path("index"))
    k = search_depth(cfg.questions, cfg.tools)
    pages = {e["page_id"] for s in walks for e in s.entities}
    v = Validator(LinkView.open(store, load_graph(store), pages), index, k, 1.0, True, cfg.questions.adversaries)
    corpus = ShardCorpus(v.links, index, k, v.depth.adversaries, 1.0)
    return walks, corpus, Router(corpus, budget=48)


def test_a_walk_with_an_unclueable_hop_is_rerouted_not_dropped(routed):
    walks, corpus, router = routed
    maker = ClueMaker(corpus)
    stuck = []
    for src in walks:
        try:
            chain_question(src.entities, derive_seed(src.seed, "oracle-question", 0), corpus, maker=maker)
        except NoClue as e:
            stuck.append((src, e.hop))
    assert stuck, "every demo walk could be clued as walked: nothing to route"
    rerouted = 0
    for src, hop in stuck:
        out = router.route(src)
        if out is None:
            continue
        rerouted += 1
        path, walk = [e["page_id"] for e in out.entities], [e["page_id"] for e in src.entities]
        assert len(path) == len(walk) and path[0] == walk[0] and len(set(path)) == len(path)
        assert path != walk  # the hop with no clue is gone
        assert [(h.src_id, h.dst_id) for h in out.links] == list(zip(path, path[1:]))
        assert all(h.anchor_text and h.anchor_text.lower() in h.paragraph.lower() for h in out.links)
        # every hop of the routed walk now has a clue: the oracle writes its question
        text, hops = chain_question(out.entities, derive_seed(out.seed, "oracle-question", 0), corpus, maker=maker)
        assert [h["bridge"] for h in hops] == [e["title"] for e in out.entities[1:]]
        assert out.source_id == src.source_id and out.question_id == src.question_id
    # most walks the writer could not clue get a route instead of being dropped
    assert rerouted >= 0.5 * len(stuck), (rerouted, len(stuck))
    assert router.stats.rerouted == rerouted and router.stats.hops_changed >= rerouted


def test_routes_end_on_named_entities_where_one_can_be_clued(routed):
    walks, corpus, router = routed
    ends = []
    for src in walks[:60]:
        out = router.route(src)
        if out is not None:
            here, there = out.entities[-2]["page_id"], out.entities[-1]["page_id"]
            page = corpus.page(here)
            anchor = next(a for a, dst, *_ in page["links"] if dst == there)
            ends.append(named_title(out.entities[-1]["title"]) or named_in("\n".join(page["paragraphs"]), anchor))
    walked_named = sum(named_title(s.entities[-1]["title"]) for s in walks[:60])
    assert ends and sum(ends) / len(ends) >= 0.6, (sum(ends), len(ends))
    assert sum(ends) > walked_named  # more named answers than the random walks end on


def test_a_walk_routed_again_ends_on_none_of_the_answers_it_is_told_to_avoid(routed):
    # The questions stage's second pass (`_reroute`) gives the walks the answer cap dropped another ending: the
    # answers at the cap are excluded as last pages, the rest of the route is chosen as before.
    walks, corpus, router = routed
    moved = 0
    for src in walks[:40]:
        first = router.route(src)
        if first is None:
            continue
        avoid = frozenset({first.entities[-1]["page_id"]})
        again = router.route(src, avoid)
        if again is None:
            continue
        moved += 1
        path = [e["page_id"] for e in again.entities]
        assert path[-1] not in avoid and path[0] == src.entities[0]["page_id"]
        assert len(path) == len(src.entities) and len(set(path)) == len(path)
        text, hops = chain_question(again.entities, derive_seed(again.seed, "oracle-question", 0), corpus)
        assert [h["bridge"] for h in hops] == [e["title"] for e in again.entities[1:]]
        assert again.question_id == src.question_id  # the same question, another answer
    assert moved >= 5, moved
