"""The ``questions`` stage: write, validate, and optionally harden and check questions.

Each shard writes its questions, validates them and repairs the failures once
(:mod:`synth.questions.write`, :mod:`synth.questions.validate`), then runs the optional
checks.  The report's extras say what the validators cost (``validators``), the repairs
attempted and passed per reason (``repairs``), and how varied the phrasing is
(``phrasing``, :mod:`synth.questions.skeletons`).

The stage is sharded (``questions.shard_size`` sources a shard): each shard runs its
rounds of teacher calls concurrently through :meth:`Teacher.map`, which keeps input
order.  Its validators are CPU-bound Python, so the shards run in ``runner.cpu_workers``
worker processes (``cpu_shards`` in the stage table; Dask workers under the flow), each
process with 1/N of ``teacher.concurrency``, ``rpm`` and ``tpm``, so the limits stay global.
Duplicates are removed across shards at the end, the first in source order kept, so
the table depends on neither concurrency nor sharding.  Every source ends either in
``questions`` or in ``rejects/questions`` with a counted reason.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import pyarrow.parquet as pq

from synth.text.answers import is_correct, mentions, normalize_answer
from synth.engine.stage import Shards, ShardSummary, StageContext, StageResult, summary_failed_items
from synth.text.question_text import leaked
from synth.teacher.tasks import CLOSED_BOOK, OBFUSCATE, QUESTION, REPAIR, SOLVABLE, SUBGRAPH_QUESTION, Source, Task
from synth.questions.config import search_depth
from synth.decontam.tally import Tally, merge as merge_tallies, report as decontam_report
from synth.questions.decontam import Screen
from synth.questions.depth import Depth, by_adversary, summary as depth_summary
from synth.questions.links import LinkView, ShardCorpus, load_graph
from synth.questions.route import RouteStats, Router
from synth.questions.style import depth_by_source, style as question_style
from synth.questions.skeletons import count_skeletons, vocabulary
from synth.questions.sources import load_sources, page_meta
from synth.questions.validate import Validator
from synth.questions.write import Funnel, Repairs, write_questions
from synth.engine.records import REJECT_SCHEMA, Question, Reject
from synth.engine.store import MissingInput, write_parquet_atomic
from synth.teacher.client import Teacher, TeacherError, merged_usage, shard_usage, stage_teacher


REROUTE_BUDGET = 8  # the answer cap's second routing pass: its clue-check budget, as a multiple of route_budget


def _sources(ctx: StageContext) -> list[Source]:
    # Loaded once per process and stage run; every shard slices it.
    return ctx.shared("sources", lambda: load_sources(ctx))


def _screen(ctx: StageContext) -> Screen | None:
    # The benchmark index and its verdict on every source, built once per process and stage run.
    return ctx.shared("screen", lambda: Screen.open(ctx, _sources(ctx)))


def plan(ctx: StageContext) -> list[list[int]]:
    """Shards of ``questions.shard_size`` sources: ``[start, end)`` ranges."""
    n, size = len(_sources(ctx)), ctx.cfg.questions.shard_size
    return [[a, min(a + size, n)] for a in range(0, n, size)]


def _index(ctx: StageContext):
    from synth.tools.search import SearchIndex

    return ctx.resource("index", lambda: SearchIndex.open(ctx.store.path("index")))


def _dense(ctx: StageContext):
    """The dense adversary's page vectors and query model, once per process (None: no adversary is dense)."""
    if "dense" not in ctx.cfg.questions.adversaries:
        return None
    if not ctx.store.exists("embed"):
        raise MissingInput(f"the dense adversary (questions.adversaries) searches the page vectors, which are not "
                           f"in {ctx.store.root} (run `hopforge embed --out {ctx.store.root}` first)")
    from synth.tools.dense import open_dense

    return ctx.shared("dense", lambda: open_dense(ctx.store, ctx.cfg.tools.dense))


