"""Stages, their content keys, and the runner that skips unchanged work.

A stage is a pure function over the store plus a little metadata: which stages it
reads, which config sections and code modules shape its output, and which paths
it publishes.  Its content key is::

    sha256(stage name, hopforge version, code hash, config-section hash, keys of the stages it reads)

A stage whose key matches the manifest (or whose complete output for that key is
still on disk) is reused and says so; otherwise it runs into ``<key>.partial`` and
is committed atomically (see :mod:`synth.store`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .config import Config
from .progress import Bar
from .store import MissingInput, ShardWriter, Store, atomic_write_json

log = logging.getLogger("hopforge")

VERSION = "0.1.0"


@dataclass
class StageResult:
    """What a stage did: ``input == output + sum(dropped.values())`` must hold."""

    input: int
    output: int
    dropped: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def check(self, stage: str) -> None:
        total = self.output + sum(self.dropped.values())
        if total != self.input:
            raise AssertionError(
                f"stage {stage}: funnel does not add up: input {self.input} != output {self.output} "
                f"+ dropped {sum(self.dropped.values())} {self.dropped}"
            )


@dataclass(frozen=True)
class Shards:
    """A stage that works shard by shard (so a flow can spread shards over workers and a rerun
    after a crash skips the shards already done).

    ``plan(ctx)`` lists JSON-able shard descriptors; ``run(ctx, i, desc)`` does shard ``i``,
    writes its rows under ``ctx.shard_out(table, i)`` and returns a JSON-able summary;
    ``finish(ctx, summaries)`` turns the summaries (in shard order) into the stage result.
    """

    plan: Callable[["StageContext"], list[Any]]
    run: Callable[["StageContext", int, Any], dict]
    finish: Callable[["StageContext", list[dict]], StageResult]


# A shard executor runs fn(i, desc) for every (i, desc) and returns the results in order.
ShardExecutor = Callable[[Callable[[int, Any], dict], Sequence[tuple[int, Any]]], list[dict]]


@dataclass(frozen=True)
class Stage:
    """A pipeline stage.  ``run(ctx)`` does the work and returns a :class:`StageResult`
    (or, for a sharded stage, ``shards`` says how)."""

    name: str
    run: Callable[["StageContext"], StageResult]
    reads: tuple[str, ...] = ()
    optional_reads: tuple[str, ...] = ()  # read when present (e.g. subgraphs); their keys enter ours then
    sections: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # extra files (prompts, templates) relative to the repo package roots
    outputs: tuple[str, ...] = ()
    command: str = ""  # the CLI command that runs it, for error messages
    key_extra: Callable[[Config, Store], str] | None = None  # e.g. the identity of an external source file
    shards: Callable[[], Shards] | None = None  # lazily built, so stage modules load only when run


def code_hash(modules: tuple[str, ...], files: tuple[str, ...] = ()) -> str:
    """Hash of the source text of the given modules and package data files."""
    h = hashlib.sha256()
    for m in modules:
        spec = importlib.util.find_spec(m)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"module {m} not found")
        h.update(m.encode())
        h.update(Path(spec.origin).read_bytes())
    for f in files:
        pkg, _, rel = f.partition("/")
        spec = importlib.util.find_spec(pkg)
        assert spec is not None and spec.origin is not None
        h.update(f.encode())
        h.update((Path(spec.origin).parent / rel).read_bytes())
    return h.hexdigest()[:16]


class StageContext:
    """Everything a running stage may touch: config, store, its staging folder, progress."""

    def __init__(self, stage: Stage, cfg: Config, store: Store, key: str, progress: bool | None = None):
        self.stage, self.cfg, self.store, self.key = stage, cfg, store, key
        self.staging = store.partial_dir(stage.name, key)
        self.staging.mkdir(parents=True, exist_ok=True)
        self._progress = progress
        self.counters: dict[str, float] = {}
        self._lock = threading.Lock()
        self._teacher = None
        self._snap = None
        self._bars: dict[str, Bar] = {}

    def out(self, rel: str) -> Path:
        """Where to write output ``rel`` (inside the staging folder)."""
        p = self.staging / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def writer(self, rel: str, schema, **kw) -> ShardWriter:
        """A shard writer for output table ``rel``."""
        return ShardWriter(self.out(rel), schema, **kw)

    def bar(self, desc: str, total: float | None = None, unit: str = "it") -> Bar:
        """A progress bar for this stage."""
        return Bar(f"{self.stage.name}: {desc}", total=total, unit=unit, enabled=self._progress)

    def shared_bar(self, desc: str, total: float | None = None, unit: str = "it") -> Bar:
        """One bar shared by every shard of this stage (made on first use, closed when the stage ends)."""
        with self._lock:
            if desc not in self._bars:
                self._bars[desc] = self.bar(desc, total, unit)
            return self._bars[desc]

    def shard_out(self, rel: str, i: int) -> Path:
        """Where shard ``i`` writes its part of table ``rel`` (one Parquet file)."""
        p = self.staging / "_parts" / rel / f"part-{i:05d}.parquet"
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def shard_parts(self, rel: str) -> list[Path]:
        """The parts every shard wrote for table ``rel``, in shard order."""
        return sorted((self.staging / "_parts" / rel).glob("part-*.parquet"))

    def publish_parts(self, rel: str, schema) -> int:
        """Move the shards' parts of ``rel`` into the output table (order kept); returns the row count."""
        import pyarrow.parquet as pq

        out = self.out(rel)
        out.mkdir(parents=True, exist_ok=True)
        rows = 0
        for j, part in enumerate(self.shard_parts(rel)):
            rows += pq.ParquetFile(part).metadata.num_rows
            part.replace(out / f"part-{j:05d}.parquet")
        if rows == 0 and not any(out.iterdir()):
            ShardWriter(out, schema).close()
        return rows

    def teacher(self):
        """The stage's teacher (one per stage run, shared by its shards, so its concurrency is global)."""
        with self._lock:
            if self._teacher is None:
                from .teacher import open_teacher

                self._teacher = open_teacher(self.cfg.teacher, self.store.root)
                self._snap = self._teacher.stats.snapshot()
            return self._teacher

    def teacher_stats(self) -> dict | None:
        """What the stage's teacher did (None when the stage made no calls)."""
        return None if self._teacher is None else self._teacher.stats.since(self._snap)

    def close(self) -> None:
        """Close bars and the teacher's connections."""
        for b in self._bars.values():
            b.close()
        if self._teacher is not None:
            self._teacher.close()


