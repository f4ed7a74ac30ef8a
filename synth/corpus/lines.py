"""Reading KILT JSON Lines (plain, ``.gz`` or ``.bz2``) in bounded blocks.

The file is read in blocks of about ``batch_mb`` MiB cut at newlines, so memory
stays bounded whatever the file size.  Each block takes the fast path first:
``pyarrow.json.read_json`` against an explicit schema (C++, multi-threaded), then
Arrow compute to validate.  numpy maps rows back to line numbers: pyarrow skips
blank lines, so row ``i`` is the ``i``-th non-blank line.

A block the fast path cannot take (bad JSON, a line that is not an object, a field
of the wrong type, invalid UTF-8) is bisected by lines; the halves that parse take
the fast path again and only small pieces around the bad lines are read line by
line with ``orjson``.  A few bad lines therefore cost a few extra parses of their
block, not a slow pass over the whole file.

Two pyarrow behaviours shape the guards here: a top-level ``null`` as the first
value crashes the reader, and several objects on one line parse as several rows.
So the fast path only sees lines that start with ``{`` and end with ``}``, and
its row count must equal the number of non-blank lines.
"""

from __future__ import annotations

import bz2
import gzip
from pathlib import Path
from typing import BinaryIO, Iterator

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.json as pj

from synth.corpus.normalise import (HF_JSON_SCHEMA, KILT_JSON_SCHEMA, RAW_SCHEMA, RECORD_NORMALISERS, BadRecord, RawBatch,
                       arrow_to_raw, validate_raw)

PREFIX_CHARS = 200  # how much of a rejected line the rejects file keeps
_SMALL = 32  # a failing piece of at most this many lines is read line by line
_WS = b" \t\r"
_BOM = b"\xef\xbb\xbf"
_JSON_SCHEMAS = {"kilt": KILT_JSON_SCHEMA, "hf": HF_JSON_SCHEMA}


def open_binary(path: Path) -> tuple[BinaryIO, BinaryIO]:
    """Open ``path`` for reading, decompressing gzip or bzip2 (told by magic bytes).

    Returns ``(stream, raw)``: read data from ``stream``; ``raw.tell()`` is the position
    in the file on disk, for progress.
    """
    raw = open(path, "rb")
    magic = raw.read(3)
    raw.seek(0)
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    if magic == b"BZh":
        return bz2.BZ2File(raw, mode="rb"), raw
    return raw, raw


def iter_blocks(stream: BinaryIO, size: int) -> Iterator[bytes]:
    """Blocks of about ``size`` bytes, each ending at a newline (the last one may not)."""
    carry = b""
    while True:
        chunk = stream.read(size)
        if not chunk:
            if carry:
                yield carry
            return
        cut = chunk.rfind(b"\n")
        if cut < 0:  # one line longer than a block: keep reading until it ends
            carry += chunk
            continue
        # one copy per block: join takes the memoryview without slicing it out first
        yield b"".join((carry, memoryview(chunk)[: cut + 1])) if cut + 1 < len(chunk) or carry else chunk
        carry = chunk[cut + 1:]


def read_jsonl(path: Path, layout: str, batch_bytes: int, label: str | None = None) -> Iterator[RawBatch]:
    """Read a JSON Lines file of ``layout`` ("kilt" or "hf") as :class:`RawBatch` es."""
    stream, raw = open_binary(path)
    with raw, stream:
        first_line, last_pos = 1, 0
        for block in iter_blocks(stream, batch_bytes):
            batch, n_lines = parse_block(block, first_line, layout)
            pos = raw.tell()
            batch.source_bytes, batch.file = pos - last_pos, label
            last_pos, first_line = pos, first_line + n_lines
            yield batch


