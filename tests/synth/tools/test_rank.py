"""tools.ranker: the agents' search by BM25, by meaning (dense) or both fused (hybrid), from one setting, wherever the
agents search (rollouts, eval, `hopforge tools serve`, verl's tool), with the same masking, titles and snippets."""

from __future__ import annotations

import asyncio
import importlib.util
import json

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from flows.cli_tools import tools_app
from flows.config import load_config
from flows.stages import EMBED, EVAL, INDEX, PIPELINE, RL_BAND, ROLLOUT
from helpers.linkcorpus import write_ingest
from synth.engine.config import ConfigError
from synth.engine.errors import InputError
from synth.engine.records import LINK_SCHEMA, PAGE_SCHEMA
from synth.engine.runner import run_stage
from synth.engine.store import MissingInput, Store, atomic_write_json
from synth.tools.config import ToolsConfig
from synth.tools.dense import META_FILE, VECTORS_FILE, save_npy
from synth.tools.rank import (HYBRID_GATE, HYBRID_WEIGHTS, DenseRanking, open_search, search_facts, search_key,
                              use_ranker)
from synth.tools.search import FusedRanking, ScoreFusion, SearchIndex, fuse_scores, reciprocal_rank_fusion
from synth.tools.server import start_server


def _page(pid: str, title: str, description: str | None, paragraphs: list[str]) -> dict:
    return {"page_id": pid, "title": title, "paragraphs": paragraphs, "description": description, "aliases": None,
            "wikidata_id": None, "categories": None, "url": None, "n_chars": sum(map(len, paragraphs))}


PAGES = [
    _page("1", "Ship", "Large watercraft", ["A ship travels the oceans. It carries cargo.", "Ships have hulls."]),
    _page("2", "Gale", None, ["A gale is a strong wind. Sailors fear it."]),
    _page("3", "Paris", "Capital of France", ["Paris is the capital of France. It lies on the Seine."]),
    _page("4", "Violin", "Bowed string instrument", ["The violin is a bowed string instrument with four strings."]),
    _page("5", "Photosynthesis", "Process by which plants make food from light",
          ["Plants turn light into sugar in their leaves."]),
    _page("6", "Oak", "Tree of the beech family", ["An oak is a tree. Its fruit is the acorn."]),
    _page("7", "Everest", "Highest mountain on Earth", ["Mount Everest is in the Himalayas."]),
    _page("8", "Cello", "Large bowed string instrument",
          ["The cello is a bowed string instrument, larger than the violin and played seated."]),
    _page("9", "Fiddle", "Folk name of the violin", ["A fiddle is a violin played in folk music."]),
]
SHIP = "1"
BOAT = "a vessel that sails the sea"  # no word of the Ship page (BM25 cannot find it), its meaning exactly


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    """A store of nine pages with its index and, embedded for tools.ranker=dense, its page vectors."""
    store = Store(tmp_path_factory.mktemp("rank") / "run")
    write_ingest(store, pa.Table.from_pylist(PAGES, schema=PAGE_SCHEMA), pa.Table.from_pylist([], schema=LINK_SCHEMA))
    run_stage(INDEX, load_config(None, []), store, progress=False)
    out = run_stage(EMBED, load_config(None, ["runner.cpu_workers=1", "tools.ranker=dense"]), store, progress=False)
    assert out.report["output"] == len(PAGES) and out.report["shards"] == 1  # it embedded: a reader needs vectors
    return store


def _ids(hits: list[dict]) -> list[str]:
    return [h["page_id"] for h in hits]


def test_dense_finds_by_meaning_a_page_bm25_misses(store):
    bm25 = open_search(store, ToolsConfig())
    assert SHIP not in _ids(bm25.search(BOAT, 5))
    dense = open_search(store, ToolsConfig(ranker="dense"))
    hits = dense.search(BOAT, 3)
    assert _ids(hits)[0] == SHIP and len(hits) == 3
    # what the agent sees of a hit is the index's, whatever ranked it
    assert hits[0]["title"] == "Ship" and hits[0]["description"] == "Large watercraft"
    assert hits[0]["snippet"].startswith("A ship travels the oceans")
    assert dense.get_page("Ship")["page_id"] == SHIP and dense.get_page("ship")["page_id"] == SHIP