def _validator(ctx: StageContext, sources: list[Source]) -> Validator:
    """The shard's validator: the link view of its pages, and the index when shortcut checks are on."""
    t0, c0 = time.perf_counter(), time.thread_time()
    graph = ctx.resource("graph", lambda: load_graph(ctx.store))
    pages = {e["page_id"] for s in sources for e in s.entities}
    backward = {e["page_id"] for s in sources if s.kind == "subgraph" for e in s.entities}
    links = LinkView.open(ctx.store, graph, pages, backward)
    qcfg = ctx.cfg.questions
    index = _index(ctx) if ctx.store.exists("index") else None
    v = Validator(links, index, search_depth(qcfg, ctx.cfg.tools), qcfg.min_effective_depth, qcfg.check_shortcut,
                  qcfg.adversaries, _dense(ctx) if index is not None else None)
    v.seconds += time.perf_counter() - t0  # loading what the checks read is part of their cost
    v.cpu_seconds += time.thread_time() - c0
    return v


def _corpus(ctx: StageContext, validator: Validator) -> ShardCorpus | None:
    """What the oracle's writer may read of the corpus: the shard's link view and the index (None
    without an index: the oracle then declines every question; real teachers read only the prompt)."""
    if not ctx.store.exists("index"):
        return None
    return ShardCorpus(validator.links, _index(ctx), search_depth(ctx.cfg.questions, ctx.cfg.tools),
                       validator.depth.adversaries, ctx.cfg.questions.min_effective_depth, ctx.cfg.questions.facts_only)


@dataclass(frozen=True)
class QuestionsShard(ShardSummary):
    """What one shard of the questions stage did, for :func:`finish`: its funnel, its decontamination tally,
    repairs, validator costs, the depths it measured (``[nominal, effective, by_adversary]`` of every question
    checked; ``kept_adversaries`` of the kept ones), and its teacher's usage."""

    input: int = 0
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    failed_items: list[dict] = field(default_factory=list)
    decontamination: dict | None = None
    repairs: dict[str, dict[str, int]] = field(default_factory=dict)
    validators: dict = field(default_factory=dict)
    depths: list[list] = field(default_factory=list)
    kept_adversaries: dict[str, dict] = field(default_factory=dict)
    teacher: dict | None = None
    paid_calls: int = 0
    routing: dict = field(default_factory=dict)


def run_shard(ctx: StageContext, i: int, span: list[int]) -> QuestionsShard:
    """Write, validate (repairing once) and check the questions of one shard; its rows go to shard parts."""
    sources = _sources(ctx)[span[0]:span[1]]
    n_in = len(sources)
    teacher = stage_teacher(ctx)
    funnel, repairs, tally = Funnel(), Repairs(), Tally()
    screen = _screen(ctx)
    if screen is not None:  # benchmark paths get no question: no teacher call is spent on them
        sources = screen.drop_sources(sources, span[0], funnel, tally)
    bar = ctx.shared_bar("write", len(_sources(ctx)), "questions")
    bar.update(n_in - len(sources))  # the screened sources are done: they get no question
    kept, validator, routing = _questions(ctx, teacher, sources, funnel, repairs, tally, screen, bar)
    write_parquet_atomic(Question.to_table([q for _, q in kept]), ctx.shard_out("questions", i))
    write_parquet_atomic(Reject.to_table(funnel.rejects),
                         ctx.shard_out("rejects/questions", i))
    return _summary(n_in, kept, funnel, tally, repairs, validator, routing, teacher)


def _summary(n_in: int, kept: list, funnel: Funnel, tally: Tally, repairs: Repairs, validator: Validator,
             routing: RouteStats, teacher: Teacher) -> QuestionsShard:
    return QuestionsShard(
        input=n_in, kept=len(kept), dropped=dict(funnel.dropped), failed=dict(funnel.failed),
        decontamination=tally.as_dict(), failed_items=[f.as_dict() for f in funnel.failed_items],
        repairs=repairs.as_dict(), validators=validator.stats(),
        depths=[[d.nominal, d.effective, d.by_adversary] for d in validator.depths],
        kept_adversaries={q.question_id: validator.depth_of[q.question_id].by_adversary
                          for _, q in kept if q.question_id in validator.depth_of},
        routing=routing.as_dict(),
        **shard_usage(teacher))


