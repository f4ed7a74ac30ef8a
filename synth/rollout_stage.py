"""The ``rollout`` stage: ``rollout.n`` teacher trajectories per question, written to ``traces``.

Trajectories run concurrently (bounded by ``teacher.concurrency``) through
:meth:`Teacher.map`, which keeps input order, so the table does not depend on
concurrency.  Every completed teacher call is cached, so a killed run resumes
without paying twice; the tools are deterministic, so a resumed trajectory
continues exactly where it stopped.
"""

from __future__ import annotations

from collections import Counter

from .pipeline import StageContext, StageResult
from .questions import page_meta
from .records import Question, Trace
from .rollout import gold_for, rollout_one
from .search import SearchIndex
from .teacher import open_teacher
from .tools import Toolbox


def hop_evidence(store) -> dict[tuple[str, str], str]:
    """Anchor text of every walk hop and subgraph edge, keyed by (src_id, dst_id)."""
    out: dict[tuple[str, str], str] = {}
    for rel, col in (("walks", "hops"), ("subgraphs", "edges")):
        if store.exists(rel):
            for links in store.read(rel, columns=[col])[col].to_pylist():
                for e in links:
                    out.setdefault((e["src_id"], e["dst_id"]), e["anchor_text"])
    return out


def load_questions(store, limit: int | None = None) -> list[Question]:
    """The questions table as records (the first ``limit`` when set)."""
    rows = store.read("questions", hint="questions").to_pylist()
    return [Question.from_row(r) for r in rows[:limit]]


def run_rollouts(ctx: StageContext) -> StageResult:
    """Questions in; ``rollout.n`` traces per question out."""
    cfg = ctx.cfg
    questions = load_questions(ctx.store, cfg.rollout.max_questions)
    index = SearchIndex.open(ctx.store.path("index"), snippet_chars=cfg.tools.snippet_chars)
    meta = page_meta(ctx.store, {p for q in questions for p in q.path})
    evidence = hop_evidence(ctx.store)
    golds = {q.question_id: gold_for(q, meta, evidence, cfg.seed) for q in questions}
    items = [(q, s) for q in questions for s in range(cfg.rollout.n)]
    teacher = open_teacher(cfg.teacher, ctx.store.root)
    snap = teacher.stats.snapshot()

    async def one(item: tuple[Question, int]) -> Trace:
        q, s = item
        toolbox = Toolbox(index, cfg.tools, mask_page_ids=[q.answer_page_id])
        return await rollout_one(teacher, toolbox, q, s, cfg, golds[q.question_id])

    try:
        traces = teacher.map(one, items, progress=ctx.bar("trajectories", len(items), "traces"))
    finally:
        teacher.close()
    w = ctx.writer("traces", Trace.SCHEMA, rows_per_shard=20_000)
    w.write(Trace.to_table(traces))
    w.close()
    stops = Counter(t.stop_reason for t in traces)
    steps = sum(t.n_turns for t in traces)
    return StageResult(
        input=len(items), output=len(traces), dropped={},
        extra={"questions": len(questions), "n": cfg.rollout.n, "stop_reasons": dict(stops),
               "turns": steps, "tool_calls": sum(t.n_tool_calls for t in traces),
               "tool_errors": sum(t.n_tool_errors for t in traces), "teacher": teacher.stats.since(snap)},
    )
