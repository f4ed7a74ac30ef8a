"""The RL reward for ``rl_pool``: verl's ``compute_score``, in the seeds' reward modes.

verl calls ``compute_score`` from ``reward.custom_reward_function`` (``path: pkg://filters.reward``,
``name: compute_score``; see README "RL with verl"), with ``reward_kwargs`` as keyword arguments:

- per response (the ``naive`` manager, verl's default):
  ``compute_score(data_source=, solution_str=, ground_truth=, extra_info=, **reward_kwargs)`` -> a dict;
- per step, with lists (the ``batch`` manager, ``verl.workers.reward_manager.BatchRewardManager``):
  ``compute_score(data_sources=, solution_strs=, ground_truths=, extra_infos=, **reward_kwargs)`` -> a
  list of dicts.  The ``rubric`` mode needs this form: it normalises within each GRPO group, the
  responses that share ``extra_info.question_id``.

``solution_str`` is read by :func:`filters.solution.parse_solution`.  The score, in this order:

1. **Format gate** (``format_ok``, every mode).  Every ``<tool_call>`` the student wrote is a JSON
   object naming a known tool with object arguments, none is left open, and the last turn makes no
   call and holds the final ``<answer>...</answer>``.  A malformed solution scores 0 in every mode.
2. **Mode** (``reward_kwargs.mode``, default ``em``; the formulas and sources are in
   :mod:`filters.reward_modes`):
   - ``em``: ``acc``, the correctness filter's rule (:func:`filters.correctness.grade_answer`, i.e.
     :func:`synth.text.answers.judge`: page identity first, token F1 ``>= min_f1`` for free text), against
     the answer key the row carries in ``reward_model.ground_truth`` (the answer page's names, the titles
     of other pages F1 would mistake for it, and the ``min_f1`` they were gathered at), so the reward needs
     no corpus.  Set ``min_f1`` to the run's ``filters.min_f1`` so RL rewards exactly what the filter
     called correct; a lower one is refused (the key lists other titles only from its own threshold up).
   - ``f1``: the answer's token F1 against the best gold (MultiSearch).
   - ``rubric``: ``acc + rubric_weight · r_rb / max_group r_rb`` when ``acc > 0``, else ``acc``
     (positive-only; ``r_rb`` the share of the path's bridge entities, ``extra_info.path`` and
     ``extra_info.titles``, the response names or reads).  Called per response (no group in sight)
     it normalises by the largest share possible, 1.
   - ``gain``: ``½ + S(a) − ½·max(S(a_closed), S(a_rag))`` with the closed-book and naive-RAG answers
     of ``extra_info.baselines``; ``S`` is ``acc`` (``gain_score: em``, default) or the token F1
     (``gain_score: f1``), the same function for the three answers.
   - ``sarl``: SARL's ``r_final · sarl_alpha^(n−1) + sarl_lam · r_assess`` (defaults 0.8 and 0.5) over the rounds the
     ``hopforge_sarl`` agent loop (:mod:`filters.sarl`) records in ``extra_info`` (verl's reward loop merges the
     loop's ``extra_fields`` into it): ``sarl_answers``, the answer of each round, and ``sarl_verdicts``, the verdict
     of each assessment.  ``r_final`` is ``acc``, n the answer rounds, ``r_assess`` the mean transition score of the
     assessment rounds (:func:`filters.reward_modes.sarl_assess_reward`).  A row without ``sarl_answers`` (not run
     through that loop) falls back, explicitly, to one round and no assessment (R = ``acc``), with
     ``raw_sarl_missing`` 1 and a warning, so a misconfigured run shows in verl's logs.  Refused with
     ``advantage: hopforge`` (its code carries no negative outcome).
3. **Evidence** (optional, ``evidence_weight``, default 0): plus that weight times the share of the
   gold path's pages (``extra_info.path``) the student read with ``open`` or ``find``, when the answer is
   right (``acc > 0``): positive-only like the rubric, so a wrong answer gets no evidence credit
   (:func:`filters.reward_modes.evidence_reward`).
4. **Step penalty** (optional, PiCA: ``step_weight`` > 0, ``step_alpha`` default 1.0): minus
   ``step_weight · step_alpha^(t−3)`` for every tool call from the third on.
5. **Privileged feedback** (CAPF): the result is multiplied by ``rho_pf ** N``, N the ``check_answer``
   calls of the response (default ``rho_pf`` 0.8; only a CAPF tool config offers the tool, so without
   it N is 0).  This is the trajectory-level form of CAPF's return ``R(τ)·ρ_PF^{N_t}``; the per-step
   form, where a step's return counts only the calls after it, changes the advantage of each token:
   verl's ``hopforge`` advantage estimator computes it (6.).
   The MultiSearch terms (optional, ``query_weight`` and ``merge_weight``, default 0; MultiSearch: 0.1 each) are
   added before it: ``query_weight`` when one step asked more than 2 distinct queries, ``merge_weight`` when a
   ``<merge>`` block the student wrote holds its answer, each only for a right answer
   (:func:`filters.reward_modes.step_queries`; ``max_queries``: the run's ``tools.multi_search_max_queries``,
   over which the tool refused the call).  With verl's ``gdpo`` estimator they are reward keys of their own
   (``configs/rl/estimator/gdpo.yaml``).

6. **Advantage estimator** (``advantage: hopforge``, with ``algorithm.adv_estimator: hopforge``): the rubric's
   group max, CAPF's per-step return and PiCA's per-step penalty belong to the advantage step
   (:mod:`filters.advantage`), which then gets them from ``score``: an integer code of the response's R
   (the mode's score plus the evidence term), its rubric hit count and which of its calls were
   ``check_answer``.  ``rubric_weight``, ``rho_pf`` and ``step_*`` then live in ``algorithm.hopforge``
   (a ``step_weight`` here is refused, so no trajectory pays twice).
7. **Judge terms** (optional, :mod:`filters.judge_reward`; refused with ``advantage: hopforge``), added last:
   RLTR's tool-use completeness from an LLM checker averaged over ``rltr_samples`` samples, less the repeated and
   erroneous calls (``rltr_weight`` > 0; −1 for an invalid format), the dual reward's ``R_process ∈ [0,
   process_max]`` from a frozen judge (``process_max`` > 0) and its Pareto cost ``α·R_cost`` over turns and query
   words (``cost_alpha`` > 0).  The judge (``reward_kwargs.judge``) is reached through the teacher client and its
   call cache; a judge that fails leaves its term out (``raw_judge_failed``).

A malformed solution scores 0 after every term (but RLTR's −1, times ``rltr_weight``, when RLTR is on).  The
return value is verl's dict form, which verl logs as reward metrics and from which verl's ``gdpo`` estimator reads
``algorithm.gdpo_reward_keys`` (each key normalised within the group on its own).  Its keys are of two kinds:

- **Reward components** (:data:`REWARD_KEYS`), each gated as its seed says, so any of them can be a GDPO
  reward key: a malformed response (``format_ok`` 0) has 0 in every one of them (but ``rltr``, −1 when RLTR is
  on), and the positive-only ones are 0 for a wrong answer too.

  - ``score``: the reward above (under ``advantage: hopforge``, its code); gated on format;
  - ``acc``: 1 when the answer is right by the correctness rule; format;
  - ``em``: exact match of the answer; format;
  - ``f1``: the answer's token F1 (MultiSearch); format;
  - ``format_ok``: 1 when the response is well formed (the gate itself);
  - ``evidence``: the share of the gold path's pages read (the evidence term's); format and a right answer;
  - ``rubric``: ``r_rb``, the share of the bridge entities named or read; format and a right answer;
  - ``tool_calls``, ``check_calls``: the tool calls and the ``check_answer`` calls made; format;
  - ``penalty``: PiCA's step penalty charged; format;
  - ``multi_query``, ``merge``: the MultiSearch terms above (``query_weight``, ``merge_weight`` or 0); format and
    a right answer;
  - ``rltr``: RLTR's reward (0 when off); −1 for a malformed response (RLTR's format term, the one component a
    malformed response does not zero), not gated on the answer (a process reward);
  - ``process``: ``R_process`` (0 when off); format only; ``cost``: ``α·R_cost`` charged (0 when off); format.
  - ``sarl_rounds``, ``sarl_assess``: SARL's answer rounds n and ``r_assess`` (0 outside the ``sarl`` mode); format.

- **Diagnostics** (:data:`DIAGNOSTIC_KEYS`, all named ``raw_*``), ungated, for logs only and never a
  reward key: ``raw_f1``, ``raw_evidence``, ``raw_rubric`` and ``raw_tool_calls`` (the values above before
  their gates), ``raw_bad_tool_calls`` (the calls the format gate rejected), ``raw_queries`` (the most distinct
  queries of one step) and ``raw_merge`` (1 when a ``<merge>`` block holds the answer, right or wrong); the judge
  terms' ``raw_completeness``, ``raw_repeat_calls``, ``raw_error_calls``, ``raw_process``, ``raw_cost`` and
  ``raw_judge_failed`` (:mod:`filters.judge_reward`); SARL's ``raw_sarl_assess`` (``r_assess`` ungated),
  ``raw_sarl_unparsed`` (assessments whose verdict could not be read) and ``raw_sarl_missing`` (1 when the ``sarl``
  mode found no rounds in the row).

Rows of another ``data_source`` (a mixed dataset) go to verl's own ``default_compute_score``.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from filters.band import DATA_SOURCE
from filters.config import FiltersConfig
from filters.correctness import grade_answer
from filters.judge_reward import JUDGE_DIAGNOSTIC_KEYS, JUDGE_KEYS, Settings as JudgeSettings
from filters.judge_reward import apply as apply_judge, settings as judge_settings
from filters.reward_modes import (MODES, SARL_ALPHA, SARL_LAM, UNPARSED, answer_f1, entity_share, evidence_reward,
                                  feedback_factor, gain_reward, group_ids, merge_holds_answer, merge_reward,
                                  multi_query_reward, rubric_rewards, sarl_assess_reward, sarl_reward, sarl_rounds,
                                  step_penalty, step_queries)
from filters.solution import Solution, _as_list, evidence_share, gold_answers, parse_solution
from synth.text.answers import AnswerKey
from synth.tools.config import ToolsConfig

MIN_F1 = FiltersConfig.model_fields["min_f1"].default

RHO_PF = 0.8  # CAPF's example value
MAX_QUERIES = ToolsConfig.model_fields["multi_search_max_queries"].default

# The keys of the returned dict (see the module docstring): the reward components, each 0 for a malformed
# response (and the positive-only ones for a wrong answer), and the ungated diagnostics, never reward keys.
REWARD_KEYS = ("score", "acc", "em", "f1", "format_ok", "evidence", "rubric", "tool_calls", "check_calls", "penalty",
               "multi_query", "merge", "sarl_rounds", "sarl_assess", *JUDGE_KEYS)
DIAGNOSTIC_KEYS = ("raw_f1", "raw_evidence", "raw_rubric", "raw_tool_calls", "raw_bad_tool_calls", "raw_queries",
                   "raw_merge", "raw_sarl_assess", "raw_sarl_unparsed", "raw_sarl_missing", *JUDGE_DIAGNOSTIC_KEYS)

_log = logging.getLogger(__name__)
_warned_sarl_missing = False


class _Scored:
    """One response graded, before the group-level rubric normalisation (a plain class: see Solution)."""

    __slots__ = ("sol", "acc", "em", "f1", "evidence", "share", "base", "mine", "sarl")

    def __init__(self, solution_str: str, ground_truth: Any, extra_info: dict | None, min_f1: float) -> None:
        extra = extra_info or {}
        self.sol = sol = parse_solution(solution_str)
        key = AnswerKey.from_ground_truth(ground_truth)
        g = grade_answer(sol.answer, key, min_f1)
        self.acc = float(sol.format_ok and g.rule_correct)
        self.em, self.f1 = float(g.em), float(answer_f1(sol.answer, list(key.names)))
        path = [str(p) for p in _as_list(extra.get("path"))]
        self.evidence = evidence_share(sol.read_page_ids, path)
        self.share = entity_share(sol, path, [str(t) for t in _as_list(extra.get("titles"))])
        self.base = 0.0
        self.mine = True
        self.sarl = (0, 0.0, 0, 0)  # SARL's (answer rounds, r_assess, unparsed verdicts, rounds missing)


def _baseline_scores(extra_info: dict | None, min_f1: float, gain_score: str, gold: AnswerKey) -> tuple[float, float]:
    """``(S(a_closed), S(a_rag))`` from ``extra_info.baselines`` (see :func:`filters.band.rl_row`)."""
    b = (extra_info or {}).get("baselines") or {}
    out = []
    for key in ("closed_book", "rag"):
        entry = b.get(key) if isinstance(b, dict) else None
        if not isinstance(entry, dict):
            raise ValueError(f"reward mode 'gain' needs extra_info.baselines.{key} (the question's {key} answer); "
                             "this rl_pool row has none: build rl_pool with `rl.baselines: true`")
        answer = entry.get("answer")
        out.append(answer_f1(answer, list(gold.names)) if gain_score == "f1"
                   else float(grade_answer(answer, gold, min_f1).rule_correct))
    return out[0], out[1]


def _sarl_score(s: _Scored, ground_truth: Any, extra_info: dict | None, min_f1: float, alpha: float,
                lam: float) -> float:
    """SARL's R of one response from the rounds its agent loop recorded in ``extra_info`` (see the module
    docstring); a row without them scores as one round without assessment, flagged ``raw_sarl_missing``."""
    global _warned_sarl_missing
    extra = extra_info or {}
    if extra.get("sarl_answers") is None:
        if not _warned_sarl_missing:
            _warned_sarl_missing = True
            _log.warning("reward mode sarl: a row carries no extra_info.sarl_answers (not run through the "
                         "hopforge_sarl agent loop: +agent=sarl sets it); scored as one round without assessment, "
                         "raw_sarl_missing=1")
        s.sarl = (1, 0.0, 0, 1)
        return sarl_reward(s.acc, 1, 0.0, alpha, lam)
    answers = [None if a is None else str(a) for a in _as_list(extra.get("sarl_answers"))]
    verdicts = [str(v) for v in _as_list(extra.get("sarl_verdicts"))]
    rounds = sarl_rounds(answers, verdicts)
    key = AnswerKey.from_ground_truth(ground_truth)
    correct = [bool(a) and grade_answer(a, key, min_f1).rule_correct for a in answers]
    r_assess = sarl_assess_reward(correct, rounds)
    n = max(len(answers), 1)
    s.sarl = (n, r_assess, verdicts.count(UNPARSED), 0)
    return sarl_reward(s.acc, n, r_assess, alpha, lam)


def _mode_score(s: _Scored, mode: str, ground_truth: Any, extra_info: dict | None, min_f1: float,
                gain_score: str, sarl_alpha: float = SARL_ALPHA, sarl_lam: float = SARL_LAM) -> float:
    """The mode's score of one response, the rubric still per response (normalised by 1)."""
    if mode == "em":
        return s.acc
    if mode == "f1":
        return s.f1
    if mode == "rubric":
        return s.acc
    if mode == "gain":
        closed, rag = _baseline_scores(extra_info, min_f1, gain_score, AnswerKey.from_ground_truth(ground_truth))
        return gain_reward(s.acc if gain_score == "em" else s.f1, closed, rag)
    if mode == "sarl":
        return _sarl_score(s, ground_truth, extra_info, min_f1, sarl_alpha, sarl_lam)
    raise ValueError(f"unknown reward mode {mode!r} (allowed: {', '.join(MODES)})")


