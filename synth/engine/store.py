"""The stage store: content-addressed stage outputs under an output folder DIR.

Layout::

    DIR/manifest.json                 current key of every stage (atomic JSON)
    DIR/reports/<stage>.json          input / output / dropped of the last run of <stage>
    DIR/.stages/<stage>/<key>/...     a stage's complete output, named by its content key
    DIR/.stages/<stage>/<key>.partial the same while it is being written (resumable shards)
    DIR/<table>  ->  .stages/<stage>/<key>/<table>   (relative symlink, swapped atomically)

A stage writes everything into ``<key>.partial``; the single ``rename`` to ``<key>``
is the commit, so a crash never leaves a half-written output visible.  The public
paths (``DIR/corpus/pages``, ``DIR/walks``...) are symlinks that
``pyarrow.dataset.dataset(DIR/<table>)`` reads like folders; each is replaced with
``os.replace``, which is atomic.

A committed ``<key>`` folder never changes, so the content hash of a table in it
(:meth:`Store.content_hash`, for stages keyed by what they read rather than by who wrote it)
is computed once and kept beside it in ``_content.json``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock, Timeout

from synth.engine.errors import InputError

from synth.engine.faults import crash_point

if TYPE_CHECKING:  # pyarrow.dataset imports pandas: a command that reads no table (--help) does without it
    import pyarrow.dataset as ds

log = logging.getLogger("hopforge")

PARQUET_OPTS = dict(compression="zstd", compression_level=3, use_dictionary=True, write_statistics=True)


class MissingInput(RuntimeError):
    """A stage's input table is not in the store; the message says which command makes it."""


class FolderInUse(InputError):
    """Another run holds the output folder; the message names its pid and start time."""


class RunLock:
    """The one-run-per-folder lock: ``DIR/.hopforge.lock`` (an OS file lock, so a run that was
    killed holds nothing: the next run takes it over at once) and ``DIR/.hopforge.run``, who holds
    it.  Two runs on one folder would each write and commit the same stages and pay for the same
    teacher calls twice."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._lock = FileLock(str(self.root / ".hopforge.lock"), thread_local=False)
        self.info = self.root / ".hopforge.run"

    def acquire(self, what: str = "hopforge") -> None:
        """Take the lock or raise :class:`FolderInUse` at once."""
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            try:
                held = json.loads(self.info.read_text())
                since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(held["started_at"]))
                who = f"pid {held['pid']} since {since} ({held.get('what', 'hopforge')})"
            except (OSError, ValueError, KeyError):
                who = "another process"
            raise FolderInUse(f"{self.root} is in use by {who}: wait for it to finish, stop it, or pass "
                              "another --out") from None
        atomic_write_json(self.info, {"pid": os.getpid(), "started_at": time.time(), "what": what})

    def release(self) -> None:
        """Let the next run in."""
        self.info.unlink(missing_ok=True)
        self._lock.release()

    def __enter__(self) -> "RunLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj: Any) -> None:
    """Atomically write ``obj`` as indented, key-sorted JSON."""
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode())


def write_parquet_atomic(table: pa.Table, path: Path, row_group_size: int | None = None) -> None:
    """Write one Parquet file atomically (temporary name, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        pq.write_table(table, tmp, row_group_size=row_group_size, **PARQUET_OPTS)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def tree_hash(path: Path) -> str:
    """sha256 of a file, or of a folder's files (relative names and bytes, in name order) that a dataset
    reader sees: names starting with ``.`` or ``_`` are left out."""
    path = Path(path)
    if path.is_file():
        files = [path]
    else:
        files = sorted((p for p in path.rglob("*") if p.is_file()
                        and not any(part.startswith((".", "_")) for part in p.relative_to(path).parts)),
                       key=lambda p: p.relative_to(path).as_posix())
    h = hashlib.sha256()
    for f in files:
        name = f.relative_to(path).as_posix() if f != path else ""
        h.update(f"{name}\0{f.stat().st_size}\0".encode())
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:20]


INVENTORY = "_files.json"


