"""The dense retriever's seam: the packaged model, vectors that depend on their text alone, the index's checks."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from synth.engine.config import ConfigError
from synth.engine.errors import InputError
from synth.engine.store import MissingInput
from synth.tools.dense import DenseIndex, Embedder, model_identity, packaged_model, write_index

PAGES = {
    "p1": "Ship: A ship is a large watercraft that travels the oceans.",
    "p2": "Gale: A gale is a strong wind that sinks ships at sea.",
    "p3": "Paris: Capital and largest city of France, on the Seine.",
    "p4": "Photosynthesis: Process by which plants turn light into chemical energy.",
    "p5": "Violin: A bowed string instrument with four strings tuned in fifths.",
}

# Texts of many lengths (so several padding widths), one of them twice.
TEXTS = ["a boat", "Which vessel does that article mention?", "the capital of a European country on a river",
         "How do green plants make their food from sunlight, water and carbon dioxide in their leaves?",
         "a stringed instrument", "x", "Which vessel does that article mention?",
         "A very long query " + "that goes on and on " * 40]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture(scope="module")
def dense(embedder) -> DenseIndex:
    return DenseIndex(list(PAGES), embedder.encode(list(PAGES.values())), embedder)


def test_the_packaged_model_is_unzipped_once_into_its_cache(tmp_path):
    first = packaged_model(tmp_path)
    assert (first / "modules.json").is_file() and (first / "model.safetensors").is_file()
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert packaged_model(tmp_path) == first and (first / "model.safetensors").stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no temporary folder left beside it
    identity = model_identity("all-MiniLM-L6-v2")
    assert identity.startswith("all-MiniLM-L6-v2@") and identity == model_identity("all-MiniLM-L6-v2")


def test_a_vector_is_a_function_of_its_text_alone(embedder):
    one_pass = embedder.encode(TEXTS)
    assert one_pass.dtype == np.float32 and one_pass.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(one_pass, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(one_pass[1], one_pass[6])
    alone = np.stack([embedder.encode([t])[0] for t in TEXTS])
    order = [5, 2, 7, 0, 3, 1, 6, 4]
    shuffled = embedder.encode([TEXTS[i] for i in order])
    small = Embedder(batch_size=2, threads=2).encode(TEXTS)  # other batches, other threads
    assert alone.tobytes() == one_pass.tobytes() == small.tobytes()
    assert shuffled.tobytes() == one_pass[order].tobytes()
    # Cut at 16 tokens, the two long texts are other texts; the short ones are as they were.
    cut, short = embedder.encode(TEXTS, max_tokens=16), [0, 1, 2, 4, 5, 6]
    assert not np.array_equal(cut[7], one_pass[7]) and not np.array_equal(cut[3], one_pass[3])
    assert cut[short].tobytes() == one_pass[short].tobytes()


def test_a_missing_model_is_a_one_line_error_naming_the_path(tmp_path):
    with pytest.raises(ConfigError, match="tools.dense.model: no model folder at .*nowhere") as e:
        Embedder(str(tmp_path / "nowhere"))
    assert "\n" not in str(e.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no sentence-transformers model") as e:
        Embedder(str(tmp_path / "empty"))
    assert "\n" not in str(e.value)


def test_vectors_of_another_dimension_or_model_are_refused_with_the_rebuild_command(tmp_path, embedder):
    with pytest.raises(MissingInput, match="no page vectors at .*run `hopforge embed --out"):
        DenseIndex.open(tmp_path / "run" / "embed", embedder)
    folder = tmp_path / "run" / "embed"
    write_index(folder, ["p1", "p2"], np.ones((2, 8), np.float32) / np.sqrt(8), embedder, "title_description")
    with pytest.raises(InputError, match="holds 8-dimensional vectors .* makes 384-dimensional ones: rebuild them "
                                         f"with `hopforge embed --out {tmp_path / 'run'}`") as e:
        DenseIndex.open(folder, embedder)
    assert "\n" not in str(e.value)
    # Same dimension, another model (a copy whose config differs is another model: another file hash).
    other = tmp_path / "other-model"
    shutil.copytree(embedder.folder, other, copy_function=shutil.copy)
    (other / "config_sentence_transformers.json").write_text('{"note": "another model"}\n')
    theirs = Embedder(str(other))
    assert theirs.identity != embedder.identity and theirs.identity.startswith("other-model@")
    write_index(folder, list(PAGES), theirs.encode(list(PAGES.values())), theirs, "title_description")
    with pytest.raises(InputError, match=f"holds the page vectors of model {theirs.identity}, but tools.dense.model "
                                         f"is {embedder.identity}: rebuild them with `hopforge embed"):
        DenseIndex.open(folder, embedder, rebuild="hopforge embed --out DIR")
    assert DenseIndex.open(folder, theirs).search_ids("a boat", 1) == ["p1"]


def test_search_finds_by_meaning_and_remembers(dense):
    queries = ["a vessel that crosses the waves", "the French capital", "how plants feed on light",
               "an instrument played with a bow"]
    assert [dense.search_ids(q, 1) for q in queries] == [["p1"], ["p3"], ["p4"], ["p5"]]
    made = dense.queries
    assert dense.search_many(queries + ["a storm at sea"], 2)[:4] == [dense.search_ids(q, 2) for q in queries]
    assert dense.queries == made + 5  # k=2 is another question; asked again, every answer is remembered
    assert dense.search_many(queries, 10)[0][:2] == dense.search_ids(queries[0], 2)
    assert len(dense.search_ids("anything", 10)) == len(PAGES)  # k past the pages: every page, once


def _prompted_model(tmp_path, prompts: dict, name: str = "prompted-model"):
    """A copy of the packaged model whose sentence-transformers config names ``prompts`` (as e5's or Qwen3's do)."""
    import json

    folder = tmp_path / name
    shutil.copytree(packaged_model(), folder, copy_function=shutil.copy)
    (folder / "config_sentence_transformers.json").write_text(json.dumps({"prompts": prompts}))
    return folder


def test_the_packaged_model_embeds_queries_and_pages_as_plain_text(embedder):
    import torch

    assert (embedder.query_prompt, embedder.document_prompt) == ("", "")  # all-MiniLM-L6-v2 names no prompt
    plain = embedder.encode(TEXTS)
    assert embedder.encode_documents(TEXTS).tobytes() == plain.tobytes()
    assert embedder.encode_queries(TEXTS, max_tokens=128).tobytes() == embedder.encode(TEXTS, max_tokens=128).tobytes()
    # ...and that is sentence-transformers' own pipeline on the text alone, padded to a multiple of 8 as before.
    model = embedder.model
    for i, text in enumerate(TEXTS[:6]):
        features = model.preprocess([text], processing_kwargs={"text": {"pad_to_multiple_of": 8}},
                                    max_length=embedder.max_tokens)
        with torch.inference_mode():
            ref = torch.nn.functional.normalize(model(features)["sentence_embedding"].float(), dim=-1).numpy()[0]
        assert ref.tobytes() == plain[i].tobytes(), text


def test_the_query_prompt_reaches_queries_and_the_document_prompt_pages(tmp_path, embedder):
    folder = _prompted_model(tmp_path, {"query": "query: ", "passage": "passage: "})  # e5's prompts
    theirs = Embedder(str(folder))
    assert (theirs.query_prompt, theirs.document_prompt) == ("query: ", "passage: ")
    texts = list(PAGES.values())
    # The same weights as the packaged model: a prompted text is the plain model's vector of prompt + text.
    assert theirs.encode_documents(texts).tobytes() == embedder.encode([f"passage: {t}" for t in texts]).tobytes()
    assert theirs.encode_queries(["a boat"], 128).tobytes() == embedder.encode(["query: a boat"], 128).tobytes()
    assert not np.array_equal(theirs.encode_queries(["a boat"], 128), embedder.encode(["a boat"], 128))

    # The index embeds its queries with the query prompt (and only them: pages are the stage's).
    seen: list[tuple[tuple[str, ...], str]] = []
    real = theirs.encode

    def spy(texts, max_tokens=None, progress=None, prompt="", task=None):
        seen.append((tuple(texts), prompt))
        return real(texts, max_tokens, progress, prompt, task)

    theirs.encode = spy
    index = DenseIndex(list(PAGES), theirs.encode_documents(texts), theirs)
    assert seen == [(tuple(texts), "passage: ")]
    index.search_many(["a vessel that crosses the waves", "the French capital"], 2)
    assert seen[-1] == (("a vessel that crosses the waves", "the French capital"), "query: ")

    # tools.dense's prompts win over the model's ("" included: no prompt); Qwen3-style "document" wins "passage".
    mine = Embedder(str(folder), query_prompt="Instruct: find the page\nQuery:", document_prompt="")
    assert (mine.query_prompt, mine.document_prompt) == ("Instruct: find the page\nQuery:", "")
    assert mine.encode_documents(texts).tobytes() == embedder.encode(texts).tobytes()
    both = Embedder(str(_prompted_model(tmp_path, {"query": "q: ", "passage": "p: ", "document": "d: "}, "m2")))
    assert (both.query_prompt, both.document_prompt) == ("q: ", "d: ")


def test_vectors_of_another_document_prompt_are_refused_with_the_rebuild_command(tmp_path):
    folder = _prompted_model(tmp_path, {"query": "query: ", "passage": "passage: "})
    theirs = Embedder(str(folder))
    out = tmp_path / "run" / "embed"
    write_index(out, list(PAGES), theirs.encode_documents(list(PAGES.values())), theirs, "title_description")
    assert DenseIndex.open(out, Embedder(str(folder), query_prompt="")).search_ids("a boat", 1) == ["p1"]  # queries only
    with pytest.raises(InputError, match="embedded with the document prompt 'passage: ', but "
                                         r"tools.dense.document_prompt gives '': rebuild them with `hopforge embed") as e:
        DenseIndex.open(out, Embedder(str(folder), document_prompt=""))
    assert "\n" not in str(e.value)