def _finish(s: _Scored, score: float, *, evidence_weight: float, step_weight: float, step_alpha: float,
            rho_pf: float, query_weight: float = 0.0, merge_weight: float = 0.0,
            max_queries: int = MAX_QUERIES) -> dict:
    """Add the optional terms to a response's mode score; verl's dict (see the module docstring): the reward
    components gated on the format and, the positive-only ones, on a right answer; the ``raw_`` diagnostics not."""
    sol = s.sol
    ok, right = bool(sol.format_ok), s.acc > 0  # acc is 0 for a malformed response
    penalty = step_penalty(sol.tool_calls, step_weight, step_alpha) if step_weight and ok else 0.0
    queries, merged = step_queries(sol, max_queries), merge_holds_answer(sol)
    multi, merge = multi_query_reward(s.acc, queries, query_weight), merge_reward(s.acc, merged, merge_weight)
    total = (score + evidence_reward(s.acc, s.evidence, evidence_weight) + multi + merge - penalty) * feedback_factor(
        sol.check_calls, rho_pf)
    return {"score": float(total) if ok else 0.0, "acc": s.acc, "em": s.em if ok else 0.0,
            "f1": s.f1 if ok else 0.0, "format_ok": float(ok), "evidence": float(s.evidence) if right else 0.0,
            "rubric": float(s.share) if right else 0.0, "tool_calls": sol.tool_calls if ok else 0,
            "check_calls": sol.check_calls if ok else 0, "penalty": float(penalty),
            "multi_query": float(multi), "merge": float(merge),
            "sarl_rounds": s.sarl[0] if ok else 0, "sarl_assess": float(s.sarl[1]) if ok else 0.0,
            "raw_f1": s.f1, "raw_evidence": float(s.evidence), "raw_rubric": float(s.share),
            "raw_tool_calls": sol.tool_calls, "raw_bad_tool_calls": sol.bad_calls, "raw_queries": queries,
            "raw_merge": float(merged), "raw_sarl_assess": float(s.sarl[1]), "raw_sarl_unparsed": s.sarl[2],
            "raw_sarl_missing": float(s.sarl[3])}