def inventory(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` and its size, by relative name (hidden files, and the ``_`` files the
    store keeps at the top of a stage folder, are left out)."""
    folder = Path(folder)
    out: dict[str, int] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        rel = Path(dirpath).relative_to(folder)
        for name in filenames:
            if name.startswith(".") or (rel == Path(".") and name.startswith("_")):
                continue
            p = Path(dirpath) / name
            out[(rel / name).as_posix()] = p.lstat().st_size
    return out


class ShardWriter:
    """Writes a table as numbered Parquet shards ``part-00000.parquet`` ... into a folder.

    Rows are buffered and flushed every ``rows_per_shard`` rows (or ``bytes_per_shard``),
    so memory stays bounded.  Each shard is written atomically.  Shards that already
    exist are kept: ``next_index`` starts after them, which is how resumable stages
    continue a crashed write.

    With ``row_group_rows``, a shard is written as it fills, one row group of exactly that many rows at a
    time, into a hidden temporary file renamed when the shard is done: the writer then holds one row
    group, not a shard (a table of large rows, such as whole traces, would otherwise hold up to
    ``bytes_per_shard`` and the encoding of all of it).  Row groups are cut by row count, so the same rows
    give the same bytes however they are handed to :meth:`write`.
    """

    def __init__(self, folder: Path, schema: pa.Schema, rows_per_shard: int = 100_000, bytes_per_shard: int = 256 << 20,
                 row_group_rows: int | None = None):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self.rows_per_shard = rows_per_shard
        self.bytes_per_shard = bytes_per_shard
        self.row_group_rows = row_group_rows
        self._batches: list[pa.RecordBatch] = []
        self._rows = 0
        self._bytes = 0
        self._open: pq.ParquetWriter | None = None  # the shard being written, with row_group_rows
        self._tmp: Path | None = None
        self._shard_rows = self._shard_bytes = 0  # rows and bytes already in the open shard
        self.rows_written = 0
        self.next_index = len(list(self.folder.glob("part-*.parquet")))

    def write(self, data: pa.Table | pa.RecordBatch | list[dict]) -> None:
        """Buffer rows (a table, a batch, or a list of dicts in the schema)."""
        if isinstance(data, list):
            if not data:
                return
            data = pa.Table.from_pylist(data, schema=self.schema)
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if data.schema != self.schema:
            data = data.select(self.schema.names).cast(self.schema)
        for b in data.to_batches():
            if b.num_rows == 0:
                continue
            self._batches.append(b)
            self._rows += b.num_rows
            self._bytes += b.nbytes
        if self.row_group_rows:
            while self._rows >= self.row_group_rows:
                self._spill(self.row_group_rows)
        if self._shard_rows + self._rows >= self.rows_per_shard or self._shard_bytes + self._bytes >= self.bytes_per_shard:
            self.flush()

    def _spill(self, n: int) -> None:
        """Write the first ``n`` buffered rows as a row group of the open shard (opened if none is)."""
        table = pa.Table.from_batches(self._batches, schema=self.schema)
        group, rest = table.slice(0, n), table.slice(n)
        if self._open is None:
            self._tmp = self.folder / f".part-{self.next_index:05d}.parquet.{uuid.uuid4().hex[:8]}.tmp"
            self._open = pq.ParquetWriter(self._tmp, self.schema, **PARQUET_OPTS)
        try:
            self._open.write_table(group, row_group_size=n)
        except BaseException:
            self._abandon()
            raise
        self._shard_rows += group.num_rows
        self._shard_bytes += group.nbytes
        self._batches = rest.to_batches()
        self._rows, self._bytes = rest.num_rows, rest.nbytes

    def _abandon(self) -> None:
        """Drop the open shard (a write failed): its temporary file goes, with the rows in it."""
        if self._open is not None:
            self._open.close()
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
        self._no_shard()

    def _no_shard(self) -> None:
        self._open, self._tmp, self._shard_rows, self._shard_bytes = None, None, 0, 0

    def flush(self) -> None:
        """Write the buffered rows as the next shard (with ``row_group_rows``: finish the open shard)."""
        if self._open is not None:
            if self._rows:
                self._spill(self._rows)
            try:
                self._open.close()
                os.replace(self._tmp, self.folder / f"part-{self.next_index:05d}.parquet")
            except BaseException:
                self._abandon()
                raise
            self.next_index += 1
            self.rows_written += self._shard_rows
            self._no_shard()
            return
        if not self._batches:
            return
        table = pa.Table.from_batches(self._batches, schema=self.schema)
        write_parquet_atomic(table, self.folder / f"part-{self.next_index:05d}.parquet")
        self.next_index += 1
        self.rows_written += table.num_rows
        self._batches, self._rows, self._bytes = [], 0, 0

    def close(self) -> None:
        """Flush; a table with no rows still gets one empty shard so its schema is readable."""
        self.flush()
        if self.next_index == 0:
            write_parquet_atomic(self.schema.empty_table(), self.folder / "part-00000.parquet")
            self.next_index = 1


class Store:
    """The output folder DIR: tables, artefacts, reports and the manifest."""

    def __init__(self, root: str | Path):
        self.root = Path(root).absolute()
        if self.root.is_symlink() and not self.root.exists():
            raise InputError(f"--out {self.root} is a symlink to {os.readlink(self.root)}, which does not exist")
        if self.root.exists() and not self.root.is_dir():
            raise InputError(f"--out {self.root} is a file, not a folder")
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(str(self.root / ".manifest.lock"))

    # ---- paths ---------------------------------------------------------------------------
    def path(self, rel: str) -> Path:
        """Public path of a table or artefact, e.g. ``corpus/pages``."""
        return self.root / rel

    def stage_dir(self, stage: str, key: str) -> Path:
        return self.root / ".stages" / stage / key

    def partial_dir(self, stage: str, key: str) -> Path:
        return self.root / ".stages" / stage / f"{key}.partial"

    # ---- tables --------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        return self.path(rel).exists()

    def dataset(self, rel: str, hint: str | None = None) -> ds.Dataset:
        """The Arrow dataset of a table; raises :class:`MissingInput` naming the command that makes it."""
        p = self.path(rel)
        if not p.exists():
            how = f" (run `hopforge {hint} --out {self.root}` first)" if hint else ""
            raise MissingInput(f"table '{rel}' not found in {self.root}{how}")
        import pyarrow.dataset as ds

        return ds.dataset(p, format="parquet")

    def read(self, rel: str, columns: list[str] | None = None, hint: str | None = None) -> pa.Table:
        """Read a whole table (or some columns)."""
        return self.dataset(rel, hint).to_table(columns=columns)

    def content_hash(self, stage: str, key: str, table: str) -> str:
        """A hash of the files of ``table`` in the committed output ``key`` of ``stage`` (what a reader of
        the table sees: names and bytes, hidden and ``_`` files left out, as pyarrow's datasets do).

        The writer is deterministic (the same rows in the same order give the same Parquet bytes), so an
        unchanged table hashes the same after its stage reran.  Kept in ``<key>/_content.json``.
        """
        base = self.stage_dir(stage, key)
        memo = base / "_content.json"
        with self.locked():
            try:
                known = json.loads(memo.read_text())
            except (FileNotFoundError, ValueError):
                known = {}
            if table in known:
                return known[table]
            target = base / table
            if not target.exists():
                raise MissingInput(f"stage '{stage}' output {key} in {self.root} has no table '{table}'")
            known[table] = tree_hash(target)
            atomic_write_json(memo, known)
            return known[table]

    # ---- manifest ------------------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    def manifest(self) -> dict:
        """The manifest: ``{"stages": {name: entry}}``."""
        try:
            return json.loads(self.manifest_path.read_text())
        except FileNotFoundError:
            return {"stages": {}}

    def stage_entry(self, stage: str) -> dict | None:
        return self.manifest()["stages"].get(stage)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Serialise manifest and symlink updates across threads and processes."""
        with self._lock:
            yield

    def commit(self, stage: str, key: str, outputs: Iterable[str], entry: dict, report: dict | None) -> None:
        """Publish a finished stage: partial -> key folder, swap symlinks, write report and manifest.

        A partial of a key that is already committed (a retry of the items that failed, or a damaged
        output recomputed) replaces it: the old folder is moved aside first, then removed.  The folder's
        inventory (``_files.json``: every file and its size) is written before the rename, so
        :meth:`damage` can tell later whether anything changed inside it.
        """
        with self.locked():
            final = self.stage_dir(stage, key)
            partial = self.partial_dir(stage, key)
            if partial.exists():
                atomic_write_json(partial / INVENTORY, inventory(partial))
                if final.exists():
                    aside = final.with_name(f"{key}.replaced")
                    shutil.rmtree(aside, ignore_errors=True)
                    os.replace(final, aside)
                    os.replace(partial, final)
                    shutil.rmtree(aside, ignore_errors=True)
                else:
                    os.replace(partial, final)
            elif not final.exists():
                raise RuntimeError(f"stage {stage}: nothing to commit for key {key}")
            crash_point(f"commit:{stage}")
            self._publish_locked(stage, key, outputs)
            if report is not None:
                atomic_write_json(self.root / "reports" / f"{stage}.json", report)
                atomic_write_json(final / "_report.json", report)
            m = self.manifest()
            m["stages"][stage] = entry
            atomic_write_json(self.manifest_path, m)
            self._gc_locked(stage, keep=key)

    def committed_report(self, stage: str, key: str) -> dict:
        """The report stored with the committed output ``key`` of ``stage`` ({} when there is none)."""
        try:
            return json.loads((self.stage_dir(stage, key) / "_report.json").read_text())
        except (FileNotFoundError, ValueError):
            return {}

    def damage(self, stage: str, key: str) -> str | None:
        """What changed inside the committed output ``key`` of ``stage`` since it was committed (files
        missing, resized or added, against its inventory), or None when it is whole.  An output
        committed before inventories existed is taken as whole."""
        final = self.stage_dir(stage, key)
        try:
            known = json.loads((final / INVENTORY).read_text())
        except FileNotFoundError:
            return None
        except ValueError:
            return f"its inventory {final / INVENTORY} is not JSON"
        now = inventory(final)
        missing = sorted(set(known) - set(now))
        added = sorted(set(now) - set(known))
        resized = sorted(f for f in set(known) & set(now) if known[f] != now[f])
        parts = [f"{what} {', '.join(names[:3])}{' …' if len(names) > 3 else ''}"
                 for what, names in (("missing", missing), ("resized", resized), ("not written by hopforge", added))
                 if names]
        return "; ".join(parts) or None

    def republish(self, stage: str, key: str, outputs: Iterable[str], entry: dict) -> dict | None:
        """Point the public paths at an existing complete output (reuse); returns its stored report."""
        with self.locked():
            self._publish_locked(stage, key, outputs)
            rp = self.stage_dir(stage, key) / "_report.json"
            report = json.loads(rp.read_text()) if rp.exists() else None
            if report is not None:
                atomic_write_json(self.root / "reports" / f"{stage}.json", report)
            m = self.manifest()
            m["stages"][stage] = entry
            atomic_write_json(self.manifest_path, m)
            return report

    def _publish_locked(self, stage: str, key: str, outputs: Iterable[str]) -> None:
        final = self.stage_dir(stage, key)
        for rel in outputs:
            target = final / rel
            if not target.exists():
                continue
            link = self.path(rel)
            link.parent.mkdir(parents=True, exist_ok=True)
            rel_target = os.path.relpath(target, link.parent)
            if link.is_symlink() and os.readlink(link) == rel_target:
                continue
            tmp = link.with_name(f".{link.name}.{uuid.uuid4().hex[:8]}.lnk")
            os.symlink(rel_target, tmp)
            if link.exists() and not link.is_symlink():
                # A plain file or folder the user put there: never delete or merge it, move it aside.
                aside = link.with_name(f"{link.name}.moved-aside-{time.strftime('%Y%m%d-%H%M%S')}")
                os.replace(link, aside)
                log.warning("%s was not made by hopforge; moved it to %s", link, aside)
            os.replace(tmp, link)

    def _gc_locked(self, stage: str, keep: str) -> None:
        base = self.root / ".stages" / stage
        for d in base.iterdir():
            if d.name != keep and not d.name.endswith(".partial"):
                shutil.rmtree(d, ignore_errors=True)
            elif d.name.endswith(".partial"):
                # An abandoned partial of another key (config changed after a crash).
                shutil.rmtree(d, ignore_errors=True)