def test_hybrid_ranks_the_meaning_too_and_an_exact_title_first(store):
    hybrid = open_search(store, ToolsConfig(ranker="hybrid"))
    assert _ids(hybrid.search(BOAT, 3))[0] == SHIP  # BM25 has nothing for it; the dense list decides
    for ranker in ("bm25", "dense", "hybrid"):
        index = open_search(store, ToolsConfig(ranker=ranker))
        for title, pid in (("Violin", "4"), ("fiddle", "9"), ("Oak", "6"), ("Ship", SHIP)):
            assert _ids(index.search(title, 3))[0] == pid, (ranker, title)


class Nearest:
    """A stand-in for the page vectors: every query's nearest pages in one fixed order, at cosine similarities
    falling from 0.9 by 0.05 a rank (the first one past the hybrid's gate: the list has its full say)."""

    def __init__(self, order: list[str]):
        self.order = order

    def search_ids(self, text: str, k: int) -> list[str]:
        return self.order[:k]

    def scored_many(self, texts: list[str], k: int) -> list[list[tuple[str, float]]]:
        return [[(pid, 0.9 - 0.05 * i) for i, pid in enumerate(self.order[:k])] for _ in texts]


def test_the_hybrid_puts_an_exact_title_first_where_plain_fusion_would_not(store):
    # "Violin": BM25 ranks Violin (4) first, then Fiddle (9) and Cello (8); a retriever that puts Fiddle first and
    # Violin last makes plain fusion rank Fiddle above the page the query names.
    index = use_ranker(SearchIndex.open(store.path("index")), ToolsConfig(ranker="hybrid"),
                       Nearest(["9", "8", "1", "2", "3", "5", "6", "7", "4"]))
    tool = index.ranking("tool")
    assert tool.top("Violin", 3)[0] == "4"
    assert FusedRanking([tool, DenseRanking(Nearest(["9", "8", "1", "2", "3", "5", "6", "7", "4"]))]).top(
        "Violin", 3, frozenset())[0] == "9"
    hits = index.search("Violin", 3)
    assert _ids(hits) == ["4", "9", "8"] and hits[0]["title"] == "Violin"
    assert _ids(index.search("Violin", 3, exclude_page_ids=["4"])) == ["9", "8", "1"]  # masked, still 3
    dense = use_ranker(SearchIndex.open(store.path("index")), ToolsConfig(ranker="dense"),
                       Nearest(["9", "8", "1", "2", "3", "5", "6", "7", "4"]))
    assert _ids(dense.search("violin", 2)) == ["4", "9"]  # by title, case aside, then by meaning


@pytest.mark.parametrize("ranker", ["dense", "hybrid"])
def test_the_answer_page_stays_masked_and_k_results_come_back(store, ranker):
    index = open_search(store, ToolsConfig(ranker=ranker))
    for k in (1, 3, 8):
        hits = index.search(BOAT, k, exclude_page_ids=[SHIP])
        assert SHIP not in _ids(hits) and len(hits) == k
        assert index.search_ids(BOAT, k, exclude_page_ids=[SHIP]) == _ids(hits)
    # an exact title that is the masked page is masked too
    assert SHIP not in _ids(index.search("Ship", 3, exclude_page_ids=[SHIP]))
    assert len(index.search(BOAT, 20, exclude_page_ids=[SHIP, "3"])) == len(PAGES) - 2  # every other page


