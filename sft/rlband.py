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

Every row names its question's best correct *teacher* rollout (``reference_trace_id``, ``step_labels``), read
from the filter's ``filter/references`` (:mod:`filters.guidance`, the same choice the teacher band makes), and
with ``rl.baselines`` carries the teacher's closed-book and naive-RAG answers (:func:`filters.pool.add_baselines`,
asked here for this stage's rows, as the filter asks them for its own).

**Action guidance** (ACTGUIDE-RL, ``rl.guidance``).  A question the student got wrong in all ``n`` rollouts
enters the pool guided by the teacher's reference: ``guidance`` holds its K tool calls.  The stage measures
ACTGUIDE's minimal prefix k*: for a prefix length k the student rolls out ``n`` more times with the first k
reference actions played before its first turn (each a tool call and its observation, from the same toolbox:
:func:`synth.rollout.loop.rollout_one`'s ``prefix``), and k *works* when at least ``rl.guidance_min_correct``
of them answer correctly.  A binary search over k = 1..K (:class:`PrefixSearch`; success taken as monotone in
k) finds the smallest k that works in at most ``floor(log2 K) + 1`` probes; the row records it as
``guidance_k``.  The guided rollouts are kept in ``rl_band/guided`` (sample index ``k·n + s``, so
``sample_index // n`` is the k a rollout was given).  A question whose reference is missing (no correct
teacher rollout) or that no k <= K lets the student answer stays out, counted in the report's ``guidance``
(``without_correct_rollout``, ``no_working_prefix``, with ``rows``, ``probes`` and the k* histogram ``k``).
A failed guided rollout leaves the whole question undecided and retried, as a failed unguided one does.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from filters.band import BANDS, band, band_counts, band_model_name, context_of, pass_stats, prompt_messages, rl_row
from filters.curriculum import write_curriculum
from filters.guidance import load_references
from filters.pool import add_baselines
from filters.rlconfig import STUDENT
from sft.evaluate import CountedTurns, TurnCounter, harness_settings
from sft.policy import oracle_student, student_teacher
from synth.engine.records import RL_SCHEMA, TEACHER_FAILED, Question, Split, Trace
from synth.engine.seeding import derive_seed
from synth.engine.stage import FailedItem, Shards, ShardSummary, StageContext, StageResult, failed_item
from synth.engine.store import write_parquet_atomic
from synth.rollout.loop import rollout_one
from synth.corpus.answerkeys import answer_keys
from synth.text.answers import is_correct
from synth.tools.rank import open_search, search_facts
from synth.tools.toolbox import Toolbox

log = logging.getLogger("hopforge")

TRACES = "rl_band/traces"
GUIDED = "rl_band/guided"


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
    if cfg.rl.policy == "oracle":
        return oracle_student(cfg), band_model_name(STUDENT, [f"oracle@{cfg.eval.max_turns}-turns"])
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
    index = ctx.shared("search", lambda: open_search(ctx.store, cfg.tools))  # tools.ranker; opened once a process
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
    facts, failed, kept = [], [], {}
    for q in questions:
        ts = sorted(by_q.get(q.question_id, []), key=lambda t: t.sample_index)
        bad = next((t for t in ts if t.stop_reason == TEACHER_FAILED), None)
        if bad is not None or len(ts) != n:
            # No decision was made: the question is retried by the next run, never counted as all wrong.
            failed.append(failed_item(q.question_id, TEACHER_FAILED, (bad.error if bad else "") or "missing rollouts"))
            continue
        kept[q.question_id] = ts
        key = keys.key_for(q)
        c = sum(is_correct(t.final_answer, key, cfg.filters.min_f1) for t in ts)
        first = ts[0]
        prompt = prompt_messages(first.conversation.messages) or [{"role": "user", "content": q.question}]
        facts.append({"question_id": q.question_id, "split": q.split, "n": n, "c": int(c),
                      "first": is_correct(first.final_answer, key, cfg.filters.min_f1),
                      "prompt": prompt, "tools": first.tools or "[]"})
    guided: list[Trace] = []
    if cfg.rl.guidance:
        wrong = [f["question_id"] for f in facts if f["c"] == 0]
        refs = load_references(ctx.store, wrong) if wrong else {}
        by_id = {q.question_id: q for q in questions}
        searches = {qid: PrefixSearch(refs[qid].n_actions) for qid in wrong if qid in refs}
        prefixes = {qid: json.loads(refs[qid].calls) for qid in searches}

        async def guided_one(item: tuple[Question, int, int]) -> Trace:
            q, k, s = item
            box = Toolbox(index, cfg.tools, mask_page_ids=[q.answer_page_id])
            prefix = prefixes[q.question_id][:k]
            return await rollout_one(counted, box, q, guided_sample(k, n, s), run_cfg, prefix=prefix)

        broken: dict[str, str] = {}
        # The binary search plans one round at a time, so the bar's total grows by each round's rollouts.
        gbar = ctx.shared_bar("guided rollouts (k* search)", None, "traces") if searches else None
        while True:
            probes = {qid: k for qid, srch in searches.items() if qid not in broken and (k := srch.next()) is not None}
            if not probes:
                break
            items = [(by_id[qid], k, s) for qid, k in sorted(probes.items()) for s in range(n)]
            gbar.set_total((gbar.total or 0) + len(items))
            out = [t for t in teacher.map(guided_one, items, progress=gbar) if isinstance(t, Trace)]
            got: dict[str, list[Trace]] = {}
            for t in out:
                got.setdefault(t.question_id, []).append(t)
            for qid, k in sorted(probes.items()):
                ts = got.get(qid, [])
                bad = next((t for t in ts if t.stop_reason == TEACHER_FAILED), None)
                if bad is not None or len(ts) != n:
                    broken[qid] = (bad.error if bad else "") or "missing guided rollouts"
                    continue
                guided.extend(ts)
                key = keys.key_for(by_id[qid])
                ok = sum(is_correct(t.final_answer, key, cfg.filters.min_f1) for t in ts)
                searches[qid].record(k, ok >= cfg.rl.guidance_min_correct)
        for f in facts:
            qid = f["question_id"]
            if qid in broken:
                continue
            if qid in searches:
                srch = searches[qid]
                f["guidance"] = {"reference": True, "K": srch.K, "k": srch.best, "tried": list(srch.tried)}
            elif f["c"] == 0:
                f["guidance"] = {"reference": False}
        if broken:  # a guided rollout failed: no decision on the question, which the next run retries whole
            failed += [failed_item(qid, TEACHER_FAILED, why) for qid, why in sorted(broken.items())]
            facts = [f for f in facts if f["question_id"] not in broken]
            guided = [t for t in guided if t.question_id not in broken]
            for qid in broken:
                kept.pop(qid, None)
    write_parquet_atomic(Trace.to_table([t for ts in kept.values() for t in ts]), ctx.shard_out(TRACES, i))
    write_parquet_atomic(Trace.to_table(guided), ctx.shard_out(GUIDED, i))
    return RlBandShard(model=model, facts=facts, failed=failed, turns=cut.turns, cut=cut.cut)


def guided_sample(k: int, n: int, s: int) -> int:
    """The sample index of guided rollout ``s`` (of ``n``) at prefix length ``k``: ``k·n + s``, past the unguided
    samples ``0..n-1``, so each has its own seed and trace id, and ``sample_index // n`` is its k."""
    return k * n + s


class PrefixSearch:
    """ACTGUIDE-RL's minimal prefix by binary search over k = 1..K: ``next()`` the k to try (None when done),
    ``record(k, works)`` its outcome.  Success is taken as monotone in k (a longer prefix of a correct path is
    no harder); ``best`` is the smallest k that worked (None: not even the whole path), ``tried`` the k probed,
    in order: at most ``floor(log2 K) + 1`` of them."""

    def __init__(self, K: int):
        self.K, self.lo, self.hi = int(K), 1, int(K)
        self.best: int | None = None
        self.tried: list[int] = []

    def next(self) -> int | None:
        return (self.lo + self.hi) // 2 if self.lo <= self.hi else None

    def record(self, k: int, works: bool) -> None:
        self.tried.append(k)
        if works:
            self.best, self.hi = k, k - 1
        else:
            self.lo = k + 1


def minimal_prefix(K: int, works) -> tuple[int | None, list[int]]:
    """``(k*, tried)`` for a predicate ``works(k)``, by :class:`PrefixSearch`."""
    srch = PrefixSearch(K)
    while (k := srch.next()) is not None:
        srch.record(k, bool(works(k)))
    return srch.best, srch.tried


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
    refs = load_references(ctx.store, [f["question_id"] for f in facts])
    rows = []
    guidance = {"rows": 0, "without_correct_rollout": 0, "no_working_prefix": 0, "probes": 0, "k": {}}
    for f in facts:
        b, g, ref = band(f["c"], f["n"]), f.get("guidance"), refs.get(f["question_id"])
        text, k = None, None
        if b == "all_wrong" and cfg.rl.guidance and g is not None:
            if not g["reference"]:
                guidance["without_correct_rollout"] += 1
                continue
            guidance["probes"] += len(g["tried"])
            if g["k"] is None:  # not even the whole correct path let the student answer: no gradient either way
                guidance["no_working_prefix"] += 1
                continue
            text, k = ref.calls, g["k"]
            guidance["rows"] += 1
            guidance["k"][str(k)] = guidance["k"].get(str(k), 0) + 1
        elif b != "rl_pool":
            continue
        q = questions[f["question_id"]]
        rows.append(rl_row(q, f["prompt"], f["tools"], f["n"], f["c"], index=len(rows), band_model=model,
                           key=keys.key_for(q), context=context_of(cfg),
                           reference=ref.as_reference() if ref else None, guidance=text, guidance_k=k))
    baselines = None
    if cfg.rl.baselines and rows:  # the dual reward's baselines, asked as the filter asks them for the teacher band
        from synth.teacher.client import stage_teacher

        baselines = add_baselines(ctx, questions, rows, stage_teacher(ctx), {qid: keys.key_for(q)
                                                                             for qid, q in questions.items()})
    w = ctx.writer("rl_pool", RL_SCHEMA)
    w.write(rows)
    w.close()
    ctx.publish_parts(TRACES, Trace.SCHEMA)
    ctx.publish_parts(GUIDED, Trace.SCHEMA)
    hops = {qid: len(q.hops) for qid, q in questions.items()}
    curriculum = write_curriculum(ctx, rows, hops, cfg.rl.curriculum, RL_SCHEMA)
    bands = {b: 0 for b in BANDS}
    bands.update(Counter(band(f["c"], f["n"]) for f in facts))
    turns, cut = sum(s.turns for s in summaries), sum(s.cut for s in summaries)
    extra: dict[str, Any] = {
        "band_by": STUDENT, "band_model": model, "bands": bands,
        "search": search_facts(cfg.tools),  # the search the student banded with: tools.ranker and its model
        "bands_of_splits": sorted({str(f["split"]) for f in facts}),
        "bands_by_split": band_counts((f["split"], f["n"], f["c"]) for f in facts), "rl_pool_rows": len(rows),
        "pass": pass_stats((f["n"], f["c"], f["first"]) for f in facts),
        "truncation": {"max_new_tokens": cfg.eval.max_new_tokens, "turns": turns, "cut_turns": cut,
                       "cut_rate": round(cut / turns, 4) if turns else None},
    }
    if cfg.rl.guidance:
        guidance["k"] = dict(sorted(guidance["k"].items(), key=lambda kv: int(kv[0])))
        extra["guidance"] = guidance
    if baselines is not None:
        extra["baselines"] = baselines
    if curriculum:
        extra["curriculum"] = curriculum
    log.info("rl_band: %d of %d questions in the band (c of %d rollouts by %s): %s", len(rows), len(facts),
             cfg.rl.n, model, ", ".join(f"{b} {v}" for b, v in bands.items()))
    failed_counts = dict(Counter(f.reason for f in failed))
    # The guided all-wrong questions are rows; the rest of all_wrong (no reference, no working prefix) is dropped.
    dropped = dict(bands, all_wrong=bands["all_wrong"] - guidance["rows"])
    return StageResult(input=len(facts) + len(failed), output=len(rows),
                       dropped={b: v for b, v in dropped.items() if b != "rl_pool" and v},
                       extra=extra, failed=failed_counts, failed_items=failed)


SHARDS = Shards(plan=_plan, run=_run, finish=_finish, summary=RlBandShard)

__all__ = ["GUIDED", "SHARDS", "TRACES", "PrefixSearch", "guided_sample", "minimal_prefix", "pool_questions"]
