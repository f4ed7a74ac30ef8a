"""The ``questions`` stage: write, validate, and optionally harden and check questions.

Rounds of teacher calls run concurrently (``teacher.concurrency``) through
:meth:`Teacher.map`, which keeps input order, so the table does not depend on
concurrency.  Every source ends either in ``questions`` or in ``rejects/questions``
with a counted reason, so ``input == output + sum(dropped)``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from .answers import is_correct, mentions, normalize_answer
from .pipeline import StageContext, StageResult
from .prompting import extract_answer, extract_json, prompt_sha, render
from .questions import Source, format_request, load_sources, names_of, page_meta, parse_question
from .records import REJECT_SCHEMA, Question
from .teacher import Teacher, TeacherError, open_teacher


class _Funnel:
    """Survivors of each round, and rejects with their reasons."""

    def __init__(self) -> None:
        self.dropped: Counter[str] = Counter()
        self.rejects: list[dict] = []

    def drop(self, qid: str, source_id: str, reason: str, detail: str = "", raw: str | None = None) -> None:
        self.dropped[reason] += 1
        self.rejects.append({"record_id": qid, "source_id": source_id, "reason": reason, "detail": detail, "raw": raw})


def run_questions(ctx: StageContext) -> StageResult:
    """Walks and subgraphs in; verified questions out (see :mod:`synth.questions`)."""
    qcfg = ctx.cfg.questions
    sources = load_sources(ctx)
    teacher = open_teacher(ctx.cfg.teacher, ctx.store.root)
    snap = teacher.stats.snapshot()
    funnel = _Funnel()
    try:
        kept = _write(ctx, teacher, sources, funnel)
        if qcfg.obfuscate:
            kept = _obfuscate(ctx, teacher, kept, funnel)
        if qcfg.check_closed_book:
            kept = _check(ctx, teacher, kept, funnel, "closed_book", "too_easy", _closed_book_messages, want_correct=False)
        if qcfg.check_solvable:
            metas = page_meta(ctx.store, {p for _, q in kept for p in q.path}, ("page_id", "title", "paragraphs"))
            kept = _check(ctx, teacher, kept, funnel, "solvable", "unsolvable",
                          lambda src, q: _solvable_messages(q, metas), want_correct=True)
        if qcfg.check_shortcut:
            kept = _shortcut(ctx, kept, funnel)
    finally:
        teacher.close()
    w = ctx.writer("questions", Question.SCHEMA)
    w.write(Question.to_table([q for _, q in kept]))
    w.close()
    rw = ctx.writer("rejects/questions", REJECT_SCHEMA)
    rw.write(funnel.rejects)
    rw.close()
    stats = teacher.stats.since(snap)
    return StageResult(input=len(sources), output=len(kept), dropped=dict(funnel.dropped),
                       extra={"teacher": stats, "kinds": dict(Counter(q.kind for _, q in kept)),
                              "prompt_sha": {n: prompt_sha(n) for n in ("question", "subgraph_question")}})


def _write(ctx: StageContext, teacher: Teacher, sources: list[Source], funnel: _Funnel) -> list[tuple[Source, Question]]:
    qcfg = ctx.cfg.questions

    async def write(src: Source) -> tuple[str, Any]:
        name, messages, hint = format_request(src, qcfg)
        return name, await teacher.chat(messages, hint=hint)

    results = teacher.map(write, sources, progress=ctx.bar("write", len(sources), "questions"))
    kept, seen = [], set()
    for src, res in zip(sources, results):
        if isinstance(res, TeacherError):
            funnel.drop(src.question_id, src.source_id, "teacher_failed", res.reason)
            continue
        name, resp = res
        q, reason, detail = parse_question(src, resp.content, qcfg, ctx.cfg.teacher.model, prompt_sha(name))
        if q is None:
            funnel.drop(src.question_id, src.source_id, reason or "parse_error", detail, resp.content)
            continue
        norm = normalize_answer(q.question)
        if norm in seen:
            funnel.drop(q.question_id, src.source_id, "duplicate", "same question as an earlier one", q.question)
            continue
        seen.add(norm)
        kept.append((src, q))
    return kept


def _obfuscate(ctx: StageContext, teacher: Teacher, kept: list, funnel: _Funnel) -> list:
    """Rewrite pass: blur entity names into descriptions; the rewrite must keep every rule."""
    qcfg = ctx.cfg.questions

    async def rewrite(item: tuple[Source, Question]):
        src, q = item
        names = [{"title": e["title"], "description": e.get("description") or ""} for e in src.entities[:-1]]
        msgs = render("obfuscate", question=q.question, names=names)
        return await teacher.chat(msgs, hint={"task": "obfuscate", "source": src, "question": q.question, "seed": q.seed})

    out, seen = [], set()
    for (src, q), res in zip(kept, teacher.map(rewrite, kept, progress=ctx.bar("obfuscate", len(kept), "questions"))):
        if isinstance(res, TeacherError):
            funnel.drop(q.question_id, src.source_id, "teacher_failed", res.reason)
            continue
        obj, _ = extract_json(res.content)
        new = obj.get("question") if obj else None
        target = src.entity(q.answer) or {"title": q.answer, "aliases": q.answer_aliases}
        if not isinstance(new, str) or not new.strip():
            funnel.drop(q.question_id, src.source_id, "obfuscate_failed", "no rewritten question", res.content)
        elif any(mentions(new, n) for n in names_of(target) + q.answer_aliases):
            funnel.drop(q.question_id, src.source_id, "answer_leak", "rewrite names the answer", new)
        elif not qcfg.min_words <= len(new.split()) <= qcfg.max_words:
            funnel.drop(q.question_id, src.source_id, "length", f"rewrite has {len(new.split())} words", new)
        elif normalize_answer(new) in seen:
            funnel.drop(q.question_id, src.source_id, "duplicate", "rewrite equals an earlier question", new)
        else:
            seen.add(normalize_answer(new))
            q.question = new.strip()
            out.append((src, q))
    return out


def _closed_book_messages(src: Source, q: Question) -> list[dict]:
    return render("closed_book", question=q.question)


def _solvable_messages(q: Question, metas: dict[str, dict]) -> list[dict]:
    pages = [{"title": metas[p]["title"], "text": "\n".join(metas[p]["paragraphs"] or [])} for p in q.path if p in metas]
    return render("solvable", question=q.question, pages=pages)


def _check(ctx: StageContext, teacher: Teacher, kept: list, funnel: _Funnel, task: str, reason: str,
           make_messages: Callable[[Source, Question], list[dict]], want_correct: bool) -> list:
    """Ask the teacher to answer; keep the question when correctness equals ``want_correct``."""

    async def ask(item: tuple[Source, Question]):
        src, q = item
        hint = {"task": task, "source": src, "question": q.question, "answer": q.answer, "titles": q.titles,
                "seed": q.seed}
        return await teacher.chat(make_messages(src, q), hint=hint)

    out = []
    for (src, q), res in zip(kept, teacher.map(ask, kept, progress=ctx.bar(task, len(kept), "questions"))):
        if isinstance(res, TeacherError):
            funnel.drop(q.question_id, src.source_id, "teacher_failed", res.reason)
            continue
        answer = extract_answer(res.content)
        correct = is_correct(answer, [q.answer, *q.answer_aliases])
        if correct != want_correct:
            funnel.drop(q.question_id, src.source_id, reason, f"{task} answer {answer!r}", res.content)
        else:
            out.append((src, q))
    return out


def _shortcut(ctx: StageContext, kept: list, funnel: _Funnel) -> list:
    """LiteResearcher's shortcut filter: one search for the question must not surface the answer page."""
    from .search import SearchIndex
    from .tools import is_shortcut

    index = SearchIndex.open(ctx.store.path("index"))
    k = ctx.cfg.questions.shortcut_k
    out = []
    with ctx.bar("shortcut", len(kept), "questions") as bar:
        for src, q in kept:
            if is_shortcut(index, q.question, q.answer_page_id, k):
                funnel.drop(q.question_id, src.source_id, "shortcut", f"answer page in top {k}", q.question)
            else:
                out.append((src, q))
            bar.update(1)
    return out
