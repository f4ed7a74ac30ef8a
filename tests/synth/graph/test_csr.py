"""The CSR link graph: built from corpus/links through the stage runner, saved, loaded, queried."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from helpers.linkcorpus import make_corpus, random_edges, write_ingest
from flows.config import Config
from synth.graph.csr import CSRGraph, _ptr_dtype, csr_from_edges, open_graph, reverse_csr
from synth.engine.runner import run_stage
from flows.stages import GRAPH
from synth.engine.store import MissingInput, Store


@pytest.fixture()
def built(tmp_path):
    """A store whose links hold duplicates, self-links and a link to a missing page, with the graph built."""
    edges = random_edges(60, 400, seed=3) + [("p1", "p1"), ("p2", "p2")]
    pages, links = make_corpus(edges, pages=["lonely"], repeat={edges[0]: 3})
    dangling = pa.Table.from_pylist([{"src_id": "p1", "dst_id": "missing", "paragraph_id": 1, "start": 0, "end": 1,
                                      "anchor_text": "P"}], schema=links.schema)
    links = pa.concat_tables([links, dangling])
    store = Store(tmp_path / "out")
    write_ingest(store, pages, links)
    outcome = run_stage(GRAPH, Config(), store, progress=False)
    return store, pages, links, outcome


def expected_edges(pages: pa.Table, links: pa.Table) -> tuple[list[str], set[tuple[int, int]]]:
    ids = sorted(pages.column("page_id").to_pylist(), key=lambda s: s.encode())
    node = {p: i for i, p in enumerate(ids)}
    edges = {(node[s], node[d]) for s, d in zip(links["src_id"].to_pylist(), links["dst_id"].to_pylist())
             if s in node and d in node and s != d}
    return ids, edges


def test_csr_matches_distinct_edges(built):
    store, pages, links, _ = built
    g = open_graph(store)
    ids, edges = expected_edges(pages, links)
    assert g.page_ids.to_pylist() == ids  # node i is the i-th page id in byte order
    assert g.num_nodes == len(ids) and g.num_edges == len(edges)
    got = {(u, int(v)) for u in range(g.num_nodes) for v in g.neighbors(u)}
    assert got == edges
    rev = {(int(u), v) for v in range(g.num_nodes) for u in g.predecessors(v)}
    assert rev == edges
    for u in range(g.num_nodes):
        assert np.all(np.diff(g.neighbors(u)) > 0) and np.all(np.diff(g.predecessors(u)) > 0)
    assert g.indices.dtype == np.int32 and g.rindices.dtype == np.int32 and g.indptr.dtype == np.int32


def test_funnel_counts_every_link(built):
    _, pages, links, outcome = built
    r = outcome.report
    _, edges = expected_edges(pages, links)
    assert r["input"] == links.num_rows and r["output"] == len(edges)
    loops = sum(s == d for s, d in zip(links["src_id"].to_pylist(), links["dst_id"].to_pylist()))
    assert loops >= 2 and r["dropped"]["self_loop"] == loops and r["dropped"]["unknown_page"] == 1
    assert r["dropped"]["duplicate_edge"] == links.num_rows - len(edges) - loops - 1 > 0
    assert r["input"] == r["output"] + sum(r["dropped"].values())
    assert r["graph"]["edges"] == len(edges)


def test_queries(built):
    store, pages, links, _ = built
    g = open_graph(store)
    _, edges = expected_edges(pages, links)
    us, vs = np.meshgrid(np.arange(g.num_nodes), np.arange(g.num_nodes), indexing="ij")
    has = g.has_edges(us.ravel(), vs.ravel())
    assert {(int(u), int(v)) for u, v in zip(us.ravel()[has], vs.ravel()[has])} == edges
    u, v = next(iter(edges))
    assert g.has_edge(u, v)
    assert g.node_of("p7") == g.page_ids.to_pylist().index("p7")
    assert g.nodes_of(["p7", "nope"]).tolist() == [g.node_of("p7"), -1]
    with pytest.raises(KeyError):
        g.node_of("nope")
    assert g.out_degree(u) == len(g.neighbors(u)) and g.in_degree(v) == len(g.predecessors(v))
    assert g.out_degree().sum() == g.in_degree().sum() == g.num_edges


def test_stats(built):
    store, *_ = built
    g = open_graph(store)
    s = g.stats()
    out, inn = np.diff(g.indptr), np.diff(g.rindptr)
    assert s["nodes"] == g.num_nodes and s["edges"] == g.num_edges
    assert s["out_max"] == out.max() and s["in_max"] == inn.max()
    assert s["out_p50"] == pytest.approx(np.percentile(out, 50))
    assert s["in_p99"] == pytest.approx(np.percentile(inn, 99))
    assert s["out_zero"] == int((out == 0).sum())  # "lonely" and every page with no out-link
    assert s["bytes"] == g.nbytes
    # 8 bytes per edge for the two index arrays; the pointers add 8 per node.
    assert s["bytes_per_edge"] == pytest.approx(8 + 8 * (g.num_nodes + 1) / g.num_edges, abs=1e-3)


def test_save_load_round_trip(tmp_path, built):
    store, *_ = built
    g = open_graph(store)
    assert isinstance(g.indices, np.memmap)  # loaded lazily, never copied
    g.save(tmp_path / "copy")
    h = CSRGraph.load(tmp_path / "copy")
    for name in ("indptr", "indices", "rindptr", "rindices"):
        assert np.array_equal(getattr(g, name), getattr(h, name))
    assert h.page_ids.equals(g.page_ids) and h.titles.equals(g.titles)
    with pytest.raises(FileNotFoundError):
        CSRGraph.load(tmp_path / "nothing")


def test_in_memory_graph_and_networkx():
    g = CSRGraph.from_edges(5, [0, 0, 1, 2, 3, 3, 4], [1, 1, 2, 0, 3, 4, 0])  # a duplicate and a self-loop
    assert g.num_edges == 5
    sub = g.to_networkx([0, 1, 2])
    assert set(sub.edges()) == {(0, 1), (1, 2), (2, 0)}
    assert sub.nodes[0]["page_id"] == "0"
    indptr, indices, removed = csr_from_edges(5, [0, 0, 1], [1, 1, 1])
    assert removed == 2 and indices.tolist() == [1]
    rindptr, rindices = reverse_csr(indptr, indices)
    assert rindptr.tolist() == [0, 0, 1, 1, 1, 1] and rindices.tolist() == [0]
    assert _ptr_dtype(10) == np.int32 and _ptr_dtype(2**31) == np.int64


def test_rerun_is_reused_and_missing_input_is_named(tmp_path, built):
    store, *_ = built
    assert run_stage(GRAPH, Config(), store, progress=False).reused
    with pytest.raises(MissingInput, match="ingest"):
        run_stage(GRAPH, Config(), Store(tmp_path / "empty"), progress=False)
