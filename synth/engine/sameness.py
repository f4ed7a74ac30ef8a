"""What "the same data" is: the digests two runs of a stage are compared by.

A stage's output is a function of its content key (its code, config sections and input keys): run
again, in another process, under another ``PYTHONHASHSEED``, teacher concurrency, worker count or
shard size, it must write the same data.  That data is:

* **a table** (a folder of Parquet parts, or one Parquet file) by its rows: each row's canonical JSON
  (keys sorted, Arrow's Python values; its run-fact columns, such as a trace's measured ``latency_s``, left
  out, and a path inside the run folder written relative to it) is hashed, the row hashes are sorted and
  hashed after the schema's names and types.  How the rows were cut into files, and Parquet's encoding, do
  not count; row order does not either (the explorer, which lists tables as written, does compare it);
* **a JSON file** (a stage report, an artefact's metadata) by its value without :data:`RUN_FACTS`, a path
  inside the run folder written relative to it (``DIR/...``: a report may name its own folder);
* **any other file** by its bytes;
* **a folder** by its files' digests and relative names.  Hidden files (``.managed.json``, locks,
  temporary files) and the store's own ``_`` files at its top are not data, nor is a file a concern's
  digest says is none (:data:`NOT_DATA`: the trainer's pickled arguments, which hold paths and a clock).

An artefact whose files are not byte-stable by design (the search index: tantivy names its segments
at random and splits documents among them by writer thread) is compared by what it holds instead, by a
digest function of its own concern (``flows/verify.py`` lists them).

**Run facts** describe how a run went, not what it made: how long it took, how the work was spread
(workers, passes, shards), what the teacher was paid for rather than served from the call cache
(a rerun from the call cache answers every call from it), what the checks' memos saved, and where the
source file lay (its content is in the ingest key).  Reports keep them; comparisons leave them out.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

import orjson

from synth.engine.errors import DamagedFile, first_sentence, machine_error

Roots = tuple[str, ...]  # the run folder's path as written in what it holds (absolute, and resolved)

# Keys of report JSON that are run facts (module docstring), at any depth; and any key of time: ending in "_s"
# (latency_s, wall_s, rate_wait_s), "seconds", "_per_second" or "runtime", or starting with "seconds".
RUN_FACTS = frozenset({
    # how long it took
    "seconds", "cpu_seconds", "finished_at", "started_at", "mb_per_s", "pages_per_s",
    # how the work was spread (operational settings)
    "workers", "passes", "corpus_scans", "pages_counted", "shards",
    # the teacher's calls as paid for or served from the call cache, and their latency
    "teacher", "teacher_calls", "paid_calls", "per_kept_sample",
    # what the checks and the token-count cache saved (memos live per shard and per folder)
    "validators", "tokens_counted",
    # where the source file lay (its content is in the ingest key)
    "source",
})


def is_run_fact(key: str) -> bool:
    """Whether a report key names a run fact (:data:`RUN_FACTS`, or a key of time: module comment)."""
    return key in RUN_FACTS or key.endswith(("_s", "seconds", "_per_second", "runtime")) or key.startswith("seconds")


def figures(value: Any, roots: Roots = ()) -> Any:
    """A report's value without its run facts, at any depth (the figures two runs must share); a string that
    is a path inside one of ``roots`` (the run folder, as written) is made relative to it (``DIR/...``)."""
    if isinstance(value, dict):
        return {k: figures(v, roots) for k, v in value.items() if not (isinstance(k, str) and is_run_fact(k))}
    if isinstance(value, list):
        return [figures(v, roots) for v in value]
    if isinstance(value, str):
        for root in roots:
            if value == root or value.startswith(root + "/"):
                return "DIR" + value[len(root):]
    return value


@dataclass(frozen=True)
class Digest:
    """What one output holds, as a hash: ``kind`` (table, json, bytes, folder, missing or a concern's own),
    ``rows`` for a table, and for a folder the digest of each file by relative name (``parts``)."""

    kind: str
    sha: str
    rows: int | None = None
    parts: dict[str, "Digest"] = field(default_factory=dict, compare=False)

    def differing(self, other: "Digest") -> list[str]:
        """The parts (files of a folder) whose digests differ from ``other``'s, by name; ``[]`` when the two
        are equal or neither has parts."""
        names = sorted(set(self.parts) | set(other.parts))
        return [n for n in names if self.parts.get(n) != other.parts.get(n)]

    def describe(self) -> str:
        """``"1,234 rows"``, ``"12 files"``, ``"json"``, ``"missing"``..."""
        if self.rows is not None:
            return f"{self.rows:,} rows"
        if self.kind == "folder":
            return f"{len(self.parts):,} files"
        return self.kind


MISSING = Digest("missing", "")
DAMAGED = Digest("damaged", "")  # an output a file of which cannot be read (:class:`~synth.engine.errors.DamagedFile`)
NOT_DATA = Digest("not data", "")  # what a concern's file digest returns for a file that is no data


def _default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": bytes(value).hex()}
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError(f"cannot digest a {type(value).__name__}")


def canonical(value: Any) -> bytes:
    """Canonical JSON bytes of a value: keys sorted, floats as their shortest exact repr, bytes as hex."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=_default)


def table_digest(path: Path, batch_rows: int = 4096, roots: Roots = ()) -> Digest:
    """The rows of a Parquet table (a file, or a folder of parts read as one table), order aside, each row
    without its run facts (:func:`figures`: a measured latency; paths inside ``roots`` relative to them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    files = [path] if path.is_file() else sorted(
        (p for p in path.rglob("*.parquet") if not _hidden(p.relative_to(path))), key=lambda p: p.as_posix())
    rows: list[bytes] = []
    schema: pa.Schema | None = None
    for f in files:
        try:
            pf = pq.ParquetFile(f)
            s = pa.schema(list(pf.schema_arrow))  # names and types; Parquet and pandas metadata are no data
            schema = schema or s
            if not s.equals(schema):
                raise DamagedFile(f, f"its schema differs from the other parts of {path}")
            for batch in pf.iter_batches(batch_size=batch_rows):
                rows.extend(hashlib.blake2b(canonical(figures(r, roots)), digest_size=16).digest()
                            for r in batch.to_pylist())
        except (pa.ArrowException, OSError) as e:  # truncated, overwritten: no footer, bad magic bytes
            if machine_error(e) is not None:  # the machine refused the read: not the file's fault
                raise
            raise DamagedFile(f, first_sentence(str(e))) from e
    rows.sort()
    h = hashlib.sha256(str(schema).encode() if schema is not None else b"")
    for r in rows:
        h.update(r)
    return Digest("table", h.hexdigest()[:20], rows=len(rows))


def read_json(path: Path) -> Any:
    """A JSON file's value; :class:`~synth.engine.errors.DamagedFile` when it holds no JSON (cut, overwritten)."""
    data = Path(path).read_bytes()
    try:
        return json.loads(data)
    except ValueError as e:
        raise DamagedFile(path, first_sentence(str(e)), kind="JSON file") from None


def json_digest(path: Path, roots: Roots = ()) -> Digest:
    """A JSON file's value without its run facts (paths inside ``roots`` relative to them)."""
    value = figures(read_json(path), roots)
    return Digest("json", hashlib.sha256(canonical(value)).hexdigest()[:20])


def bytes_digest(path: Path) -> Digest:
    """A file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return Digest("bytes", h.hexdigest()[:20])


def file_digest(path: Path, roots: Roots = ()) -> Digest:
    """A file by its kind: Parquet by rows, JSON without run facts, anything else by bytes."""
    suffix = Path(path).suffix
    if suffix == ".parquet":
        return table_digest(path, roots=roots)
    if suffix == ".json":
        return json_digest(path, roots)
    return bytes_digest(path)


FileDigest = Callable[[Path, str], "Digest | None"]


def _hidden(rel: Path) -> bool:
    return any(part.startswith(".") for part in rel.parts)


def is_table(path: Path) -> bool:
    """Whether ``path`` is a table: a Parquet file, or a folder whose data files are all Parquet parts."""
    path = Path(path)
    if path.is_file():
        return path.suffix == ".parquet"
    if not path.is_dir():
        return False
    names = [p.name for p in path.iterdir() if not p.name.startswith((".", "_"))]
    return bool(names) and all(n.endswith(".parquet") for n in names)


def folder_digest(path: Path, own: FileDigest | None = None, roots: Roots = ()) -> Digest:
    """A folder by its files (module docstring); ``own(file, relative name)`` may digest a file its own way
    (None: the default by kind; :data:`NOT_DATA`: leave it out)."""
    path = Path(path)
    parts: dict[str, Digest] = {}
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel_dir = Path(dirpath).relative_to(path)
        for name in sorted(filenames):
            if name.startswith(".") or (rel_dir == Path(".") and name.startswith("_")):
                continue
            rel = (rel_dir / name).as_posix()
            f = Path(dirpath) / name
            d = (own(f, rel) if own is not None else None) or file_digest(f, roots)
            if d is not NOT_DATA:
                parts[rel] = d
    h = hashlib.sha256()
    for rel in sorted(parts):
        h.update(f"{rel}\0{parts[rel].sha}\n".encode())
    return Digest("folder", h.hexdigest()[:20], parts=parts)


def output_digest(path: Path, own: FileDigest | None = None, roots: Roots = ()) -> Digest:
    """What a stage output holds: a table by its rows, a folder by its files, a file by its kind
    (:data:`MISSING` when there is nothing at ``path``)."""
    path = Path(path)
    if not path.exists():
        return MISSING
    if is_table(path):
        return table_digest(path, roots=roots)
    if path.is_dir():
        return folder_digest(path, own, roots)
    return (own(path, path.name) if own is not None else None) or file_digest(path, roots)


__all__ = ["RUN_FACTS", "Roots", "is_run_fact", "figures", "Digest", "MISSING", "DAMAGED", "NOT_DATA", "read_json", "canonical", "table_digest", "json_digest",
           "bytes_digest", "file_digest", "is_table", "folder_digest", "output_digest"]