def compute_score(data_source: str | None = None, solution_str: str | None = None, ground_truth: Any = None,
                  extra_info: dict | None = None, *, data_sources: Sequence[str] | None = None,
                  solution_strs: Sequence[str] | None = None, ground_truths: Sequence[Any] | None = None,
                  extra_infos: Sequence[dict | None] | None = None, mode: str = "em", min_f1: float = MIN_F1,
                  evidence_weight: float = 0.0, rubric_weight: float = 0.5, gain_score: str = "em",
                  step_weight: float = 0.0, step_alpha: float = 1.0, rho_pf: float = RHO_PF,
                  query_weight: float = 0.0, merge_weight: float = 0.0, max_queries: int = MAX_QUERIES,
                  advantage: str | None = None, sarl_alpha: float = SARL_ALPHA, sarl_lam: float = SARL_LAM,
                  **kwargs: Any) -> dict | float | list:
    """verl's reward function for ``rl_pool`` rows, per response or per step (lists): see the module docstring.

    Every keyword after the data comes from ``reward.custom_reward_function.reward_kwargs``; the judge terms'
    (``rltr_*``, ``process_max``, ``cost_*``, ``judge``...) are read by :func:`filters.judge_reward.settings`."""
    opts = judge_settings(kwargs)
    terms = {"evidence_weight": evidence_weight, "step_weight": step_weight, "step_alpha": step_alpha,
             "rho_pf": rho_pf, "query_weight": query_weight, "merge_weight": merge_weight, "max_queries": max_queries}
    multisearch = {k: terms[k] for k in ("query_weight", "merge_weight", "max_queries")}
    sarl = {"sarl_alpha": sarl_alpha, "sarl_lam": sarl_lam}
    if mode not in MODES:
        raise ValueError(f"unknown reward mode {mode!r} (allowed: {', '.join(MODES)})")
    if gain_score not in ("em", "f1"):
        raise ValueError(f"unknown gain_score {gain_score!r} (allowed: em, f1)")
    if advantage not in (None, "", "hopforge"):
        raise ValueError(f"unknown advantage {advantage!r} (allowed: hopforge)")
    if advantage:
        if mode == "sarl":
            raise ValueError("advantage: hopforge carries outcomes in [0, 4); SARL's reward goes below 0 "
                             "(r_assess): use mode sarl with verl's own estimators")
        if step_weight:
            raise ValueError("advantage: hopforge charges the step penalty per step in the estimator: set "
                             "algorithm.hopforge.step_weight, not reward_kwargs.step_weight")
        if opts.enabled:
            raise ValueError("advantage: hopforge carries no judge term (rltr_weight, process_max, cost_alpha): "
                             "use them with verl's own estimators")
        if solution_strs is not None:
            return [_coded(src, sol, gt, extra, mode, min_f1, gain_score, evidence_weight, multisearch)
                    for src, sol, gt, extra in zip(list(_as_list(data_sources)), list(solution_strs),
                                                   list(_as_list(ground_truths)),
                                                   list(_as_list(extra_infos)) or [None] * len(solution_strs))]
        return _coded(data_source, solution_str, ground_truth, extra_info, mode, min_f1, gain_score, evidence_weight,
                      multisearch)
    if solution_strs is not None:
        return _batch(list(_as_list(data_sources)), list(solution_strs), list(_as_list(ground_truths)),
                      list(_as_list(extra_infos)) or [None] * len(solution_strs), mode, min_f1, rubric_weight,
                      gain_score, terms, kwargs, opts, sarl)
    if data_source != DATA_SOURCE:
        from verl.utils.reward_score import default_compute_score

        return default_compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
    s = _Scored(solution_str or "", ground_truth, extra_info, min_f1)
    score = _mode_score(s, mode, ground_truth, extra_info, min_f1, gain_score, **sarl)
    if mode == "rubric":
        score = s.acc + rubric_weight * s.share if s.acc > 0 else s.acc  # alone: normalised by 1, the largest share
    out = _finish(s, score, **terms)
    apply_judge([out], [s.sol], [solution_str or ""], [extra_info], opts)
    return out


