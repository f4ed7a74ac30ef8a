"""The ``synth`` flow: every stage of the pipeline as a Prefect task, shards as tasks of their own.

``prefect deployment run synth/full`` runs :func:`synth_flow`.  It checks what the run
needs from outside first (:mod:`flows.preflight`: corpus source, API key, endpoint,
task runner) and fails within seconds when something is missing.  Then the child flow
``synth-stages`` runs the stages of :data:`flows.stages.PIPELINE` in order, one task
each (named after the stage), with the task runner the config asks for
(``runner.task_runner``); a flow's task runner is fixed when it starts, so the parent
picks it from the config and starts the child with ``.with_options(task_runner=...)``.

A sharded stage (questions, rollout) submits every shard as a task (``<stage>-shard``)
to that runner: threads in this process, Dask workers, or Ray.  Under Dask the CPU-bound work of the
other stages (the filter's batches, assemble's passes, the report's trace views) runs on the Dask
workers too (:class:`synth.engine.workers.DaskPool`).  hopforge's content keys
decide what is reused, so the tasks cache nothing themselves (``NO_CACHE``): a rerun
with unchanged inputs reuses every stage, and a run that died resumes from its
finished shards.  The teacher's ``concurrency`` / ``rpm`` / ``tpm`` are global: when
shards run in N worker processes, each process's teacher takes 1/N of them (``ShardJob.share``,
:func:`synth.teacher.client.per_process`).

At the end ``DIR/reports/run.json`` is current and the run carries four artifacts: the
funnel, the stages, the teacher's cost and the report with its figures (:mod:`flows.artifacts`).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Sequence

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import wait

from flows.config import Config, ConfigError, load_config
from flows.stages import (ASSEMBLE, EMBED, EVAL, EXPAND, FILTER, GRAPH, INDEX, INGEST, PIPELINE, QUESTIONS, REPORT,
                          RL_BAND, ROLLOUT, SFT, TOKENIZER, WALKS)
from synth.engine.errors import InputError, StageFailed
from synth.engine.stage import ShardJob, Stage, StageOutcome
from synth.engine.store import MissingInput, Store
from synth.engine.workers import DaskPool

from flows.runlogs import attach_in_worker, hopforge_logs_to_run, run_logger

USER_ERRORS = (ConfigError, InputError, MissingInput, StageFailed)  # a retry would fail the same way


# ---- task runners ----------------------------------------------------------------------------
def task_runner_for(cfg: Config):
    """The Prefect task runner ``cfg.runner.task_runner`` names (not started yet)."""
    s = cfg.runner
    if s.task_runner == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=s.shard_workers)
    if s.task_runner == "dask":
        from prefect_dask import DaskTaskRunner

        if s.dask_address:
            return DaskTaskRunner(address=s.dask_address)
        # One thread per worker process: a shard already overlaps its own teacher calls.
        return DaskTaskRunner(cluster_class="distributed.LocalCluster",
                              cluster_kwargs={"n_workers": s.dask_workers, "processes": True,
                                              "threads_per_worker": 1, "dashboard_address": ":0"})
    try:
        from prefect_ray import RayTaskRunner
    except ImportError:
        raise ConfigError("runner.task_runner is 'ray' but prefect-ray is not installed: pip install prefect-ray "
                          "(or set runner.task_runner to threads or dask)") from None
    return RayTaskRunner()  # RAY_ADDRESS names an existing cluster; otherwise a local one starts


def worker_processes(runner: Any, jobs: int) -> int:
    """How many processes the shards of one stage may run in at once (1: this process only)."""
    name = type(runner).__name__
    if name == "DaskTaskRunner":
        return max(1, min(jobs, len(runner.client.nthreads())))
    if name == "RayTaskRunner":
        try:
            import ray

            cpus = int(ray.cluster_resources().get("CPU", jobs))
        except Exception:  # noqa: BLE001 - unknown size: assume every shard gets its own process
            cpus = jobs
        return max(1, min(jobs, cpus))
    return 1


# ---- tasks -----------------------------------------------------------------------------------
def _retry_unless_user_error(task: Any, task_run: Any, state: Any) -> bool:
    """Retry a shard after an infrastructure failure, never after bad input (it would fail again)."""
    try:
        state.result()
    except USER_ERRORS:
        return False
    except BaseException:  # noqa: BLE001
        return True
    return True


@task(name="shard", task_run_name="{job.stage}-shard-{job.index:05d}", cache_policy=NO_CACHE,
      persist_result=False, retries=1, retry_delay_seconds=5, retry_condition_fn=_retry_unless_user_error)
def shard_task(job: ShardJob) -> dict:
    """Run one shard (here or on a worker); it writes its part and marks itself done, so a retry is safe."""
    from prefect.context import TaskRunContext

    ctx = TaskRunContext.get()
    attach_in_worker(ctx.task_run.flow_run_id if ctx is not None else None)
    return run_shard_job(job)


def run_shard_job(job: ShardJob) -> dict:
    """Run one shard from its plain-data job: the stage from the table, the config rebuilt."""
    return PIPELINE.run_shard(job, Config.model_validate(job.config))


class PrefectShardExecutor:
    """A :data:`~synth.engine.stage.ShardExecutor` that submits every shard as a task of the current flow run."""

    def __call__(self, jobs: Sequence[ShardJob]) -> list[dict]:
        from prefect.context import FlowRunContext

        if not jobs:
            return []
        runner = FlowRunContext.get().task_runner
        processes = worker_processes(runner, len(jobs))
        if processes > 1:  # each process's teacher takes 1/N of the global limits (synth.teacher.client.per_process)
            jobs = [dataclasses.replace(j, share=processes, progress=False) for j in jobs]
            concurrency = jobs[0].config["teacher"].get("concurrency") or 1
            run_logger().info("%s: %d shards over %d worker processes; teacher concurrency %s each",
                              jobs[0].stage, len(jobs), processes, max(1, concurrency // processes))
        shard = shard_task.with_options(name=f"{jobs[0].stage}-shard")
        futures = [shard.submit(j) for j in jobs]
        wait(futures)  # every shard finishes (and marks itself done) before a failure is raised
        return [f.result() for f in futures]


def cpu_pool() -> DaskPool | None:
    """The flow's Dask cluster, where a stage's CPU-bound work runs (:mod:`synth.engine.workers`); None under
    the other task runners (the stage then uses ``runner.cpu_workers`` processes of this machine)."""
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    runner = ctx.task_runner if ctx is not None else None
    return DaskPool(runner.client) if type(runner).__name__ == "DaskTaskRunner" else None


@task(cache_policy=NO_CACHE, persist_result=False)
def stage_task(stage_name: str, cfg: Config, out: str) -> StageOutcome:
    """Run one stage (reused when its content key is unchanged), its shards as tasks."""
    stage = PIPELINE[stage_name]
    executor = PrefectShardExecutor() if stage.sharded else None
    outcome = PIPELINE.run_stage(stage, cfg, Store(out), progress=False, executor=executor, cpu_pool=cpu_pool())
    r = outcome.typed_report
    run_logger().info("%s: %s in %.1fs: %s in, %s out, %s dropped, %d teacher calls", stage_name,
                      "reused" if outcome.reused else "ran", outcome.seconds, "?" if r.input is None else r.input,
                      "?" if r.output is None else r.output, sum(r.dropped.values()), outcome.teacher_calls)
    return outcome


# ---- flows -----------------------------------------------------------------------------------
@flow(name="synth-stages", log_prints=False, persist_result=False)
def synth_stages(config: str = "configs/demo.yaml", overrides: list[str] = [], out: str = "data/demo",  # noqa: B006
                 stages: list[str] | None = None) -> list[StageOutcome]:
    """Run the pipeline's stages in order (all of them, or the named ones), keeping ``reports/run.json`` current."""
    cfg = load_config(config, overrides)
    store = Store(out)

    def run_stage(stage: Stage) -> StageOutcome:
        return stage_task.with_options(name=stage.name, task_run_name=stage.name)(stage.name, cfg, str(store.root))

    # The pipeline, one stage a line, in the order of flows/stages.py (a test keeps the two in step).
    with PIPELINE.start(cfg, store, only=stages, run_one=run_stage) as run:
        run(INGEST)
        run(GRAPH)
        run(WALKS)
        run(EXPAND)
        run(INDEX)
        run(EMBED)
        run(QUESTIONS)
        run(ROLLOUT)
        run(TOKENIZER)
        run(FILTER)
        run(ASSEMBLE)
        run(REPORT)
        run(SFT)
        run(EVAL)
        run(RL_BAND)
    return run.outcomes


