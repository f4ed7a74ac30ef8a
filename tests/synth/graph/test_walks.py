"""Random walks: the walk rules, exact uniform choice, reproducibility, the funnel and the evidence."""

from __future__ import annotations

import hashlib
from collections import Counter

import numba
import numpy as np
import pyarrow as pa
import pytest

from helpers.linkcorpus import graph_store, make_corpus, random_edges, write_ingest
from flows.config import Config, WalkConfig
from synth.graph.csr import CSRGraph, open_graph
from synth.graph.nodefilter import node_filter, title_mask
from synth.engine.errors import StageFailed
from synth.engine.runner import run_stage
from synth.engine.records import Walk
from synth.engine.seeding import below, derive, stream_key
from flows.stages import GRAPH, WALKS
from synth.engine.store import Store
from synth.graph.walks import REJECTION_DRAWS, path_is_valid, sample_walks, start_nodes

EXCLUDED = {"q0": "1999", "q1": "List of rivers", "q2": "Mercury (disambiguation)"}


def corpus_edges() -> list[tuple[str, str]]:
    """A random graph, plus excluded-title pages and a hub that many pages link to."""
    edges = random_edges(120, 900, seed=7)
    edges += [(f"p{i}", q) for i in range(0, 120, 3) for q in EXCLUDED]
    edges += [(q, f"p{i}") for i, q in enumerate(EXCLUDED)]
    edges += [(f"p{i}", "hub") for i in range(0, 120, 2)] + [("hub", "p5"), ("hub", "p6")]
    return edges


def build(tmp_path, edges, cfg: Config, **kw) -> Store:
    return graph_store(tmp_path, edges, cfg, shuffle_links=True, titles=EXCLUDED, **kw)  # link order must not matter


@pytest.fixture()
def walked(tmp_path):
    cfg = Config()
    cfg.walk.num_walks, cfg.walk.max_in_degree = 300, 40
    cfg.walk.max_answer_repeats = cfg.walk.max_bridge_repeats = None  # the caps have a test of their own
    store = build(tmp_path, corpus_edges(), cfg, repeat={("p0", "hub"): 2})
    outcome = run_stage(WALKS, cfg, store, progress=False)
    return store, cfg, outcome


def node_paths(g: CSRGraph, table: pa.Table) -> list[np.ndarray]:
    return [g.nodes_of(p) for p in table.column("path").to_pylist()]


def test_walks_follow_the_rules(walked):
    store, cfg, outcome = walked
    g = open_graph(store)
    walks = store.read("walks")
    assert walks.num_rows > 100 and outcome.report["output"] == walks.num_rows
    nf = node_filter(g, cfg.walk)
    hub = g.node_of("hub")
    assert g.in_degree(hub) > cfg.walk.max_in_degree and not nf.allowed[hub]
    assert nf.excluded == {"title": 3, "hub": 1}
    for path in node_paths(g, walks):
        assert len(path) == cfg.walk.hops + 1 and len(set(path.tolist())) == len(path)  # no revisits
        assert g.has_edges(path[:-1], path[1:]).all()  # every step is a link
        assert nf.allowed[path].all()  # no hub, no excluded title, start included
        i, j = np.triu_indices(len(path), k=2)
        assert not g.has_edges(path[i], path[j]).any()  # chordless
        assert path_is_valid(g, nf.allowed, path, chordless=True)
    titles = {t for ts in walks.column("titles").to_pylist() for t in ts}
    assert not titles & set(EXCLUDED.values()) and "Page hub" not in titles


def test_funnel_and_ids(walked):
    store, cfg, outcome = walked
    r = outcome.report
    assert r["input"] == r["output"] + sum(r["dropped"].values())
    assert r["input"] == r["walks"]["attempts"] >= cfg.walk.num_walks
    walks = store.read("walks")
    ids = walks.column("walk_id").to_pylist()
    assert len(set(ids)) == len(ids)
    for wid, path in zip(ids, walks.column("path").to_pylist()):
        assert wid == hashlib.sha1("\x1f".join(path).encode()).hexdigest()[:16]
    slots = walks.column("slot").to_pylist()
    assert slots == sorted(slots) and max(slots) < cfg.walk.num_walks


