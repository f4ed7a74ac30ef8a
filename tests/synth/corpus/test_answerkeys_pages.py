"""``keys_for_pages``: answer keys for questions the pipeline did not write (benchmarks), built by the same rule."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from synth.corpus.answerkeys import keys_for_pages
from synth.text.answers import judge


class _Pages:
    def __init__(self, folder):
        self.folder = folder

    def exists(self, rel):
        return rel == "corpus/pages"

    def dataset(self, rel, hint=None):
        return ds.dataset(self.folder)


def test_a_resolved_page_adds_its_names_and_other_pages_titles_are_wrong(tmp_path):
    pq.write_table(pa.table({"page_id": ["1", "2", "3"], "title": ["New York", "New York City", "Doctor Strange (2016 film)"],
                             "aliases": [["Big Apple"], None, None]}), tmp_path / "p.parquet")
    keys = keys_for_pages(_Pages(tmp_path), {"a": ("1", ["New York"]), "b": ("3", ["Doctor Strange"]),
                                             "c": (None, ["1957"])}, 0.8)
    assert keys["a"].names == ("New York", "Big Apple") and keys["a"].other_titles == ("New York City",)
    assert judge("Big Apple", keys["a"], 0.8).basis == "page"  # the page's corpus alias
    assert judge("New York City", keys["a"], 0.8).basis == "other_page"  # F1 0.8, but another page
    assert keys["b"].names == ("Doctor Strange", "Doctor Strange (2016 film)")
    assert keys["c"].names == ("1957",) and keys["c"].other_titles == () and keys["c"].min_f1 == 0.8
