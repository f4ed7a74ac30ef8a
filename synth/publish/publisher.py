"""``hopforge publish``: the output folder DIR -> Parquet shards + a dataset card, on disk or on the Hub.

Layout (the Hub's own)::

    README.md                                   dataset card, YAML `configs:` -> data_files
    data/<config>/train-00000-of-00004.parquet  one folder per config: sft, longctx, rl_pool, questions, traces

Sharding rule.  A table of ``R`` rows gets ``N = 2**ceil(log2(ceil(R / rows_per_shard)))``
shards (1 when ``R <= rows_per_shard``); row ``r`` goes to shard
``sha256(id(r))[:8] mod N`` and each shard is sorted by id.  Ids are ``trace_id`` (sft,
traces), ``sample_id`` (longctx), ``question_id`` (questions) and
``extra_info.question_id`` (rl_pool).  Why hashing rather than cutting the id-sorted
table every ``rows_per_shard`` rows: with contiguous cuts one inserted or deleted row
shifts every later boundary, so every later shard changes; with hash buckets a row
added, removed or edited changes exactly the one shard it hashes to, as long as ``N``
stays put.  ``N`` is a power of two so it changes only when the table doubles or
halves (then every shard of that table is rewritten, and its file names change since
they carry ``N``).  Shards hold between about half and all of ``rows_per_shard`` rows.

Determinism.  The Parquet settings are fixed (zstd level 3, dictionary encoding,
statistics, ``row_group_rows`` rows per group, content-defined chunking), schema
metadata is dropped, and the writer's ``created_by`` names the pinned pyarrow, so the
same rows give the same bytes; the card holds no date, host or path.  An unchanged
shard is therefore byte-identical between builds and is neither rewritten nor uploaded.
The card names the stage content keys, so a rerun of a stage rewrites the card too
(one small file) even when its rows came out the same.

Targets.
  * ``local:PATH`` stages every new or changed file while the layout and card are built,
    then writes each atomically (temporary file + rename), leaves unchanged ones untouched,
    and removes stale shards (``data/*/*-NNNNN-of-NNNNN.parquet`` not in the new layout).
    A publish that fails (bad rows, a secret in the card) changes nothing.  Nothing else in
    PATH is touched.
  * ``hub:ORG/NAME`` creates the dataset repo if needed (``publish.private``), lists the
    remote files, and makes one ``create_commit`` with a ``CommitOperationAdd`` for every
    new or changed file (compared by LFS sha256, or git blob sha1 for non-LFS files) and
    a ``CommitOperationDelete`` for every stale shard; nothing changed, no commit.  The
    token is read from ``HF_TOKEN`` only, passed to each call, and never logged, printed
    or written; error messages from the Hub are scrubbed of it.

A DIR is published only when the stages behind the tables ran and agree with each
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

from synth.engine.errors import InputError
from synth.publish.config import PublishConfig
from synth.engine.store import Store

log = logging.getLogger("hopforge")

SPLIT = "train"
# (config, id column) in card order; a dotted id is a struct field.
TABLES: tuple[tuple[str, str], ...] = (("sft", "trace_id"), ("longctx", "sample_id"),
                                       ("rl_pool", "extra_info.question_id"), ("questions", "question_id"),
                                       ("traces", "trace_id"))
OPTIONAL_TABLES = {"longctx": "no `longctx` table in DIR (the assemble stage has not run)"}
REQUIRED_STAGES = ("ingest", "questions", "rollout", "filter")
CONSISTENT_STAGES = ("questions", "rollout", "filter", "assemble")
SHARD_RE = re.compile(r"^data/[^/]+/[A-Za-z0-9_.-]+-\d{5}-of-\d{5}\.parquet$")
REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
TARGET_FORMS = "local:PATH (a folder) or hub:ORG/NAME (a Hugging Face dataset repo)"
MAX_OPEN_SPILLS = 128  # shard spill files open at once; more shards take more passes over the table
BATCH_ROWS = 2048


class PublishError(InputError):
    """The DIR cannot be published as it is, or the target is wrong (the CLI exits 2)."""


class HubError(PublishError):
    """A Hub call failed; the message is scrubbed of the token."""


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


def shard_path(config: str, i: int, n: int) -> str:
    """``data/<config>/train-XXXXX-of-YYYYY.parquet``."""
    return f"data/{config}/{SPLIT}-{i:05d}-of-{n:05d}.parquet"


def _ids(data: pa.Table | pa.RecordBatch, id_col: str):
    parts = id_col.split(".")
    arr = data.column(parts[0])
    for p in parts[1:]:
        arr = pc.struct_field(arr, p)
    return arr


def _clean(table: pa.Table, schema: pa.Schema, id_col: str) -> pa.Table:
    """The rows sorted by id, in ``schema`` (no schema or field metadata), in one chunk per column."""
    table = table.take(pc.sort_indices(_ids(table, id_col)))
    return table.cast(schema).combine_chunks()


def table_shards(path: Path, id_col: str, per_shard: int, spill: Path) -> Iterator[tuple[int, int, pa.Table]]:
    """Yield ``(index, count, rows)`` for every shard of the table at ``path`` (see the module docstring);
    nothing for a table without rows.

    Raises :class:`PublishError` on a null or repeated id (the sharding and sort need unique ids).
    """
    dataset = ds.dataset(path, format="parquet")
    schema = pa.schema([f.remove_metadata() for f in dataset.schema])
    ids = dataset.to_table(columns={"_id": ds.field(*id_col.split("."))})["_id"]
    rows = len(ids)
    if ids.null_count:
        raise PublishError(f"table {path.name}: {ids.null_count} rows have no {id_col}")
    if rows and pc.count_distinct(ids).as_py() != rows:
        raise PublishError(f"table {path.name}: {id_col} is not unique ({rows - pc.count_distinct(ids).as_py()} "
                           "repeated ids); shards need one id per row")
    if rows == 0:
        return  # nothing to publish: `datasets` cannot read a Parquet config without rows
    n = shard_count(rows, per_shard)
    if n == 1:
        yield 0, 1, _clean(dataset.to_table(), schema, id_col)
        return
    for first in range(0, n, MAX_OPEN_SPILLS):
        group = range(first, min(n, first + MAX_OPEN_SPILLS))
        files = {i: spill / f"{path.name}-{i:05d}.arrow" for i in group}
        writers = {i: pa.ipc.new_file(str(f), dataset.schema) for i, f in files.items()}
        try:
            for batch in dataset.to_batches(batch_size=BATCH_ROWS):
                where = np.fromiter((shard_of(k, n) for k in _ids(batch, id_col).to_pylist()), np.int64,
                                    count=batch.num_rows)
                for i in np.unique(where):
                    if int(i) in writers:
                        writers[int(i)].write_batch(batch.filter(pa.array(where == i)))
        finally:
            for w in writers.values():
                w.close()
        for i in group:
            with pa.memory_map(str(files[i])) as src:
                part = pa.ipc.open_file(src).read_all()
            yield i, n, _clean(part, schema, id_col)
            del part
            files[i].unlink()


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
    folder as it was; unchanged files are never rewritten."""

    def __init__(self, root: Path, staging: Path):
        self.root = Path(root).expanduser().absolute()
        if self.root.exists() and not self.root.is_dir():
            raise PublishError(f"bad target local:{root}: not a folder")
        self.staging = staging
        self.adds: list[tuple[str, Path]] = []

    def _same(self, rel: str, data: bytes) -> bool:
        path = self.root / rel
        return path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data

    def stale(self, keep: set[str]) -> list[str]:
        """Shards in the folder that the new layout does not hold."""
        base = self.root / "data"
        rels = (p.relative_to(self.root).as_posix() for p in base.rglob("*.parquet")) if base.is_dir() else ()
        return sorted(r for r in rels if SHARD_RE.match(r) and r not in keep)

    def finish(self, stale: list[str], message: str) -> str | None:
        """Write the staged files (temporary name in the target folder, then rename), then remove the
        stale shards and the folders they leave empty.  A crash in between leaves extra or missing
        files that the next publish repairs."""
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

