"""KILT sources: where the knowledge source is, what it is, and how to read it.

A source (``corpus.source``) is one of:

* a KILT JSON Lines file, plain, ``.gz`` or ``.bz2`` (the ``_id`` layout);
* a file or folder in the Hugging Face ``facebook/kilt_wikipedia`` layout
  (``kilt_id``), as Parquet or JSON Lines;
* ``hf:NAME``, streamed with ``datasets.load_dataset(..., streaming=True)``;
* ``demo``, the embedded demo corpus, built under ``DIR/source/`` when missing.

Every reader yields :class:`~synth.corpus.normalise.RawBatch` es in one schema
(:data:`~synth.corpus.normalise.RAW_SCHEMA`), so the ingest stage never sees a layout.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import zlib
from pathlib import Path
from typing import Iterator

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from synth.corpus.config import CorpusConfig
from synth.engine.errors import InputError
from synth.corpus.lines import PREFIX_CHARS, iter_blocks, open_binary, read_jsonl
from synth.corpus.normalise import RAW_SCHEMA, RECORD_NORMALISERS, BadRecord, RawBatch, arrow_to_raw, validate_raw

log = logging.getLogger("hopforge")

HASH_WHOLE_MAX = 256 << 20  # files up to this size are hashed whole
HASH_EDGE = 4 << 20  # bigger ones: size, mtime and the first and last 4 MiB
DATA_SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet")
HF_PARQUET_EXPORT = "hf://datasets/{name}@refs/convert/parquet/{config}/{split}/*.parquet"


def resolve_source(source: str | None, root: Path) -> str:
    """The source to read: ``hf:NAME`` as is, ``demo`` as its file (built if missing), else a checked path."""
    if source is None:
        raise InputError("corpus.source is not set: pass `--kilt SOURCE` to `hopforge ingest` or "
                         "`--set corpus.source=...` (a KILT JSONL file, an HF-layout folder, hf:NAME, or demo)")
    if source.startswith("hf:"):
        if len(source) == 3:
            raise InputError("corpus.source 'hf:' names no dataset (e.g. hf:facebook/kilt_wikipedia)")
        return source
    if source == "demo":
        path = Path(root) / "source" / "kilt_demo.jsonl"
        if not path.exists():
            from synth.corpus.demo import build_demo_corpus

            build_demo_corpus(path)
        return str(path)
    path = Path(source).expanduser()
    if not path.exists():
        raise InputError(f"corpus.source: no such file or folder: {path}")
    return str(path)


def data_files(path: Path) -> list[Path]:
    """The data files of a source path: the file itself, or a folder's files in sorted order."""
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))
                   and any(s in p.suffixes for s in DATA_SUFFIXES))
    if not files:
        raise InputError(f"corpus.source: folder {path} holds no data files ({', '.join(DATA_SUFFIXES)}, "
                         "optionally .gz/.bz2)")
    return files


def _file_identity(path: Path) -> str:
    st = path.stat()
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if st.st_size <= HASH_WHOLE_MAX:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
            return h.hexdigest()
        h.update(f.read(HASH_EDGE))
        f.seek(st.st_size - HASH_EDGE)
        h.update(f.read(HASH_EDGE))
    return f"{st.st_size}:{st.st_mtime_ns}:{h.hexdigest()}"


def source_identity(source: str) -> str:
    """A stable string naming the source's content, for the ingest stage's content key.

    Files up to 256 MiB are hashed whole; bigger ones by size, mtime and the sha256 of
    their first and last 4 MiB (hashing 35 GiB on every run would cost minutes).  A
    folder combines its data files; ``hf:NAME`` is its own identity.
    """
    if source.startswith("hf:"):
        return source
    path = Path(source)
    if path.is_file():
        return _file_identity(path)
    h = hashlib.sha256()
    for f in data_files(path):
        h.update(f"{f.relative_to(path).as_posix()}\0{_file_identity(f)}\n".encode())
    return h.hexdigest()


def source_size(source: str) -> int | None:
    """Bytes on disk of a local source (the progress bar's total), None for a stream."""
    if source.startswith("hf:"):
        return None
    return sum(f.stat().st_size for f in data_files(Path(source)))


