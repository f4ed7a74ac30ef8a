"""The seeds' RL reward signals, as formulas: what each mode of :mod:`filters.reward` computes.

Each function is one published formula; :func:`filters.reward.compute_score` picks them by
``reward_kwargs.mode`` and composes them with the format gate and the optional terms.

- **em** (hopforge's default): ``acc``, 1 when the answer matches the answer or an alias by the
  correctness filter's rule (:func:`filters.correctness.grade_answer`), else 0.
- **f1** (MultiSearch): ``r_ans = 2·n_int / (n_pred + n_truth)`` over the normalised words of the
  answer and the best gold (:func:`synth.text.answers.f1_score`, SQuAD/HotpotQA normalisation;
  equal to ``2PR / (P + R)``).
- **rubric** (the KG-walk seed's entity rubric, positive-only, group-normalised):
  ``r = r_oc + λ·r̂_rb`` when ``r_oc > 0``, else ``r_oc``; ``r_rb`` is the share of the path's
  entities the response names (:func:`entity_share`) and ``r̂_rb = r_rb / max_group r_rb`` over the
  responses of one GRPO group (the same question).  Positive-only: a wrong answer gets no rubric
  credit however many entities it lists, so listing entity-like words never pays.
- **gain** (the planner/answerer dual reward): ``R = ½ + S(a, gt) − ½·max(S(a_I, gt), S(a_R, gt))``,
  ``a_I`` the closed-book answer and ``a_R`` the naive-RAG answer of the question, stored in
  ``extra_info.baselines``; planning is rewarded for what it adds over answering directly.
- **evidence** (optional with any mode, hopforge's process term): ``evidence_weight · share`` of the gold
  path's pages read, positive-only like the rubric: it counts only when the answer is right (``acc > 0``),
  so reading pages without answering never pays (:func:`evidence_reward`).
- **step penalty** (PiCA, optional with any mode): ``λ·α^(t−3)`` for each tool call ``t ≥ 3``
  (counting from 1), so the first two calls are free and the cost of each further one grows
  when ``α > 1``; the trajectory pays the sum.
- **privileged feedback** (CAPF, optional): the return is multiplied by ``ρ_PF^N``, N the number of
  ``check_answer`` calls (the trajectory-level form of CAPF's ``R(τ)·ρ_PF^{N_t}``).
- **multi-query** (MultiSearch, optional): ``query_weight`` (MultiSearch: 0.1) when one step asked more than
  2 distinct queries (:func:`step_queries`), positive-only: only for a right, well-formed answer.
- **merge** (MultiSearch, optional): ``merge_weight`` (0.1) when a ``<merge>`` block the student wrote holds
  its final answer (:func:`merge_holds_answer`), positive-only like the multi-query term.
- **RLTR** (optional, with a judge; :mod:`filters.judge_reward`): ``rltr_weight · r``, ``r = −1`` for an invalid
  format, else ``clip(c̄ − repeat_penalty·n_repeat − error_penalty·n_error, −1, 1)``, ``c̄`` an LLM checker's
  tool-use completeness verdicts averaged over N samples; a process reward, not gated on the answer.
- **the dual reward's judge terms** (optional; :mod:`filters.judge_reward`): ``+ R_process`` (a frozen judge's
  0–10 score times ``process_max/10``, in [0, 0.5] for the dual reward) ``− α·R_cost``, with
  ``R_cost = ½·min(T/T_max, 1) + ½·min(W/W_max, 1)``: T the turns that called a tool, W the words of the search
  queries.
- **sarl** (SARL, self-assessment RL; the episode comes from the ``hopforge_sarl`` agent loop, :mod:`filters.sarl`):
  ``R = r_final·α^(n−1) + λ·r_assess``, ``n`` the answer rounds (answers the policy gave, each followed by its own
  assessment in an isolated context until one says COMPLETE), ``r_final`` the final answer's ``acc`` and
  ``r_assess`` the mean over the assessment rounds of the transition each made, from the answer before it to the
  answer after it (a COMPLETE verdict ends the episode: the same answer): wrong→right +1, right→right +1,
  wrong→wrong −0.1, right→wrong −2 (:data:`SARL_TRANSITIONS`); 0 without an assessment round.  α = 0.8, λ = 0.5.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from synth.text.answers import f1_score, mentions
from synth.tools.registry import find_tool

from filters.bestofn import title_variants
from filters.solution import Solution

MODES = ("em", "f1", "rubric", "gain", "sarl")
MULTI_QUERY_MIN = 3  # MultiSearch's multi-query reward: more than 2 queries in one step
_MERGE = re.compile(r"<merge>(.*?)</merge>", re.S)

# SARL: its defaults, the verdicts an assessment round records, and the score of each transition of an assessment
# round, (answer before right, answer after right) -> score.  An assessment whose verdict cannot be read counts as
# COMPLETE (the episode ends on its answer) and is recorded as UNPARSED.
SARL_ALPHA = 0.8
SARL_LAM = 0.5
COMPLETE, INCOMPLETE, UNPARSED = "COMPLETE", "INCOMPLETE", "UNPARSED"
VERDICTS = (COMPLETE, INCOMPLETE, UNPARSED)
SARL_TRANSITIONS = {(False, True): 1.0, (True, True): 1.0, (False, False): -0.1, (True, False): -2.0}


def answer_f1(answer: str | None, golds: Sequence[str]) -> float:
    """MultiSearch's answer reward: token F1 against the best of the golds (0.0 without an answer)."""
    if not answer or not golds:
        return 0.0
    return max(f1_score(answer, g) for g in golds)


