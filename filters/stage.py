"""The ``filter`` stage: traces in; ``sft``, ``rl_pool``, rejects, per-trace verdicts and references out.

Pass 1 streams ``traces`` in batches.  Each trace is graded (rule, and the judge when
``filters.judge``; see :mod:`filters.correctness`) and run through the configured
chain; a dropped trace goes to ``rejects/filter`` with its reason at once.  What
best-of-n and the difficulty band need is kept small: per question ``n``, ``c``, the
harness prompt and its best correct rollout's tool calls and step labels (a
:class:`~filters.guidance.Reference`, for the ``rl_pool`` row); per surviving trace a
:class:`~filters.bestofn.Candidate`.
Pass 2 reads back only the survivors, writes the kept ones to ``sft`` and the others
to the rejects as ``not_best``.  Memory holds no conversation beyond one batch.

Funnel: input = traces, output = kept traces (``sft`` rows under ``sft.context: full``; one row per
assistant turn under ``as_seen``), dropped by reason = the chain's reasons plus ``not_best``.  The
``preference`` table pairs each kept trace with another rollout of its question (:mod:`filters.preference`),
read in a last pass over only the paired traces.  ``filter/verdicts`` has one row per trace, with its count
of ungrounded tool calls (:mod:`filters.grounded`) whichever filter dropped it; a verdict is written as soon as
it is final (after pass one, or after pass two for a best-of-n candidate), so the parent holds
none beyond the candidates'.  ``filter/references`` holds each pooled question's best correct rollout
(:mod:`filters.guidance`), which the student band reads.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from synth.engine.errors import not_a_file
from synth.engine.stage import StageContext, StageResult
from synth.engine.tables import RowMapping
from synth.engine.workers import guided_batches
from synth.engine.records import SFT_SCHEMA, TRACE_REJECT_SCHEMA, VERDICT_SCHEMA, Question, Split, Trace, Verdict
from synth.text.answers import BASES, NO_MATCH

from filters.band import pass_stats, prompt_messages
from filters.base import HELD_OUT, NOT_BEST, FilterContext, FilterRunner, build_chain
from filters.bestofn import Candidate, rubric_raw, select_best
from filters.config import FiltersConfig
from filters.correctness import CorrectnessFilter, grade, run_judge
from filters.grounded import ungrounded_steps
from filters.guidance import Reference, keep_best, reference_of, write_references
from filters.pool import write_rl_pool
from filters.preference import WRONG_ANSWER, Loser, pair, write_preference
from synth.corpus.answerkeys import answer_keys
from filters.sftrows import samples, sft_messages, sft_rows
from synth.tokenizer.losspolicy import reasoning_mode as resolve_reasoning, rendered

BATCH_ROWS = 512
# A worker's batch: each worker holds its batch's conversations decoded several times over (rows, records,
# messages, renders), about 1 MB a trace; 256 keeps two workers and the parent under 4 GiB together.
WORKER_BATCH_ROWS = 256
# Row groups of the tables that hold whole traces (rejects/filter, sft): written as they fill, so the parent
# holds one group of ~50 KB traces (about 12 MB) per table rather than a 256 MB shard and its encoding.
TRACE_ROW_GROUP = 256
# How the parent reads traces: in its own thread, a batch when the workers want one.  Arrow's threaded scan
# read about 1 GB of traces ahead of the workers whatever its readahead settings, refilled in bursts (the
# parent swung between 0.6 and 1.9 GiB on 40,000 traces; read in this thread it stays near 0.6).  The
# workers, not the reads, set the pace.
SCAN = dict(use_threads=False)

def key_extra(cfg: Any, store: Any) -> str:
    """Content-key part beyond the config: the bytes of the evaluation files and, with ``rl.baselines``, the
    index the baselines search (the teacher and the tools they are asked with are config reads the stage
    declares then: ``more_sections``)."""
    fcfg = cfg.filters
    h = hashlib.sha256()
    for name in fcfg.decontaminate:
        p = Path(name)
        if (why := not_a_file(p)) is not None:
            from synth.engine.config import ConfigError

            raise ConfigError(f"bad value for config key 'filters.decontaminate': {p}: {why}")
        h.update(str(p).encode())
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    if cfg.rl.baselines:  # the teacher answers each rl_pool question closed-book and from one search
        entry = store.stage_entry("index") or {}
        h.update(f"baselines {entry.get('key')}".encode())
    return h.hexdigest()[:16]


class QuestionTable(RowMapping):
    """question_id -> :class:`Question`, read from the questions table kept in Arrow and built on demand.

    A run of 10,000 questions held as Question objects took 130 MB in each process that loaded it (the
    parent twice), against 16 MB in Arrow, and a forked worker's reads of Python objects copy their pages.
    Arrow's buffers are never written, so workers share them.  The ``CACHE`` (4,096) questions used last are
    kept built: a batch's traces ask for the same few questions many times.  For a duplicated id the last row
    wins, as in a dict built from the rows."""

    def __init__(self, table: pa.Table):
        super().__init__(table, "question_id", Question.from_row)


def load_questions(store: Any) -> QuestionTable:
    """question_id -> question (see :class:`QuestionTable`)."""
    return QuestionTable(store.read("questions", hint="questions"))


class _PerQuestion:
    """What the band needs of one question: n, c, and its first rollout's harness prompt."""

    __slots__ = ("n", "c", "first", "key", "prompt", "tools", "models")

    def __init__(self) -> None:
        self.n, self.c = 0, 0
        self.first: bool | None = None  # whether sample 0 answered correctly
        self.key: tuple | None = None
        self.prompt: list[dict] | None = None
        self.tools: str | None = None
        self.models: set[str] = set()  # the teacher models whose rollouts measured the band

    def add(self, fact: "_Fact") -> None:
        self.n += 1
        self.c += int(fact.correct)
        self.models.add(sys.intern(fact.model))
        if fact.sample_index == 0:
            self.first = fact.correct
        key = (fact.sample_index, fact.trace_id)
        if fact.prompt is None or (self.key is not None and key >= self.key):
            return
        # The system prompt and the tool schemas are the same text for most questions: held once.
        self.key, self.tools = key, sys.intern(fact.tools) if fact.tools else fact.tools
        self.prompt = [{"role": m["role"], "content": sys.intern(m["content"]) if m["role"] == "system" else
                        m["content"]} for m in fact.prompt]


