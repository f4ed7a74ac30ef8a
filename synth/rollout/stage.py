"""The ``rollout`` stage: teacher trajectories per question, written to ``traces``.

How many each question gets is :class:`SamplePlan`'s (``rollout.policy``): under ``adaptive`` (the
default) an sft question is sampled until ``filters.keep_per_question`` samples are correct, up to
``rollout.n``, an rl question gets ``rollout.n``, an eval question ``rollout.eval_n``; under ``fixed``
each gets ``rollout.n``.  A question whose teacher rollouts can put it in ``rl_pool`` gets all
``rollout.n``: an sft question too when the pool shares it (``questions.share_sft_rl`` under
``rl.band_by: teacher``), since its band's c/n must count every sample, not the ones an early stop
left.  The samples are asked for in waves: the first wave is what no outcome can change, each next one
only what the samples so far leave undecided.

The stage is sharded (``rollout.shard_size`` questions a shard); trajectories run
concurrently through :meth:`Teacher.map`, which keeps input order, and all shards
share one teacher, so ``teacher.concurrency`` is global and the table depends on
neither concurrency nor sharding.  Every completed teacher call is cached, so a killed run resumes
without paying twice; the tools are deterministic, so a resumed trajectory
continues exactly where it stopped.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from synth.engine.stage import Shards, ShardSummary, StageContext, StageResult, failed_item, summary_failed_items
from synth.engine.records import SPLITS, TEACHER_FAILED as FAILED, Question, Split, Trace
from synth.corpus.answerkeys import AnswerKeys, answer_keys
from synth.text.answers import AnswerKey, is_correct
from synth.rollout.loop import rollout_one
from synth.tools.rank import open_search, search_facts
from synth.tools.search import SearchIndex
from synth.engine.store import write_parquet_atomic
from synth.teacher.client import merged_usage, shard_usage, stage_teacher
from synth.tools.toolbox import Toolbox

# rl.band_by's value for the teacher's band (filters.rlconfig.TEACHER; filters is a layer above this one).
TEACHER_BAND = "teacher"


def load_questions(store, limit: int | None = None) -> list[Question]:
    """The questions table as records (the first ``limit`` when set)."""
    rows = store.read("questions", hint="questions").to_pylist()
    return [Question.from_row(r) for r in rows[:limit]]


def _inputs(ctx: StageContext) -> tuple[list[Question], SearchIndex, AnswerKeys]:
    # Loaded once per process and stage run; every shard uses them.  Nothing of the gold chain beyond
    # the question record is loaded: the teacher is handed the question text and a persona seed only.
    # The answer keys decide, as the filter will, when an sft question has its correct samples.
    def load() -> tuple[list[Question], SearchIndex, AnswerKeys]:
        cfg = ctx.cfg
        questions = load_questions(ctx.store, cfg.rollout.max_questions)
        index = open_search(ctx.store, cfg.tools)  # tools.ranker: BM25, dense or hybrid
        return questions, index, answer_keys(ctx.store, cfg.filters.min_f1)

    return ctx.shared("inputs", load)


def plan(ctx: StageContext) -> list[list[int]]:
    """Shards of ``rollout.shard_size`` questions: ``[start, end)`` ranges."""
    n, size = len(_inputs(ctx)[0]), ctx.cfg.rollout.shard_size
    return [[a, min(a + size, n)] for a in range(0, n, size)]


@dataclass(frozen=True)
class RolloutShard(ShardSummary):
    """What one shard of the rollout stage did, for :func:`finish`: trajectories by stop reason, the failed ones,
    samples by split (and those the policy saved against ``fixed``), turns and tool calls, where the teacher's
    reasoning came, and its teacher's usage."""

    input: int = 0
    stop_reasons: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    failed_items: list[dict] = field(default_factory=list)
    samples: dict[str, int] = field(default_factory=dict)
    saved: int = 0
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    reasoning_fields: dict[str, int] = field(default_factory=dict)
    teacher: dict | None = None
    paid_calls: int = 0