def _questions(ctx: StageContext, teacher: Teacher, sources: list[Source], funnel: Funnel, repairs: Repairs,
               tally: Tally, screen: Screen | None, bar, exclude: frozenset[str] | None = None
               ) -> tuple[list, Validator, RouteStats]:
    """Route, write, validate and check the questions of ``sources``.  ``exclude`` set (the second pass of
    :func:`_reroute`): only the walks that have a route ending on none of those pages are written."""
    qcfg = ctx.cfg.questions
    validator = _validator(ctx, sources)
    corpus = _corpus(ctx, validator)
    routing = RouteStats()
    if qcfg.route and corpus is not None:
        walked = {s.source_id: s for s in sources}
        # The second pass looks further (REROUTE_BUDGET times the budget): its walks are the ones whose first
        # route ended where many did, and it may end only on a named entity no longer at the cap.
        budget = qcfg.route_budget * (REROUTE_BUDGET if exclude is not None else 1)
        sources, routing = _route(sources, corpus, budget, ctx.cfg.walk.max_in_degree, exclude)
        if screen is not None:  # a re-routed walk is screened again: its new path may retrace a benchmark
            moved = [s for s in sources if s is not walked.get(s.source_id)]
            kept_moved = {id(s) for s in screen.drop_routed(moved, funnel, tally)}
            bar.update(len(moved) - len(kept_moved))
            sources = [s for s in sources if s is walked.get(s.source_id) or id(s) in kept_moved]
    elif exclude is not None:
        sources = []
    kept = write_questions(ctx, teacher, sources, funnel, validator, repairs, bar, corpus)
    if qcfg.obfuscate:
        kept = _obfuscate(ctx, teacher, kept, funnel, validator)
    if screen is not None:  # the final text, before the checks that ask the teacher again
        kept = screen.drop_texts(kept, funnel, tally)
    if qcfg.check_closed_book:
        kept = _check(ctx, teacher, kept, funnel, CLOSED_BOOK, "too_easy", _closed_book_messages, want_correct=False)
    if qcfg.check_solvable:
        metas = page_meta(ctx.store, {p for _, q in kept for p in q.path}, ("page_id", "title", "paragraphs"))
        kept = _check(ctx, teacher, kept, funnel, SOLVABLE, "unsolvable",
                      lambda src, q: _solvable_messages(q, metas), want_correct=True)
    if qcfg.check_shortcut:
        kept = _shortcut(ctx, kept, funnel)
    return kept, validator, routing


def finish(ctx: StageContext, summaries: list[QuestionsShard]) -> StageResult:
    """Drop duplicates across shards (the first one in source order wins) and write the tables."""
    dropped: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for s in summaries:
        dropped.update(s.dropped)
        failed.update(s.failed)
    rejects = [Reject.from_row(r) for p in ctx.shard_parts("rejects/questions") for r in pq.read_table(p).to_pylist()]
    kept: list[Question] = []
    seen: set[str] = set()
    for p in ctx.shard_parts("questions"):
        for q in map(Question.from_row, pq.read_table(p).to_pylist()):
            norm = normalize_answer(q.question)
            if norm in seen:
                dropped["duplicate"] += 1
                rejects.append(Reject(q.question_id, q.source_id, "duplicate", "same question as an earlier one",
                                      q.question))
                continue
            seen.add(norm)
            kept.append(q)
    # A shard drops in the order it decides (first drafts, then repairs), so the rows go in source order: the
    # table (and the explorer, which lists it as written) is then the same for any questions.shard_size.
    at = {s.question_id: i for i, s in enumerate(_sources(ctx))}
    cap = ctx.cfg.walk.max_answer_repeats
    kept = _cap_answers(kept, at, cap, dropped, rejects)
    rerouted: dict = {}
    if ctx.cfg.questions.route and cap and dropped.get("answer_repeat"):
        second, rerouted = _reroute(ctx, kept, rejects, at, cap, dropped, seen)
        if second is not None:
            summaries = [*summaries, second]
            kept.sort(key=lambda q: at.get(q.question_id, len(at)))
    rejects.sort(key=lambda r: at.get(r.record_id, len(at)))
    w = ctx.writer("questions", Question.SCHEMA)
    w.write(Question.to_table(kept))
    w.close()
    rw = ctx.writer("rejects/questions", REJECT_SCHEMA)
    rw.write(Reject.to_table(rejects))
    rw.close()
    n_in = sum(s.input for s in summaries)
    extra = {"kinds": dict(Counter(q.kind for q in kept)), "shards": len(summaries),
             "prompt_sha": {t.name: t.sha for t in (QUESTION, SUBGRAPH_QUESTION, REPAIR)},
             "repairs": _merged_repairs(summaries), "validators": _merged_validators(summaries),
             "routing": {**_merged_routing(summaries), "answer_repeat_rerouted": rerouted},
             "style": _style(ctx, kept),
             "phrasing": _phrasing(ctx, kept), "depth": _depth_report(kept, summaries, ctx.cfg.questions.adversaries),
             **merged_usage(summaries, ctx.cfg.teacher.price_per_mtok)}
    screen = _screen(ctx)
    if screen is not None:
        extra["decontamination"] = decontam_report(screen.files(), merge_tallies([s.decontamination for s in summaries]))
    return StageResult(input=n_in, output=len(kept), dropped=dict(dropped), extra=extra, failed=dict(failed),
                       failed_items=summary_failed_items(summaries))


