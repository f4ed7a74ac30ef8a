"""The resolved index is built once per benchmark content and corpus, and read back the same."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.benchworld import fixture, resolver
from synth.decontam.formats import read_benchmark
from synth.decontam.index import Benchmark, file_sha256
from synth.decontam.saved import built_once

FILES = [("hotpotqa", "hotpot_dev_distractor_v1.json"), ("frames", "frames_test.tsv")]


def _benches(sha: str | None = None) -> list[Benchmark]:
    return [Benchmark(f, n, sha or file_sha256(fixture(n)), read_benchmark(fixture(n), f)) for f, n in FILES]


def _no_corpus(titles):
    raise AssertionError("the corpus was asked again")


def test_read_back_equals_built_and_asks_the_corpus_nothing(tmp_path) -> None:
    calls = []

    def counting(titles):
        calls.append(len(titles))
        return resolver()(titles)

    built = built_once(_benches(), counting, tmp_path, "ingest-key-1")
    assert len(calls) == 1 and len(list(tmp_path.glob("index-*"))) == 1
    again = built_once(_benches(), _no_corpus, tmp_path, "ingest-key-1")
    for name in ("owner_bench", "pair_keys", "pair_owner", "entity_keys", "entity_owner", "pages"):
        assert np.array_equal(getattr(again, name), getattr(built, name)), name
    assert again.m == built.m and again.answer_ids == built.answer_ids and again.answer_pages == built.answer_pages
    assert [b.summary() for b in again.benchmarks] == [b.summary() for b in built.benchmarks]
    assert built.benchmarks[1].titles_unresolved == 1  # the stats come back too, not zeros
    assert [q.qid for q in again.questions] == [q.qid for q in built.questions]


def test_another_corpus_or_other_bytes_build_anew(tmp_path) -> None:
    built_once(_benches(), resolver(), tmp_path, "ingest-key-1")
    with pytest.raises(AssertionError, match="asked again"):
        built_once(_benches(), _no_corpus, tmp_path, "ingest-key-2")
    with pytest.raises(AssertionError, match="asked again"):
        built_once(_benches(sha="0" * 64), _no_corpus, tmp_path, "ingest-key-1")
    built_once(_benches(), resolver(), tmp_path, None)  # no corpus key: built, never saved
    assert len(list(tmp_path.glob("index-*"))) == 1 and not list(tmp_path.glob(".index-*"))
