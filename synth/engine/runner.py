"""Running stages: content keys, reuse, sharded work, commits, and the run report.

A stage's content key is::

    sha256(stage name, version, code hash, config-section hash, keys of the stages it reads, extra)

where the code hash covers the import closure of the stage's entry
(:mod:`synth.engine.codekey`).  An input the stage declares ``by_content`` enters by a hash of
the tables it reads of it instead of by its stage key.  A stage whose key matches a complete output on disk is
reused and says so; otherwise it runs into ``<key>.partial`` and is committed atomically
(:mod:`synth.engine.store`).

:class:`Pipeline` holds the stages in order (the table itself is the composition root's,
``flows/stages.py``).  :meth:`Pipeline.start` is the one run loop: ``hopforge run``, the stage
commands and the Prefect flow all go through it (a :class:`Run`, which holds the folder's
run lock), and it keeps
``DIR/reports/run.json`` current after every stage, so a crashed run still shows how far it got.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from synth.engine.config import unwrap
from synth.engine.codekey import code_hash
from synth.engine.errors import StageFailed
from synth.engine.faults import crash_point
from synth.engine.stage import (FAILED_LISTED, STOP, FailedItem, ShardExecutor, ShardJob, Shards, ShardSummary, Stage,
                                StageContext, StageOutcome, StageResult)
from synth.engine.store import MissingInput, RunLock, Store, atomic_write_json
from synth.engine.workers import CpuPool, set_limit_share

log = logging.getLogger("hopforge")

VERSION = "0.1.0"


class Pipeline:
    """The stages in order, and how to run them."""

    def __init__(self, stages: Sequence[Stage]):
        self.stages = list(stages)
        self.by_name = {s.name: s for s in self.stages}

    def __iter__(self):
        return iter(self.stages)

    def __getitem__(self, name: str) -> Stage:
        return self.by_name[name]

    def command_of(self, name: str) -> str:
        """The CLI command that makes stage ``name``'s output."""
        stage = self.by_name.get(name)
        return stage.command if stage is not None and stage.command else name

    def upto(self, name: str | None) -> list[Stage]:
        """The stages up to and including ``name`` (all of them for None)."""
        if name is None:
            return list(self.stages)
        names = [s.name for s in self.stages]
        return self.stages[: names.index(name) + 1]

    # ---- keys --------------------------------------------------------------------------------
    def stage_key(self, stage: Stage, cfg: Any, store: Store) -> tuple[str, dict]:
        """The content key of ``stage`` and the parts it was made from.

        ``parts["inputs"]`` holds the keys of the stages read by key; ``parts["content"]`` (present only
        for a stage with ``by_content``) the content hashes of the tables read by content.
        """
        input_keys: dict[str, str] = {}
        content: dict[str, dict[str, str]] = {}

        def add(up: str, entry: dict) -> None:
            if up in stage.by_content:
                content[up] = {t: store.content_hash(up, entry["key"], t) for t in stage.by_content[up]}
            else:
                # An output that lacks failed items differs from the whole one of the same key.
                input_keys[up] = entry["key"] + (f"~{entry['failed_digest']}" if entry.get("failed_digest") else "")
            if entry.get("failed"):
                log.warning("%s: the output of %s lacks %d items whose teacher call failed; `hopforge %s --out %s` "
                            "retries them", stage.name, up, entry["failed"], self.command_of(up), store.root)

        for up in stage.required(cfg):
            entry = store.stage_entry(up)
            if entry is None:
                raise MissingInput(f"stage '{stage.name}' needs the output of stage '{up}', which is not in "
                                   f"{store.root} (run `hopforge {self.command_of(up)} --out {store.root}` first)")
            add(up, entry)
        for up in stage.optional_reads:
            entry = store.stage_entry(up)
            if entry is not None:
                add(up, entry)
        parts = {
            "stage": stage.name,
            "version": VERSION,
            "code": code_hash(stage.module),
            "config": cfg.section_hash(*stage.declared(cfg)),
            "inputs": input_keys,
            "extra": stage.key_extra(cfg, store) if stage.key_extra else "",
        }
        if content:
            parts["content"] = content
        key = hashlib.sha256(repr(sorted(parts.items())).encode()).hexdigest()[:20]
        return key, parts

    # ---- one stage -----------------------------------------------------------------------------
    def run_stage(self, stage: Stage, cfg: Any, store: Store, force: bool = False, progress: bool | None = None,
                  executor: ShardExecutor | None = None, cpu_pool: CpuPool | None = None) -> StageOutcome:
        """Run one stage unless its content key is unchanged; commit its outputs atomically.

        Four steps: reuse a committed output of the same key (:meth:`_reuse`), else run the stage
        (:meth:`_execute`), judge what it made by the failure policy (:meth:`_refuse`: nothing is
        committed for an empty or an all-failed stage), and commit it (:meth:`_commit`), then say what
        failed (:meth:`_after_commit`).

        A sharded stage runs its shards through ``executor`` (default: ``runner.shard_workers``
        threads); the Prefect flow passes one that submits each shard as a task.  The stage's CPU-bound
        work runs on ``cpu_pool`` (the flow's Dask cluster) when given, else in ``runner.cpu_workers``
        local processes (:mod:`synth.engine.workers`).
        """
        t0 = time.monotonic()
        key, parts = self.stage_key(stage, cfg, store)
        if not force:
            reused = self._reuse(stage, cfg, store, key, parts, t0)
            if reused is not None:
                return reused
        result = self._execute(stage, cfg, store, key, force, progress, executor, cpu_pool)
        self._refuse(stage, cfg, store, key, result)
        outcome = self._commit(stage, cfg, store, key, parts, result, time.monotonic() - t0)
        self._after_commit(stage, cfg, result)
        return outcome

    def _reuse(self, stage: Stage, cfg: Any, store: Store, key: str, parts: dict, t0: float) -> StageOutcome | None:
        """The committed output of ``key``, republished, when it is whole and nothing of it is to retry (None:
        run the stage); an empty one made under ``runner.allow_empty`` is refused without it."""
        final = store.stage_dir(stage.name, key)
        if not final.exists():
            return None
        damage = store.damage(stage.name, key)
        failed = store.committed_report(stage.name, key).get("failed") or {}
        if damage:
            log.warning("%s: its committed output %s is damaged (%s); recomputing it", stage.name, final, damage)
            return None
        if failed:
            log.info("%s: retrying the %d items whose teacher call failed last time (%s); the rest are "
                     "call-cache hits", stage.name, sum(failed.values()), _top(failed))
            return None
        committed = store.committed_report(stage.name, key)
        if not cfg.runner.allow_empty and committed.get("output") == 0 and not committed.get("idle"):
            raise StageFailed(f"stage {stage.name}: its committed output (key {key}) is empty ("
                              f"{_why_empty(stage, committed)}), made under runner.allow_empty or by an "
                              "older hopforge; an empty stage is an error: change what emptied it, or set "
                              "runner.allow_empty=true to use it")
        entry = store.stage_entry(stage.name)
        same = entry is not None and entry.get("key") == key
        manifest_entry = entry if same else dict(
            {k: v for k, v in (entry or {}).items() if k not in ("failed", "failed_digest")},
            **parts, key=key, sections=list(stage.declared(cfg)))
        report = store.republish(stage.name, key, stage.outputs, manifest_entry) or {}
        log.info("%s: unchanged (key %s), reused", stage.name, key)
        return StageOutcome(stage.name, key, True, time.monotonic() - t0, report)

    def _execute(self, stage: Stage, cfg: Any, store: Store, key: str, force: bool, progress: bool | None,
                 executor: ShardExecutor | None, cpu_pool: CpuPool | None) -> StageResult:
        """Run the stage into its staging folder (its shards, resumed, for a sharded one) and check the result's
        accounting."""
        if force:
            shutil.rmtree(store.stage_dir(stage.name, key), ignore_errors=True)
            shutil.rmtree(store.partial_dir(stage.name, key), ignore_errors=True)
        _prepare_partial(store.partial_dir(stage.name, key), sharded=stage.sharded)
        ctx = StageContext(stage, cfg, store, key, progress=progress, cpu_pool=cpu_pool)
        log.info("%s: running (key %s)", stage.name, key)
        try:
            result = self._run_sharded(ctx, stage.load(), executor) if stage.sharded else stage.load()(ctx)
        finally:
            ctx.close()
        result.check(stage.name)
        return result

    @staticmethod
    def _too_many_failed(cfg: Any, result: StageResult) -> bool:
        n = result.n_failed
        return n > 0 and n > cfg.runner.max_failed_fraction * result.input

    def _refuse(self, stage: Stage, cfg: Any, store: Store, key: str, result: StageResult) -> None:
        """The failure policy before a commit: a stage whose every teacher call failed, or whose output is empty
        (unless it was idle by its configuration, or ``runner.allow_empty``), stops the run, committing nothing."""
        if self._too_many_failed(cfg, result) and result.output == 0 and not result.dropped:
            raise StageFailed(f"stage {stage.name}: the teacher call of every one of its {result.input:,} items failed "
                              f"({_top(result.failed, result.failed_items)}); nothing is committed, and the same "
                              "command retries them")
        if result.output == 0 and not result.idle and not cfg.runner.allow_empty:
            # Committed, an empty stage would be reused by every later run, and the stages after it would "run"
            # on nothing: a broken prompt, endpoint or corpus must stop the run where it emptied the data.
            why = _why_empty(stage, {**result.extra, **dataclasses.asdict(result)})
            seen = f"; see {store.root}/.stages/{stage.name}/{key}.partial" if result.dropped else ""
            raise StageFailed(f"stage {stage.name}: {why}, so its output is empty and nothing is committed{seen}; an "
                              "empty stage is an error unless runner.allow_empty=true")

    def _commit(self, stage: Stage, cfg: Any, store: Store, key: str, parts: dict, result: StageResult,
                seconds: float) -> StageOutcome:
        """Commit the staging folder as the output of ``key``, with its report and manifest entry."""
        report = {
            "stage": stage.name,
            "key": key,
            "input": result.input,
            "output": result.output,
            "dropped": dict(sorted(result.dropped.items())),
            "seconds": round(seconds, 3),
            **result.extra,
        }
        if result.idle:
            report["idle"] = result.idle
        # The sections let a reader (the dataset card) check a config against this output later.
        entry = dict(parts, key=key, sections=list(stage.declared(cfg)), seconds=round(seconds, 3),
                     finished_at=time.time())
        if result.n_failed:
            report["failed"] = dict(sorted(result.failed.items()))
            report["failed_items"] = [f.as_dict() for f in result.failed_items[:FAILED_LISTED]]
            ids = sorted(f.id for f in result.failed_items)
            entry["failed"] = result.n_failed
            entry["failed_digest"] = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:12]
        store.commit(stage.name, key, stage.outputs, entry, report)
        return StageOutcome(stage.name, key, False, seconds, report, result.teacher_calls)

    def _after_commit(self, stage: Stage, cfg: Any, result: StageResult) -> None:
        """What failed, said once the rest is safe: more failed calls than ``runner.max_failed_fraction`` stop the
        run; fewer are a warning (a plain rerun retries them)."""
        n_failed = result.n_failed
        if self._too_many_failed(cfg, result):
            raise StageFailed(f"stage {stage.name}: the teacher call of {n_failed:,} of its {result.input:,} items "
                              f"failed ({_top(result.failed, result.failed_items)}), more than "
                              f"runner.max_failed_fraction={cfg.runner.max_failed_fraction:g}; the "
                              f"{result.output:,} items that succeeded are committed, and the same command retries "
                              "only the failed ones")
        if n_failed:
            log.warning("%s: the teacher call of %d of %d items failed (%s); they are not in the output, and a "
                        "plain rerun retries them", stage.name, n_failed, result.input,
                        _top(result.failed, result.failed_items))

    # ---- shards --------------------------------------------------------------------------------
    def run_shard(self, job: ShardJob, cfg: Any) -> dict:
        """Run one shard (in this process or a worker's) and mark it done; returns its summary as JSON (a
        :class:`ShardSummary` as its ``to_dict``), the form that crosses processes and that the mark holds."""
        stage = self.by_name[job.stage]
        set_limit_share(job.share)
        ctx = StageContext(stage, cfg, Store(job.root), job.key, progress=job.progress)
        try:
            summary = stage.load().run(ctx, job.index, job.desc)
        finally:
            ctx.close()
        if isinstance(summary, ShardSummary):
            summary = summary.to_dict()
        atomic_write_json(ctx.staging / "_shards" / f"{job.index:05d}.json", summary)
        crash_point(f"shard:{job.stage}:{job.index}")
        return summary

    def thread_executor(self, cfg: Any, workers: int) -> ShardExecutor:
        """Run shards on ``workers`` threads of this process (the teacher's gate is shared)."""

        def one(job: ShardJob) -> dict:
            return self.run_shard(job, cfg)

        def run(jobs: Sequence[ShardJob]) -> list[dict]:
            if workers <= 1 or len(jobs) <= 1:
                return [one(j) for j in jobs]
            STOP.clear()
            with ThreadPoolExecutor(workers, thread_name_prefix="hopforge-shard") as ex:
                try:
                    return list(ex.map(one, jobs))
                except BaseException:
                    STOP.set()  # a Ctrl-C, or a shard that failed: the other shards stop too
                    ex.shutdown(wait=True, cancel_futures=True)
                    raise

        return run

    def process_executor(self, ctx: StageContext, workers: int) -> ShardExecutor:
        """Run shards in ``workers`` processes (:mod:`synth.engine.workers`), for a stage whose shards are
        CPU-bound Python (``Stage.cpu_shards``): each process's teacher takes 1/N of the global limits
        (``ShardJob.share``), and one bar counts finished shards (the shards draw none of their own)."""
        whole = unwrap(ctx.cfg)  # the runner ships the whole config; each shard's ctx views it again
        work = ctx.cpu_work(_shards_setup, (self, whole), _shard_step, _shard_name)

        def run(jobs: Sequence[ShardJob]) -> list[dict]:
            jobs = [dataclasses.replace(j, share=workers, progress=False) for j in jobs]
            out = []
            with ctx.bar("shards", len(jobs), "shards") as bar:
                for summary in ctx.cpu_map(work, jobs, workers):
                    out.append(summary)
                    bar.update(1)
            return out

        return run

    def _run_sharded(self, ctx: StageContext, shards: Shards, executor: ShardExecutor | None) -> StageResult:
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
        config = unwrap(ctx.cfg).model_dump(mode="json")  # each shard's ctx views it again
        jobs = [ShardJob(ctx.stage.name, config, str(ctx.store.root), ctx.key, i, d, ctx.progress)
                for i, d in enumerate(descs) if i not in done]
        workers = ctx.cpu_workers(len(jobs)) if ctx.stage.cpu_shards and executor is None else 1
        run = executor or (self.process_executor(ctx, workers) if workers > 1 else
                           self.thread_executor(unwrap(ctx.cfg), ctx.cfg.runner.shard_workers))
        try:
            fresh = run(jobs)
        finally:
            ctx.close_bars()
        paid_now = sum(s.get("paid_calls", 0) for s in fresh)
        for job, summary in zip(jobs, fresh):
            done[job.index] = summary
        summaries = [dict(done[i]) for i in range(len(descs))]
        if shards.summary is not None:  # fresh and resumed shards alike, read from their JSON
            summaries = [shards.summary.from_dict(s) for s in summaries]
        result = shards.finish(ctx, summaries)
        # The shards' bookkeeping is not output: only what finish() wrote is committed.
        shutil.rmtree(marks, ignore_errors=True)
        shutil.rmtree(ctx.staging / "_parts", ignore_errors=True)
        result.teacher_calls = paid_now
        return result

    # ---- the run loop --------------------------------------------------------------------------
    def start(self, cfg: Any, store: Store, force: bool = False, only: Iterable[str] | None = None,
              run_one: Callable[[Stage], StageOutcome] | None = None,
              on_stage: Callable[[StageOutcome], None] | None = None) -> "Run":
        """A :class:`Run` over ``store``: enter it (``with``), call it with each stage in order."""
        return Run(self, cfg, store, force=force, only=only, run_one=run_one, on_stage=on_stage)

    def run(self, stages: Iterable[Stage], cfg: Any, store: Store, **kw: Any) -> list[StageOutcome]:
        """Run ``stages`` in order (each reused when unchanged); see :meth:`start`."""
        with self.start(cfg, store, **kw) as run:
            for stage in stages:
                run(stage)
        return run.outcomes


