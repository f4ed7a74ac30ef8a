"""Subgraph expansion (OpenSeeker-v2 ``Expand(G, v_seed, K)``)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from helpers.linkcorpus import graph_store, random_edges
from flows.config import Config
from synth.graph.expand import expand_slot, seed_nodes
from synth.graph.csr import CSRGraph, open_graph
from synth.graph.nodefilter import node_filter
from synth.engine.errors import StageFailed
from synth.engine.runner import run_stage
from synth.engine.records import Subgraph
from synth.engine.seeding import stream_key
from flows.stages import EXPAND
from synth.engine.store import Store


def build(tmp_path, edges, cfg: Config, titles=None) -> Store:
    return graph_store(tmp_path, edges, cfg, titles=titles)


@pytest.fixture()
def expanded(tmp_path):
    cfg = Config()
    cfg.expand.num_subgraphs, cfg.expand.budget = 40, 9
    cfg.walk.max_in_degree = 30
    edges = random_edges(150, 500, seed=2) + [(f"p{i}", "hub") for i in range(0, 150, 3)] + [("p1", "y")]
    store = build(tmp_path, edges, cfg, titles={"y": "1999"})
    return store, cfg, run_stage(EXPAND, cfg, store, progress=False)


def test_subgraphs_are_connected_induced_and_allowed(expanded):
    store, cfg, outcome = expanded
    g = open_graph(store)
    allowed = node_filter(g, cfg.walk).allowed
    subs = [Subgraph.from_row(r) for r in store.read("subgraphs").to_pylist()]
    assert len(subs) == outcome.report["output"] > 30
    for s in subs:
        nodes = g.nodes_of(s.nodes)
        assert len(set(s.nodes)) == cfg.expand.budget and s.seed_id == s.nodes[0]
        assert allowed[nodes].all() and "hub" not in s.nodes and "y" not in s.nodes
        sub = nx.DiGraph()
        sub.add_nodes_from(s.nodes)
        sub.add_edges_from((e.src_id, e.dst_id) for e in s.edges)
        assert nx.is_weakly_connected(sub)
        # Exactly the induced edges: every recorded edge exists, every edge among the nodes is recorded.
        induced = {(u, v) for u in s.nodes for v in s.nodes
                   if u != v and g.has_edge(g.node_of(u), g.node_of(v))}
        assert {(e.src_id, e.dst_id) for e in s.edges} == induced
        assert s.titles == [f"Page {p}" for p in s.nodes]
        for e in s.edges:
            assert e.anchor_text in e.paragraph
    ids = [s.subgraph_id for s in subs]
    assert len(set(ids)) == len(ids)


def test_funnel_and_determinism(tmp_path, expanded):
    store, cfg, outcome = expanded
    r = outcome.report
    assert r["input"] == cfg.expand.num_subgraphs == r["output"] + sum(r["dropped"].values())
    again = run_stage(EXPAND, cfg, store, force=True, progress=False)
    assert again.report["output"] == r["output"]
    first = store.read("subgraphs")
    g = open_graph(store)
    allowed = node_filter(g, cfg.walk).allowed
    seeds = seed_nodes(g, allowed)
    key = stream_key(cfg.seed, "expand")
    slot = first.column("slot")[3].as_py()
    nodes, _ = expand_slot(g, allowed, seeds, cfg.expand.budget, key, slot, cfg.expand.max_attempts)
    assert g.page_ids.take(nodes).to_pylist() == first.column("nodes")[3].as_py()  # one slot alone: same result
    other, _ = expand_slot(g, allowed, seeds, cfg.expand.budget, stream_key(cfg.seed + 1, "expand"), slot, 4)
    assert other is None or not np.array_equal(other, nodes)


def test_small_components_are_dropped(tmp_path):
    # Components of 3 pages cannot hold K = 5.
    edges = [(f"c{i}a", f"c{i}b") for i in range(10)] + [(f"c{i}c", f"c{i}b") for i in range(10)]
    cfg = Config()
    cfg.expand.num_subgraphs, cfg.expand.budget, cfg.expand.max_attempts = 6, 5, 3
    store = build(tmp_path, edges, cfg)
    with pytest.raises(StageFailed, match=r"stage expand: every one of its 6 items was dropped \(too_small 6\)"):
        run_stage(EXPAND, cfg, store, progress=False)  # an empty stage is an error...
    cfg.runner.allow_empty = True  # ...unless the config accepts it
    r = run_stage(EXPAND, cfg, store, progress=False).report
    assert r["output"] == 0 and r["dropped"]["too_small"] == 6 and r["expand"]["attempts"] == 18
    cfg.expand.budget = 3  # now every component fits, via in-links as well as out-links
    r = run_stage(EXPAND, cfg, store, progress=False).report
    assert r["output"] + r["dropped"]["duplicate_subgraph"] == 6 and r["output"] > 1


def test_zero_subgraphs_writes_an_empty_table(tmp_path):
    cfg = Config()
    cfg.expand.num_subgraphs = 0
    store = build(tmp_path, random_edges(20, 60), cfg)
    r = run_stage(EXPAND, cfg, store, progress=False).report
    t = store.read("subgraphs")
    assert r["input"] == r["output"] == 0 and t.num_rows == 0 and "edges" in t.schema.names
    assert r["idle"] == "expand.num_subgraphs is 0: no subgraph is asked for"  # no subgraph asked: not an empty stage


def test_expand_uses_in_links():
    # A star into node 0: from any leaf, only in-links of 0 reach the other leaves.
    g = CSRGraph.from_edges(6, [1, 2, 3, 4, 5], [0, 0, 0, 0, 0])
    allowed = np.ones(6, np.bool_)
    nodes, tries = expand_slot(g, allowed, seed_nodes(g, allowed), 6, stream_key(0, "expand"), 0, 1)
    assert tries == 1 and sorted(nodes.tolist()) == [0, 1, 2, 3, 4, 5]
