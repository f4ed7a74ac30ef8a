"""Large tables read once and kept in Arrow, with Python views that build a row when it is asked for.

A run's per-question and per-trace tables grow with the run: 100,000 questions or 400,000 traces as
Python dicts take GBs, and a forked worker's reads of Python objects copy their pages (reference
counts are writes).  Arrow's buffers are compact and never written, so forked workers share them.

* :class:`RowMapping`: key -> row (or a value built from it), with a small cache of the rows used
  last; for a duplicated key the last row wins, as in a dict built from the rows.
* :class:`RowSequence`: the rows in order, built a batch at a time while iterating.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

BATCH_ROWS = 4096


class RowMapping(Mapping):
    """``key column value -> build(row)`` over an Arrow table; ``cache`` values built last are kept."""

    CACHE = 4096

    def __init__(self, table: pa.Table, key: str, build: Callable[[dict], Any] | None = None,
                 cache: int | None = None):
        self.table = table
        self._build = build
        self._cache = self.CACHE if cache is None else cache
        self._index = {k: i for i, k in enumerate(table.column(key).to_pylist())}
        self._built: OrderedDict[Any, Any] = OrderedDict()

    def __getitem__(self, key: Any) -> Any:
        if key in self._built:
            self._built.move_to_end(key)
            return self._built[key]
        row = self.table.slice(self._index[key], 1).to_pylist()[0]
        value = self._build(row) if self._build is not None else row
        if self._cache > 0:
            self._built[key] = value
            if len(self._built) > self._cache:
                self._built.popitem(last=False)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[Any]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def column(self, name: str) -> list:
        """Column ``name`` of the mapping's rows, in key order (for a duplicated key, its last row's)."""
        values = self.table.column(name).to_pylist()
        return [values[i] for i in self._index.values()]


def _rows(table: pa.Table) -> Iterator[dict]:
    for batch in table.to_batches(max_chunksize=BATCH_ROWS):
        yield from batch.to_pylist()


class RowSequence(Sequence):
    """The rows of an Arrow table as dicts, built ``BATCH_ROWS`` at a time while iterating."""

    def __init__(self, table: pa.Table):
        self.table = table

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, i: int) -> dict:  # type: ignore[override]
        if isinstance(i, slice):
            return RowSequence(self.table.slice(*_bounds(i, len(self))))  # type: ignore[return-value]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.table.slice(i, 1).to_pylist()[0]

    def __iter__(self) -> Iterator[dict]:
        return _rows(self.table)


def _bounds(s: slice, n: int) -> tuple[int, int]:
    start, stop, step = s.indices(n)
    if step != 1:
        raise ValueError("RowSequence slices take a step of 1")
    return start, max(0, stop - start)


__all__ = ["RowMapping", "RowSequence"]