def entity_share(sol: Solution, path: Sequence[str], titles: Sequence[str]) -> float:
    """``r_rb``: the share of the path's intermediate entities (``path[1:-1]``) the response engages with.

    An entity counts when the student's own text (its reasoning, its tool-call arguments and its
    answer; never an observation) names it as a whole normalised phrase, its title or its title
    without a "(qualifier)", or when the rollout read its page (``open`` / ``find``).  The start
    entity is described by the question and the answer is graded apart, so, as in best-of-n
    (:mod:`filters.bestofn`), only the bridge entities count; a path without one scores 1."""
    inner = list(range(1, len(path) - 1))
    if not inner:
        return 1.0
    read = set(sol.read_page_ids)
    hits = 0
    for j in inner:
        variants = title_variants(titles[j]) if j < len(titles) and titles[j] else []
        if path[j] in read or any(mentions(sol.student_text, v) for v in variants):
            hits += 1
    return hits / len(inner)


def rubric_rewards(outcomes: Sequence[float], shares: Sequence[float], weight: float) -> list[float]:
    """The rubric mode over one GRPO group: ``r_oc + weight·r_rb / max_group(r_rb)`` where ``r_oc > 0``.

    The group maximum is taken over the responses whose outcome is positive (the rubric is
    positive-only: a wrong response's entities neither earn credit nor set the scale); 0 when no
    correct response names any entity."""
    top = max((s for o, s in zip(outcomes, shares) if o > 0), default=0.0)
    return [o + weight * (s / top if top > 0 else 0.0) if o > 0 else o for o, s in zip(outcomes, shares)]


def evidence_reward(acc: float, share: float, weight: float) -> float:
    """The evidence term, positive-only: ``weight·share`` when the answer is right (``acc > 0``), else 0."""
    return weight * share if acc > 0 else 0.0


def gain_reward(score: float, closed_book: float, rag: float) -> float:
    """The dual reward's outcome gain: ``½ + S(a) − ½·max(S(a_I), S(a_R))``, in [0, 1.5]."""
    return 0.5 + score - 0.5 * max(closed_book, rag)


def step_penalty(tool_calls: int, weight: float, alpha: float) -> float:
    """PiCA's penalty summed over a trajectory: ``Σ_{t=3..T} weight·alpha^(t−3)`` for T tool calls."""
    return sum(weight * alpha ** (t - 3) for t in range(3, tool_calls + 1))


def feedback_factor(check_calls: int, rho_pf: float) -> float:
    """CAPF's attenuation ``ρ_PF^N`` for N ``check_answer`` calls (1.0 without any)."""
    return rho_pf ** check_calls


