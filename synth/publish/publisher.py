"""``hopforge publish``: the output folder DIR -> Parquet shards + a dataset card, on disk or on the Hub.

Layout (the Hub's own)::

    README.md                                     dataset card, YAML `configs:` -> data_files per split
    data/<config>/<split>-00000-of-00004.parquet  one folder per config (sft, longctx, rl_pool, questions,
                                                  traces), one file prefix per split (sft, rl, eval)

Splits.  Every row carries its question's split (``sft``, ``rl`` or ``eval``, decided once
when the question is written, see :func:`synth.questions.sources.split_of`): the ``split``
column, or ``extra_info.split`` in ``rl_pool``.  Each split of a config is a Hub split of
its own, so ``datasets.load_dataset(PATH, "questions", split="eval")`` reads the held-out
questions.  ``questions`` and ``traces`` hold every split, ``sft`` and ``longctx`` only
``sft``, ``rl_pool`` ``rl`` (and ``sft`` with ``questions.share_sft_rl``).  A row without a
split or with another value is refused (:class:`PublishError` naming the table and the row
id), and so is an ``eval`` row in a training config (sft, longctx, rl_pool): eval
questions are held out and never trained on.

Sharding rule, per split.  A split of ``R`` rows gets ``N = 2**ceil(log2(ceil(R /
rows_per_shard)))`` shards (1 when ``R <= rows_per_shard``); row ``r`` goes to shard
``sha256(id(r))[:8] mod N`` of its split and each shard is sorted by id.  Ids are
``trace_id`` (sft, traces), ``sample_id`` (longctx), ``question_id`` (questions) and
``extra_info.question_id`` (rl_pool).  Why hashing rather than cutting the id-sorted
table every ``rows_per_shard`` rows: with contiguous cuts one inserted or deleted row
shifts every later boundary, so every later shard changes; with hash buckets a row
added, removed or edited changes exactly the one shard it hashes to, as long as ``N``
stays put.  ``N`` is a power of two so it changes only when the split doubles or
halves (then every shard of that split is rewritten, and its file names change since
they carry ``N``); the other splits' shards stay as they are.  Shards hold between about
half and all of ``rows_per_shard`` rows.

Determinism.  The Parquet settings are fixed (zstd level 3, dictionary encoding,
statistics, ``row_group_rows`` rows per group, content-defined chunking), schema
metadata is dropped, and the writer's ``created_by`` names the pinned pyarrow, so the
same rows give the same bytes; the card holds no date or host, and no path but the target's
own (a local target's folder, in the card's load snippet).  An unchanged
shard is therefore byte-identical between builds and is neither rewritten nor uploaded.
The card names the stage content keys, so a rerun of a stage rewrites the card too
(one small file) even when its rows came out the same.

Targets.
  * ``local:PATH`` stages every new or changed file while the layout and card are built,
    then writes each atomically (temporary file + rename), leaves unchanged ones untouched,
    and removes stale shards (``data/*/*-NNNNN-of-NNNNN.parquet`` not in the new layout: a split
    whose shard count changed, a split or config that is gone, the ``train-*`` shards of the
    layout before splits).
    A publish that fails (bad rows, a secret in the card) changes nothing.  Nothing else in
    PATH is touched.
    What the user owns is never overwritten.  PATH may not lie inside the output folder DIR
    (its stage folders would take the card and the shards), nor DIR inside PATH's ``data/``.
    PATH keeps a list of what publish wrote there, ``.hopforge-publish.json`` (path -> sha256,
    written atomically, see :mod:`synth.publish.owned`): a file is replaced, or a stale shard removed,
    only when it is listed with the bytes it holds now, so a republish goes through but a
    ``README.md`` of the user's (or a file edited since) stops the publish, naming it, before
    anything is written; ``overwrite=True`` (``--overwrite``) replaces such files, as it must
    once for a folder published before the list existed.
  * ``hub:ORG/NAME`` creates the dataset repo if needed (``publish.private``), lists the
    remote files, and makes one ``create_commit`` with a ``CommitOperationAdd`` for every
    new or changed file (compared by LFS sha256, or git blob sha1 for non-LFS files) and
    a ``CommitOperationDelete`` for every stale shard; nothing changed, no commit.  The
    token is read from ``HF_TOKEN`` only, passed to each call, and never logged, printed
    or written; error messages from the Hub are scrubbed of it.

A DIR is published under its run lock (``DIR/.hopforge.lock``, :class:`~synth.engine.store.RunLock`, the
one ``hopforge run`` and ``report`` take): while a run holds the folder, publish stops at once with one
line naming it, and no run starts on the folder while publish reads it, so a publish never reads a
folder half updated.  A DIR is published only when the stages behind the tables ran and agree with each
other: the manifest must hold ``ingest``, ``questions``, ``rollout`` and ``filter``, and
each of these (and ``assemble``) must have been made from the current output of the
stages it read.  Memory stays bounded by one shard: rows are spilled per shard to Arrow
IPC files under DIR first, then each shard is sorted and written.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from synth.engine.store import RunLock, Store
from synth.publish.errors import HubError, PublishError
from synth.publish.owned import OWNED_FILE, OwnedFiles, check_outside_run
from synth.publish.config import PublishConfig
from synth.engine.records import SPLITS

log = logging.getLogger("hopforge")

# (config, id column, split column) in card order; a dotted column is a struct field.
TABLES: tuple[tuple[str, str, str], ...] = (
    ("sft", "trace_id", "split"), ("preference", "chosen_trace_id", "split"), ("longctx", "sample_id", "split"),
    ("rl_pool", "extra_info.question_id", "extra_info.split"), ("questions", "question_id", "split"),
    ("traces", "trace_id", "split"))
# Configs that are training data: an eval row there would be trained on, so it is refused.
TRAINING_CONFIGS = frozenset({"sft", "preference", "longctx", "rl_pool"})
OPTIONAL_TABLES = {"longctx": "no `longctx` table in DIR (the assemble stage has not run)",
                   "preference": "no `preference` table in DIR (a filter stage from before preference pairs wrote it: "
                                 "rerun `hopforge filter`)"}
REQUIRED_STAGES = ("ingest", "questions", "rollout", "filter")
CONSISTENT_STAGES = ("questions", "rollout", "filter", "assemble")
SHARD_RE = re.compile(r"^data/[^/]+/[A-Za-z0-9_.-]+-\d{5}-of-\d{5}\.parquet$")
REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
TARGET_FORMS = "local:PATH (a folder) or hub:ORG/NAME (a Hugging Face dataset repo)"
MAX_OPEN_SPILLS = 128  # shard spill files open at once; more shards take more passes over the table
BATCH_ROWS = 2048


@dataclass(frozen=True)
class Target:
    """Where to publish: ``kind`` is ``local`` (``where`` a path) or ``hub`` (``where`` a repo id)."""

    kind: str
    where: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.where}"


def parse_target(text: str) -> Target:
    """``local:PATH`` or ``hub:ORG/NAME``; anything else raises :class:`PublishError` naming both forms."""
    kind, sep, where = (text or "").partition(":")
    if sep and kind == "local" and where.strip():
        return Target("local", where)
    if sep and kind == "hub" and REPO_RE.match(where) and ".." not in where and not where.endswith(".git"):
        return Target("hub", where)
    raise PublishError(f"bad target {text!r}: expected {TARGET_FORMS}")


# ---- readiness ----------------------------------------------------------------------------------

def check_ready(store: Store) -> tuple[dict, dict[str, dict]]:
    """The manifest and the reports, once DIR is complete and consistent; else :class:`PublishError`."""
    root = store.root
    manifest = store.manifest()
    stages = manifest.get("stages", {})
    missing = [s for s in REQUIRED_STAGES if s not in stages]
    if missing:
        cmds = ", ".join(f"`hopforge {s} --out {root}`" for s in missing)
        raise PublishError(f"cannot publish {root}: its manifest has no {', '.join(missing)} stage "
                           f"(run {cmds}, or `hopforge run --out {root}`)")
    for name in CONSISTENT_STAGES:
        for up, key in ((stages.get(name) or {}).get("inputs") or {}).items():
            current = (stages.get(up) or {}).get("key")
            if current is not None and current != key:
                raise PublishError(
                    f"cannot publish {root}: stage '{name}' was made from the '{up}' output {key}, but the current "
                    f"'{up}' output is {current}; rerun `hopforge {name} --out {root}`")
    reports: dict[str, dict] = {}
    for p in sorted((root / "reports").glob("*.json")):
        try:
            reports[p.stem] = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise PublishError(f"cannot publish {root}: unreadable report {p}: {e}") from None
    if "filter" not in reports:
        raise PublishError(f"cannot publish {root}: reports/filter.json is missing (rerun `hopforge "
                           f"filter --out {root} --force`)")
    return manifest, reports


# ---- shards -------------------------------------------------------------------------------------

def shard_count(rows: int, per_shard: int) -> int:
    """Shards for a table of ``rows`` rows: the power of two at or above ``ceil(rows / per_shard)``."""
    need = max(1, math.ceil(rows / per_shard))
    return 1 << (need - 1).bit_length()


def shard_of(key: str, n: int) -> int:
    """The shard of the row whose id is ``key``: the first 8 bytes of its sha256, modulo ``n``."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") % n