def run_shard(ctx: StageContext, i: int, span: list[int]) -> RolloutShard:
    """The trajectories of one shard's questions (see :func:`samples_of`), written as one part of ``traces``."""
    cfg = ctx.cfg
    questions, index, keys = _inputs(ctx)
    shard = questions[span[0]:span[1]]
    teacher = stage_teacher(ctx)
    plan = SamplePlan.of(cfg)

    async def one(item: tuple[Question, int]) -> Trace:
        q, s = item
        toolbox = Toolbox(index, cfg.tools, mask_page_ids=[q.answer_page_id])
        return await rollout_one(teacher, toolbox, q, s, cfg)

    bar = ctx.shared_bar("trajectories", sum(plan.most(q) for q in questions), "traces")
    done: dict[str, list[Trace]] = {q.question_id: [] for q in shard}
    todo = [(q, s) for q in shard for s in range(plan.first(q))]
    while todo:  # waves: each asks only for what the samples so far leave undecided
        for (q, _), t in zip(todo, teacher.map(one, todo, progress=bar)):
            done[q.question_id].append(t)
        todo = [(q, s) for q in shard for s in plan.more(q, done[q.question_id], keys.key_for(q))]
    bar.update(sum(plan.most(q) - len(done[q.question_id]) for q in shard))  # decided early: nothing left to do
    ordered = [t for q in shard for t in sorted(done[q.question_id], key=lambda t: t.sample_index)]
    # A trajectory whose teacher call failed is not a finished one: it is left out of the table and listed,
    # so the next run retries it (its calls that succeeded are cache hits) and no filter mistakes it for data.
    traces = [t for t in ordered if t.stop_reason != FAILED]
    failed = [failed_item(t.trace_id, *_reason(t)) for t in ordered if t.stop_reason == FAILED]
    write_parquet_atomic(Trace.to_table(traces), ctx.shard_out("traces", i))
    return RolloutShard(
        input=len(ordered), stop_reasons=dict(Counter(t.stop_reason for t in traces)),
        failed=dict(Counter(f.reason for f in failed)), failed_items=[f.as_dict() for f in failed],
        samples={sp: sum(len(done[q.question_id]) for q in shard if q.split == sp) for sp in SPLITS},
        saved=sum(plan.n - len(done[q.question_id]) for q in shard),  # against policy fixed
        turns=sum(t.n_turns for t in traces), tool_calls=sum(t.n_tool_calls for t in traces),
        tool_errors=sum(t.n_tool_errors for t in traces),
        reasoning_fields=dict(Counter(t.reasoning_field for t in traces if t.reasoning_field)),
        **shard_usage(teacher))


@dataclass(frozen=True)
class SamplePlan:
    """Which sample indices a question gets (``rollout.policy``).

    Under ``fixed`` every question gets ``rollout.n``.  Under ``adaptive``, an sft question is sampled
    in sample-index order until ``keep`` samples are correct (the answer rule alone: the final answer
    judged against the question's answer key at ``min_f1``, nothing the other filters decide), up to n; an rl
    question gets all n; an eval question ``rollout.eval_n``.  Samples are deterministic by (question,
    sample index), so the samples a question gets depend on nothing but those samples: a larger n, or a
    larger ``keep``, only adds samples after the ones there are (paid once, then call-cache hits).
    A question with a failed sample is not extended in that run: its outcome is not known yet.

    ``pooled`` are the splits whose teacher rollouts measure an ``rl_pool`` band (:func:`pooled_splits`):
    each of their questions gets all n, never an early stop, so the c/n its pool row carries is c of
    ``rollout.n`` (a shared sft question would otherwise be banded on the samples it took to decide: right
    on its first sample, 1 of 1).  Only the sft questions no pool reads keep the early stop.
    """

    policy: str
    n: int
    eval_n: int
    keep: int
    min_f1: float
    pooled: frozenset[str] = frozenset({Split.RL})

    @classmethod
    def of(cls, cfg) -> "SamplePlan":
        r = cfg.rollout
        return cls(r.policy, r.n, r.eval_n, cfg.filters.keep_per_question, cfg.filters.min_f1,
                   pooled_splits(cfg) if r.policy == "adaptive" else frozenset({Split.RL}))

    def stops_early(self, q: Question) -> bool:
        """Whether ``q`` is sampled only until its outcome is decided: an sft question no pool reads, under
        ``adaptive``."""
        return self.policy == "adaptive" and q.split == Split.SFT and q.split not in self.pooled

    def most(self, q: Question) -> int:
        """The samples ``q`` may get."""
        if self.policy == "fixed" or q.split in self.pooled:
            return self.n
        return self.eval_n if q.split == Split.EVAL else self.n

    def first(self, q: Question) -> int:
        """The samples ``q`` gets before any outcome is known."""
        if self.stops_early(q):
            return min(self.keep, self.n)
        return self.most(q)

    def more(self, q: Question, got: list[Trace], key: AnswerKey | None = None) -> range:
        """The next sample indices ``q`` needs, given the samples it ``got`` (empty when decided); ``key`` is its
        answer key (None: its answer and aliases alone)."""
        if not self.stops_early(q) or any(t.stop_reason == FAILED for t in got):
            return range(0)
        gold = key if key is not None else q.golds
        correct = sum(is_correct(t.final_answer, gold, self.min_f1) for t in got)
        return range(len(got), min(self.n, len(got) + max(0, self.keep - correct)))