def _layout_of(keys) -> str | None:
    return "kilt" if "_id" in keys else "hf" if "kilt_id" in keys else None


def _first_values(path: Path, limit: int) -> Iterator[object]:
    """The first ``limit`` non-blank lines of a JSON Lines file, parsed (None where not JSON)."""
    stream, raw = open_binary(path)
    with raw, stream:
        for block in iter_blocks(stream, 1 << 20):
            for line in block.removeprefix(b"\xef\xbb\xbf").splitlines():
                if not line.strip():
                    continue
                try:
                    yield orjson.loads(line)
                except orjson.JSONDecodeError:
                    yield None
                limit -= 1
                if limit <= 0:
                    return


def detect_layout(path: Path, scan_lines: int = 1000) -> str | None:
    """``"kilt"`` or ``"hf"`` for a data file, from its first record that has ``_id`` or ``kilt_id``.

    None for a file with no records at all (an empty shard); an InputError when records
    exist but none of the first ``scan_lines`` has either key.
    """
    if ".parquet" in path.suffixes:
        keys = pq.read_schema(path).names
        layout = _layout_of(keys)
        if layout is None and pq.read_metadata(path).num_rows == 0:
            return None
    else:
        keys, layout, seen = [], None, 0
        for value in _first_values(path, scan_lines):
            seen += 1
            if isinstance(value, dict):
                keys = keys or sorted(value)
                layout = _layout_of(value)
                if layout is not None:
                    break
        if not seen:
            return None
    if layout is None:
        raise InputError(f"{path}: cannot tell the KILT layout: no record has `_id` (KILT JSON Lines) or "
                         f"`kilt_id` (Hugging Face layout); first record's keys: {sorted(keys)[:12]}")
    return layout


def read_source(source: str, cfg: CorpusConfig) -> Iterator[RawBatch]:
    """Every record of ``source`` as :class:`RawBatch` es, in source order."""
    batch_bytes = cfg.batch_mb << 20
    if source.startswith("hf:"):
        yield from read_hf_stream(source[3:], cfg.hf_config, cfg.hf_split, batch_bytes)
        return
    root = Path(source)
    files = data_files(root)
    for f in files:
        label = f.relative_to(root).as_posix() if root.is_dir() else None
        try:
            layout = detect_layout(f)
            if layout is None:
                log.warning("ingest: %s holds no records; skipped", f)
                continue
            log.debug("ingest: %s is in the %s layout", f, layout)
            if ".parquet" in f.suffixes:
                yield from read_parquet(f, layout, batch_bytes, label)
            else:
                yield from read_jsonl(f, layout, batch_bytes, label)
        except UNREADABLE as e:
            raise InputError(unreadable_message(f, e)) from None


# What a truncated or corrupt file raises while it is read: gzip / bzip2 / zlib and Arrow errors.
UNREADABLE = (EOFError, zlib.error, gzip.BadGzipFile, OSError, pa.ArrowException)


def unreadable_message(path: Path, e: BaseException) -> str:
    """One line naming the file and what is wrong with it."""
    return f"corpus.source: {path} is truncated or corrupt ({type(e).__name__}: {str(e)[:160]})"


def probe_source(source: str) -> str | None:
    """Why a local source cannot be read (a problem line), or None: Parquet footers and magic bytes,
    and the first MiB of the first JSON Lines file decompressed (a truncated or corrupt gzip or
    bzip2 file fails there), without reading the whole source."""
    if source.startswith("hf:") or source == "demo":
        return None
    try:
        files = data_files(Path(source))
    except InputError as e:
        return str(e)
    jsonl = [f for f in files if ".parquet" not in f.suffixes]
    for f in files:
        try:
            if ".parquet" in f.suffixes:
                pq.read_metadata(f)
            elif f == jsonl[0]:
                stream, raw = open_binary(f)
                with raw, stream:
                    stream.read(1 << 20)
        except UNREADABLE as e:
            return unreadable_message(f, e)
    return None


def _rows_per_batch(bytes_per_row: float, batch_bytes: int) -> int:
    return int(max(64, min(1_000_000, batch_bytes / max(bytes_per_row, 1.0))))