def step_queries(sol: Solution, max_queries: int) -> int:
    """The most distinct queries one step asked: per step (an assistant turn, :attr:`Solution.call_turns`), the
    queries of its well-formed calls of a tool that finds pages (a masked tool's text argument: ``search``'s
    ``query``, ``multi_search``'s ``queries``), repeats counted once (case and whitespace ignored).  A call the
    tool refuses (more than ``max_queries`` queries, or one that is empty or not a string) counts none."""
    per_step: dict[int, set[str]] = {}
    for (name, args), step in zip(sol.calls, sol.call_turns):
        spec = find_tool(name)
        if spec is None or not spec.masked or spec.text_arg is None:
            continue
        value = args.get(spec.text_arg)
        queries = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        if not queries or len(queries) > max_queries or not all(isinstance(q, str) and q.strip() for q in queries):
            continue
        per_step.setdefault(step, set()).update(" ".join(q.casefold().split()) for q in queries)
    return max(map(len, per_step.values()), default=0)


def multi_query_reward(acc: float, queries: int, weight: float) -> float:
    """MultiSearch's multi-query reward, positive-only: ``weight`` when the answer is right and one step asked more
    than 2 distinct queries (``queries``, :func:`step_queries`), else 0."""
    return weight if acc > 0 and queries >= MULTI_QUERY_MIN else 0.0


def merge_holds_answer(sol: Solution) -> bool:
    """Whether a ``<merge>...</merge>`` block the student wrote (never an observation's) names its final answer as a
    whole normalised phrase."""
    return bool(sol.answer) and any(mentions(block, sol.answer) for block in _MERGE.findall(sol.student_text))


def merge_reward(acc: float, holds: bool, weight: float) -> float:
    """MultiSearch's merge reward, positive-only: ``weight`` when the answer is right and a merge block holds it."""
    return weight if acc > 0 and holds else 0.0


def sarl_rounds(answers: Sequence, verdicts: Sequence[str]) -> list[tuple[int, int]]:
    """The transitions of SARL's assessment rounds: for round ``i`` (the assessment of answer ``i``), the indices of
    the answer before it and the answer after it (the next answer; the same one when none followed: a COMPLETE or
    unreadable verdict ended the episode, or an INCOMPLETE one left no turn for a new answer).  Every assessment
    follows an answer: more verdicts than answers, or an unknown verdict, is refused."""
    if len(verdicts) > len(answers):
        raise ValueError(f"SARL recorded {len(verdicts)} assessments for {len(answers)} answers: each assessment "
                         "follows an answer")
    unknown = sorted({str(v) for v in verdicts} - set(VERDICTS))
    if unknown:
        raise ValueError(f"unknown SARL verdict(s) {', '.join(unknown)} (allowed: {', '.join(VERDICTS)})")
    return [(i, i + 1 if i + 1 < len(answers) else i) for i in range(len(verdicts))]


def sarl_assess_reward(correct: Sequence[bool], rounds: Sequence[tuple[int, int]]) -> float:
    """``r_assess``: the mean of :data:`SARL_TRANSITIONS` over the rounds (``correct``: each answer's correctness);
    0.0 without a round."""
    if not rounds:
        return 0.0
    return sum(SARL_TRANSITIONS[(bool(correct[a]), bool(correct[b]))] for a, b in rounds) / len(rounds)


def sarl_reward(r_final: float, n: int, r_assess: float, alpha: float = SARL_ALPHA, lam: float = SARL_LAM) -> float:
    """SARL's ``R = r_final·alpha^(n−1) + lam·r_assess`` for ``n`` answer rounds (at least 1)."""
    return r_final * alpha ** (max(int(n), 1) - 1) + lam * r_assess


def group_ids(extra_infos: Iterable[dict | None]) -> list[str]:
    """The GRPO group of each response: its question (``extra_info.question_id``, what a group's responses
    share); a response without one is a group of its own."""
    return [str((e or {}).get("question_id") or f"#{i}") for i, e in enumerate(extra_infos)]


__all__ = ["COMPLETE", "INCOMPLETE", "MODES", "MULTI_QUERY_MIN", "SARL_ALPHA", "SARL_LAM", "SARL_TRANSITIONS",
           "UNPARSED", "VERDICTS", "answer_f1", "entity_share", "evidence_reward", "feedback_factor",
           "gain_reward", "group_ids", "merge_holds_answer", "merge_reward", "multi_query_reward", "rubric_rewards",
           "sarl_assess_reward", "sarl_reward", "sarl_rounds", "step_penalty", "step_queries"]