@dataclass(frozen=True, slots=True)
class _Fact:
    """What one trace tells its question's band: correct or not, and its harness prompt (None when the
    conversation broke before the first assistant turn: the harness is taken from another rollout)."""

    question_id: str
    trace_id: str
    sample_index: int
    correct: bool
    prompt: list[dict] | None
    tools: str | None
    model: str = ""

    @classmethod
    def of(cls, trace: Trace, correct: bool, with_prompt: bool = True) -> "_Fact":
        conv = trace.conversation
        prompt = None
        if with_prompt and (conv.problem is None or any(m.role == "assistant" for m in conv.messages)):
            prompt = prompt_messages(conv.messages) or None
        return cls(trace.question_id, trace.trace_id, trace.sample_index, bool(correct), prompt,
                   trace.tools if prompt else None, trace.teacher_model or "")


@dataclass
class _BatchOut:
    """Pass one's result for one batch: plain data, so a worker process can hand it back."""

    facts: list[_Fact]
    candidates: list[Candidate]
    verdicts: list[Verdict]
    rejects: pa.Table | list[dict]
    dropped: Counter
    counted: int = 0  # traces whose length was rendered and tokenized (not read from the cache)
    references: list[Reference] = field(default_factory=list)  # correct rollouts of rl questions
    wrong: list[Loser] = field(default_factory=list)  # sft traces that answered wrong: preference's rejected ones