def pooled_splits(cfg) -> frozenset[str]:
    """The splits whose teacher rollouts measure an ``rl_pool`` band under ``rollout.policy: adaptive``: ``rl``,
    and ``sft`` when ``questions.share_sft_rl`` shares it with a pool the teacher measures (``rl.band_by:
    teacher``; a student's band samples its own ``rl.n``).  Reads only what the rollout stage declares under
    that policy (``flows.stages``)."""
    if cfg.questions.share_sft_rl and cfg.rl.band_by == TEACHER_BAND:
        return frozenset({Split.RL, Split.SFT})
    return frozenset({Split.RL})


def _reason(trace: Trace) -> tuple[str, str]:
    """A failed trajectory's reason slug and what the teacher said, with the turn it failed on."""
    reason, _, detail = (trace.error or "teacher_error").partition(": ")
    return reason, f"turn {trace.n_turns + 1}: {detail}" if detail else f"turn {trace.n_turns + 1}"


def finish(ctx: StageContext, summaries: list[RolloutShard]) -> StageResult:
    """Publish the shards' parts as ``traces`` and sum their counts."""
    rows = ctx.publish_parts("traces", Trace.SCHEMA)
    stops: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    samples: Counter[str] = Counter()
    fields: Counter[str] = Counter()
    for s in summaries:
        stops.update(s.stop_reasons)
        failed.update(s.failed)
        samples.update(s.samples)
        fields.update(s.reasoning_fields or {})
    n_in = sum(s.input for s in summaries)
    return StageResult(
        input=n_in, output=rows, dropped={}, failed=dict(failed),
        failed_items=summary_failed_items(summaries),
        extra={"questions": len(_inputs(ctx)[0]), "n": ctx.cfg.rollout.n, "policy": ctx.cfg.rollout.policy,
               "samples_by_split": dict(samples), "samples_saved": sum(s.saved for s in summaries),
               "stop_reasons": dict(stops),
               # the agents' search: tools.ranker and, dense or hybrid, the embedding model's name and files' sha
               "search": search_facts(ctx.cfg.tools),
               "turns": sum(s.turns for s in summaries), "tool_calls": sum(s.tool_calls for s in summaries),
               "tool_errors": sum(s.tool_errors for s in summaries), "shards": len(summaries),
               # Where the teacher's server put its reasoning (and so where it was sent back), traces per field;
               # the field most traces show, or None when no trace carried reasoning.
               "reasoning": {"field": fields.most_common(1)[0][0] if fields else None,
                             "traces": sum(fields.values()), "by_field": dict(sorted(fields.items()))},
               **merged_usage(summaries, ctx.cfg.teacher.price_per_mtok)},
    )


SHARDS = Shards(plan=plan, run=run_shard, finish=finish, summary=RolloutShard)