class Run:
    """One run of stages over an output folder: the one run loop of the CLI and the flow.

    Each call runs one stage (through ``run_one``, default :meth:`Pipeline.run_stage`; the
    Prefect flow passes one that runs it as a task) and rewrites ``DIR/reports/run.json``:
    per stage ``reused``, ``seconds``, ``teacher_calls`` (requests paid for by this run; cache
    hits and shards an interrupted run finished are not counted), its key and its funnel.
    Stages outside ``only`` (when given) are skipped.  Entering the run takes the folder's
    :class:`~synth.engine.store.RunLock`, so a second run on the same folder stops at once.
    """

    def __init__(self, pipeline: Pipeline, cfg: Any, store: Store, force: bool = False,
                 only: Iterable[str] | None = None, run_one: Callable[[Stage], StageOutcome] | None = None,
                 on_stage: Callable[[StageOutcome], None] | None = None):
        self.store = store
        self.only = None if only is None else set(only)
        self.run_one = run_one or (lambda s: pipeline.run_stage(s, cfg, store, force=force))
        self.on_stage = on_stage
        self.started = time.time()
        self.outcomes: list[StageOutcome] = []
        self.lock = RunLock(store.root)

    def __enter__(self) -> "Run":
        self.lock.acquire()
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        try:
            self.write(finished=exc_type is None)
        finally:
            self.lock.release()

    def __call__(self, stage: Stage) -> StageOutcome | None:
        """Run (or reuse) ``stage`` and record its outcome."""
        if self.only is not None and stage.name not in self.only:
            return None
        outcome = self.run_one(stage)
        self.outcomes.append(outcome)
        self.write(finished=False)
        if self.on_stage is not None:
            self.on_stage(outcome)
        return outcome

    def write(self, finished: bool) -> dict:
        """Write ``reports/run.json`` now; returns it."""
        report = {
            "started_at": self.started,
            "finished": finished,
            "seconds": round(time.time() - self.started, 3),
            "teacher_calls": sum(o.teacher_calls for o in self.outcomes),
            "stages": {
                o.name: {
                    "reused": o.reused,
                    "seconds": round(o.seconds, 3),
                    "teacher_calls": o.teacher_calls,
                    "key": o.key,
                    "input": o.report.get("input"),
                    "output": o.report.get("output"),
                    "dropped": o.report.get("dropped", {}),
                    "failed": o.report.get("failed", {}),
                }
                for o in self.outcomes
            },
        }
        atomic_write_json(self.store.root / "reports" / "run.json", report)
        return report