def test_answer_and_bridge_repeats_are_capped(tmp_path):
    cfg = Config()
    cfg.walk.num_walks, cfg.walk.max_in_degree, cfg.walk.hops = 400, 40, 3
    cfg.walk.max_answer_repeats = cfg.walk.max_bridge_repeats = None
    store = build(tmp_path / "free", corpus_edges(), cfg)
    free = run_stage(WALKS, cfg, store, progress=False)
    ends = Counter(p[-1] for p in store.read("walks").column("path").to_pylist())
    assert max(ends.values()) > 2  # uncapped, some page ends several walks

    cfg.walk.max_answer_repeats, cfg.walk.max_bridge_repeats = 2, 3
    store = build(tmp_path / "capped", corpus_edges(), cfg)
    capped = run_stage(WALKS, cfg, store, progress=False)
    paths = store.read("walks").column("path").to_pylist()
    assert max(Counter(p[-1] for p in paths).values()) <= 2
    assert max(Counter(b for p in paths for b in p[1:-1]).values()) <= 3
    r = capped.report
    assert r["dropped"]["answer_repeat"] + r["dropped"]["bridge_repeat"] == free.report["output"] - r["output"] > 0
    assert r["input"] == r["output"] + sum(r["dropped"].values())
    # The walks report shows both histograms ({times: pages}) of what was kept.
    assert sum(int(t) * n for t, n in r["repeats"]["answer"].items()) == len(paths)
    assert max(int(t) for t in r["repeats"]["bridge"]) <= 3
    # Deterministic whatever the chunking: the caps apply in slot order.
    again = build(tmp_path / "again", corpus_edges(), cfg)
    run_stage(WALKS, cfg, again, progress=False)
    assert again.read("walks").column("path").to_pylist() == paths


def test_evidence_is_the_first_anchor(walked):
    store, _, _ = walked
    pages = {r["page_id"]: r for r in store.read("corpus/pages").to_pylist()}
    links = store.read("corpus/links").to_pylist()
    first = {}
    for link in sorted(links, key=lambda x: (x["paragraph_id"], x["start"])):
        first.setdefault((link["src_id"], link["dst_id"]), link)
    walks = [Walk.from_row(r) for r in store.read("walks").to_pylist()]
    for w in walks:
        assert len(w.hops) == len(w.path) - 1
        for k, hop in enumerate(w.hops):
            assert (hop.src_id, hop.dst_id) == (w.path[k], w.path[k + 1])
            link = first[(hop.src_id, hop.dst_id)]
            assert hop.paragraph_id == link["paragraph_id"]
            assert hop.paragraph == pages[hop.src_id]["paragraphs"][hop.paragraph_id - 1]
            assert hop.paragraph[link["start"]:link["end"]] == hop.anchor_text == link["anchor_text"]


def reference_walk(g: CSRGraph, allowed, starts, seed, slot, hops, max_attempts, chordless):
    """The walk rules in plain Python with the same counter-based draws as the kernel."""
    def d(k, c):
        return np.uint64(derive(np.uint64(k), np.int64(c)))

    slot_key = d(stream_key(seed, "walks"), slot)
    for t in range(max_attempts):
        try_key = d(slot_key, t)
        path = [int(starts[below(d(try_key, 0), len(starts))])]
        for step in range(1, hops + 1):
            key, nbrs = d(try_key, step), g.neighbors(path[-1]).tolist()

            def ok(c):
                return allowed[c] and c not in path and not (chordless and any(g.has_edge(p, c) for p in path[:-1]))

            nxt = None
            for r in range(REJECTION_DRAWS if nbrs else 0):
                c = nbrs[below(d(key, r), len(nbrs))]
                if ok(c):
                    nxt = c
                    break
            valid = [c for c in nbrs if ok(c)]
            if nxt is None and valid:
                nxt = valid[below(d(key, REJECTION_DRAWS), len(valid))]
            if nxt is None:
                break
            path.append(nxt)
        else:
            return path, t + 1
    return None, max_attempts


@pytest.mark.parametrize("chordless", [True, False])
def test_kernel_matches_reference_and_is_deterministic(chordless):
    rng = np.random.default_rng(1)
    g = CSRGraph.from_edges(80, rng.integers(0, 80, 500), rng.integers(0, 80, 500))
    allowed = rng.random(80) > 0.1
    starts = start_nodes(g, allowed)
    batch = sample_walks(g, allowed, 5, 0, 200, seed=11, max_attempts=3, chordless=chordless)
    for s in range(200):
        path, tries = reference_walk(g, allowed, starts, 11, s, 5, 3, chordless)
        got = batch.paths[s]
        assert (got.tolist() == path) if path else (got == -1).all()
        assert batch.attempts[s] == tries
    # Same seed, other batching and thread counts: the same walks.
    parts = [sample_walks(g, allowed, 5, lo, n, seed=11, max_attempts=3, chordless=chordless)
             for lo, n in ((0, 37), (37, 163))]
    assert np.array_equal(np.concatenate([p.paths for p in parts]), batch.paths)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = sample_walks(g, allowed, 5, 0, 200, seed=11, max_attempts=3, chordless=chordless)
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(one.paths, batch.paths) and np.array_equal(one.attempts, batch.attempts)
    other = sample_walks(g, allowed, 5, 0, 200, seed=12, max_attempts=3, chordless=chordless)
    assert not np.array_equal(other.paths, batch.paths)