def shard_path(config: str, split: str, i: int, n: int) -> str:
    """``data/<config>/<split>-XXXXX-of-YYYYY.parquet``."""
    return f"data/{config}/{split}-{i:05d}-of-{n:05d}.parquet"


def _col(data: pa.Table | pa.RecordBatch, dotted: str):
    parts = dotted.split(".")
    arr = data.column(parts[0])
    for p in parts[1:]:
        arr = pc.struct_field(arr, p)
    return arr


def _clean(table: pa.Table, schema: pa.Schema, id_col: str) -> pa.Table:
    """The rows sorted by id, in ``schema`` (no schema or field metadata), in one chunk per column."""
    table = table.take(pc.sort_indices(_col(table, id_col)))
    return table.cast(schema).combine_chunks()


def _has_column(schema: pa.Schema, dotted: str) -> bool:
    fields: Any = schema
    for part in dotted.split("."):
        idx = fields.get_field_index(part) if fields is not None else -1
        if idx < 0:
            return False
        typ = fields.field(idx).type
        fields = typ if pa.types.is_struct(typ) else None
    return True


def _check_splits(name: str, ids: pa.ChunkedArray, splits: pa.ChunkedArray, id_col: str,
                  split_col: str) -> dict[str, int]:
    """Rows per split (in :data:`SPLITS` order, present splits only); :class:`PublishError` naming the
    table and the (smallest) row id when a row has no split, another value, or is an eval row of a
    training config."""
    ok = pc.fill_null(pc.is_in(splits, value_set=pa.array(SPLITS)), False)
    if not pc.all(ok).as_py():
        bad = pc.invert(ok)
        first = pc.min(ids.filter(bad)).as_py()
        value = splits.filter(pc.equal(ids, first))[0].as_py()
        what = "has no split" if value is None else f"has split {value!r}"
        raise PublishError(f"table {name}: row {first} ({id_col}) {what}; every row needs a `{split_col}` of "
                           f"{', '.join(SPLITS)} ({pc.sum(bad.cast(pa.int64())).as_py()} bad rows); rerun the "
                           "stage that wrote it")
    counts = {str(v["values"]): int(v["counts"]) for v in pc.value_counts(splits.combine_chunks()).to_pylist()}
    if name in TRAINING_CONFIGS and counts.get("eval"):
        first = pc.min(ids.filter(pc.equal(splits, "eval"))).as_py()
        raise PublishError(f"table {name}: row {first} ({id_col}) is a question of the eval split "
                           f"({counts['eval']} such rows); eval questions are held out and never published as "
                           "training data")
    return {s: counts[s] for s in SPLITS if counts.get(s)}


