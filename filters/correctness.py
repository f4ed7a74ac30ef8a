"""The correctness filter (reason ``wrong_answer``) and the optional LLM judge.

The rule (:func:`synth.text.answers.judge`, against the question's answer key,
:mod:`synth.corpus.answerkeys`): a trace's ``final_answer`` is correct when, after Unicode
folding and SQuAD/HotpotQA normalisation, it is a name of the answer page (its title, an alias
the corpus supports); it is wrong when it is the title of another page of the corpus, or a name
with a qualifier the page does not carry ("Milky Way (disambiguation)"); any other text is
correct when its token F1 against the best name reaches ``filters.min_f1``.  How it was decided
is recorded (``filter/verdicts.match``).

The judge (``filters.judge``) asks the teacher, through ``synth/teacher/prompts/judge.jinja2``,
whether the answer names the same thing as the gold.  It can only *add* a verdict:

    correct = rule_correct or (judge_correct is True and f1 > 0)

so a rule match is never overturned, and the judge rescues a rule miss only when the
answer shares at least one normalised word with the gold (F1 > 0) -- a paraphrase or
a longer form ("Bill Clinton" for "William Jefferson Clinton" shares one), never an
unrelated string, which keeps a lenient or confused judge from admitting guesses -- and
never an answer the rule found to name another page (``other_page``, ``qualified``).
Both verdicts are recorded (``filter/verdicts``: ``rule_correct``, ``f1``,
``judge_correct``, ``correct``); a judge call that fails or cannot be parsed leaves
``judge_correct`` null and the rule stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from synth.engine.records import Question, Trace
from synth.text.answers import NO_MATCH, OTHER_PAGE, QUALIFIED, AnswerKey, judge

from filters.base import BaseFilter, FilterContext, Verdict, register


@dataclass(slots=True)
class Grade:
    """Correctness of one trace: the rule's verdict, its F1, and the judge's (None: not asked / failed)."""

    rule_correct: bool
    em: bool
    f1: float
    judge_correct: bool | None = None
    basis: str = NO_MATCH  # how the rule decided (synth.text.answers.BASES)

    @property
    def correct(self) -> bool:
        """The combined verdict (see the module docstring)."""
        return combine(self.rule_correct, self.f1, self.judge_correct, self.basis)


def combine(rule_correct: bool, f1: float, judge_correct: bool | None, basis: str = NO_MATCH) -> bool:
    """``rule_correct or (judge_correct is True and f1 > 0)``: the judge only adds, and never for an answer the
    rule found to name another page."""
    if basis in (OTHER_PAGE, QUALIFIED):
        return bool(rule_correct)
    return bool(rule_correct or (judge_correct is True and f1 > 0))


def golds(question: Question) -> list[str]:
    """The answer and its aliases (empty ones left out)."""
    return question.golds


def grade(prediction: str | None, question: Question | None, min_f1: float, key: AnswerKey | None = None) -> Grade:
    """The rule's grade of ``prediction`` against ``question``'s answer key (``key``; without one, a key of the
    question's answer and aliases alone)."""
    if question is None:
        return Grade(False, False, 0.0)
    return grade_answer(prediction, key if key is not None else golds(question), min_f1)


def grade_answer(prediction: str | None, gold: AnswerKey | Iterable[str], min_f1: float) -> Grade:
    """The rule's grade of ``prediction`` against an answer key (or gold answers: a key without other titles):
    :func:`synth.text.answers.judge`, page identity first, token F1 ``>= min_f1`` for free text.  The one
    matching rule of the filter and of the RL reward (:mod:`filters.reward`); an empty prediction is wrong."""
    key = gold if isinstance(gold, AnswerKey) else AnswerKey.of(gold)
    j = judge(prediction, key, min_f1)
    return Grade(j.correct, j.em, float(j.f1), None, j.basis)


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
            key = ctx.answer_keys.get(trace.question_id) if ctx.answer_keys is not None else None
            g = grade(trace.final_answer, question, self.min_f1, key)
            ctx.grades[trace.trace_id] = g
        if g.correct:
            return True
        if question is None:
            return False, "wrong_answer", f"question {trace.question_id!r} not found"
        judge = "" if g.judge_correct is None else f", judge {'correct' if g.judge_correct else 'wrong'}"
        how = {OTHER_PAGE: ", the title of another page", QUALIFIED: ", a qualified title of another page"}
        return False, "wrong_answer", (f"answer {trace.final_answer!r} vs {question.answer!r}: "
                                       f"F1 {g.f1:.2f}{how.get(g.basis, '')}{judge}")


__all__ = ["CorrectnessFilter", "Grade", "combine", "golds", "grade", "grade_answer", "judge_messages", "parse_judge",
           "run_judge"]