def publish(out_dir: str | Path, target: str, cfg: Any) -> dict:
    """Publish the tables of ``out_dir`` to ``target`` (``local:PATH`` or ``hub:ORG/NAME``).

    Returns a summary: ``written`` / ``unchanged`` / ``deleted`` (file paths; on the Hub
    ``written`` means uploaded), ``rows`` and ``shards`` per config, ``skipped`` configs with
    the reason, and ``commit_url`` (Hub only, None when nothing changed).
    """
    from synth.publish.card import card_facts, leaked_secret, render_card
    from synth.engine.runner import VERSION

    tgt = parse_target(target)
    pcfg = cfg.publish
    root = Path(out_dir).absolute()
    if not (root / "manifest.json").is_file():
        raise PublishError(f"cannot publish {root}: no manifest.json (not a hopforge output folder)")
    store = Store(root)
    manifest, reports = check_ready(store)
    written: list[str] = []
    unchanged: list[str] = []
    configs: list[dict] = []
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix=".publish-", dir=root) as tmp:
        staging = Path(tmp)
        sink = HubSink(tgt.where, pcfg, staging) if tgt.kind == "hub" else LocalSink(Path(tgt.where), staging)

        def put(rel: str, data: bytes) -> None:
            (written if sink.put(rel, data) else unchanged).append(rel)

        for name, id_col in TABLES:
            path = root / name
            if not path.exists():
                if name in OPTIONAL_TABLES:
                    skipped[name] = OPTIONAL_TABLES[name]
                    log.info("publish: skipping %s: %s", name, skipped[name])
                    continue
                raise PublishError(f"cannot publish {root}: table '{name}' is missing")
            rows = shards = 0
            columns: list[str] = []
            for i, n, part in table_shards(path, id_col, getattr(pcfg.rows_per_shard, name), staging):
                put(shard_path(name, i, n), parquet_bytes(part, pcfg))
                rows, shards, columns = rows + part.num_rows, n, part.schema.names
            if not shards:
                skipped[name] = "the table has no rows"
                log.info("publish: skipping %s: %s", name, skipped[name])
                continue
            configs.append({"name": name, "rows": rows, "shards": shards, "columns": columns, "id": id_col})
        facts = card_facts(root, manifest, reports, cfg, configs, skipped, pcfg,
                           tgt.where if tgt.kind == "hub" else None, VERSION)
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
               "skipped": skipped, "commit_url": commit_url}
    log.info("publish %s: %d files written, %d unchanged, %d stale removed", tgt, len(written), len(unchanged),
             len(deleted))
    return summary


__all__ = ["HubError", "LocalSink", "HubSink", "PublishError", "Target", "check_ready", "git_blob_sha1",
           "parquet_bytes", "parse_target", "publish", "shard_count", "shard_of", "shard_path",
           "table_shards"]