def table_shards(path: Path, id_col: str, split_col: str, per_shard: int, spill: Path,
                 name: str | None = None) -> Iterator[tuple[str, int, int, pa.Table]]:
    """Yield ``(split, index, count, rows)`` for every shard of every split of the table at ``path``
    (see the module docstring), splits in :data:`SPLITS` order; nothing for a table without rows.

    Raises :class:`PublishError` on a null or repeated id (the sharding and sort need unique ids) and
    on a bad split (see :func:`_check_splits`).
    """
    name = name or path.name
    dataset = ds.dataset(path, format="parquet")
    schema = pa.schema([f.remove_metadata() for f in dataset.schema])
    if not _has_column(dataset.schema, split_col):
        raise PublishError(f"table {name}: no `{split_col}` column (written before splits existed; rerun the "
                           "stage that wrote it)")
    cols = dataset.to_table(columns={"_id": ds.field(*id_col.split(".")),
                                     "_split": ds.field(*split_col.split("."))})
    ids = cols["_id"]
    rows = len(ids)
    if ids.null_count:
        raise PublishError(f"table {name}: {ids.null_count} rows have no {id_col}")
    if rows and pc.count_distinct(ids).as_py() != rows:
        raise PublishError(f"table {name}: {id_col} is not unique ({rows - pc.count_distinct(ids).as_py()} "
                           "repeated ids); shards need one id per row")
    if rows == 0:
        return  # nothing to publish: `datasets` cannot read a Parquet config without rows
    per_split = _check_splits(name, ids, cols["_split"], id_col, split_col)
    del cols, ids
    # Every (split, shard) is a bucket; a row's bucket is its split's first bucket + its shard in the split.
    counts = {s: shard_count(r, per_shard) for s, r in per_split.items()}
    buckets = [(s, i, n) for s, n in counts.items() for i in range(n)]
    offset: dict[str, int] = {}
    for b, (s, _i, _n) in enumerate(buckets):
        offset.setdefault(s, b)
    if len(buckets) == 1:
        yield buckets[0][0], 0, 1, _clean(dataset.to_table(), schema, id_col)
        return
    for first in range(0, len(buckets), MAX_OPEN_SPILLS):
        group = range(first, min(len(buckets), first + MAX_OPEN_SPILLS))
        files = {b: spill / f"{name}-{b:05d}.arrow" for b in group}
        writers = {b: pa.ipc.new_file(str(f), dataset.schema) for b, f in files.items()}
        try:
            for batch in dataset.to_batches(batch_size=BATCH_ROWS):
                keys = _col(batch, id_col).to_pylist()
                where = np.fromiter((offset[s] + shard_of(k, counts[s])
                                     for k, s in zip(keys, _col(batch, split_col).to_pylist())),
                                    np.int64, count=batch.num_rows)
                for b in np.unique(where):
                    if int(b) in writers:
                        writers[int(b)].write_batch(batch.filter(pa.array(where == b)))
        finally:
            for w in writers.values():
                w.close()
        for b in group:
            with pa.memory_map(str(files[b])) as src:
                part = pa.ipc.open_file(src).read_all()
            split, i, n = buckets[b]
            yield split, i, n, _clean(part, schema, id_col)
            del part
            files[b].unlink()


