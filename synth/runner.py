"""Running stages in order: the one path ``hopforge run``, the stage commands and the flows share.

Every run writes ``DIR/reports/run.json`` (updated after each stage, so a crashed
run still shows how far it got): for each stage whether it was ``reused``, its
``seconds``, and ``teacher_calls``, the requests actually sent by this run (cache
hits and shards done by an earlier, interrupted run are not counted).
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from .config import Config
from .pipeline import ShardExecutor, Stage, StageOutcome, run_stage
from .store import Store, atomic_write_json


def write_run_report(store: Store, outcomes: Sequence[StageOutcome], started: float, finished: bool) -> dict:
    """Write ``reports/run.json`` for the outcomes so far; returns it."""
    report = {
        "started_at": started,
        "finished": finished,
        "seconds": round(time.time() - started, 3),
        "teacher_calls": sum(o.teacher_calls for o in outcomes),
        "stages": {
            o.name: {
                "reused": o.reused,
                "seconds": round(o.seconds, 3),
                "teacher_calls": o.teacher_calls,
                "key": o.key,
                "input": o.report.get("input"),
                "output": o.report.get("output"),
                "dropped": o.report.get("dropped", {}),
            }
            for o in outcomes
        },
    }
    atomic_write_json(store.root / "reports" / "run.json", report)
    return report


def run_pipeline(stages: Sequence[Stage], cfg: Config, store: Store, force: bool = False,
                 executor: ShardExecutor | None = None,
                 on_stage: Callable[[StageOutcome], None] | None = None) -> list[StageOutcome]:
    """Run ``stages`` in order (each reused when unchanged) and keep ``reports/run.json`` current."""
    started = time.time()
    outcomes: list[StageOutcome] = []
    for stage in stages:
        outcome = run_stage(stage, cfg, store, force=force, executor=executor)
        outcomes.append(outcome)
        write_run_report(store, outcomes, started, finished=False)
        if on_stage is not None:
            on_stage(outcome)
    write_run_report(store, outcomes, started, finished=True)
    return outcomes


def summary_rows(outcomes: Sequence[StageOutcome]) -> list[list]:
    """Rows for the end-of-run table: stage, status, input, output, dropped, teacher calls, seconds."""
    rows = []
    for o in outcomes:
        r = o.report
        rows.append([o.name, "reused" if o.reused else "ran", r.get("input", ""), r.get("output", ""),
                     sum((r.get("dropped") or {}).values()), o.teacher_calls, round(o.seconds, 2)])
    return rows


SUMMARY_COLUMNS = ["stage", "status", "input", "output", "dropped", "teacher calls", "seconds"]

TEACHER_COLUMNS = ["stage", "requests", "cache hits", "retries", "failed", "prompt tokens", "completion tokens",
                   "cost (USD)"]


def teacher_rows(outcomes: Sequence[StageOutcome]) -> list[list]:
    """Rows for the teacher accounting table: what each stage's calls cost (as recorded in its report)."""
    rows = []
    for o in outcomes:
        t = o.report.get("teacher")
        if not t:
            continue
        cost = t.get("cost_usd")
        rows.append([o.name + (" (reused)" if o.reused else ""), t.get("requests", 0), t.get("cache_hits", 0),
                     t.get("retries", 0), t.get("failed", 0), t.get("prompt_tokens", 0), t.get("completion_tokens", 0),
                     "-" if cost is None else round(cost, 4)])
    return rows
