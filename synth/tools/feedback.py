"""CAPF's privileged feedback action ``check_answer``: a candidate answer against the ground truth.

CAPF (the privileged-feedback work) gives the policy, *in training only*, an extra action
``a_PF(ŷ)`` that compares a candidate ``ŷ`` with the ground truth and returns guidance as an
observation; the return of a trajectory is attenuated by ``ρ_PF`` for every such call
(``reward_kwargs.rho_pf`` in :mod:`filters.reward`), so the policy learns to check only when
checking pays.  The rollouts, the SFT rows and evaluation never offer the tool: the ground
truth reaches it only through verl's ``tools_kwargs`` (``extra_info.tools_kwargs.check_answer``
of an ``rl_pool`` row, :func:`filters.band.tools_kwargs`).

The verdict, in this order:

- ``correct``: the candidate is right by the correctness filter's rule (:func:`synth.text.answers.judge`
  against the answer key: the answer page's names, and the titles of other pages that are never right);
- ``partial``: it names an entity of the question's chain that is not the answer (a bridge
  entity: the policy stopped early, or followed a hop too few); the guidance says which
  hop of the chain it is, so the policy knows how far it got and that the chain goes on;
- ``wrong``: anything else (also an empty candidate).

The guidance never states the answer or the titles of the entities after the one matched.
"""

from __future__ import annotations

from typing import Iterable

from synth.text.answers import AnswerKey, judge, normalize_answer

CHECK_ANSWER = "check_answer"
VERDICTS = ("correct", "partial", "wrong")
# filters.min_f1's default; the tool config can set the run's value (`config.min_f1`).
DEFAULT_MIN_F1 = 0.8


def check_answer_schema() -> dict:
    """The OpenAI function schema of ``check_answer`` (the shape of :func:`synth.tools.schema.tool_schemas`)."""
    return {"type": "function", "function": {
        "name": CHECK_ANSWER,
        "description": "Check a candidate answer before you commit to it (training only: every check lowers the "
                       "reward a little). Returns whether it is correct, names an entity of the question's chain "
                       "that is not the final answer (and which step of the chain it is), or is wrong.",
        "parameters": {"type": "object", "properties": {
            "answer": {"type": "string", "description": "The candidate answer, as you would give it."}},
            "required": ["answer"], "additionalProperties": False}}}


def _bare(title: str) -> str:
    """A title without a trailing "(qualifier)": "Mercury (planet)" -> "Mercury"."""
    head, sep, _ = title.rpartition(" (")
    return head if sep and title.endswith(")") and head else title


def check(candidate: str | None, target: Iterable[str], chain: Iterable[str] = (),
          min_f1: float = DEFAULT_MIN_F1, other_titles: Iterable[str] = ()) -> tuple[str, str]:
    """``(verdict, guidance)`` of ``candidate`` against ``target`` (the answer page's names), ``other_titles``
    (titles of other pages, never right) and ``chain`` (the titles of the question's path, start first, answer
    last); see the module docstring."""
    golds = [g for g in target if isinstance(g, str) and g]
    text = (candidate or "").strip()
    if not text or not normalize_answer(text):
        return "wrong", "Incorrect: the candidate answer is empty."
    key = AnswerKey(tuple(golds), tuple(t for t in other_titles if isinstance(t, str) and t))
    if golds and judge(text, key, min_f1).correct:
        return "correct", "Correct: this is the answer to the question."
    titles = [t for t in chain if isinstance(t, str) and t]
    answer_norms = {normalize_answer(g) for g in golds}
    # The last title of the chain is the answer page; only the entities before it can be "partially right".
    for j, title in enumerate(titles[:-1] if len(titles) > 1 else []):
        if normalize_answer(title) in answer_norms:
            continue
        if any(normalize_answer(text) == normalize_answer(v) for v in {title, _bare(title)}):
            steps = len(titles) - 1
            where = "the entity the question starts from" if j == 0 else f"the entity reached at step {j} of {steps}"
            return "partial", (f"Partially right: {text!r} is {where} of the question's chain, not its final answer. "
                               f"The chain goes on for {steps - j} more step(s) from there.")
    return "wrong", "Incorrect: this is not the answer, nor an entity of the question's chain."


__all__ = ["CHECK_ANSWER", "DEFAULT_MIN_F1", "VERDICTS", "check", "check_answer_schema"]
