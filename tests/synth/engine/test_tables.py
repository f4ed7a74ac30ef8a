"""Arrow-backed views: the same rows, in the same order, as dicts and lists built from the table give."""

from __future__ import annotations

import pyarrow as pa
import pytest

from synth.engine import tables
from synth.engine.tables import RowMapping, RowSequence


def _table(n: int) -> pa.Table:
    rows = [{"id": f"k{i % 37}", "n": i, "tags": [str(i)] * (i % 3) or None} for i in range(n)]
    return pa.Table.from_pylist(rows)


def test_row_mapping_is_the_dict_of_its_rows_last_duplicate_winning():
    table = _table(100)  # ids repeat: k0 .. k36, the last row of each stands
    expected = {r["id"]: r for r in table.to_pylist()}
    for cache in (0, 3, 4096):
        got = RowMapping(table, "id", cache=cache)
        assert len(got) == len(expected) == 37 and list(got) == list(expected)
        for k in [*expected, *reversed(expected), "k5", "k5"]:
            assert k in got and got[k] == expected[k]
        assert len(got._built) == min(cache, 37)
        assert "k99" not in got and got.get("k99") is None
        with pytest.raises(KeyError):
            got["k99"]
        assert got.column("n") == [expected[k]["n"] for k in expected]


def test_row_mapping_builds_values_and_caches_the_last_used():
    table = _table(10)
    calls = []

    def build(row):
        calls.append(row["id"])
        return row["n"] * 2

    got = RowMapping(table, "id", build, cache=2)
    assert [got["k1"], got["k2"], got["k1"], got["k3"], got["k2"]] == [2, 4, 2, 6, 4]
    assert calls == ["k1", "k2", "k3", "k2"]  # k1 was used last before k3 came; k2 was not, and is built again


def test_row_sequence_iterates_every_row_in_order_in_batches(monkeypatch):
    monkeypatch.setattr(tables, "BATCH_ROWS", 7)
    table = pa.concat_tables([_table(10), _table(25)])  # two chunks
    rows = table.to_pylist()
    seq = RowSequence(table)
    assert len(seq) == 35 and list(seq) == rows and bool(seq)
    assert seq[0] == rows[0] and seq[-1] == rows[-1] and seq[12] == rows[12]
    assert list(seq[5:9]) == rows[5:9]
    with pytest.raises(IndexError):
        seq[35]
    assert not RowSequence(table.slice(0, 0)) and list(RowSequence(table.slice(0, 0))) == []
