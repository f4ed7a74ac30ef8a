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
from synth.tools.rank import DenseRanking, open_search, search_facts, search_key, use_ranker
from synth.tools.search import FusedRanking, SearchIndex
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
    """A stand-in for the page vectors: every query's nearest pages in one fixed order."""

    def __init__(self, order: list[str]):
        self.order = order

    def search_ids(self, text: str, k: int) -> list[str]:
        return self.order[:k]


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
    assert facts["identity"] == f"{facts['model']}@{facts['model_sha']}" and facts["rrf_k"] == 60
    assert RolloutReport.from_dict({"search": facts}).search == facts  # reports/rollout.json, read back
    text = search_text(facts)
    assert "`hybrid`" in text and f"`{facts['model']}`" in text and f"`{facts['model_sha']}`" in text
    assert "BM25" in search_text(None) and "`bm25`" in search_text({"ranker": "bm25"})  # a run before the ranker