def test_choice_is_uniform_among_valid_neighbours():
    # Node 0 links to 1..60; only 3 of them may be visited, so most rejection draws fail
    # and the exact scan decides.  Every walk must land on one of the 3, evenly.
    g = CSRGraph.from_edges(61, [0] * 60, list(range(1, 61)))
    allowed = np.zeros(61, np.bool_)
    allowed[[0, 17, 30, 59]] = True
    b = sample_walks(g, allowed, 1, 0, 6000, seed=0, max_attempts=1)
    counts = Counter(b.paths[:, 1].tolist())
    assert set(counts) == {17, 30, 59}
    assert all(abs(c - 2000) < 200 for c in counts.values())  # ~4.5 sigma
    # All valid: plain uniform over 60.
    b = sample_walks(g, np.ones(61, np.bool_), 1, 0, 30000, seed=0, max_attempts=1)
    counts = np.bincount(b.paths[:, 1], minlength=61)[1:]
    chi2 = ((counts - 500) ** 2 / 500).sum()
    assert chi2 < 110  # 59 degrees of freedom: p < 1e-4 above this


def test_chordless_rejects_shortcuts_that_plain_walks_take(tmp_path):
    # A transitive tournament (i -> j for all i < j): every 2-hop path has a chord.
    n = 12
    edges = [(f"t{i:02d}", f"t{j:02d}") for i in range(n) for j in range(i + 1, n)]
    cfg = Config()
    cfg.walk.num_walks, cfg.walk.hops, cfg.walk.max_attempts = 50, 3, 2
    store = build(tmp_path, edges, cfg)
    with pytest.raises(StageFailed, match=r"stage walks: every one of its 100 items was dropped \(dead_end 100\)"):
        run_stage(WALKS, cfg, store, progress=False)  # an empty stage is an error...
    cfg.runner.allow_empty = True  # ...unless the config accepts it
    r = run_stage(WALKS, cfg, store, progress=False).report
    assert r["output"] == 0 and r["dropped"]["dead_end"] == 100 and r["input"] == 100
    cfg.walk.chordless = False
    r = run_stage(WALKS, cfg, store, progress=False).report
    g = open_graph(store)
    paths = node_paths(g, store.read("walks"))
    assert r["output"] > 0 and all(g.has_edge(p[0], p[2]) for p in paths)


def test_dead_ends_are_counted(tmp_path):
    # A chain ending in a sink: a 4-hop walk exists only from a0.
    edges = [("a0", "a1"), ("a1", "a2"), ("a2", "a3"), ("a3", "a4"), ("b0", "b1")]
    cfg = Config()
    cfg.walk.num_walks, cfg.walk.hops, cfg.walk.max_attempts = 40, 4, 3
    store = build(tmp_path, edges, cfg)
    r = run_stage(WALKS, cfg, store, progress=False).report
    assert r["dropped"]["dead_end"] > 0 and r["input"] == r["output"] + sum(r["dropped"].values())
    assert r["output"] == 1 and r["dropped"]["duplicate_path"] > 0  # every success is a0..a4
    assert store.read("walks").column("path").to_pylist() == [["a0", "a1", "a2", "a3", "a4"]]


def test_no_start_page(tmp_path):
    cfg = Config()
    cfg.walk.num_walks = 7
    cfg.walk.exclude_patterns = ["^Page "]
    store = build(tmp_path, random_edges(10, 30), cfg)
    with pytest.raises(StageFailed, match=r"stage walks: every one of its 7 items was dropped \(no_start 7\)"):
        run_stage(WALKS, cfg, store, progress=False)
    cfg.runner.allow_empty = True
    r = run_stage(WALKS, cfg, store, progress=False).report
    assert r["output"] == 0 and r["dropped"]["no_start"] == 7 and r["input"] == 7
    assert store.read("walks").num_rows == 0 and store.read("walks").schema.names[0] == "walk_id"


