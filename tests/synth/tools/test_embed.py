"""The embed stage: what of a page is embedded, reuse and recompute by its key, and shards that change no byte."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flows.config import load_config
from flows.stages import EMBED
from helpers.linkcorpus import write_ingest
from synth.engine.config import ConfigError
from synth.engine.records import LINK_SCHEMA, PAGE_SCHEMA
from synth.engine.runner import run_stage
from synth.engine.store import Store
from synth.tools.dense import DenseIndex, Embedder, packaged_model
from synth.tools.embed import page_texts


def _page(pid: str, title: str, description: str | None, paragraphs: list[str]) -> dict:
    return {"page_id": pid, "title": title, "paragraphs": paragraphs, "description": description, "aliases": None,
            "wikidata_id": None, "categories": None, "url": None, "n_chars": sum(map(len, paragraphs))}


PAGES = [
    _page("1", "Ship", "Large watercraft", ["A ship travels the oceans. It carries cargo.", "Ships have hulls."]),
    _page("2", "Gale", None, ["Section::::Overview.", "A gale is a strong wind. Sailors fear it."]),
    _page("3", "Paris", "Capital of France", ["Paris is the capital of France. It lies on the Seine."]),
    _page("4", "Violin", "", ["The violin is a bowed string instrument."]),
    _page("5", "Photosynthesis", "Process by which plants make food from light", []),
    _page("6", "Oak", None, []),
    _page("7", "Everest", "Highest mountain on Earth", ["Mount Everest is in the Himalayas."]),
]


DENSE = "tools.ranker=dense"  # a reader of the vectors: without one the stage commits an empty embed


def _store(root) -> Store:
    store = Store(root)
    write_ingest(store, pa.Table.from_pylist(PAGES, schema=PAGE_SCHEMA), pa.Table.from_pylist([], schema=LINK_SCHEMA))
    return store


def _vectors(store) -> tuple[list[str], np.ndarray, dict]:
    folder = store.path("embed")
    ids = pq.read_table(folder / "pages.parquet").column("page_id").to_pylist()
    return ids, np.load(folder / "vectors.npy"), json.loads((folder / "dense.json").read_text())


def test_a_page_is_its_title_and_description_or_its_lead():
    table = pa.Table.from_pylist(PAGES, schema=PAGE_SCHEMA)
    assert page_texts(table, "title_description") == [
        "Ship: Large watercraft", "Gale: A gale is a strong wind.", "Paris: Capital of France",
        "Violin: The violin is a bowed string instrument.", "Photosynthesis: Process by which plants make food "
        "from light", "Oak", "Everest: Highest mountain on Earth"]  # no description: the lead's first sentence
    assert page_texts(table, "title_lead")[:2] == ["Ship: A ship travels the oceans. It carries cargo.",
                                                   "Gale: A gale is a strong wind. Sailors fear it."]  # no heading


def test_the_vectors_are_reused_and_made_again_when_the_model_or_the_text_changes(tmp_path):
    store = _store(tmp_path / "run")
    cfg = load_config(None, [DENSE, "runner.cpu_workers=1"])
    first = run_stage(EMBED, cfg, store, progress=False)
    ids, vectors, meta = _vectors(store)
    assert not first.reused and ids == [p["page_id"] for p in PAGES] and vectors.shape == (7, 384)
    assert meta["identity"] == first.report["identity"] and meta["text"] == "title_description"
    embedder = Embedder()
    assert vectors.tobytes() == embedder.encode(page_texts(pa.Table.from_pylist(PAGES, schema=PAGE_SCHEMA),
                                                           "title_description")).tobytes()
    index = DenseIndex.open(store.path("embed"), embedder)
    assert index.search_ids("the French capital", 1) == ["3"] and index.search_ids("a boat", 1) == ["1"]

    # The batch size, threads and shard size are operational: the same key, nothing embedded again.
    again = run_stage(EMBED, load_config(None, [DENSE, "runner.cpu_workers=1", "tools.dense.batch_size=2",
                                                "tools.dense.shard_pages=3"]), store, progress=False)
    assert again.reused and again.key == first.key

    lead = run_stage(EMBED, load_config(None, [DENSE, "runner.cpu_workers=1", "tools.dense.text=title_lead"]), store,
                     progress=False)
    assert not lead.reused and lead.key != first.key
    _, lead_vectors, lead_meta = _vectors(store)
    assert lead_meta["text"] == "title_lead" and not np.array_equal(lead_vectors[0], vectors[0])
    assert np.array_equal(lead_vectors[5], vectors[5])  # Oak has no text but its title either way

    # Another model folder (here a copy whose files differ) is another key, and its identity is recorded.
    other = tmp_path / "other-model"
    shutil.copytree(packaged_model(), other, copy_function=shutil.copy)
    (other / "config_sentence_transformers.json").write_text('{"note": "another model"}\n')
    theirs = run_stage(EMBED, load_config(None, [DENSE, "runner.cpu_workers=1", f"tools.dense.model={other}"]), store,
                       progress=False)
    assert not theirs.reused and theirs.key not in (first.key, lead.key)
    assert _vectors(store)[2]["identity"].startswith("other-model@")
    with pytest.raises(Exception, match="holds the page vectors of model other-model@"):
        DenseIndex.open(store.path("embed"), embedder)
    back = run_stage(EMBED, cfg, store, progress=False)  # the first key again: the same bytes again
    assert back.key == first.key and _vectors(store)[1].tobytes() == vectors.tobytes()


def test_a_bad_model_path_stops_the_stage_in_one_line(tmp_path):
    store = _store(tmp_path / "run")
    with pytest.raises(ConfigError, match=r"^tools.dense.model: no model folder at /no/such/model \(") as e:
        run_stage(EMBED, load_config(None, [DENSE, "tools.dense.model=/no/such/model"]), store, progress=False)
    assert "\n" not in str(e.value)


def test_shards_in_worker_processes_give_the_bytes_of_one_pass(tmp_path):
    one = _store(tmp_path / "one")
    run_stage(EMBED, load_config(None, [DENSE, "runner.cpu_workers=1", "tools.dense.shard_pages=100"]), one, progress=False)
    sharded = _store(tmp_path / "sharded")
    out = run_stage(EMBED, load_config(None, [DENSE, "runner.cpu_workers=2", "tools.dense.shard_pages=2",
                                              "tools.dense.batch_size=3"]), sharded, progress=False)
    assert out.report["shards"] == 4 and out.report["output"] == 7
    ids, vectors, _ = _vectors(sharded)
    assert ids == _vectors(one)[0] and vectors.tobytes() == _vectors(one)[1].tobytes()


def test_shards_on_dask_workers_give_the_bytes_of_one_pass(tmp_path):
    # The flow's Dask runner (runner.task_runner=dask): what a user with a cluster embeds on many workers with.
    from prefect.testing.utilities import prefect_test_harness

    from flows.synth_flow import synth_stages, task_runner_for

    one = _store(tmp_path / "one")
    run_stage(EMBED, load_config(None, [DENSE, "runner.cpu_workers=1", "tools.dense.shard_pages=100"]), one,
              progress=False)
    on_dask = _store(tmp_path / "dask")
    overrides = [DENSE, "runner.task_runner=dask", "runner.dask_workers=2", "tools.dense.shard_pages=2"]
    config = tmp_path / "config.yaml"
    config.write_text("seed: 0\n")
    with prefect_test_harness(server_startup_timeout=None):
        flow = synth_stages.with_options(task_runner=task_runner_for(load_config(str(config), overrides)))
        [outcome] = flow(config=str(config), overrides=overrides, out=str(on_dask.root), stages=["embed"])
    assert outcome.name == "embed" and outcome.report["shards"] == 4 and outcome.report["output"] == 7
    ids, vectors, _ = _vectors(on_dask)
    assert ids == _vectors(one)[0] and vectors.tobytes() == _vectors(one)[1].tobytes()


def test_switching_the_reader_reuses_the_vectors_and_no_reader_idles_the_stage(tmp_path):
    store = _store(tmp_path / "run")
    base = ["runner.cpu_workers=1"]
    bm25 = run_stage(EMBED, load_config(None, base), store, progress=False)
    assert bm25.report["output"] == 0 and "tools.ranker is bm25" in bm25.report["idle"]  # no reader: nothing embedded
    dense = run_stage(EMBED, load_config(None, [*base, "tools.ranker=dense"]), store, progress=False)
    assert not dense.reused and dense.key != bm25.key and dense.report["output"] == len(PAGES)
    vectors = _vectors(store)[1]
    # The vectors depend on neither the ranker nor which reader asked for them: the same key, nothing embedded.
    for reader in (["tools.ranker=hybrid"], ["questions.adversaries=[tool,body,keywords,dense]"],
                   ["tools.ranker=hybrid", "questions.adversaries=[tool,dense]"]):
        again = run_stage(EMBED, load_config(None, [*base, *reader]), store, progress=False)
        assert again.reused and again.key == dense.key, reader
    assert _vectors(store)[1].tobytes() == vectors.tobytes()
    # Back to no reader: the idle output again (its key), and bm25 with a dense adversary is a reader.
    idle = run_stage(EMBED, load_config(None, [*base, "questions.adversaries=[tool,body]"]), store, progress=False)
    assert idle.key not in (dense.key, bm25.key) and idle.report["output"] == 0 and idle.report["idle"]
    assert run_stage(EMBED, load_config(None, base), store, progress=False).key == bm25.key


def test_the_document_prompt_keys_the_vectors_and_the_query_prompt_does_not(tmp_path):
    store = _store(tmp_path / "run")
    base = [DENSE, "runner.cpu_workers=1"]
    plain = run_stage(EMBED, load_config(None, base), store, progress=False)
    _, vectors, meta = _vectors(store)
    assert "document_prompt" not in meta  # the packaged model names none: dense.json as it was before prompts
    queries = run_stage(EMBED, load_config(None, [*base, "tools.dense.query_prompt=query:"]), store, progress=False)
    assert queries.reused and queries.key == plain.key  # a query prompt shapes searches, not page vectors
    doc = run_stage(EMBED, load_config(None, [*base, "tools.dense.document_prompt=passage:"]), store, progress=False)
    assert not doc.reused and doc.key != plain.key
    _, prompted, meta = _vectors(store)
    assert meta["document_prompt"] == "passage:"
    texts = page_texts(pa.Table.from_pylist(PAGES, schema=PAGE_SCHEMA), "title_description")
    assert prompted.tobytes() == Embedder().encode([f"passage:{t}" for t in texts]).tobytes()
    with pytest.raises(Exception, match="embedded with the document prompt 'passage:'"):
        DenseIndex.open(store.path("embed"), Embedder())
    assert run_stage(EMBED, load_config(None, base), store, progress=False).key == plain.key
    assert _vectors(store)[1].tobytes() == vectors.tobytes()