def read_parquet(path: Path, layout: str, batch_bytes: int, label: str | None = None) -> Iterator[RawBatch]:
    """Read a Parquet file (usually the HF layout) in batches of about ``batch_bytes``."""
    pf = pq.ParquetFile(path)
    md = pf.metadata
    per_row = md.num_rows and sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups)) / md.num_rows
    size, done, first = path.stat().st_size, 0, 1
    for batch in pf.iter_batches(batch_size=_rows_per_batch(per_row or 1.0, batch_bytes)):
        table = pa.Table.from_batches([batch])
        out = table_to_batch(table, layout, first)
        first += table.num_rows
        pos = int(size * (first - 1) / max(md.num_rows, 1))
        out.source_bytes, out.file, done = pos - done, label, pos
        yield out


def table_to_batch(table: pa.Table, layout: str, first: int) -> RawBatch:
    """Normalise an Arrow table of records numbered from ``first`` into a :class:`RawBatch`."""
    lines = np.arange(first, first + table.num_rows, dtype=np.int64)
    raw = arrow_to_raw(table, layout, lines)
    rejects: list[dict] = []
    if raw is not None:
        raw, bad = validate_raw(raw, layout)
        keep_rows = np.ones(table.num_rows, dtype=bool)
        for row, reason, detail in bad:
            keep_rows[row] = False
            rejects.append(_reject(int(lines[row]), reason, detail, table, row))
        kept = np.flatnonzero(keep_rows)
    else:  # per-record path for a batch whose columns do not fit the layout
        rows, kept_list = [], []
        normalise = RECORD_NORMALISERS[layout]
        for row, obj in enumerate(table.to_pylist()):
            try:
                rec = normalise(obj)
            except BadRecord as e:
                rejects.append(_reject(int(lines[row]), e.reason, e.detail, table, row))
                continue
            rec["line"] = int(lines[row])
            rows.append(rec)
            kept_list.append(row)
        raw, kept = pa.Table.from_pylist(rows, schema=RAW_SCHEMA), np.asarray(kept_list, dtype=np.int64)

    def prefix(i: int) -> str:
        return _row_text(table, int(kept[i]))

    return RawBatch(raw, rejects, prefix, 0, table.nbytes)


def _row_text(table: pa.Table, row: int) -> str:
    return orjson.dumps(table.slice(row, 1).to_pylist()[0], default=str).decode()[:PREFIX_CHARS]


def _reject(line: int, reason: str, detail: str, table: pa.Table, row: int) -> dict:
    return {"line": line, "reason": reason, "detail": detail, "raw": _row_text(table, row)}


def _load_stream(name: str, config: str, split: str):
    """``datasets.load_dataset(..., streaming=True)``, falling back to the Hub's Parquet export.

    Newer ``datasets`` refuses loading scripts, and ``facebook/kilt_wikipedia`` is a
    script dataset; the Hub keeps a Parquet conversion of it under ``refs/convert/parquet``.
    """
    import datasets

    try:
        return datasets.load_dataset(name, config, split=split, streaming=True)
    except Exception as e:  # noqa: BLE001 - datasets raises RuntimeError, ValueError... depending on version
        msg = str(e).lower()
        if "script" not in msg and "trust_remote_code" not in msg:
            raise
        files = HF_PARQUET_EXPORT.format(name=name, config=config, split=split)
        log.info("ingest: %s has a loading script (%s); streaming its Parquet export %s", name, e, files)
        return datasets.load_dataset("parquet", data_files={split: files}, split=split, streaming=True)


def read_hf_stream(name: str, config: str, split: str, batch_bytes: int) -> Iterator[RawBatch]:
    """Stream ``hf:NAME`` batch by batch (Arrow-formatted) through the HF-layout normaliser."""
    stream = _load_stream(name, config, split).with_format("arrow")
    first = 1
    # A KILT page weighs about 6 KB in Arrow; batches of ~batch_bytes bound memory.
    for table in stream.iter(batch_size=_rows_per_batch(6000, batch_bytes)):
        out = table_to_batch(table, "hf", first)
        first += table.num_rows
        yield out


__all__ = ["resolve_source", "source_identity", "source_size", "detect_layout", "read_source", "data_files",
           "read_parquet", "read_hf_stream", "table_to_batch", "RAW_SCHEMA", "RawBatch"]