def _coded(data_source: str | None, solution_str: str | None, ground_truth: Any, extra_info: dict | None, mode: str,
           min_f1: float, gain_score: str, evidence_weight: float, multisearch: dict | None = None) -> dict:
    """One response for verl's ``hopforge`` advantage estimator: ``score`` is the code of
    :func:`filters.advantage.encode` (R = the mode's score plus the evidence and MultiSearch terms; the rubric's
    hit count; which calls were ``check_answer``), the other keys as :func:`_finish` gives them, for verl's logs."""
    from filters.advantage import call_turns, encode
    from synth.tools.feedback import CHECK_ANSWER

    if data_source != DATA_SOURCE:
        raise ValueError(f"advantage: hopforge reads hopforge's rows only; this one is from {data_source!r}")
    s = _Scored(solution_str or "", ground_truth, extra_info, min_f1)
    base = _mode_score(s, mode, ground_truth, extra_info, min_f1, gain_score)
    inner = max(len(_as_list((extra_info or {}).get("path"))) - 2, 0)
    hits = (round(s.share * inner) if inner else 1) if mode == "rubric" and s.acc > 0 else None
    out = _finish(s, base, evidence_weight=evidence_weight, step_weight=0.0, step_alpha=1.0, rho_pf=1.0,
                  **(multisearch or {}))
    outcome = (base + evidence_reward(s.acc, s.evidence, evidence_weight) + out["multi_query"] + out["merge"]
               if s.sol.format_ok else 0.0)
    apply_judge([out], [s.sol], [solution_str or ""], [extra_info], JudgeSettings())  # the judge keys, all 0
    out["score"] = encode(format_ok=s.sol.format_ok, outcome=outcome, hits=hits,
                          check_turns=call_turns(solution_str or "", [CHECK_ANSWER]))
    return out


