"""The ``rollout`` stage: ``rollout.n`` teacher trajectories per question, written to ``traces``.

The stage is sharded (``rollout.shard_size`` questions a shard); trajectories run
concurrently through :meth:`Teacher.map`, which keeps input order, and all shards
share one teacher, so ``teacher.concurrency`` is global and the table depends on
neither concurrency nor sharding.  Every completed teacher call is cached, so a killed run resumes
without paying twice; the tools are deterministic, so a resumed trajectory
continues exactly where it stopped.
"""

from __future__ import annotations

import threading
from collections import Counter

from synth.engine.stage import Shards, StageContext, StageResult, failed_item
from synth.engine.records import TEACHER_FAILED as FAILED, Question, Trace
from synth.rollout.loop import rollout_one
from synth.tools.search import SearchIndex
from synth.engine.store import write_parquet_atomic
from synth.teacher.client import merged_usage, shard_usage, stage_teacher
from synth.tools.toolbox import Toolbox


def load_questions(store, limit: int | None = None) -> list[Question]:
    """The questions table as records (the first ``limit`` when set)."""
    rows = store.read("questions", hint="questions").to_pylist()
    return [Question.from_row(r) for r in rows[:limit]]


_CACHE: dict[tuple[str, str], tuple[list[Question], SearchIndex]] = {}
_LOCK = threading.Lock()


def _inputs(ctx: StageContext) -> tuple[list[Question], SearchIndex]:
    # Loaded once per process and stage run; every shard uses them.  Nothing of the gold chain beyond
    # the question record is loaded: the teacher is handed the question text and a persona seed only.
    key = (str(ctx.store.root), ctx.key)
    with _LOCK:
        if key not in _CACHE:
            _CACHE.clear()
            cfg = ctx.cfg
            questions = load_questions(ctx.store, cfg.rollout.max_questions)
            index = SearchIndex.open(ctx.store.path("index"), snippet_chars=cfg.tools.snippet_chars)
            _CACHE[key] = (questions, index)
        return _CACHE[key]


def plan(ctx: StageContext) -> list[list[int]]:
    """Shards of ``rollout.shard_size`` questions: ``[start, end)`` ranges."""
    n, size = len(_inputs(ctx)[0]), ctx.cfg.rollout.shard_size
    return [[a, min(a + size, n)] for a in range(0, n, size)]


def run_shard(ctx: StageContext, i: int, span: list[int]) -> dict:
    """``rollout.n`` trajectories for each question of one shard, written as one part of ``traces``."""
    cfg = ctx.cfg
    questions, index = _inputs(ctx)
    items = [(q, s) for q in questions[span[0]:span[1]] for s in range(cfg.rollout.n)]
    teacher = stage_teacher(ctx)

    async def one(item: tuple[Question, int]) -> Trace:
        q, s = item
        toolbox = Toolbox(index, cfg.tools, mask_page_ids=[q.answer_page_id])
        return await rollout_one(teacher, toolbox, q, s, cfg)

    bar = ctx.shared_bar("trajectories", len(questions) * cfg.rollout.n, "traces")
    done = teacher.map(one, items, progress=bar)
    # A trajectory whose teacher call failed is not a finished one: it is left out of the table and listed,
    # so the next run retries it (its calls that succeeded are cache hits) and no filter mistakes it for data.
    traces = [t for t in done if t.stop_reason != FAILED]
    failed = [failed_item(t.trace_id, *_reason(t)) for t in done if t.stop_reason == FAILED]
    write_parquet_atomic(Trace.to_table(traces), ctx.shard_out("traces", i))
    return {"input": len(items), "stop_reasons": dict(Counter(t.stop_reason for t in traces)),
            "failed": dict(Counter(f["reason"] for f in failed)), "failed_items": failed,
            "turns": sum(t.n_turns for t in traces), "tool_calls": sum(t.n_tool_calls for t in traces),
            "tool_errors": sum(t.n_tool_errors for t in traces), **shard_usage(teacher)}


def _reason(trace: Trace) -> tuple[str, str]:
    """A failed trajectory's reason slug and what the teacher said, with the turn it failed on."""
    reason, _, detail = (trace.error or "teacher_error").partition(": ")
    return reason, f"turn {trace.n_turns + 1}: {detail}" if detail else f"turn {trace.n_turns + 1}"


def finish(ctx: StageContext, summaries: list[dict]) -> StageResult:
    """Publish the shards' parts as ``traces`` and sum their counts."""
    rows = ctx.publish_parts("traces", Trace.SCHEMA)
    stops: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for s in summaries:
        stops.update(s["stop_reasons"])
        failed.update(s["failed"])
    n_in = sum(s["input"] for s in summaries)
    return StageResult(
        input=n_in, output=rows, dropped={}, failed=dict(failed),
        failed_items=[f for s in summaries for f in s["failed_items"]],
        extra={"questions": len(_inputs(ctx)[0]), "n": ctx.cfg.rollout.n, "stop_reasons": dict(stops),
               "turns": sum(s["turns"] for s in summaries), "tool_calls": sum(s["tool_calls"] for s in summaries),
               "tool_errors": sum(s["tool_errors"] for s in summaries), "shards": len(summaries),
               **merged_usage(summaries, ctx.cfg.teacher.price_per_mtok)},
    )


SHARDS = Shards(plan=plan, run=run_shard, finish=finish)