@flow(name="synth", log_prints=False, persist_result=False)
def synth_flow(config: str = "configs/demo.yaml", overrides: list[str] = [], out: str = "data/demo") -> dict:  # noqa: B006
    """Build warm-start data for search agents: KILT pages -> walks -> questions -> traces -> sft.

    Every run is incremental: a stage whose inputs, config and code are unchanged is reused.
    """
    from flows import artifacts
    from flows.preflight import load_checked
    from prefect.context import FlowRunContext

    logger = run_logger()
    t0 = time.monotonic()
    cfg = load_checked(config, list(overrides), out, via="flow")  # fails here, in seconds, on a missing input
    root = Path(out).absolute()
    logger.info("synth: config %s, out %s, task runner %s", config, root, cfg.runner.task_runner)
    ctx = FlowRunContext.get()
    run_id = ctx.flow_run.id if ctx is not None and ctx.flow_run is not None else None
    with hopforge_logs_to_run(run_id):
        runner = task_runner_for(cfg)
        outcomes = synth_stages.with_options(task_runner=runner)(config=config, overrides=list(overrides),
                                                                  out=str(root))
    artifacts.attach(root, cfg, outcomes)
    summary = {
        "out": str(root),
        "ran": [o.name for o in outcomes if not o.reused],
        "reused": [o.name for o in outcomes if o.reused],
        "teacher_calls": sum(o.teacher_calls for o in outcomes),
        "outputs": {o.name: o.typed_report.output for o in outcomes},
        "seconds": round(time.monotonic() - t0, 2),
        "run_report": str(root / "reports" / "run.json"),
    }
    logger.info("synth: done in %.1fs: %d stages ran, %d reused, %d teacher calls", summary["seconds"],
                len(summary["ran"]), len(summary["reused"]), summary["teacher_calls"])
    return summary