@dataclass
class StageOutcome:
    name: str
    key: str
    reused: bool
    seconds: float
    report: dict


def stage_key(stage: Stage, cfg: Config, store: Store) -> tuple[str, dict]:
    """The content key of ``stage`` and the parts it was made from."""
    input_keys = {}
    for up in stage.reads:
        entry = store.stage_entry(up)
        if entry is None:
            raise MissingInput(f"stage '{stage.name}' needs the output of stage '{up}', which is not in {store.root}"
                               f" (run `hopforge {STAGE_COMMANDS.get(up, up)} --out {store.root}` first)")
        input_keys[up] = entry["key"]
    for up in stage.optional_reads:
        entry = store.stage_entry(up)
        if entry is not None:
            input_keys[up] = entry["key"]
    parts = {
        "stage": stage.name,
        "version": VERSION,
        "code": code_hash(stage.modules, stage.files),
        "config": cfg.section_hash(*stage.sections),
        "inputs": input_keys,
        "extra": stage.key_extra(cfg, store) if stage.key_extra else "",
    }
    key = hashlib.sha256(repr(sorted(parts.items())).encode()).hexdigest()[:20]
    return key, parts


STAGE_COMMANDS: dict[str, str] = {}


def thread_executor(workers: int) -> ShardExecutor:
    """Run shards on ``workers`` threads (shards of teacher work overlap; the teacher's gate is shared)."""

    def run(fn: Callable[[int, Any], dict], items: Sequence[tuple[int, Any]]) -> list[dict]:
        if workers <= 1 or len(items) <= 1:
            return [fn(i, d) for i, d in items]
        with ThreadPoolExecutor(workers, thread_name_prefix="hopforge-shard") as ex:
            return list(ex.map(lambda a: fn(*a), items))

    return run