def test_hopforge_tools_serve_and_search_use_the_configured_ranker(store, monkeypatch):
    from starlette.testclient import TestClient

    import synth.tools.server as server

    served = {}

    class Captured:  # uvicorn.Server, without a socket: the app `hopforge tools serve` would serve
        def __init__(self, config):
            served["app"] = config.app

        def run(self):
            pass

    monkeypatch.setattr(server.uvicorn, "Server", Captured)
    r = CliRunner().invoke(tools_app, ["serve", "--out", str(store.root), "--set", "tools.ranker=dense"])
    assert r.exit_code == 0, r.output
    with TestClient(served["app"], base_url="http://127.0.0.1") as c:  # the server answers loopback hosts only
        assert c.get("/health").json()["ranker"] == "dense"
        assert _ids(c.get("/search", params={"q": BOAT, "k": 3}).json())[0] == SHIP
        masked = c.post("/search", json={"query": BOAT, "k": 3, "exclude": [SHIP]}).json()
        assert SHIP not in _ids(masked) and len(masked) == 3

    r = CliRunner().invoke(tools_app, ["search", "--out", str(store.root), "-q", BOAT, "--set", "tools.ranker=hybrid"])
    assert r.exit_code == 0, r.output
    assert _ids(json.loads(r.stdout))[0] == SHIP
    r = CliRunner().invoke(tools_app, ["search", "--out", str(store.root), "-q", BOAT])  # bm25: not by meaning
    assert r.exit_code == 0 and SHIP not in _ids(json.loads(r.stdout))


@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="verl is not installed")
def test_verls_tool_searches_with_the_servers_ranker_and_masks_the_answer_page(store):
    from synth.tools.verl_tool import HopforgeTool, ToolServerError

    kwargs = {"search": {"create_kwargs": {"exclude": [SHIP]}}}  # an rl_pool row's extra_info.tools_kwargs
    with start_server(store.path("index"), ToolsConfig(ranker="dense")) as running:
        tool = HopforgeTool({"type": "native", "name": "search", "url": running.url, "tools": {"ranker": "dense"},
                            "require_exclude": True})

        async def search(create_kwargs):
            iid, _ = await tool.create(create_kwargs=create_kwargs)
            response, _, _ = await tool.execute(iid, {"query": BOAT, "k": 4})
            return json.loads(response.text)

        masked = asyncio.run(search(kwargs["search"]["create_kwargs"]))
        assert SHIP not in _ids(masked) and len(masked) == 4
        plain = HopforgeTool({"type": "native", "name": "search", "url": running.url, "tools": {"ranker": "dense"}})
        tool = plain
        assert _ids(asyncio.run(search({})))[0] == SHIP  # so the mask is what hid it, and the ranking is dense
        with pytest.raises(ToolServerError, match="searches with tools.ranker=dense but this tool config says bm25"):
            HopforgeTool({"type": "native", "name": "search", "url": running.url})


def test_a_missing_model_folder_is_one_line(store):
    cfg = ToolsConfig(ranker="dense", dense={"model": "/no/such/model"})
    with pytest.raises(ConfigError, match=r"^tools.dense.model: no model folder at /no/such/model") as e:
        open_search(store, cfg)
    assert "\n" not in str(e.value)


def _copy(store, tmp_path) -> Store:
    import shutil

    shutil.copytree(store.root, tmp_path / "copy", symlinks=True)
    other = Store(tmp_path / "copy")
    assert other.path("embed").resolve().is_relative_to(other.root)  # the copy's own vectors, edited freely
    return other


def test_vectors_of_another_dimension_or_model_are_refused_naming_the_rebuild(store, tmp_path):
    other = _copy(store, tmp_path)
    folder = other.path("embed").resolve()
    meta = json.loads((folder / META_FILE).read_text())
    rebuild = f"hopforge embed --out {other.root} --set tools.ranker=hybrid"

    atomic_write_json(folder / META_FILE, dict(meta, identity="some-model@0123456789ab"))
    with pytest.raises(InputError, match="holds the page vectors of model some-model@0123456789ab") as e:
        open_search(other, ToolsConfig(ranker="hybrid"))
    assert rebuild in str(e.value) and "\n" not in str(e.value)

    save_npy(folder / VECTORS_FILE, np.zeros((len(PAGES), 8), dtype=np.float32))
    atomic_write_json(folder / META_FILE, dict(meta, dim=8))
    with pytest.raises(InputError, match="holds 8-dimensional vectors .* makes 384-dimensional ones") as e:
        open_search(other, ToolsConfig(ranker="hybrid"))
    assert rebuild in str(e.value) and "\n" not in str(e.value)