def run_stage(stage: Stage, cfg: Any, store: Store, **kw: Any) -> StageOutcome:
    """Run one stage on its own (outside any pipeline table); see :meth:`Pipeline.run_stage`."""
    return Pipeline([stage]).run_stage(stage, cfg, store, **kw)


def _shards_setup(pipeline: Pipeline, cfg: Any) -> tuple[Pipeline, Any]:
    return pipeline, cfg


def _shard_step(state: tuple[Pipeline, Any], job: ShardJob) -> dict:
    pipeline, cfg = state
    return pipeline.run_shard(job, cfg)


def _shard_name(i: int, job: ShardJob) -> str:
    return f"shard {job.index} ({json.dumps(job.desc)})"


def _top(counts: dict[str, int], items: Sequence[FailedItem] = ()) -> str:
    """The commonest reasons of ``counts`` with their numbers, and the first detail given for the first."""
    top = sorted(((r, n) for r, n in counts.items() if n), key=lambda x: (-x[1], x[0]))[:4]
    said = ", ".join(f"{r} {n:,}" for r, n in top)
    detail = next((i.detail for i in items if i.reason == top[0][0] and i.detail), None) if top else None
    return f"{said}: {detail}" if detail else said


def _why_empty(stage: Stage, r: dict) -> str:
    """Why a stage made nothing, from its result (or committed report): ``input``, ``dropped``, ``failed``."""
    n, dropped, failed = r.get("input") or 0, r.get("dropped") or {}, r.get("failed") or {}
    if not n:
        said = r.get("skipped")  # a stage may say why it had nothing to read (eval: no eval-split question)
        if isinstance(said, str) and said:
            return f"its input was empty: {said}"
        return "its input was empty" + (f" (it reads {', '.join(stage.reads)})" if stage.reads else "")
    if failed:
        why_failed = _top(failed, [FailedItem.from_dict(f) for f in r.get("failed_items") or ()])
        return (f"none of its {n:,} items made it: {sum(dropped.values()):,} were dropped"
                + (f" ({_top(dropped)})" if dropped else "")
                + f" and the teacher call of {sum(failed.values()):,} failed ({why_failed})")
    return f"every one of its {n:,} items was dropped ({_top(dropped)})"


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


SUMMARY_COLUMNS = ["stage", "status", "input", "output", "dropped", "failed", "teacher calls", "seconds"]


def summary_rows(outcomes: Sequence[StageOutcome]) -> list[list]:
    """Rows for the end-of-run table: stage, status, input, output, dropped, failed (teacher calls that failed:
    a rerun retries them), teacher calls, seconds."""
    rows = []
    for o in outcomes:
        r = o.report
        rows.append([o.name, "reused" if o.reused else "ran", r.get("input", ""), r.get("output", ""),
                     sum((r.get("dropped") or {}).values()), sum((r.get("failed") or {}).values()), o.teacher_calls,
                     round(o.seconds, 2)])
    return rows