class _PassOne:
    """Pass one over a batch of traces: grade, run the chain, count tokens, note the verdicts.

    The same object runs in this process or in each worker process, so the tables do not depend
    on the worker count.  ``judge(traces, grades)`` adds the LLM judge's verdicts (this process only).
    """

    def __init__(self, cfg: Any, root: str | Path):
        from synth.engine.store import Store

        self.fcfg = fcfg = cfg.filters
        # The splits whose questions may enter rl_pool, and so need a reference rollout.
        self.pooled = {Split.RL, Split.SFT} if cfg.questions.share_sft_rl else {Split.RL}
        root = Path(root)
        self.questions = load_questions(Store(root))
        self.keys = answer_keys(Store(root), fcfg.min_f1)
        self.counts = None
        tokenizer = None
        # What a kept trace's SFT rows hold (sft.context) and how their reasoning renders (sft.reasoning): the
        # length filter counts exactly those renders.
        self.context = cfg.sft.context
        self.compress, self.keep = cfg.rollout.compress_observations, cfg.rollout.keep_observations
        self.reasoning = "keep"
        if "length" in fcfg.chain:
            from synth.tokenizer.counts import TokenCounts

            from synth.tokenizer.tokens import load_tokenizer

            tokenizer = load_tokenizer(_tokenizer_path(root), chat_template=True)
            self.counts = TokenCounts(tokenizer, root)
            self.reasoning = reasoning_mode(cfg, tokenizer)
        self.fctx = FilterContext(self.questions, tokenizer=tokenizer, answer_keys=self.keys)
        self.pending: list[tuple[str, str, str | None]] = []  # (trace_id, reason, detail) of this batch's rejects
        self.runner = FilterRunner(chain_of(fcfg), on_reject=lambda trace, reason, detail: self.pending.append(
            (trace.trace_id, reason, detail)))

    def __call__(self, batch: pa.RecordBatch, judge: Any = None, flush: bool = False) -> _BatchOut:
        fcfg, fctx, questions = self.fcfg, self.fctx, self.questions
        recs = [Trace.from_row(r) for r in batch.to_pylist()]
        fctx.grades = {t.trace_id: grade(t.final_answer, questions.get(t.question_id), fcfg.min_f1,
                                         self.keys.get(t.question_id)) for t in recs}
        if judge is not None:
            judge(recs, fctx.grades)
        counted = 0
        if self.counts is not None:
            before = self.counts.computed
            fctx.token_counts = self._lengths(recs)
            counted = self.counts.computed - before
            if flush:
                self.counts.flush()
        out = _BatchOut([], [], [], [], Counter(), counted)
        for t in recs:
            self._one(t, out)
        for v in out.verdicts:
            v.n_tokens = fctx.token_counts.get(v.trace_id)
        out.rejects = self._rejects(batch, recs)
        out.dropped, self.runner.dropped = self.runner.dropped, Counter()
        fctx.measures.clear()
        fctx.token_counts = {}
        return out

    def _lengths(self, recs: list[Trace]) -> dict[str, int]:
        """trace_id -> the rendered length of its longest SFT row (one row under ``full``; under ``as_seen`` one a
        turn, each of which must fit), its reasoning rendered as ``sft.reasoning`` says; left out when the
        template cannot render one of them."""
        items, owner = [], []
        for t in recs:
            tools = json.loads(t.tools) or None
            for _, msgs in samples(sft_messages(t), self.context, self.compress, self.keep):
                items.append((rendered(msgs, self.reasoning), tools))
                owner.append(t.trace_id)
        out: dict[str, int] = {}
        failed: set[str] = set()
        for tid, n in zip(owner, self.counts.count(items)):
            if n is None:
                failed.add(tid)
            else:
                out[tid] = max(n, out.get(tid, 0))
        return {tid: n for tid, n in out.items() if tid not in failed}

    def _reasoning_tokens(self, trace: Trace) -> tuple[int | None, int | None]:
        """(tokens of the assistant turns' reasoning, tokens of all they wrote), or Nones without a tokenizer."""
        if self.counts is None:
            return None, None
        reasoning, written = [], []
        for m in trace.conversation.messages:
            if m.role != "assistant":
                continue
            reasoning.append(m.reasoning_content or "")
            written += [m.reasoning_content or "", m.text or ""]
            written += [f"{tc.name} {tc.arguments}" for tc in m.tool_calls]
        n = self.counts.count_texts([t for t in reasoning + written if t])
        texts = [t for t in reasoning if t]
        return sum(n[:len(texts)]), sum(n[len(texts):])

    def _fits(self, trace_id: str) -> bool:
        """Whether a trace fits ``filters.max_tokens`` as the length filter counted it (True when not counted)."""
        n = self.fctx.token_counts.get(trace_id)
        return n is None or "length" not in self.fcfg.chain or n <= self.fcfg.max_tokens

    def _rejects(self, batch: pa.RecordBatch, recs: list[Trace]) -> pa.Table | list[dict]:
        pending, self.pending = self.pending, []
        return reject_rows(batch, recs, pending)

    def _one(self, trace: Trace, out: _BatchOut) -> None:
        tid, qid = trace.trace_id, trace.question_id
        g = self.fctx.grades[tid]
        # Only the questions rl_pool draws from need their harness prompt: the others' facts leave it out, so
        # the parent does not hold a prompt per question of the run.
        q = self.fctx.questions.get(qid)
        out.facts.append(_Fact.of(trace, g.correct, with_prompt=q is not None and q.split in self.pooled))
        keep, reason, _ = self.runner.apply(trace, self.fctx)
        if reason == WRONG_ANSWER and trace.split == Split.SFT and self._fits(tid):
            out.wrong.append(Loser(qid, int(trace.sample_index), tid))
        if g.correct and trace.split in self.pooled and qid in self.fctx.questions:
            # rl_pool rows name their question's best correct rollout (and guide all-wrong ones by it).
            out.references.append(reference_of(trace, self.fctx.questions[qid], keep, self.fcfg.min_grounding))
        rubric = None
        if keep and trace.split != Split.SFT:
            # The chain ran (its verdicts feed the report), but only sft questions train the student.
            reason = HELD_OUT
            self.runner.reject(trace, reason, f"a question of the {trace.split} split: its traces are never SFT rows")
        elif keep:
            rubric = rubric_raw(trace, self.fctx.questions[qid])
            out.candidates.append(Candidate(tid, qid, int(trace.n_tool_calls), rubric,
                                            0.0, *self._reasoning_tokens(trace)))
        # Counted for every trace, whichever filter dropped it (the report's grounding histogram reads it).
        ungrounded = len(ungrounded_steps(trace, self.fcfg.min_grounding))
        out.verdicts.append(Verdict(trace_id=tid, question_id=qid, teacher_model=trace.teacher_model,
                                    split=trace.split, rule_correct=g.rule_correct, em=g.em, f1=g.f1, match=g.basis,
                                    judge_correct=g.judge_correct, correct=g.correct, rubric_raw=rubric, rubric=None,
                                    n_tokens=None, ungrounded_steps=ungrounded, kept=False, reason=reason))

    def close(self) -> None:
        if self.counts is not None:
            self.counts.flush()