def _run_sharded(ctx: StageContext, shards: Shards, executor: ShardExecutor | None) -> StageResult:
    """Plan, run the shards not done yet (each marked done atomically), then finish."""
    descs = shards.plan(ctx)
    marks = ctx.staging / "_shards"
    plan_file = marks / "plan.json"
    plan = json.loads(json.dumps(descs))
    if plan_file.exists() and json.loads(plan_file.read_text()) != plan:
        # Shard boundaries changed (e.g. an operational shard size): earlier parts do not fit.
        shutil.rmtree(marks, ignore_errors=True)
        shutil.rmtree(ctx.staging / "_parts", ignore_errors=True)
    marks.mkdir(parents=True, exist_ok=True)
    atomic_write_json(plan_file, plan)
    done = {int(p.stem): json.loads(p.read_text()) for p in marks.glob("[0-9]*.json")}
    if done:
        log.info("%s: resuming, %d of %d shards already done", ctx.stage.name, len(done), len(descs))

    def one(i: int, desc: Any) -> dict:
        summary = shards.run(ctx, i, desc)
        atomic_write_json(marks / f"{i:05d}.json", summary)
        return summary

    todo = [(i, d) for i, d in enumerate(descs) if i not in done]
    run = executor or thread_executor(getattr(getattr(ctx.cfg, "synth", None), "shard_workers", 1))
    for (i, _), summary in zip(todo, run(one, todo)):
        done[i] = summary
    return shards.finish(ctx, [done[i] for i in range(len(descs))])


def run_stage(stage: Stage, cfg: Config, store: Store, force: bool = False, progress: bool | None = None,
              executor: ShardExecutor | None = None) -> StageOutcome:
    """Run one stage unless its content key is unchanged; commit its outputs atomically.

    A sharded stage runs its shards through ``executor`` (default: ``synth.shard_workers`` threads);
    the Prefect flow passes one that submits each shard as a task.
    """
    t0 = time.monotonic()
    key, parts = stage_key(stage, cfg, store)
    entry = store.stage_entry(stage.name)
    final = store.stage_dir(stage.name, key)
    if not force and final.exists():
        manifest_entry = dict(entry or {}, **parts, key=key) if not entry or entry.get("key") != key else entry
        report = store.republish(stage.name, key, stage.outputs, manifest_entry) or {}
        log.info("%s: unchanged (key %s), reused", stage.name, key)
        return StageOutcome(stage.name, key, True, time.monotonic() - t0, report)
    if force:
        shutil.rmtree(final, ignore_errors=True)
        shutil.rmtree(store.partial_dir(stage.name, key), ignore_errors=True)
    ctx = StageContext(stage, cfg, store, key, progress=progress)
    log.info("%s: running (key %s)", stage.name, key)
    try:
        result = _run_sharded(ctx, stage.shards(), executor) if stage.shards else stage.run(ctx)
    finally:
        ctx.close()
    teacher = ctx.teacher_stats()
    if teacher is not None:
        result.extra["teacher"] = teacher
    result.check(stage.name)
    seconds = time.monotonic() - t0
    report = {
        "stage": stage.name,
        "key": key,
        "input": result.input,
        "output": result.output,
        "dropped": dict(sorted(result.dropped.items())),
        "seconds": round(seconds, 3),
        **result.extra,
    }
    entry = dict(parts, key=key, seconds=round(seconds, 3), finished_at=time.time())
    store.commit(stage.name, key, stage.outputs, entry, report)
    return StageOutcome(stage.name, key, False, seconds, report)