def _batch(sources: list, solutions: list, truths: list, extras: list, mode: str, min_f1: float,
           rubric_weight: float, gain_score: str, terms: dict, kwargs: dict,
           opts: JudgeSettings | None = None, sarl: dict | None = None) -> list:
    """The batch manager's call: every response of a step, the rubric normalised within each question's group;
    the judge asked for all of them at once."""
    out: list = [None] * len(solutions)
    scored: dict[int, _Scored] = {}
    for i, (src, sol, gt, extra) in enumerate(zip(sources, solutions, truths, extras)):
        if src != DATA_SOURCE:
            out[i] = compute_score(src, sol, gt, extra, **kwargs)
            continue
        s = scored[i] = _Scored(sol or "", gt, extra, min_f1)
        s.base = _mode_score(s, mode, gt, extra, min_f1, gain_score, **(sarl or {}))
    if mode == "rubric":
        groups: dict[str, list[int]] = {}
        ids = group_ids(extras)
        for i in scored:
            groups.setdefault(ids[i], []).append(i)
        for members in groups.values():
            rewards = rubric_rewards([scored[i].base for i in members], [scored[i].share for i in members],
                                     rubric_weight)
            for i, r in zip(members, rewards):
                scored[i].base = r
    for i, s in scored.items():
        out[i] = _finish(s, s.base, **terms)
    mine = sorted(scored)
    apply_judge([out[i] for i in mine], [scored[i].sol for i in mine], [solutions[i] or "" for i in mine],
                [extras[i] for i in mine], opts or JudgeSettings())
    return out


__all__ = ["DIAGNOSTIC_KEYS", "MAX_QUERIES", "MIN_F1", "REWARD_KEYS", "RHO_PF", "Solution", "compute_score",
           "evidence_share", "gold_answers", "parse_solution"]