def parse_block(block: bytes, first_line: int, layout: str) -> tuple[RawBatch, int]:
    """Parse one block of whole lines; returns the batch and the number of lines it held."""
    if first_line == 1 and block.startswith(_BOM):
        block = b"   " + block[3:]  # whitespace keeps every offset and line length as it was
    arr = np.frombuffer(block, np.uint8)
    nl = np.flatnonzero(arr == 10)
    starts = np.concatenate([[0], nl + 1])
    ends = np.concatenate([nl, [len(block)]])
    if block.endswith(b"\n"):
        starts, ends = starts[:-1], ends[:-1]
    n_lines = len(starts)
    lines = np.arange(first_line, first_line + n_lines, dtype=np.int64)
    ends = ends - ((ends > starts) & (arr[np.maximum(ends - 1, 0)] == 13))  # CRLF files
    nonempty = ends > starts
    first_b = arr[np.where(nonempty, starts, 0)] if len(arr) else np.zeros(n_lines, np.uint8)
    last_b = arr[np.where(nonempty, ends - 1, 0)] if len(arr) else np.zeros(n_lines, np.uint8)
    plain = nonempty & (first_b == ord("{")) & (last_b == ord("}"))
    blank = ~nonempty
    suspicious = np.zeros(n_lines, dtype=bool)
    for i in np.flatnonzero(nonempty & ~plain):  # rare: padded, whitespace-only or not an object
        seg = block[starts[i]:ends[i]].strip(_WS)
        if not seg:
            blank[i] = True
        elif not (seg[:1] == b"{" and seg[-1:] == b"}"):
            suspicious[i] = True
    nb = np.flatnonzero(~blank)
    parser = _BlockParser(block, starts, ends, lines, suspicious, layout)
    parser.parse(nb)
    tables = [t for t in parser.tables if t.num_rows]
    table = pa.concat_tables(tables) if tables else RAW_SCHEMA.empty_table()
    row_starts = np.concatenate(parser.row_starts) if parser.row_starts else np.zeros(0, np.int64)
    parser.rejects.sort(key=lambda r: r["line"])

    def prefix(i: int) -> str:
        s = int(row_starts[i])
        return block[s:s + 4 * PREFIX_CHARS].decode("utf-8", "replace")[:PREFIX_CHARS]

    return RawBatch(table, parser.rejects, prefix, len(block), len(block)), n_lines


class _BlockParser:
    """Parses the non-blank lines of one block: fast path first, bisecting around failures."""

    def __init__(self, block, starts, ends, lines, suspicious, layout):
        self.block, self.starts, self.ends, self.lines = block, starts, ends, lines
        self.suspicious, self.layout = suspicious, layout
        self.tables: list[pa.Table] = []
        self.row_starts: list[np.ndarray] = []
        self.rejects: list[dict] = []

    def parse(self, idx: np.ndarray) -> None:
        """Parse the lines ``idx`` (indices into the block's lines, in order)."""
        if len(idx) == 0:
            return
        if not self.suspicious[idx].any() and self._fast(idx):
            return
        if len(idx) <= _SMALL:
            self._slow(idx)
            return
        mid = len(idx) // 2
        self.parse(idx[:mid])
        self.parse(idx[mid:])

    def _fast(self, idx: np.ndarray) -> bool:
        s, e = int(self.starts[idx[0]]), int(self.ends[idx[-1]])
        longest = int((self.ends[idx] - self.starts[idx]).max())
        opts = pj.ReadOptions(block_size=max(longest + 64, 2 << 20), use_threads=True)
        parse = pj.ParseOptions(explicit_schema=_JSON_SCHEMAS[self.layout], unexpected_field_behavior="ignore")
        try:
            parsed = pj.read_json(pa.py_buffer(memoryview(self.block)[s:e]), read_options=opts, parse_options=parse)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return False
        if parsed.num_rows != len(idx):  # several objects on one line
            return False
        raw = arrow_to_raw(parsed, self.layout, self.lines[idx])
        if raw is None:
            return False
        try:
            raw.validate(full=True)  # pyarrow.json does not check UTF-8; this does
        except pa.ArrowInvalid:
            return False
        good, bad = validate_raw(raw, self.layout)
        keep = np.ones(len(idx), dtype=bool)
        for row, reason, detail in bad:
            keep[row] = False
            self._reject(idx[row], reason, detail)
        self.tables.append(good)
        self.row_starts.append(self.starts[idx[keep]])
        return True

    def _slow(self, idx: np.ndarray) -> None:
        normalise = RECORD_NORMALISERS[self.layout]
        rows, starts = [], []
        for i in idx:
            seg = memoryview(self.block)[int(self.starts[i]):int(self.ends[i])]
            try:
                obj = orjson.loads(seg)
            except orjson.JSONDecodeError as e:
                self._reject(i, "bad_json", f"not valid JSON ({e})")
                continue
            try:
                row = normalise(obj)
            except BadRecord as e:
                self._reject(i, e.reason, e.detail)
                continue
            row["line"] = int(self.lines[i])
            rows.append(row)
            starts.append(self.starts[i])
        self.tables.append(pa.Table.from_pylist(rows, schema=RAW_SCHEMA))
        self.row_starts.append(np.asarray(starts, dtype=np.int64))

    def _reject(self, i: int, reason: str, detail: str) -> None:
        s = int(self.starts[i])
        raw = self.block[s:min(int(self.ends[i]), s + 4 * PREFIX_CHARS)].decode("utf-8", "replace")[:PREFIX_CHARS]
        self.rejects.append({"line": int(self.lines[i]), "reason": reason, "detail": detail, "raw": raw})