def test_a_ranker_without_page_vectors_names_the_embed_command(store, tmp_path):
    other = _copy(store, tmp_path)
    bm25 = run_stage(EMBED, load_config(None, ["runner.cpu_workers=1"]), other, progress=False)
    assert bm25.report["output"] == 0 and "tools.ranker is bm25" in bm25.report["idle"]  # no reader: idle
    with pytest.raises(MissingInput, match=f"holds no page vectors .*run `hopforge embed --out {other.root} "
                                           "--set tools.ranker=dense`"):
        open_search(other, ToolsConfig(ranker="dense"))
    assert open_search(other, ToolsConfig()).search("Ship", 1)[0]["page_id"] == SHIP  # bm25 needs none


def test_the_searching_stages_key_the_ranker_and_the_model_and_read_the_vectors(store, tmp_path):
    other = _copy(store, tmp_path)
    manifest = other.manifest()
    for name in ("walks", "questions", "rollout", "sft", "filter"):  # stand-ins: only their keys enter the key
        manifest["stages"][name] = {"key": f"{name}-key"}
    atomic_write_json(other.manifest_path, manifest)
    bm25, dense, hybrid = (load_config(None, [f"tools.ranker={r}"]) for r in ("bm25", "dense", "hybrid"))
    identity = search_facts(dense.tools)["identity"]
    assert search_key(bm25) == "ranker=bm25" and search_key(dense) == f"ranker=dense model={identity}"
    assert search_key(hybrid) == (f"ranker=hybrid model={identity} fusion=zscore weights=0.25,0.75 gate=0.7,0.8 "
                                  "depth=100")  # a new fusion ranks otherwise: its traces are made again
    for stage in (ROLLOUT, EVAL, RL_BAND):
        keys = {}
        for name, cfg in (("bm25", bm25), ("dense", dense), ("hybrid", hybrid)):
            keys[name], parts = PIPELINE.stage_key(stage, cfg, other)
            assert ("embed" in parts["inputs"]) == (name != "bm25"), (stage.name, name)
        assert len(set(keys.values())) == 3, stage.name
    manifest["stages"].pop("embed")
    atomic_write_json(other.manifest_path, manifest)
    PIPELINE.stage_key(ROLLOUT, bm25, other)  # bm25 reads no vectors
    with pytest.raises(MissingInput, match="needs the output of stage 'embed'.*hopforge embed"):
        PIPELINE.stage_key(ROLLOUT, dense, other)


def test_the_report_and_the_card_name_the_ranker_and_the_model():
    from synth.engine.reports import RolloutReport
    from synth.report.runinfo import search_text

    facts = search_facts(ToolsConfig(ranker="hybrid"))
    assert facts["identity"] == f"{facts['model']}@{facts['model_sha']}" and facts["fusion"] == "zscore"
    assert facts["weights"] == list(HYBRID_WEIGHTS) and facts["dense_gate"] == list(HYBRID_GATE)
    assert facts["depth"] == 100 and "rrf_k" not in facts
    assert RolloutReport.from_dict({"search": facts}).search == facts  # reports/rollout.json, read back
    text = search_text(facts)
    assert "`hybrid`" in text and f"`{facts['model']}`" in text and f"`{facts['model_sha']}`" in text
    assert "fused by their scores" in text and f"{HYBRID_GATE[0]}-{HYBRID_GATE[1]}" in text
    assert "reciprocal rank fusion, k = 60" in search_text({"ranker": "hybrid", "rrf_k": 60})  # a run before it
    assert "BM25" in search_text(None) and "`bm25`" in search_text({"ranker": "bm25"})  # a run before the ranker


# ---- the hybrid's fusion by scores (synth.tools.search.fuse_scores), on hand-made lists --------------------------

DEEP = [("X", 0.9), ("Y", 0.5), ("Z", 0.5), ("W", 0.5)]  # a dense list, 4 deep: X stands above a flat rest


