"""The correctness filter (reason ``wrong_answer``) and the optional LLM judge.

The rule: a trace's ``final_answer`` is correct when, after SQuAD/HotpotQA
normalisation, it equals the question's answer or one of its aliases, or its token F1
against the best of them reaches ``filters.min_f1`` (:mod:`synth.text.answers`).

The judge (``filters.judge``) asks the teacher, through ``synth/teacher/prompts/judge.jinja2``,
whether the answer names the same thing as the gold.  It can only *add* a verdict:

    correct = rule_correct or (judge_correct is True and f1 > 0)

so a rule match is never overturned, and the judge rescues a rule miss only when the
answer shares at least one normalised word with the gold (F1 > 0) -- a paraphrase or
a longer form ("Bill Clinton" for "William Jefferson Clinton" shares one), never an
unrelated string, which keeps a lenient or confused judge from admitting guesses.
Both verdicts are recorded (``filter/verdicts``: ``rule_correct``, ``f1``,
``judge_correct``, ``correct``); a judge call that fails or cannot be parsed leaves
``judge_correct`` null and the rule stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from synth.engine.records import Question, Trace
from synth.text.answers import best_match

from filters.base import BaseFilter, FilterContext, Verdict, register


@dataclass(slots=True)
class Grade:
    """Correctness of one trace: the rule's verdict, its F1, and the judge's (None: not asked / failed)."""

    rule_correct: bool
    em: bool
    f1: float
    judge_correct: bool | None = None

    @property
    def correct(self) -> bool:
        """The combined verdict (see the module docstring)."""
        return combine(self.rule_correct, self.f1, self.judge_correct)


def combine(rule_correct: bool, f1: float, judge_correct: bool | None) -> bool:
    """``rule_correct or (judge_correct is True and f1 > 0)``: the judge only adds."""
    return bool(rule_correct or (judge_correct is True and f1 > 0))


def golds(question: Question) -> list[str]:
    """The answer and its aliases (empty ones left out)."""
    return question.golds


def grade(prediction: str | None, question: Question | None, min_f1: float) -> Grade:
    """The rule's grade of ``prediction`` against ``question``'s answer and aliases."""
    if question is None:
        return Grade(False, False, 0.0)
    return grade_answer(prediction, golds(question), min_f1)


def grade_answer(prediction: str | None, gold_answers: Iterable[str], min_f1: float) -> Grade:
    """The rule's grade of ``prediction`` against gold answers: exact match after normalisation, or
    token F1 against the best of them ``>= min_f1``.  The one matching rule of the filter and of the
    RL reward (:mod:`filters.reward`); an empty prediction is wrong."""
    if prediction is None or not prediction.strip():
        return Grade(False, False, 0.0)
    em, f1 = best_match(prediction, [g for g in gold_answers if g])
    return Grade(bool(em or f1 >= min_f1), bool(em), float(f1))


# ---- the judge ----------------------------------------------------------------------------

# The judge's Task is imported where it is used: the answer matching above is also the RL reward's
# (filters/reward.py), which verl's workers load, and it needs none of the teacher's machinery.

def judge_messages(question: Question, prediction: str) -> list[dict]:
    """The judge prompt for one answer."""
    from synth.teacher.tasks import JUDGE

    aliases = [a for a in (question.answer_aliases or []) if a]
    return JUDGE.format_input(question=question.question, answer=question.answer, aliases=aliases,
                              prediction=prediction)


def parse_judge(text: str | None) -> bool | None:
    """The judge's verdict from its reply (``{"correct": true|false}``); None when it cannot be read."""
    from synth.teacher.tasks import JUDGE

    return JUDGE.format_output(text).value


def run_judge(teacher: Any, items: list[tuple[Question, str]], progress: Any = None) -> tuple[list[bool | None], dict]:
    """Judge ``(question, prediction)`` pairs through ``teacher.map``; returns verdicts and counts.

    The counts say how many calls ``failed`` (teacher error) or were ``unparsed``.
    """
    from synth.teacher.client import TeacherError
    from synth.teacher.tasks import JUDGE

    async def ask(item: tuple[Question, str]):
        q, pred = item
        hint = JUDGE.hint(answer=q.answer, aliases=tuple(q.answer_aliases or ()),
                          prediction=pred)
        return await teacher.chat(judge_messages(q, pred), hint=hint)

    results = teacher.map(ask, items, progress=progress) if items else []
    verdicts: list[bool | None] = []
    counts = {"asked": len(items), "failed": 0, "unparsed": 0}
    for res in results:
        if isinstance(res, TeacherError):
            counts["failed"] += 1
            verdicts.append(None)
            continue
        v = parse_judge(res.content)
        if v is None:
            counts["unparsed"] += 1
        verdicts.append(v)
    return verdicts, counts


@register("correctness", "wrong_answer")
class CorrectnessFilter(BaseFilter):
    """Drops traces whose final answer is wrong (reason ``wrong_answer``)."""

    min_f1: float

    def __call__(self, trace: Trace, ctx: FilterContext) -> Verdict:
        g = ctx.grades.get(trace.trace_id)
        question = ctx.questions.get(trace.question_id)
        if g is None:
            g = grade(trace.final_answer, question, self.min_f1)
            ctx.grades[trace.trace_id] = g
        if g.correct:
            return True
        if question is None:
            return False, "wrong_answer", f"question {trace.question_id!r} not found"
        judge = "" if g.judge_correct is None else f", judge {'correct' if g.judge_correct else 'wrong'}"
        return False, "wrong_answer", (f"answer {trace.final_answer!r} vs {question.answer!r}: "
                                       f"F1 {g.f1:.2f}{judge}")


__all__ = ["CorrectnessFilter", "Grade", "combine", "golds", "grade", "grade_answer", "judge_messages", "parse_judge",
           "run_judge"]
