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
from .faults import crash_point
from .progress import Bar
from .store import MissingInput, ShardWriter, Store, atomic_write_json
from .teacher_stats import merge_reports

log = logging.getLogger("hopforge")

VERSION = "0.1.0"


@dataclass
class StageResult:
    """What a stage did: ``input == output + sum(dropped.values())`` must hold."""

    input: int
    output: int
    dropped: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    teacher_calls: int = 0  # requests sent to the teacher by this run (not cache hits, not resumed shards)

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


@dataclass(frozen=True)
class ShardJob:
    """One shard of a stage run, as plain data: it pickles to another process (a Dask worker),
    which rebuilds the stage context from it (:func:`run_shard_job`)."""

    stage: str
    config: dict
    root: str
    key: str
    index: int
    desc: Any
    progress: bool | None = None


# A shard executor runs every job (through run_shard_job, here or elsewhere) and returns the
# summaries in job order.
ShardExecutor = Callable[[Sequence[ShardJob]], list[dict]]


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
        self._lock = threading.Lock()
        self._teacher = None
        self._snap = None

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
        """One bar shared by every shard of this stage run in this process (closed when the stage ends)."""
        k = (str(self.store.root), self.stage.name, self.key, desc)
        with _BARS_LOCK:
            if k not in _BARS:
                _BARS[k] = self.bar(desc, total, unit)
            return _BARS[k]

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
        """Close the teacher's connections."""
        if self._teacher is not None:
            self._teacher.close()

    def close_bars(self) -> None:
        """Close the bars shared by this stage run's shards."""
        with _BARS_LOCK:
            for k in [k for k in _BARS if k[:3] == (str(self.store.root), self.stage.name, self.key)]:
                _BARS.pop(k).close()


_BARS: dict[tuple, Bar] = {}
_BARS_LOCK = threading.Lock()


@dataclass
class StageOutcome:
    name: str
    key: str
    reused: bool
    seconds: float
    report: dict
    teacher_calls: int = 0  # requests this run sent (0 when reused)


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


def run_shard_job(job: ShardJob) -> dict:
    """Run one shard (in this process or a worker's) and mark it done; returns its summary, with
    what its own teacher did under ``teacher``."""
    from .config import Config
    from .stages import BY_NAME

    stage = BY_NAME[job.stage]
    ctx = StageContext(stage, Config.model_validate(job.config), Store(job.root), job.key, progress=job.progress)
    try:
        summary = stage.shards().run(ctx, job.index, job.desc)
    finally:
        ctx.close()
    summary["teacher"] = ctx.teacher_stats()
    atomic_write_json(ctx.staging / "_shards" / f"{job.index:05d}.json", summary)
    crash_point(f"shard:{job.stage}:{job.index}")
    return summary


def thread_executor(workers: int) -> ShardExecutor:
    """Run shards on ``workers`` threads (shards of teacher work overlap; the teacher's gate is shared)."""

    def run(jobs: Sequence[ShardJob]) -> list[dict]:
        if workers <= 1 or len(jobs) <= 1:
            return [run_shard_job(j) for j in jobs]
        with ThreadPoolExecutor(workers, thread_name_prefix="hopforge-shard") as ex:
            return list(ex.map(run_shard_job, jobs))

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
    config = ctx.cfg.model_dump(mode="json")
    jobs = [ShardJob(ctx.stage.name, config, str(ctx.store.root), ctx.key, i, d, ctx._progress)
            for i, d in enumerate(descs) if i not in done]
    run = executor or thread_executor(ctx.cfg.synth.shard_workers)
    try:
        fresh = run(jobs)
    finally:
        ctx.close_bars()
    calls_now = sum((s.get("teacher") or {}).get("requests", 0) for s in fresh)
    for job, summary in zip(jobs, fresh):
        done[job.index] = summary
    summaries = [dict(done[i]) for i in range(len(descs))]
    teachers = [s.pop("teacher", None) for s in summaries]
    result = shards.finish(ctx, summaries)
    # The shards' bookkeeping is not output: only what finish() wrote is committed.
    shutil.rmtree(marks, ignore_errors=True)
    shutil.rmtree(ctx.staging / "_parts", ignore_errors=True)
    merged = merge_reports(teachers, ctx.cfg.teacher.price_per_mtok)
    if merged is not None:
        result.extra["teacher"] = merged
    result.teacher_calls = calls_now
    return result


def _prepare_partial(partial: Path, sharded: bool) -> None:
    """Clear what an interrupted attempt left, except finished shards (their parts and marks)."""
    if not partial.exists():
        return
    keep = {"_shards", "_parts"} if sharded else set()
    for p in partial.iterdir():
        if p.name not in keep:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    for tmp in partial.rglob("*.tmp"):
        tmp.unlink()


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
    _prepare_partial(store.partial_dir(stage.name, key), sharded=stage.shards is not None)
    ctx = StageContext(stage, cfg, store, key, progress=progress)
    log.info("%s: running (key %s)", stage.name, key)
    try:
        result = _run_sharded(ctx, stage.shards(), executor) if stage.shards else stage.run(ctx)
    finally:
        ctx.close()
    teacher = ctx.teacher_stats()
    if teacher is not None:
        result.extra["teacher"] = teacher
        result.teacher_calls += teacher["requests"]
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
    return StageOutcome(stage.name, key, False, seconds, report, result.teacher_calls)