def test_a_short_bm25_list_is_its_pages_far_above_the_rest_not_among_themselves():
    # BM25 matches one page, A, padded with its floor (0) to the depth: [3, 0, 0, 0], so A's z-score is 1.732 and a
    # page it leaves out scores -0.577; X's in the dense list is 1.732, the rest (and A, absent: the last score)
    # -0.577. Weighted 0.6 / 0.4: A 0.808 beats X 0.346; W, Y and Z tie at -0.577, by page id.
    assert fuse_scores([[("A", 3.0)], DEEP], 5, [0.6, 0.4], "zscore", 4, [0.0, None]) == ["A", "X", "W", "Y", "Z"]
    # Unpadded, one score has no spread and says nothing: the dense list alone decides.
    assert fuse_scores([[("A", 3.0)], DEEP], 5, [0.6, 0.4], "zscore", 4, [None, None])[0] == "X"


def test_a_confident_list_outvotes_a_flat_one_where_equal_rank_fusion_does_not():
    # 20 deep. BM25: A far above 19 pages near 1-2 (a query of rare words); dense: 20 pages evenly spread, A not
    # among them. Equal reciprocal rank fusion puts B first (second in BM25, first in the dense list); standardised,
    # A's BM25 z-score (4.3) outweighs the dense list's best (1.6) and what A lacks there.
    others = [f"p{i:02d}" for i in range(18)]
    bm25 = [("A", 20.0), ("B", 2.0)] + [(p, 1.9 - 0.05 * i) for i, p in enumerate(others)]
    dense = [("B", 0.62)] + [(p, 0.61 - 0.01 * i) for i, p in enumerate(others)] + [("E", 0.42)]
    assert reciprocal_rank_fusion([[p for p, _ in bm25], [p for p, _ in dense]], 3)[0] == "B"
    assert fuse_scores([bm25, dense], 3, depth=20, floors=[0.0, None])[0] == "A"
    # and the other way round: a dense list whose best page stands far above its rest, over a flat BM25 list
    sharp = [("X", 0.95), ("B", 0.40)] + [(p, 0.39 - 0.001 * i) for i, p in enumerate(others)]
    flat = [("B", 5.0)] + [(p, 4.9 - 0.05 * i) for i, p in enumerate(others)] + [("E", 3.9)]
    assert reciprocal_rank_fusion([[p for p, _ in flat], [p for p, _ in sharp]], 3)[0] == "B"
    assert fuse_scores([flat, sharp], 2, depth=20, floors=[0.0, None]) == ["X", "B"]


def test_a_list_of_equal_scores_says_nothing():
    bm25 = [("B", 4.0), ("A", 3.0), ("C", 1.0), ("D", 0.5)]
    level = [("Z", 0.7), ("Y", 0.7), ("A", 0.7), ("X", 0.7)]
    # the BM25 order, then the dense list's pages (absent from BM25, its last score), by page id
    assert fuse_scores([bm25, level], 8, depth=4, floors=[0.0, None]) == ["B", "A", "C", "D", "X", "Y", "Z"]


def test_the_dense_gate_gives_a_loosely_similar_list_no_say_and_a_close_one_its_full_weight():
    bm25 = [("A", 6.0), ("B", 5.0), ("C", 1.0), ("D", 0.5)]
    dense = [("C", 0.66), ("D", 0.40), ("A", 0.39), ("B", 0.38)]  # C stands out, at a cosine of 0.66
    args = dict(weights=[0.3, 0.7], depth=4, floors=[0.0, None])
    ungated = fuse_scores([bm25, dense], 4, **args)
    assert ungated[0] == "C"
    assert fuse_scores([bm25, dense], 4, gates=[None, (0.7, 0.85)], **args) == ["A", "B", "C", "D"]  # under 0.7
    assert fuse_scores([bm25, dense], 4, gates=[None, (0.5, 0.66)], **args) == ungated  # at the top: full say
    # a third of its say (0.66 a third of the way from 0.6 to 0.78): C passes B, not A
    assert fuse_scores([bm25, dense], 4, gates=[None, (0.6, 0.78)], **args) == ["A", "C", "B", "D"]


