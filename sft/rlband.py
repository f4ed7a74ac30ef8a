"""Stage ``rl_band``: the difficulty band measured on the policy RL will train (``rl.band_by: student``).

LiteResearcher's curriculum keeps the questions its *current policy* answers 1 <= c <= 7 times in 8
rollouts: a group it all fails or all solves gives GRPO no gradient.  A question the teacher solves 4 of
4 times may be out of the student's reach, and the reverse, so under ``band_by: student`` this stage
rolls the warm-start student out ``rl.n`` times on every rl question (and sft ones with
``questions.share_sft_rl``), keeps ``1 <= c <= n - 1`` and writes ``rl_pool`` in the layout of
:mod:`filters.band`, each row with the student's ``n``, ``c`` and ``band_model``.

The rollouts go through the eval harness (:func:`synth.rollout.loop.rollout_one`): the same tools, the
answer page masked from search, ``eval.max_turns`` turns of at most ``eval.max_new_tokens`` tokens, and
the answer rule of the filter (``filters.min_f1``).  The student samples at ``rl.temperature`` with seeds
derived from the run seed and each sample's index, so a rerun gives the same band.  It runs in-process
with ``transformers`` or behind an OpenAI-compatible server (:mod:`sft.policy`).

The stage is sharded (``rl.shard_size`` questions a shard): a crashed or interrupted run keeps the shards
it finished, and the rerun rolls out only the rest.  Its traces are kept in ``rl_band/traces``.  A question
whose student call failed (a server down, say) is listed as failed, never counted as wrong, and retried by
the next run.  Under ``band_by: teacher`` the stage measures nothing and writes nothing: the filter wrote
the teacher's pool.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from filters.band import BANDS, band, band_counts, band_model_name, context_of, pass_stats, prompt_messages, rl_row
from filters.curriculum import write_curriculum
from filters.rlconfig import STUDENT
from sft.evaluate import CountedTurns, TurnCounter, harness_settings
from sft.policy import student_teacher
from synth.engine.records import RL_SCHEMA, TEACHER_FAILED, Question, Split, Trace
from synth.engine.seeding import derive_seed
from synth.engine.stage import FailedItem, Shards, ShardSummary, StageContext, StageResult, failed_item
from synth.engine.store import write_parquet_atomic
from synth.rollout.loop import rollout_one
from synth.corpus.answerkeys import answer_keys
from synth.text.answers import is_correct
from synth.tools.search import SearchIndex
from synth.tools.toolbox import Toolbox

log = logging.getLogger("hopforge")

TRACES = "rl_band/traces"


def pool_questions(store: Any, cfg: Any) -> list[Question]:
    """The questions the pool draws from, in question-id order: rl (and sft with ``share_sft_rl``)."""
    from synth.rollout.stage import load_questions

    splits = {Split.RL, Split.SFT} if cfg.questions.share_sft_rl else {Split.RL}
    qs = sorted((q for q in load_questions(store) if q.split in splits), key=lambda q: q.question_id)
    return qs[: cfg.rl.max_questions]


def _plan(ctx: StageContext) -> list[list[str]]:
    if ctx.cfg.rl.band_by != STUDENT:
        return []
    ids = [q.question_id for q in pool_questions(ctx.store, ctx.cfg)]
    size = ctx.cfg.rl.shard_size
    return [ids[i: i + size] for i in range(0, len(ids), size)]


def _student(ctx: StageContext):
    """The student's teacher for this shard, and the name its rows carry as ``band_model``."""
    cfg = ctx.cfg
    seed = derive_seed(cfg.seed, "rl_band", STUDENT) % (1 << 31)
    common = dict(temperature=cfg.rl.temperature, max_new_tokens=cfg.eval.max_new_tokens, seed=seed, shared=ctx.shared)
    if cfg.rl.base_url:
        return student_teacher(cfg, None, **common), band_model_name(STUDENT, [cfg.rl.model])
    sft_key = (ctx.store.stage_entry("sft") or {}).get("key", "")
    name = f"DIR/student@{sft_key}" if sft_key else "DIR/student"
    return student_teacher(cfg, ctx.store.path("student"), **common), band_model_name(STUDENT, [name])


@dataclass(frozen=True)
class RlBandShard(ShardSummary):
    """What one shard of ``rl_band`` measured, for :func:`_finish`: the student model, one fact per question
    (its split, n, correct rollouts c, whether the first was right, its prompt and tools), the questions whose
    rollouts failed, and the turns the student's token budget cut."""

    model: str = ""
    facts: list[dict] = field(default_factory=list)
    failed: list[FailedItem] = field(default_factory=list)
    turns: int = 0
    cut: int = 0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RlBandShard":
        base = super().from_dict(d)
        # A mark written before this type held each failed item's repr, not its dict: it cannot be read back.
        failed = [f if isinstance(f, FailedItem) else FailedItem.from_dict(f) for f in base.failed
                  if isinstance(f, (FailedItem, Mapping))]
        return replace(base, failed=failed)