def _cap_answers(kept: list[Question], at: dict[str, int], cap: int | None, dropped: Counter,
                 rejects: list[Reject]) -> list[Question]:
    """``kept`` less the questions whose answer page already answers ``cap`` earlier ones, in source order
    (``answer_repeat``): the walks stage caps each walk's last page at ``walk.max_answer_repeats``, and routing
    moves a walk's answer, often onto the few pages many routes can clue (a star: "Sun"), which a student would
    learn to guess.  Decided in source order, so it does not depend on the shards."""
    if not cap:
        return kept
    count: Counter[str] = Counter()
    over: set[str] = set()
    for q in sorted(kept, key=lambda q: at.get(q.question_id, len(at))):
        if count[q.answer_page_id] >= cap:
            over.add(q.question_id)
            dropped["answer_repeat"] += 1
            rejects.append(Reject(q.question_id, q.source_id, "answer_repeat",
                                  f"its answer {q.answer!r} already answers {cap} earlier questions "
                                  "(walk.max_answer_repeats)", q.question))
        else:
            count[q.answer_page_id] += 1
    return [q for q in kept if q.question_id not in over]


def _reroute(ctx: StageContext, kept: list[Question], rejects: list[Reject], at: dict[str, int], cap: int,
             dropped: Counter, seen: set[str]) -> tuple[QuestionsShard | None, dict]:
    """A second pass for the walks that :func:`_cap_answers` dropped (``answer_repeat``): each is routed again
    with the answers that are at the cap excluded as its last page, to end on a named entity or not at all (the
    benchmarks' answers), and written, validated and checked as in a shard; its question (same id) is kept if
    its new answer is still under the cap, counted in source order
    after the first pass's questions.  The cap spreads the answers instead of dropping the walks routing
    crowded onto a few pages (a star, "Sun").  It runs once, after every shard, in source order, so it depends
    on no shard layout; a walk it cannot place keeps its ``answer_repeat`` reject.  Returns the pass's summary
    (its teacher calls and depths go in the stage's report) and its counts."""
    dropped_ids = {r.record_id for r in rejects if r.reason == "answer_repeat"}
    sources = [s for s in _sources(ctx) if s.kind == "walk" and s.question_id in dropped_ids]
    if not sources:
        return None, {}
    count = Counter(q.answer_page_id for q in kept)
    full = frozenset(p for p, n in count.items() if n >= cap)
    teacher = stage_teacher(ctx)
    funnel, repairs, tally = Funnel(), Repairs(), Tally()
    bar = ctx.shared_bar("reroute", len(sources), "questions")
    second, validator, routing = _questions(ctx, teacher, sources, funnel, repairs, tally, _screen(ctx), bar, full)
    placed: set[str] = set()
    for _, q in sorted(second, key=lambda sq: at.get(sq[1].question_id, len(at))):
        norm = normalize_answer(q.question)
        if count[q.answer_page_id] < cap and norm not in seen:
            seen.add(norm)
            count[q.answer_page_id] += 1
            placed.add(q.question_id)
            kept.append(q)
    rejects[:] = [r for r in rejects if not (r.reason == "answer_repeat" and r.record_id in placed)]
    dropped["answer_repeat"] -= len(placed)
    if not dropped["answer_repeat"]:
        del dropped["answer_repeat"]
    # Its routing is reported apart (the walks were counted once by the shards that first routed them).
    summary = _summary(0, [sq for sq in second if sq[1].question_id in placed], funnel, tally, repairs, validator,
                       RouteStats(), teacher)
    return summary, {"walks": len(sources), "routed": routing.walked + routing.rerouted,
                     "clue_checks": routing.clue_checks, "written": len(second), "kept": len(placed)}


