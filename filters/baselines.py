"""The dual reward's baselines: each ``rl_pool`` question's closed-book and naive-RAG answers, by the teacher.

The planner/answerer work rewards planning by what it adds over answering directly,
``R = ½ + S(a, gt) − ½·max(S(a_I, gt), S(a_R, gt))`` (the ``gain`` mode of :mod:`filters.reward`),
where ``a_I`` is the direct, closed-book answer and ``a_R`` the naive-RAG answer.  With
``rl.baselines: true`` the filter stage asks the teacher both, once per ``rl_pool`` question:

- **closed book**: the question alone, through the closed-book task the questions stage's
  ``questions.check_closed_book`` validator asks (``closed_book.jinja2``: "answer from memory");
- **naive RAG**: one search for the question text (the search the rollouts' toolbox runs, with the
  answer page masked as in the rollouts, ``rl.rag_k`` results), then an answer from those results
  alone through the solvability task (``solvable.jinja2``: "answer using only the documents given"),
  each result a document of its title and snippet.

Each answer is stored with its scores under the run's rule (``acc``: the correctness filter's
exact-or-F1 match at ``filters.min_f1``; ``f1``: token F1), as ``extra_info.baselines =
{closed_book: {answer, acc, f1}, rag: {...}}``.  A reply cut at max_tokens, or one with no
``<answer>``, is an answer of None (scoring 0); a question whose calls failed gets no baselines
(counted as ``failed``), and the ``gain`` mode refuses its row rather than score it against nothing.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from synth.engine.records import Question
from synth.text.answers import AnswerKey
from synth.teacher.tasks import CLOSED_BOOK, SOLVABLE
from synth.tools.toolbox import Toolbox

from filters.correctness import grade_answer
from filters.reward_modes import answer_f1


def rag_pages(toolbox: Toolbox, question: Question, k: int) -> list[dict]:
    """The documents of the naive-RAG answer: one search for the question, each result's title and snippet."""
    text, _ = toolbox.call("search", {"query": question.question, "k": k})
    try:
        results = json.loads(text)
    except ValueError:
        return []
    if not isinstance(results, list):
        return []  # an error observation: answer from nothing
    return [{"title": r.get("title") or "", "text": r.get("snippet") or ""} for r in results if isinstance(r, dict)]


def scored(answer: str | None, question: Question, min_f1: float, key: AnswerKey | None = None) -> dict:
    """``{answer, acc, f1}`` of one baseline answer, judged against the question's answer key (``key``; None:
    its answer and aliases), as the reward judges the rollout's own."""
    key = key if key is not None else AnswerKey.of(question.golds)
    return {"answer": answer, "acc": float(grade_answer(answer, key, min_f1).rule_correct),
            "f1": float(answer_f1(answer, list(key.names)))}


def compute_baselines(teacher: Any, questions: list[Question], index: Any, tools_cfg: Any, k: int,
                      min_f1: float, keys: Mapping[str, AnswerKey] | None = None
                      ) -> tuple[dict[str, dict], dict[str, int]]:
    """Question id -> ``{closed_book, rag}`` for ``questions``, and counts (asked, failed, unanswered);
    ``keys`` the questions' answer keys."""
    from synth.teacher.client import TeacherError

    items = [(q, kind) for q in questions for kind in ("closed_book", "rag")]

    async def ask(item: tuple[Question, str]):
        q, kind = item
        if kind == "closed_book":
            return await teacher.chat(CLOSED_BOOK.format_input(question=q.question),
                                      hint=CLOSED_BOOK.hint(answer=q.answer, titles=tuple(q.titles)))
        box = Toolbox(index, tools_cfg, mask_page_ids=[q.answer_page_id])
        pages = rag_pages(box, q, k)
        return await teacher.chat(SOLVABLE.format_input(question=q.question, pages=pages),
                                  hint=SOLVABLE.hint(answer=q.answer, titles=tuple(q.titles)))

    results = teacher.map(ask, items) if items else []
    counts = {"asked": len(questions), "failed": 0, "unanswered": 0}
    answers: dict[str, dict] = {}
    failed: set[str] = set()
    for (q, kind), res in zip(items, results):
        if isinstance(res, TeacherError):
            failed.add(q.question_id)
            continue
        task = CLOSED_BOOK if kind == "closed_book" else SOLVABLE
        answer = task.format_output(res).value
        answer = answer if isinstance(answer, str) and answer.strip() else None
        counts["unanswered"] += answer is None
        answers.setdefault(q.question_id, {})[kind] = scored(answer, q, min_f1, (keys or {}).get(q.question_id))
    for qid in failed:
        answers.pop(qid, None)
    counts["failed"] = len(failed)
    return answers, counts


__all__ = ["compute_baselines", "rag_pages", "scored"]