def test_a_gated_out_list_still_orders_what_the_others_leave_tied():
    # The answer page masked, BM25 matches nothing else; the dense list's best cosine (0.60) is under the gate:
    # it has no say, yet its order, not the page ids, is what comes back.
    dense = [("P9", 0.60), ("P1", 0.55), ("P5", 0.41), ("P3", 0.40)]
    assert fuse_scores([[], dense], 3, [0.25, 0.75], depth=4, floors=[0.0, None],
                       gates=[None, (0.7, 0.8)]) == ["P9", "P1", "P5"]
    # and after the pages BM25 ranks, the dense-only pages in the dense list's order
    bm25 = [("B", 7.0), ("A", 2.0)]
    assert fuse_scores([bm25, dense], 6, [0.25, 0.75], depth=4, floors=[0.0, None],
                       gates=[None, (0.7, 0.8)]) == ["B", "A", "P9", "P1", "P5", "P3"]


def test_fusion_is_deterministic_on_ties_and_whatever_the_lists_order():
    one, two = [("B", 2.0), ("A", 1.0)], [("A", 2.0), ("B", 1.0)]
    # symmetric lists: A and B tie, and the tie goes by page id
    assert fuse_scores([one, two], 2, depth=2) == fuse_scores([two, one], 2, depth=2) == ["A", "B"]
    lists = [[("P", 3.0), ("Q", 2.0), ("R", 1.0)], [("R", 0.9), ("S", 0.7), ("P", 0.6)]]
    a = fuse_scores(lists, 4, [0.3, 0.7], depth=3, floors=[0.0, None])
    assert a == fuse_scores(lists[::-1], 4, [0.7, 0.3], depth=3, floors=[None, 0.0]) and sorted(a) == list("PQRS")
    with pytest.raises(ValueError, match="unknown fusion"):
        fuse_scores(lists, 2, method="rrf")


class Scored:
    """A stand-in scored ranking: fixed (page, score) pairs, masking honoured."""

    def __init__(self, pairs, floor=None):
        self.pairs, self.floor = pairs, floor

    def top(self, query, k, exclude=frozenset()):
        return [p for p, _ in self.scored(query, k, exclude)]

    def scored(self, query, k, exclude=frozenset()):
        return [(p, s) for p, s in self.pairs if p not in exclude][:k]


def test_score_fusion_respects_the_mask_and_returns_k():
    bm25 = Scored([("A", 9.0), ("B", 3.0), ("C", 2.0)], floor=0.0)
    dense = Scored([("A", 0.9), ("D", 0.8), ("E", 0.7), ("B", 0.6), ("F", 0.5)])
    fused = ScoreFusion([bm25, dense], depth=5)
    assert fused.top("q", 3)[0] == "A"
    masked = fused.top("q", 3, frozenset({"A"}))
    assert "A" not in masked and len(masked) == 3
    assert len(fused.top("q", 10, frozenset({"A", "B"}))) == 4  # every page left: C, D, E, F
    assert fused.top("q", 0) == []


def test_the_rankings_scores_follow_their_order(store):
    index = open_search(store, ToolsConfig(ranker="hybrid"))
    tool = index.ranking("tool")
    scored = tool.scored("bowed string instrument", 5)
    assert [p for p, _ in scored] == tool.top("bowed string instrument", 5) and scored[0][0] in ("4", "8")
    assert all(a[1] >= b[1] > 0 for a, b in zip(scored, scored[1:])) and tool.floor == 0.0
    dense = DenseRanking(open_search(store, ToolsConfig(ranker="dense")).ranking("dense").inner.dense)
    hits = dense.scored(BOAT, 4, frozenset({"3"}))
    assert [p for p, _ in hits] == dense.top(BOAT, 4, frozenset({"3"})) and hits[0][0] == SHIP and "3" not in dict(hits)
    assert all(1.0 >= a[1] >= b[1] for a, b in zip(hits, hits[1:]))  # cosine similarities, best first