def _depth_report(kept: list[Question], summaries: list[QuestionsShard], adversaries: list[str]) -> dict:
    """Effective against nominal depth: of the questions kept, and of every question the validators
    checked (repairs included), which shows what the ``enterable_hop`` check removed; and per adversary
    (:func:`synth.questions.depth.by_adversary`), the questions its searches entered and the hops they skip."""
    measured = [(len(q.hops), q.effective_depth) for q in kept if q.effective_depth is not None]
    checked = [d for s in summaries for d in s.depths or []]
    kept_by = {qid: by for s in summaries for qid, by in (s.kept_adversaries or {}).items()}
    return {"kept": depth_summary(measured), "checked": depth_summary([(d[0], d[1]) for d in checked]),
            "by_source": depth_by_source(kept),
            "adversaries": {
                "names": list(adversaries),
                "checked": by_adversary([Depth(d[0], d[1], None, d[2]) for d in checked]),
                "kept": by_adversary([Depth(len(q.hops), q.effective_depth, None, kept_by[q.question_id])
                                      for q in kept if q.question_id in kept_by])}}



def _style(ctx: StageContext, kept: list[Question]) -> dict:
    """:func:`synth.questions.style.style` of the kept questions, their answer pages' leads read once."""
    leads = page_meta(ctx.store, {q.answer_page_id for q in kept}, ("page_id", "paragraphs"))
    return question_style(kept, {p: ((m["paragraphs"] or [""])[0] or "")[:400] for p, m in leads.items()})


def _merged_repairs(summaries: list[QuestionsShard]) -> dict[str, dict[str, int]]:
    out: dict[str, Counter] = {}
    for s in summaries:
        for reason, counts in (s.repairs or {}).items():
            out.setdefault(reason, Counter()).update(counts)
    return {r: dict(c) for r, c in sorted(out.items())}


def _merged_validators(summaries: list[QuestionsShard]) -> dict:
    total: Counter = Counter()
    for s in summaries:
        total.update(s.validators or {})
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in total.items()}


def _phrasing(ctx: StageContext, kept: list[Question]) -> dict:
    """Distinct sentence skeletons of the kept questions (:mod:`synth.questions.skeletons`)."""
    by_id = {s.question_id: s for s in _sources(ctx)}
    items = []
    for q in kept:
        src = by_id.get(q.question_id)
        if src is not None:
            texts = [e["title"] for e in src.entities] + [e.get("description") for e in src.entities]
            items.append((q.question, vocabulary(texts + [l.paragraph for l in src.links]), q.titles))
    return count_skeletons(items)


SHARDS = Shards(plan=plan, run=run_shard, finish=finish, summary=QuestionsShard)


def _route(sources: list[Source], corpus: ShardCorpus, budget: int, max_in_degree: int | None,
           exclude: frozenset[str] | None = None) -> tuple[list[Source], RouteStats]:
    """Walks routed so that every hop can be clued (:mod:`synth.questions.route`); a walk with no such route
    within ``budget`` clue checks is written as walked (counted ``unroutable`` in the report's ``routing``).
    With ``exclude`` (:func:`_reroute`), a walk is routed to end on none of those pages, and one with no such
    route is left out."""
    router = Router(corpus, budget, max_in_degree=max_in_degree)
    out = []
    for src in sources:
        if src.kind != "walk":
            out.append(src)
            continue
        routed = router.route(src, exclude or frozenset(), named_only=exclude is not None)
        if exclude is not None:
            if routed is not None:
                out.append(routed)
            continue
        # A walk with no route the oracle's clue checks accept goes to the teacher as walked: another teacher
        # may still clue it, or say which hop has no clue (no_clue).
        out.append(routed or src)
    return out, router.stats


def _merged_routing(summaries: list[QuestionsShard]) -> dict:
    total: Counter = Counter()
    by_hop: Counter = Counter()
    for s in summaries:
        r = dict(s.routing or {})
        by_hop.update(r.pop("rerouted_from_hop", {}) or {})
        total.update(r)
    return {**dict(total), "rerouted_from_hop": dict(sorted(by_hop.items(), key=lambda kv: int(kv[0])))}