def reasoning_mode(cfg: Any, tokenizer: Any) -> str:
    """``sft.reasoning`` resolved against DIR/tokenizer's chat template (a config error names the keys)."""
    from synth.tokenizer.chat_templates import family_of

    template = tokenizer.chat_template
    return resolve_reasoning(cfg.sft.reasoning, template, family_of(template) or "of DIR/tokenizer")


def chain_of(fcfg: FiltersConfig) -> list:
    """The configured chain; SFT keeps correct traces only and the rubric is positive-only, so correctness
    always runs, last if unlisted."""
    chain = build_chain(fcfg.chain, fcfg)
    if "correctness" not in fcfg.chain:
        chain.append(CorrectnessFilter.from_config(fcfg))
    return chain


def _tokenizer_path(root: Path) -> Path:
    """DIR/tokenizer, or a MissingInput that names the command that makes it."""
    tok_path = root / "tokenizer"
    if not tok_path.exists():
        from synth.engine.store import MissingInput

        raise MissingInput(f"tokenizer not found in {root} (run `hopforge tokenizer --out {root}` first, "
                           "or drop `length` from filters.chain)")
    return tok_path


# ---- worker processes (synth.engine.workers) -------------------------------------------------
def _pass_one_setup(cfg: Any, root: str) -> _PassOne:
    return _PassOne(cfg, root)