@pytest.mark.parametrize("legacy", [False, True])
def test_incremental_keeps_walks_that_still_hold(tmp_path, legacy):
    cfg = Config()
    cfg.walk.num_walks, cfg.walk.hops, cfg.walk.incremental = 100, 3, True
    cfg.walk.max_answer_repeats, cfg.walk.max_bridge_repeats = 2, 4  # reused walks are kept whatever the caps
    edges = random_edges(60, 400, seed=5)
    store = build(tmp_path, edges, cfg)
    run_stage(WALKS, cfg, store, progress=False)
    old = {r["slot"]: r["path"] for r in store.read("walks").to_pylist()}
    if legacy:  # a walks table written before the column was named `slot`
        import pyarrow.parquet as pq

        for f in sorted(store.path("walks").resolve().rglob("*.parquet")):
            t = pq.read_table(f)
            pq.write_table(t.rename_columns(["start_index" if n == "slot" else n for n in t.column_names]), f)
        assert "start_index" in store.read("walks").schema.names
    # Drop a quarter of the links and rebuild: walks that used them must go, the others stay.
    kept_edges = edges[: 3 * len(edges) // 4]
    pages, links = make_corpus(kept_edges, pages=[p for e in edges for p in e])
    write_ingest(store, pages, links, key="ingest-2")
    run_stage(GRAPH, cfg, store, progress=False)
    r = run_stage(WALKS, cfg, store, progress=False).report
    g = open_graph(store)
    still = {s for s, p in old.items() if path_is_valid(g, node_filter(g, cfg.walk).allowed, g.nodes_of(p), True)}
    assert 0 < len(still) < len(old) and r["walks"]["reused"] == len(still)
    new = {row["slot"]: row["path"] for row in store.read("walks").to_pylist()}
    assert all(new[s] == old[s] for s in still)
    assert r["input"] == r["output"] + sum(r["dropped"].values())


def test_title_patterns():
    titles = pa.array(["1999", "1990s", "200 BC", "List of cats", "Lists of dogs", "Paris (disambiguation)", "Paris",
                      "1999 in film", None])
    hit = title_mask(titles, WalkConfig().exclude_patterns)
    assert hit.tolist() == [True, True, True, True, True, True, False, False, False]
    # A look-ahead RE2 cannot compile still works (through Python's re).
    assert title_mask(pa.array(["abc", "abd"]), [r"ab(?=c)"]).tolist() == [True, False]


def test_evidence_lookup_picks_the_first_anchor(tmp_path):
    from synth.graph.evidence import MissingEvidence, lookup_evidence

    pages, links = make_corpus([("a", "b"), ("b", "c"), ("a", "c")], repeat={("a", "b"): 3, ("a", "c"): 2})
    # Same paragraph, two anchors: the lower start wins; and an anchor in the title (paragraph 0).
    extra = [{"src_id": "b", "dst_id": "a", "paragraph_id": 0, "start": 0, "end": 4, "anchor_text": "Page"},
             {"src_id": "a", "dst_id": "c", "paragraph_id": 5, "start": 0, "end": 7, "anchor_text": "Section"}]
    links = pa.concat_tables([links, pa.Table.from_pylist(extra, schema=links.schema)])
    links = links.take(pa.array(np.random.default_rng(3).permutation(links.num_rows)))
    store = Store(tmp_path / "out")
    write_ingest(store, pages, links, shards=3)
    pf, lf = list(store.dataset("corpus/pages").files), list(store.dataset("corpus/links").files)
    ev = lookup_evidence(pf, lf, ["a", "b", "a", "a", "b"], ["b", "c", "c", "b", "a"]).to_pylist()
    assert [e["paragraph_id"] for e in ev] == [2, 2, 5, 2, 0]
    assert ev[0] == ev[3] and all(e["verified"] for e in ev)
    assert (ev[2]["start"], ev[2]["anchor_text"]) == (0, "Section")
    assert ev[4]["paragraph"] == "Page b" and ev[4]["anchor_text"] == "Page"
    for e in ev:
        assert e["paragraph"][e["start"]:e["end"]] == e["anchor_text"]
    with pytest.raises(MissingEvidence, match="'a', 'zz'"):
        lookup_evidence(pf, lf, ["a"], ["zz"])
    assert lookup_evidence(pf, lf, [], []).num_rows == 0


def test_a_walk_slot_holds_at_most_what_the_preflight_counts(tmp_path):
    """The preflight refuses a walk.num_walks this machine cannot hold by walk_slot_bytes: the stage's memory
    (traced) grows by at most that per slot, and not by much less (the bound says what a slot really costs)."""
    import tracemalloc

    from synth.graph.config import walk_slot_bytes

    cfg = Config()
    cfg.walk.hops, cfg.walk.max_in_degree = 3, 40
    store = build(tmp_path, corpus_edges(), cfg)
    peaks = {}
    for n in (20_000, 120_000):
        cfg.walk.num_walks = n
        run_stage(WALKS, cfg, store, progress=False)  # numba's compile and the graph's pages, before tracing
        tracemalloc.start()
        try:
            run_stage(WALKS, cfg, store, force=True, progress=False)
            peaks[n] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    per_slot = (peaks[120_000] - peaks[20_000]) / 100_000
    assert walk_slot_bytes(3) / 3 < per_slot <= walk_slot_bytes(3), per_slot