def parquet_bytes(table: pa.Table, pcfg: PublishConfig) -> bytes:
    """One shard's Parquet file, with the fixed writer settings (same rows -> same bytes)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", compression_level=3, use_dictionary=True,
                   write_statistics=True, row_group_size=pcfg.row_group_rows,
                   use_content_defined_chunking=pcfg.content_defined_chunking)
    return sink.getvalue().to_pybytes()


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a file's content (the Hub's ``blob_id`` of a non-LFS file)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# ---- targets ------------------------------------------------------------------------------------

class _Sink:
    """What both targets share: files are staged (under ``staging/upload``) unless the target
    already holds the same bytes, and written or uploaded together by ``finish``."""

    staging: Path
    adds: list[tuple[str, Path]]

    def _same(self, rel: str, data: bytes) -> bool:
        raise NotImplementedError

    def put(self, rel: str, data: bytes) -> bool:
        """Stage ``rel`` unless the target already holds ``data`` there; True when staged."""
        if self._same(rel, data):
            return False
        staged = self.staging / "upload" / rel
        staged.parent.mkdir(parents=True, exist_ok=True)
        staged.write_bytes(data)
        self.adds.append((rel, staged))
        return True


class LocalSink(_Sink):
    """Writes the layout into a folder.  Changed files are staged first and only written (each
    atomically) once the whole layout and the card are built, so a failed publish leaves the
    folder as it was; unchanged files are never rewritten.

    Every file to be replaced and every stale shard to be removed must be publish's own (listed in
    ``OWNED_FILE`` with the bytes it holds now, see :mod:`synth.publish.owned`), unless ``overwrite``."""

    def __init__(self, root: Path, staging: Path, overwrite: bool = False):
        self.root = Path(root).expanduser().absolute()
        if self.root.exists() and not self.root.is_dir():
            raise PublishError(f"bad target local:{root}: not a folder")
        self.staging, self.overwrite = staging, overwrite
        self.adds: list[tuple[str, Path]] = []
        self.layout: dict[str, str] = {}  # every file of the new layout -> sha256
        self.owned = OwnedFiles(self.root, overwrite)

    def put(self, rel: str, data: bytes) -> bool:
        self.layout[rel] = hashlib.sha256(data).hexdigest()
        return super().put(rel, data)

    def _same(self, rel: str, data: bytes) -> bool:
        path = self.root / rel
        return path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data

    def stale(self, keep: set[str]) -> list[str]:
        """Shards in the folder that the new layout does not hold (and files publish wrote that it drops)."""
        base = self.root / "data"
        rels = (p.relative_to(self.root).as_posix() for p in base.rglob("*.parquet")) if base.is_dir() else ()
        found = {r for r in rels if SHARD_RE.match(r)} | {r for r in self.owned.listed if (self.root / r).is_file()}
        return sorted(r for r in found if r not in keep)

    def finish(self, stale: list[str], message: str) -> str | None:
        """Check ownership, then write the staged files (temporary name in the target folder, then
        rename), then remove the stale shards and the folders they leave empty.  A crash in between
        leaves extra or missing files that the next publish repairs, and knows as its own."""
        replaced = [rel for rel, _ in self.adds]
        self.owned.check(replaced, stale)
        if replaced or stale:
            self.owned.before(self.layout, replaced, stale)
        for rel, staged in self.adds:
            dest = self.root / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
            try:
                shutil.copyfile(staged, tmp)
                os.replace(tmp, dest)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        for rel in stale:
            (self.root / rel).unlink(missing_ok=True)
        base = self.root / "data"
        for d in sorted((d for d in base.rglob("*") if d.is_dir()), reverse=True) if base.is_dir() else []:
            if not any(d.iterdir()):
                d.rmdir()
        self.owned.write(self.layout)
        return None


def _scrub(text: str, token: str) -> str:
    return text.replace(token, "***") if token else text


class HubSink(_Sink):
    """Stages new or changed files and commits them (with deletions of stale shards) in one Hub commit."""

    def __init__(self, repo: str, pcfg: PublishConfig, staging: Path):
        token = (os.environ.get("HF_TOKEN") or "").strip()
        if not token:
            raise PublishError("publishing to the Hub needs a token: set the HF_TOKEN environment variable "
                               "(a write token for the target organisation)")
        from huggingface_hub import HfApi

        self.repo, self.pcfg, self.staging, self._token = repo, pcfg, staging, token
        self.api = HfApi()
        self.adds: list[tuple[str, Path]] = []
        self._call("create_repo", self.api.create_repo, repo, repo_type="dataset", private=pcfg.private,
                   exist_ok=True, token=token)
        tree = self._call("list_repo_tree", lambda: list(self.api.list_repo_tree(
            repo, recursive=True, repo_type="dataset", token=token)))
        self.remote = {f.path: f for f in tree if getattr(f, "blob_id", None) is not None}

    def _call(self, what: str, fn, *a, **kw):
        try:
            return fn(*a, **kw)
        except Exception as e:  # any Hub failure: surface it without the token
            raise HubError(f"hub:{self.repo}: {what} failed: {type(e).__name__}: {_scrub(str(e), self._token)}") \
                from None

    def _same(self, rel: str, data: bytes) -> bool:
        f = self.remote.get(rel)
        if f is None:
            return False
        lfs = getattr(f, "lfs", None)
        sha256 = (lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)) if lfs else None
        if sha256:
            return sha256 == hashlib.sha256(data).hexdigest()
        return f.blob_id == git_blob_sha1(data)

    def stale(self, keep: set[str]) -> list[str]:
        """Remote shards that the new layout does not hold."""
        return sorted(p for p in self.remote if SHARD_RE.match(p) and p not in keep)

    def finish(self, stale: list[str], message: str) -> str | None:
        """One commit of the queued uploads and the deletions; no commit (None) when nothing changed."""
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete

        ops: list[Any] = [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(p)) for rel, p in self.adds]
        ops += [CommitOperationDelete(path_in_repo=p) for p in stale]
        if not ops:
            return None
        info = self._call("create_commit", self.api.create_commit, self.repo, operations=ops,
                          commit_message=message, repo_type="dataset", token=self._token)
        return getattr(info, "commit_url", None)


# ---- publish ------------------------------------------------------------------------------------

def publish(out_dir: str | Path, target: str, cfg: Any, overwrite: bool = False) -> dict:
    """Publish the tables of ``out_dir`` to ``target`` (``local:PATH`` or ``hub:ORG/NAME``).

    A local target may not lie inside ``out_dir``; there, files publish did not write are replaced
    (or removed as stale shards) only with ``overwrite`` (see :class:`LocalSink`).

    Returns a summary: ``written`` / ``unchanged`` / ``deleted`` (file paths; on the Hub
    ``written`` means uploaded), ``rows`` and ``shards`` per config (all splits together),
    ``splits`` per config (``{split: {"rows", "shards"}}``, in sft / rl / eval order), ``skipped``
    configs with the reason, and ``commit_url`` (Hub only, None when nothing changed).  It holds the
    folder's run lock throughout (:class:`~synth.engine.store.FolderInUse` when a run holds it).
    """
    tgt = parse_target(target)
    root = Path(out_dir).absolute()
    if tgt.kind == "local":
        check_outside_run(root, Path(tgt.where))
    if not (root / "manifest.json").is_file():
        raise PublishError(f"cannot publish {root}: no manifest.json (not a hopforge output folder)")
    lock = RunLock(root)
    lock.acquire("hopforge publish")  # FolderInUse, at once, while a run holds the folder
    try:
        return _publish(root, tgt, cfg, overwrite)
    finally:
        lock.release()


def _publish(root: Path, tgt: "Target", cfg: Any, overwrite: bool) -> dict:
    """:func:`publish`, with ``root``'s run lock held."""
    from synth.publish.card import card_facts, leaked_secret, render_card
    from synth.engine.reports import RunReports
    from synth.engine.runner import VERSION

    pcfg = cfg.publish
    store = Store(root)
    manifest, reports = check_ready(store)
    written: list[str] = []
    unchanged: list[str] = []
    configs: list[dict] = []
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix=".publish-", dir=root) as tmp:
        staging = Path(tmp)
        sink = HubSink(tgt.where, pcfg, staging) if tgt.kind == "hub" else \
            LocalSink(Path(tgt.where), staging, overwrite=overwrite)

        def put(rel: str, data: bytes) -> None:
            (written if sink.put(rel, data) else unchanged).append(rel)

        for name, id_col, split_col in TABLES:
            path = root / name
            if not path.exists():
                if name in OPTIONAL_TABLES:
                    skipped[name] = OPTIONAL_TABLES[name]
                    log.info("publish: skipping %s: %s", name, skipped[name])
                    continue
                raise PublishError(f"cannot publish {root}: table '{name}' is missing")
            splits: dict[str, dict[str, int]] = {}
            columns: list[str] = []
            files: list[str] = []
            for split, i, n, part in table_shards(path, id_col, split_col, getattr(pcfg.rows_per_shard, name),
                                                  staging, name):
                files.append(shard_path(name, split, i, n))
                put(files[-1], parquet_bytes(part, pcfg))
                per = splits.setdefault(split, {"rows": 0, "shards": n})
                per["rows"] += part.num_rows
                columns = part.schema.names
            if not splits:
                skipped[name] = "the table has no rows"
                log.info("publish: skipping %s: %s", name, skipped[name])
                continue
            configs.append({"name": name, "rows": sum(p["rows"] for p in splits.values()),
                            "shards": sum(p["shards"] for p in splits.values()), "splits": splits,
                            "columns": columns, "files": files, "id": id_col, "split_column": split_col})
        # the load snippet names the real target: the repo, or the folder as an absolute path
        where = tgt.where if tgt.kind == "hub" else str(sink.root)
        facts = card_facts(root, manifest, RunReports(reports), cfg, configs, skipped, pcfg, where, VERSION, tgt.kind)
        card = render_card(facts)
        var = leaked_secret(card, (cfg.teacher.api_key_env,))
        if var:
            raise PublishError(f"refusing to publish: the dataset card would contain the value of ${var}")
        put("README.md", card.encode("utf-8"))
        deleted = sink.stale(set(written) | set(unchanged))
        message = pcfg.commit_message.format(
            version=VERSION, configs=" ".join(f"{c['name']}={c['rows']}" for c in configs),
            added=len(written), deleted=len(deleted))
        commit_url = sink.finish(deleted, message)
    summary = {"target": str(tgt), "written": written, "unchanged": unchanged, "deleted": deleted,
               "rows": {c["name"]: c["rows"] for c in configs}, "shards": {c["name"]: c["shards"] for c in configs},
               "splits": {c["name"]: c["splits"] for c in configs},
               "skipped": skipped, "commit_url": commit_url}
    for c in configs:
        log.info("publish %s: %s", c["name"], ", ".join(f"{s}={p['rows']} rows/{p['shards']} shards"
                                                         for s, p in c["splits"].items()))
    log.info("publish %s: %d files written, %d unchanged, %d stale removed", tgt, len(written), len(unchanged),
             len(deleted))
    return summary


__all__ = ["OWNED_FILE", "HubError", "LocalSink", "HubSink", "PublishError", "SPLITS", "TABLES", "Target",
           "check_outside_run", "check_ready", "git_blob_sha1", "parquet_bytes", "parse_target", "publish",
           "shard_count", "shard_of", "shard_path", "table_shards"]