def _run(ctx: StageContext, i: int, qids: list[str]) -> RlBandShard:
    """Roll the student out ``rl.n`` times on each question of the shard; write its traces; count c per question."""
    cfg = ctx.cfg
    wanted = set(qids)
    pool = pool_questions(ctx.store, cfg)
    questions = [q for q in pool if q.question_id in wanted]
    n = cfg.rl.n
    keys = answer_keys(ctx.store, cfg.filters.min_f1, ctx.shared)  # the filter's rule (and the reward's)
    teacher, model = _student(ctx)
    index = SearchIndex.open(ctx.store.path("index"), snippet_chars=cfg.tools.snippet_chars)
    run_cfg = harness_settings(cfg)  # eval's harness: the student sees the context it trained in (sft.context)
    cut = TurnCounter(cfg.eval.max_new_tokens)
    counted = CountedTurns(teacher, cut)

    async def one(item: tuple[Question, int]) -> Trace:
        q, s = item
        return await rollout_one(counted, Toolbox(index, cfg.tools, mask_page_ids=[q.answer_page_id]), q, s, run_cfg)

    bar = ctx.shared_bar("student rollouts", len(pool) * n, "traces")
    traces = teacher.map(one, [(q, s) for q in questions for s in range(n)], progress=bar)
    # rollout_one turns a failed call into a teacher_failed trace; anything else in a slot is left out, and its
    # question then lacks rollouts and is retried.
    traces = [t for t in traces if isinstance(t, Trace)]
    by_q: dict[str, list[Trace]] = {}
    for t in traces:
        by_q.setdefault(t.question_id, []).append(t)
    facts, failed, kept = [], [], []
    for q in questions:
        ts = sorted(by_q.get(q.question_id, []), key=lambda t: t.sample_index)
        bad = next((t for t in ts if t.stop_reason == TEACHER_FAILED), None)
        if bad is not None or len(ts) != n:
            # No decision was made: the question is retried by the next run, never counted as all wrong.
            failed.append(failed_item(q.question_id, TEACHER_FAILED, (bad.error if bad else "") or "missing rollouts"))
            continue
        kept.extend(ts)
        key = keys.key_for(q)
        c = sum(is_correct(t.final_answer, key, cfg.filters.min_f1) for t in ts)
        first = ts[0]
        prompt = prompt_messages(first.conversation.messages) or [{"role": "user", "content": q.question}]
        facts.append({"question_id": q.question_id, "split": q.split, "n": n, "c": int(c),
                      "first": is_correct(first.final_answer, key, cfg.filters.min_f1),
                      "prompt": prompt, "tools": first.tools or "[]"})
    write_parquet_atomic(Trace.to_table(kept), ctx.shard_out(TRACES, i))
    return RlBandShard(model=model, facts=facts, failed=failed, turns=cut.turns, cut=cut.cut)


def _finish(ctx: StageContext, summaries: list[RlBandShard]) -> StageResult:
    """Band every measured question, write ``rl_pool`` (and the curriculum stages) and the report."""
    cfg = ctx.cfg
    if cfg.rl.band_by != STUDENT:
        return StageResult(input=0, output=0, idle="rl.band_by is teacher: the filter stage wrote rl_pool", extra={
            "band_by": cfg.rl.band_by, "skipped": "rl.band_by is teacher: the filter stage wrote rl_pool"})
    questions = {q.question_id: q for q in pool_questions(ctx.store, cfg)}
    keys = answer_keys(ctx.store, cfg.filters.min_f1, ctx.shared)
    facts = sorted((f for s in summaries for f in s.facts), key=lambda f: f["question_id"])
    failed = [f for s in summaries for f in s.failed]
    model = band_model_name(STUDENT, [m.partition(":")[2] for m in {s.model for s in summaries}])
    rows = []
    for f in facts:
        if band(f["c"], f["n"]) == "rl_pool":
            q = questions[f["question_id"]]
            rows.append(rl_row(q, f["prompt"], f["tools"], f["n"], f["c"], index=len(rows), band_model=model,
                               key=keys.key_for(q), context=context_of(cfg)))
    w = ctx.writer("rl_pool", RL_SCHEMA)
    w.write(rows)
    w.close()
    ctx.publish_parts(TRACES, Trace.SCHEMA)
    hops = {qid: len(q.hops) for qid, q in questions.items()}
    curriculum = write_curriculum(ctx, rows, hops, cfg.rl.curriculum, RL_SCHEMA)
    bands = {b: 0 for b in BANDS}
    bands.update(Counter(band(f["c"], f["n"]) for f in facts))
    turns, cut = sum(s.turns for s in summaries), sum(s.cut for s in summaries)
    extra: dict[str, Any] = {
        "band_by": STUDENT, "band_model": model, "bands": bands,
        "bands_of_splits": sorted({str(f["split"]) for f in facts}),
        "bands_by_split": band_counts((f["split"], f["n"], f["c"]) for f in facts), "rl_pool_rows": len(rows),
        "pass": pass_stats((f["n"], f["c"], f["first"]) for f in facts),
        "truncation": {"max_new_tokens": cfg.eval.max_new_tokens, "turns": turns, "cut_turns": cut,
                       "cut_rate": round(cut / turns, 4) if turns else None},
    }
    if curriculum:
        extra["curriculum"] = curriculum
    log.info("rl_band: %d of %d questions in the band (c of %d rollouts by %s): %s", len(rows), len(facts),
             cfg.rl.n, model, ", ".join(f"{b} {v}" for b, v in bands.items()))
    failed_counts = dict(Counter(f.reason for f in failed))
    return StageResult(input=len(facts) + len(failed), output=len(rows),
                       dropped={b: v for b, v in bands.items() if b != "rl_pool" and v},
                       extra=extra, failed=failed_counts, failed_items=failed)


SHARDS = Shards(plan=_plan, run=_run, finish=_finish, summary=RlBandShard)

__all__ = ["SHARDS", "TRACES", "pool_questions"]