def _obfuscate(ctx: StageContext, teacher: Teacher, kept: list, funnel: Funnel, validator: Validator) -> list:
    """Rewrite pass: blur entity names into descriptions; the rewrite must keep every rule."""
    qcfg = ctx.cfg.questions

    async def rewrite(item: tuple[Source, Question]):
        src, q = item
        names = [{"title": e["title"], "description": e.get("description") or ""} for e in src.entities[:-1]]
        msgs = OBFUSCATE.format_input(question=q.question, names=names)
        return await teacher.chat(msgs, hint=OBFUSCATE.hint(source=src, question=q.question, seed=q.seed))

    out = []
    for (src, q), res in zip(kept, teacher.map(rewrite, kept)):
        if isinstance(res, TeacherError):
            funnel.fail(q.question_id, res, "obfuscate")
            continue
        parsed = OBFUSCATE.format_output(res)  # the whole response: a reply cut at max_tokens is `truncated`
        new = parsed.value["question"] if parsed.value else None
        target = src.entity(q.answer) or {"title": q.answer, "aliases": q.answer_aliases}
        if parsed.reason == "truncated":
            funnel.drop(q.question_id, src.source_id, "truncated", f"obfuscate: {parsed.detail}", res.content)
        elif not isinstance(new, str) or not new.strip():
            funnel.drop(q.question_id, src.source_id, "obfuscate_failed", "no rewritten question", res.content)
        elif new.strip() == q.question:
            funnel.drop(q.question_id, src.source_id, "obfuscate_failed", "the rewrite changed nothing", new)
        elif mentions(new, q.titles[0]):
            funnel.drop(q.question_id, src.source_id, "obfuscate_failed", "the rewrite still names the start "
                        f"{q.titles[0]!r}", new)
        elif leaked(new, target, q.answer_aliases, named=[q.titles[0]]):
            funnel.drop(q.question_id, src.source_id, "answer_leak", "rewrite names the answer", new)
        elif not qcfg.min_words <= len(new.split()) <= qcfg.max_words:
            funnel.drop(q.question_id, src.source_id, "length", f"rewrite has {len(new.split())} words", new)
        else:
            q.question = new.strip()
            failure = validator.check(q)  # a rewrite must pass every check the question passed
            if failure is None:
                out.append((src, q))
            else:
                funnel.drop(q.question_id, src.source_id, failure.reason, f"rewrite: {failure.detail}", new)
    return out


def _closed_book_messages(src: Source, q: Question) -> list[dict]:
    return CLOSED_BOOK.format_input(question=q.question)


def _solvable_messages(q: Question, metas: dict[str, dict]) -> list[dict]:
    pages = [{"title": metas[p]["title"], "text": "\n".join(metas[p]["paragraphs"] or [])} for p in q.path if p in metas]
    return SOLVABLE.format_input(question=q.question, pages=pages)


def _check(ctx: StageContext, teacher: Teacher, kept: list, funnel: Funnel, task: Task, reason: str,
           make_messages: Callable[[Source, Question], list[dict]], want_correct: bool) -> list:
    """Ask the teacher to answer; keep the question when correctness equals ``want_correct``."""

    async def ask(item: tuple[Source, Question]):
        src, q = item
        hint = task.hint(answer=q.answer, titles=tuple(q.titles))
        return await teacher.chat(make_messages(src, q), hint=hint)

    out = []
    for (src, q), res in zip(kept, teacher.map(ask, kept)):
        if isinstance(res, TeacherError):
            funnel.fail(q.question_id, res, task.name)
            continue
        parsed = task.format_output(res)
        if parsed.reason == "truncated":  # cut at max_tokens: neither answered nor unanswerable
            funnel.drop(q.question_id, src.source_id, "truncated", f"{task.name}: {parsed.detail}", res.content)
            continue
        answer = parsed.value
        correct = is_correct(answer, [q.answer, *q.answer_aliases])
        if correct != want_correct:
            funnel.drop(q.question_id, src.source_id, reason, f"{task.name} answer {answer!r}", res.content)
        else:
            out.append((src, q))
    return out


def _shortcut(ctx: StageContext, kept: list, funnel: Funnel) -> list:
    """LiteResearcher's shortcut filter: one search for the question must not surface the answer page."""
    from synth.tools.toolbox import is_shortcut

    index = _index(ctx)
    k = search_depth(ctx.cfg.questions, ctx.cfg.tools)
    out = []
    for src, q in kept:
        if is_shortcut(index, q.question, q.answer_page_id, k):
            funnel.drop(q.question_id, src.source_id, "shortcut", f"answer page in top {k}", q.question)
        else:
            out.append((src, q))
    return out
