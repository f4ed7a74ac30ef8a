"""The search index compared by what it holds: two builds of the same pages are the same index."""

from __future__ import annotations

import pyarrow as pa

from helpers.searchcorpus import N_EMPTY, N_PAGES, PAGES, write_pages
from synth.engine.records import PAGE_SCHEMA
from synth.engine.sameness import MISSING, folder_digest
from synth.engine.store import write_parquet_atomic
from synth.tools.build import build_index
from synth.tools.digest import index_digest


def test_two_builds_of_the_same_pages_are_one_index_though_their_files_differ(tmp_path):
    pages = write_pages(tmp_path / "pages")
    build_index(pages, tmp_path / "one", threads=1, heap_mb=32)
    build_index(pages, tmp_path / "two", threads=2, heap_mb=64, batch_rows=3)
    assert folder_digest(tmp_path / "one") != folder_digest(tmp_path / "two")  # segment files are named at random
    a, b = index_digest(tmp_path / "one"), index_digest(tmp_path / "two")
    assert a == b and a.rows == N_PAGES - N_EMPTY


def test_a_changed_page_is_another_index_and_the_digest_names_the_documents(tmp_path):
    write_pages(tmp_path / "pages")
    build_index(tmp_path / "pages", tmp_path / "one", threads=1, heap_mb=32)
    changed = [dict(p) for p in PAGES]
    changed[0]["paragraphs"] = ["Paris is the capital of France.\n"]
    write_parquet_atomic(pa.Table.from_pylist(changed, schema=PAGE_SCHEMA), tmp_path / "changed" / "part-0.parquet")
    build_index(tmp_path / "changed", tmp_path / "two", threads=1, heap_mb=32)
    a, b = index_digest(tmp_path / "one"), index_digest(tmp_path / "two")
    assert a != b and a.differing(b) == ["documents"]
    assert index_digest(tmp_path / "nothing") is MISSING