def _pass_one_step(one: _PassOne, batch: pa.RecordBatch) -> _BatchOut:
    return one(batch, flush=True)  # a worker's token counts are on disk when its batch is handed back


def _batch_name(i: int, batch: pa.RecordBatch) -> str:
    ids = batch.column("trace_id")
    return f"batch {i} of traces ({batch.num_rows} traces, {ids[0]} .. {ids[-1]})" if batch.num_rows else f"batch {i}"


@dataclass
class _PassOneResult:
    """What pass one gathered over every trace: each question's tally (``per_q``), the best-of-n candidates and the
    wrong answers (pass two and the preference pairs), the RL reference rollouts, the verdicts that wait for
    pass two, the correctness tally, the judge's counts and the tokens counted."""

    per_q: dict[str, "_PerQuestion"] = field(default_factory=dict)
    candidates: list[Candidate] = field(default_factory=list)
    wrong: list[Loser] = field(default_factory=list)
    references: dict[str, Reference] = field(default_factory=dict)
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    tally: Counter = field(default_factory=Counter)
    judge_counts: Counter = field(default_factory=Counter)
    counted: int = 0


def _run_pass_one(ctx: StageContext, traces: Any, total: int, workers: int, questions: Any, teacher: Any,
                  runner: FilterRunner, rejects: Any, verdict_rows: Any) -> _PassOneResult:
    """Pass one: every trace through the chain, in ``workers`` processes (or here, with the judge), batch by
    batch; final verdicts and rejects are written as they come, the candidates' verdicts kept for pass two."""
    fcfg = ctx.cfg.filters
    res = _PassOneResult()
    local: _PassOne | None = None
    try:
        batches = traces.to_batches(batch_size=BATCH_ROWS, **SCAN)
        if workers > 1:
            batches = guided_batches(batches, total, workers, most=WORKER_BATCH_ROWS)
            work = ctx.cpu_work(_pass_one_setup, (ctx.cfg, str(ctx.store.root)), _pass_one_step, _batch_name)
            outs = ctx.cpu_map(work, batches, workers)
        else:
            local = _PassOne(ctx.cfg, ctx.store.root)
            judge = None if not fcfg.judge else (
                lambda recs, grades: _judge_batch(teacher, recs, questions, grades, res.judge_counts))
            outs = (local(b, judge) for b in batches)
        with ctx.bar("filter", total, "traces") as bar:
            for out in outs:
                for fact in out.facts:
                    res.per_q.setdefault(fact.question_id, _PerQuestion()).add(fact)
                res.candidates.extend(out.candidates)
                res.wrong.extend(out.wrong)
                keep_best(res.references, out.references)
                waiting = {c.trace_id for c in out.candidates}
                for v in out.verdicts:
                    _count(res.tally, v)
                verdict_rows.write([v.to_row() for v in out.verdicts if v.trace_id not in waiting])
                res.verdicts.update((v.trace_id, v) for v in out.verdicts if v.trace_id in waiting)
                runner.dropped.update(out.dropped)
                res.counted += out.counted
                rejects.write(out.rejects)
                bar.update(len(out.verdicts))
    finally:
        if local is not None:
            local.close()
    return res


