"""The write round of the questions stage: ask the teacher, parse, validate, and repair once.

Every source gets one question request.  The reply is parsed
(:func:`~synth.questions.sources.parse_question`) and the parsed question validated
(:class:`~synth.questions.validate.Validator`).  A question that fails a check a rewrite can
fix (:func:`~synth.questions.validate.repairable`) gets ONE repair request (the ``repair``
Task): the original request, the rejected reply, the reason and its rule.  The rewrite
goes through the same parsing and checks and is dropped only if it still fails, under the
reason it fails with then.  Nothing is retried twice, so a teacher that never fixes its
question costs one extra call per rejected question, no more.

:class:`Repairs` counts, per first reason, the repairs attempted and those that passed.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from synth.engine.records import Question, Reject
from synth.engine.stage import FailedItem, failed_item
from synth.questions.sources import parse_question
from synth.questions.validate import RULES, Failure, Validator, repairable
from synth.teacher.client import Teacher, TeacherError
from synth.teacher.tasks import REPAIR, CorpusView, Source, Task, question_request


class Funnel:
    """Rejects with their reasons, and sources whose teacher call failed (every source ends kept, dropped
    or failed, once).  A failed source is no decision: it is not a reject, and the next run retries it."""

    def __init__(self) -> None:
        self.dropped: Counter[str] = Counter()
        self.rejects: list[Reject] = []
        self.failed: Counter[str] = Counter()
        self.failed_items: list[FailedItem] = []

    def fail(self, qid: str, err: TeacherError, step: str) -> None:
        """Count one source whose teacher call (at ``step``) failed for good."""
        self.failed[err.reason] += 1
        self.failed_items.append(failed_item(qid, err.reason, f"{step}: {err.detail}" if err.detail else step))

    def drop(self, qid: str, source_id: str, reason: str, detail: str = "", raw: str | None = None) -> None:
        """Count one drop and keep its record for ``rejects/questions``."""
        self.dropped[reason] += 1
        self.rejects.append(Reject(qid, source_id, reason, detail, raw))


class Repairs:
    """Repairs attempted and repaired, per the reason that asked for them."""

    def __init__(self) -> None:
        self.attempted: Counter[str] = Counter()
        self.repaired: Counter[str] = Counter()

    def as_dict(self) -> dict[str, dict[str, int]]:
        """``{reason: {"attempted": n, "repaired": m}}``."""
        return {r: {"attempted": n, "repaired": self.repaired[r]} for r, n in sorted(self.attempted.items())}


def read_reply(src: Source, reply: Any, task: Task, ctx, validator: Validator) -> tuple[Question | None, Failure | None]:
    """The reply parsed and validated: ``(question, None)`` or ``(None, failure)``."""
    served = getattr(reply, "model", "") or ctx.cfg.teacher.model  # the model the endpoint says answered
    q, reason, detail = parse_question(src, reply, ctx.cfg.questions, served, task)
    if q is None:
        return None, Failure(reason or "parse_error", detail)
    failure = validator.check(q)
    return (q, None) if failure is None else (None, failure)


def write_questions(ctx, teacher: Teacher, sources: list[Source], funnel: Funnel, validator: Validator,
                    repairs: Repairs, bar=None, corpus: CorpusView | None = None) -> list[tuple[Source, Question]]:
    """One question per source, validated and repaired once where it can be; kept in source order.
    ``corpus`` is what the oracle's writer may read of the corpus (real teachers read the prompt only)."""
    qcfg = ctx.cfg.questions

    async def write(src: Source):
        task, messages, hint = question_request(src, qcfg, corpus)
        return task, messages, await teacher.chat(messages, hint=hint)

    kept: dict[int, Question] = {}
    pending = []
    for i, (src, res) in enumerate(zip(sources, teacher.map(write, sources, progress=bar))):
        if isinstance(res, TeacherError):
            funnel.fail(src.question_id, res, "write")
            continue
        task, messages, resp = res
        q, failure = read_reply(src, resp, task, ctx, validator)
        if q is not None:
            kept[i] = q
        elif qcfg.repair and repairable(src, failure):
            pending.append((i, src, task, messages, resp.content, failure))
        else:
            funnel.drop(src.question_id, src.source_id, failure.reason, failure.detail, resp.content)

    async def repair(item):
        _, src, task, messages, raw, failure = item
        msgs = REPAIR.format_input(request=messages[-1]["content"], previous=raw or "", reason=failure.reason,
                                   rule=RULES[failure.reason], detail=failure.detail)
        hint = REPAIR.hint(source=src, seed=src.seed, reason=failure.reason, hop=failure.hop, detail=failure.detail,
                           min_hops=qcfg.min_subgraph_hops, max_words=qcfg.max_words, corpus=corpus)
        return await teacher.chat(msgs, hint=hint)

    for item, res in zip(pending, teacher.map(repair, pending)):
        i, src, task, _, raw, first = item
        repairs.attempted[first.reason] += 1
        if isinstance(res, TeacherError):
            funnel.fail(src.question_id, res, f"repair of {first.reason}")
            continue
        q, failure = read_reply(src, res, task, ctx, validator)
        if q is None:
            funnel.drop(src.question_id, src.source_id, failure.reason, f"after repair: {failure.detail}", res.content)
            continue
        repairs.repaired[first.reason] += 1
        kept[i] = q
    return [(sources[i], kept[i]) for i in sorted(kept)]


__all__ = ["Funnel", "Repairs", "read_reply", "write_questions"]
