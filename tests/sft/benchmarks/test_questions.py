"""Benchmark questions before the harness: ``FORMAT:FILE`` specs, the seeded sample, withheld answers, ids,
and the judge's ``MODEL@URL``."""

from __future__ import annotations

import pytest

from helpers.benchmodel import BENCHDEMO, spec
from sft.benchmarks.judge import parse_endpoint
from sft.benchmarks.questions import load_set, parse_spec, sample_indices
from synth.engine.errors import InputError


def test_a_spec_names_a_known_format_and_a_file():
    assert parse_spec("frames:/data/test.tsv") == ("frames", __import__("pathlib").Path("/data/test.tsv"))
    for bad, why in [("hotpot.json", "expected FORMAT:FILE"), ("hotpot:x.json", "unknown format 'hotpot'"),
                     ("gaia:", "expected FORMAT:FILE")]:
        with pytest.raises(InputError, match=why):
            parse_spec(bad)


def test_the_sample_is_seeded_sorted_and_only_a_sample_when_smaller():
    a = sample_indices(100, 10, seed=7, sha256="abc")
    assert a == sorted(a) and len(set(a)) == 10 and all(0 <= i < 100 for i in a)
    assert sample_indices(100, 10, seed=7, sha256="abc") == a  # the same file and seed: the same questions
    assert sample_indices(100, 10, seed=8, sha256="abc") != a and sample_indices(100, 10, 7, "abd") != a
    assert sample_indices(5, 10, 7, "abc") == sample_indices(5, None, 7, "abc") == [0, 1, 2, 3, 4]


def test_withheld_answers_are_counted_not_asked(tmp_path):
    gaia = load_set(spec("gaia"), None, 0)
    assert (gaia.read, gaia.withheld, len(gaia.questions), gaia.sample) == (3, 1, 2, None)
    assert [q.answer for q in gaia.questions] == ["1957", "Augsburg"]
    assert gaia.questions[0].question_id == "gaia_validation_metadata.jsonl:9d0a1b2c-0000-4000-8000-000000000001"
    only = tmp_path / "metadata.jsonl"
    only.write_text('{"task_id": "t1", "Question": "q?", "Final answer": "?"}\n')
    with pytest.raises(InputError, match="no question with a published answer"):
        load_set(f"gaia:{only}", None, 0)


def test_a_limit_records_the_sample_and_repeated_ids_stay_apart(tmp_path):
    hp = load_set(spec("hotpotqa"), 2, 0)
    assert len(hp.questions) == 2 and hp.sample == {"limit": 2, "seed": 0, "of": 3}
    twice = tmp_path / "own.jsonl"
    twice.write_text('{"id": "a", "question": "one?", "answer": "x"}\n{"id": "a", "question": "two?", "answer": "y"}\n')
    ids = [q.question_id for q in load_set(f"jsonl:{twice}", None, 0).questions]
    assert ids == ["own.jsonl:a", "own.jsonl:a#2"]
    musique = load_set(f"musique:{BENCHDEMO / 'musique_ans_v1.0_dev.jsonl'}", None, 0)
    assert musique.questions[0].golds == ["Moscow", "Moskva"]


def test_model_at_url():
    assert parse_endpoint("Qwen/Qwen3-32B@http://localhost:8000/v1", "--judge") == \
        ("Qwen/Qwen3-32B", "http://localhost:8000/v1")
    assert parse_endpoint("m@https://api.example.com/v1", "--judge") == ("m", "https://api.example.com/v1")
    for bad in ["Qwen3-32B", "@http://x/v1", "m@localhost:8000"]:
        with pytest.raises(InputError, match="expected MODEL@URL"):
            parse_endpoint(bad, "--judge")


class _Pages:
    """A store holding only ``corpus/pages``."""

    def __init__(self, folder):
        self.folder = folder

    def exists(self, rel):
        return rel == "corpus/pages"

    def dataset(self, rel, hint=None):
        import pyarrow.dataset as ds

        return ds.dataset(self.folder)


def test_answers_resolve_to_pages_after_folding_and_by_an_alias_only_one_page_holds(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sft.benchmarks.questions import _folded_pages

    pq.write_table(pa.table({"page_id": ["1", "2", "3", "10", "4"],
                             "title": ["Zürich", "Moscow", "Paris", "Zurich", "Straße"],
                             "aliases": [None, ["Moskva", "Moscou"], ["Moskva"], ["Züri"], None]}), tmp_path / "p.parquet")
    found = _folded_pages(_Pages(tmp_path), {"zurich", "moskva", "moscou", "zuri", "strasse", "nowhere"})
    # A title that two pages share after folding names the first by id; "Moskva" is held by two pages: unresolved.
    assert found == {"zurich": "1", "moscou": "2", "zuri": "10", "strasse": "4"}


def test_an_endpoint_with_credentials_is_refused_without_repeating_them():
    from helpers.demostore import demo_config
    from sft.benchmarks.judge import judge_config
    from sft.benchmarks.run import model_config

    cfg = demo_config()
    with pytest.raises(InputError) as e:
        judge_config(cfg.teacher, *parse_endpoint("j@http://user:hunter2@judge.example/v1", "--judge"), None)
    assert "--judge" in str(e.value) and "credentials" in str(e.value) and "hunter2" not in str(e.value)
    with pytest.raises(InputError) as e:
        model_config(cfg, __import__("pathlib").Path("."), "m@http://user:hunter2@model.example/v1")
    assert "--model" in str(e.value) and "hunter2" not in str(e.value)
    label, tcfg = model_config(cfg, __import__("pathlib").Path("."), "m@http://model.example/v1?token=abc")
    assert (label, tcfg.backend, tcfg.model) == ("m", "openai", "m") and "abc" not in tcfg.display_url()