def run_filter(ctx: StageContext) -> StageResult:
    """Filter traces into ``sft`` (best-of-n) and ``rl_pool`` (difficulty band); see the module docstring."""
    fcfg = ctx.cfg.filters
    questions = load_questions(ctx.store)
    # Built (or read from the run's cache) here, before any worker starts: forked workers inherit them.
    keys = answer_keys(ctx.store, fcfg.min_f1, ctx.shared)
    traces = ctx.store.dataset("traces", hint="rollout")
    mode = ctx.cfg.sft.reasoning
    if "length" in fcfg.chain:
        from synth.tokenizer.tokens import load_tokenizer

        # A missing tokenizer, or an sft.reasoning its template cannot train, stops the stage here, before any
        # worker starts.
        mode = reasoning_mode(ctx.cfg, load_tokenizer(_tokenizer_path(ctx.store.root), chat_template=True))
    rejects = ctx.writer("rejects/filter", TRACE_REJECT_SCHEMA, row_group_rows=TRACE_ROW_GROUP)
    pending: list[tuple[str, str, str | None]] = []  # pass two's rejects of the batch at hand
    chain = chain_of(fcfg)
    runner = FilterRunner(chain, on_reject=lambda trace, reason, detail: pending.append(
        (trace.trace_id, reason, detail)))

    total = traces.count_rows()
    # The judge is a teacher call of this process, so with it every batch runs here.
    workers = 1 if fcfg.judge else ctx.cpu_workers(max(1, -(-total // 16)))
    teacher = snap = None
    if fcfg.judge or ctx.cfg.rl.baselines:
        # One teacher for the judge and the baselines, closed when the stage ends; its usage is reported.
        teacher = _teacher(ctx)
        snap = teacher.stats.snapshot()
    # A trace's verdict is final after pass one unless it is a best-of-n candidate (pass two adds its rubric and
    # whether it was kept): the others go to the table at once, as Arrow rows, so the parent holds no dict per
    # trace of a large run; the candidates' wait for pass two.
    verdict_rows = ctx.writer("filter/verdicts", VERDICT_SCHEMA)
    one = _run_pass_one(ctx, traces, total, workers, questions, teacher, runner, rejects, verdict_rows)
    per_q, candidates, wrong, references = one.per_q, one.candidates, one.wrong, one.references
    verdicts, tally, judge_counts, counted = one.verdicts, one.tally, one.judge_counts, one.counted
    if "length" in fcfg.chain:
        from synth.tokenizer.counts import compact_cache

        compact_cache(ctx.store.root)

    kept_ids = select_best(candidates, fcfg.keep_per_question)
    kept, n_rows = _pass_two(ctx, traces, candidates, kept_ids, runner, verdicts, pending, rejects)
    rejects.close()
    pairs = pair([c for c in candidates if c.trace_id in kept_ids], wrong,
                 [c for c in candidates if c.trace_id not in kept_ids])
    preference = write_preference(ctx, traces, pairs, {c.trace_id: c.rubric_raw for c in candidates})
    verdict_rows.write([v.to_row() for v in verdicts.values()])
    verdict_rows.close()
    band_report = write_rl_pool(ctx, questions, per_q, ctx.cfg.questions.share_sft_rl, ctx.cfg.rl.band_by,
                                references, lambda: _teacher(ctx), keys)
    # Every pooled question's reference, for the student band's rows and guidance (sft/rlband.py).
    write_references(ctx, references)

    extra: dict[str, Any] = {
        "chain": list(fcfg.chain),
        # Drop reasons in the order the chain can give them (the dataset card lists the funnel so).
        "reason_order": [r for f in chain for r in getattr(f, "reasons", ())],
        **band_report,
        "pass": pass_stats((p.n, p.c, p.first) for q, p in per_q.items() if q in questions),
        "correct": {"rule": tally["rule"], "combined": tally["combined"], "judge_rescued": tally["judge_rescued"]},
        # How the answer rule decided (synth.text.answers.BASES), and what the answer keys hold.
        "match": {b: tally["match:" + b] for b in BASES},
        "answers": keys.stats,
        "kept_rubric_mean": (round(sum(c.rubric_raw for c in candidates if c.trace_id in kept_ids) / kept, 6)
                             if kept else None),
        # What the sft rows hold (sft.context: one row per kept trace, or one per assistant turn) and the reasoning
        # they carry (sft.reasoning: how the length filter and training render it).
        "sft_rows": n_rows,
        "context": {"policy": ctx.cfg.sft.context, "compress_observations": ctx.cfg.rollout.compress_observations,
                    "keep_observations": ctx.cfg.rollout.keep_observations},
        "reasoning": reasoning_report([c for c in candidates if c.trace_id in kept_ids], mode),
        # DPO pairs from the same rollouts (filters/preference.py): chosen the kept trace, rejected a wrong answer
        # of its question, else a correct one with a lower rubric.
        "preference": preference,
        # Operational (not part of the tables): how the work was spread, and what the token cache saved.
        "workers": workers,
        "tokens_counted": counted,
    }
    if fcfg.judge:
        extra["judge"] = dict(judge_counts) | {k[6:]: n for k, n in tally.items() if k.startswith("judge:")}
    if teacher is not None:
        extra["teacher"] = teacher.stats.since(snap)
    idle = ""
    if ctx.cfg.questions.splits.sft == 0:
        idle = "questions.splits.sft is 0: no SFT row is asked for"
    elif not kept and band_report.get("rl_pool_rows") and not any(q.split == Split.SFT for q in questions.values()):
        # An RL-only run: its output is the pool, and an empty sft is what was asked for.
        idle = f"no question is of the sft split; rl_pool holds {band_report['rl_pool_rows']:,} rows"
    return StageResult(input=total, output=kept, dropped=dict(runner.dropped), extra=extra, idle=idle)


def reasoning_report(kept: list[Candidate], mode: str | None) -> dict[str, Any]:
    """The kept traces' reasoning: how many carry any (``traces_with_reasoning``), its tokens, and its share of the
    tokens the assistant wrote (reasoning, text and tool calls: what SFT trains, template markup aside; the sft
    stage's mask_report.json has the share of the trained tokens exactly), with the ``sft.reasoning`` mode."""
    counted = [c for c in kept if c.assistant_tokens is not None]
    reasoning = sum(c.reasoning_tokens or 0 for c in counted)
    written = sum(c.assistant_tokens or 0 for c in counted)
    return {"mode": mode, "traces": len(kept), "traces_with_reasoning": sum(1 for c in counted if c.reasoning_tokens),
            "reasoning_tokens": reasoning if counted else None, "assistant_tokens": written if counted else None,
            "share_of_assistant_tokens": round(reasoning / written, 6) if written else None}


def _teacher(ctx: StageContext) -> Any:
    """The stage's teacher client (the judge's and the baselines'), opened once, closed with the stage."""
    from synth.teacher.client import stage_teacher

    return stage_teacher(ctx)


def _judge_batch(teacher: Any, traces: list[Trace], questions: Mapping[str, Question], grades: dict,
                 counts: Counter) -> None:
    """Ask the judge about every answered trace of the batch; its verdict is added to the grade."""
    todo = [t for t in traces if t.question_id in questions and t.final_answer and t.final_answer.strip()]
    items = [(questions[t.question_id], t.final_answer) for t in todo]
    verdicts, c = run_judge(teacher, items)
    counts.update(c)
    for t, v in zip(todo, verdicts):
        grades[t.trace_id].judge_correct = v


def _pass_two(ctx: StageContext, traces: ds.Dataset, candidates: list[Candidate], kept_ids: set[str],
              runner: FilterRunner, verdicts: dict[str, Verdict], pending: list, rejects: Any) -> tuple[int, int]:
    """Write the kept survivors to ``sft`` (their rows under ``sft.context``) and reject the others as
    ``not_best``, batch by batch (``runner`` notes each reject in ``pending``); returns the kept traces and the
    rows written."""
    by_id = {c.trace_id: c for c in candidates}
    cfg = ctx.cfg
    context = (cfg.sft.context, cfg.rollout.compress_observations, cfg.rollout.keep_observations)
    group_size = Counter(c.question_id for c in candidates)
    group_kept = Counter(c.question_id for c in candidates if c.trace_id in kept_ids)
    sft = ctx.writer("sft", SFT_SCHEMA, row_group_rows=TRACE_ROW_GROUP)
    kept = n_rows = 0
    if by_id:
        survivors = traces.to_batches(filter=ds.field("trace_id").isin(pa.array(sorted(by_id), pa.string())),
                                      batch_size=BATCH_ROWS, **SCAN)
        for batch in survivors:
            rows, recs = [], [Trace.from_row(r) for r in batch.to_pylist()]
            for trace in recs:
                c = by_id[trace.trace_id]
                v = verdicts[c.trace_id]
                v.rubric = c.rubric
                if c.trace_id in kept_ids:
                    v.kept = True
                    rows.extend(sft_rows(trace, c.rubric, ctx.cfg.filters.min_grounding, *context))
                else:
                    v.reason = NOT_BEST
                    runner.reject(trace, NOT_BEST, f"rubric {c.rubric:.3f} (raw {c.rubric_raw:.3f}), "
                                  f"{c.n_tool_calls} tool calls; {group_kept[c.question_id]} of "
                                  f"{group_size[c.question_id]} correct traces kept")
            sft.write(rows)
            rejects.write(reject_rows(batch, recs, pending))  # with their batch: never all of a run's losers at once
            pending.clear()
            kept += len({r["trace_id"] for r in rows})
            n_rows += len(rows)
    sft.close()
    return kept, n_rows


def reject_rows(batch: pa.RecordBatch, recs: list[Trace], pending: list[tuple[str, str, str | None]]
                ) -> pa.Table | list[dict]:
    """A batch's rejected traces (``pending``: trace id, reason, detail) as rows of ``rejects/filter``: the
    batch's own Arrow rows, taken in the order they were rejected, with their reason and detail (no trace
    goes through Python dicts and back).  ``recs`` are the batch's records, in its row order."""
    if not pending:
        return []
    index = {t.trace_id: i for i, t in enumerate(recs)}
    names = TRACE_REJECT_SCHEMA.names[:-2]
    if not set(names) <= set(batch.schema.names):  # an older traces table: through the records
        return [_reject_row(recs[index[tid]], reason, detail) for tid, reason, detail in pending]
    taken = pa.Table.from_batches([batch.select(names)]).take(
        pa.array([index[tid] for tid, _, _ in pending], pa.int64()))
    return (taken.append_column("reason", pa.array([r for _, r, _ in pending], pa.string()))
            .append_column("detail", pa.array([d for _, _, d in pending], pa.string())))


def _reject_row(trace: Trace, reason: str, detail: str | None) -> dict:
    return {**trace.to_row(), "reason": reason, "detail": detail}


def _count(tally: Counter, v: Verdict) -> None:
    """Add one verdict to the stage's tallies: correct by the rule, in all, rescued by the judge, and how the
    judge compared with the rule where both spoke (``judge:<outcome>``)."""
    tally["rule"] += bool(v.rule_correct)
    tally["match:" + (v.match or NO_MATCH)] += 1
    tally["combined"] += bool(v.correct)
    tally["judge_rescued"] += bool(v.correct and not v.rule_correct)
    j = v.judge_correct
    if j is None:
        return
    if v.rule_correct:
        outcome = "agree_on_rule_hits" if j else "overruled_on_rule_hits"
    else:
        outcome = "rescued" if v.correct else ("agree_on_rule_misses" if not j else "ignored_no_overlap")
    tally["judge:" + outcome] += 1


__all__ = ["key_extra", "load_questions", "run_filter"]
