"""Step labels of a trace, for process rewards: the one home of the evidence state E_t and the pivot steps.

PiCA trains a step-level reward model from "pivot steps", the steps that made real progress;
with gold paths hopforge knows them exactly.  Every trace carries one :class:`StepLabel` per
assistant turn (``Trace.step_labels``, written by the rollout loop), and the ``sft`` rows and the
``rl_pool`` rows built from a trace copy them, so a step reward model can be trained from the data
with no extra labelling.  For turn t (assistant turns count from 1):

- ``evidence_state`` E_t: how much of the gold path the agent had seen when it decided turn t
  (``gold_first_seen[j] < t``, in a search result, an opened or a found page): 0 no gold page,
  1 some, 2 all.  This is the approximation of the evidence-state literature (clarity plus
  sufficiency) that gold paths make exact; the report's ERF and calibration read the same
  function (:func:`evidence_states`; ERF's ``T_recover`` through :func:`full_evidence_turn`).
- ``pivot_hops``: the positions j in the question's path (0 the start entity, the last one the
  answer page) whose page turn t's observation showed *first*; non-empty marks a pivot step, and
  the positions say which hop of the chain it reached.
- ``grounded``: whether every tool call of the turn acted only on what the agent had been shown
  (the grounded filter's analysis, :mod:`synth.tools.grounding`, at ``filters.min_grounding``);
  None for a turn with no call that analysis judges (the final answer).
"""

from __future__ import annotations

from typing import Iterable

from synth.engine.conversation import Conversation
from synth.engine.records import StepLabel
from synth.tools.grounding import grounding


def evidence_states(gold_first_seen: list[int], n_turns: int) -> list[int]:
    """``E_t`` for t = 1..n_turns: the evidence state each turn was decided in."""
    total = len(gold_first_seen)
    states = []
    for t in range(1, n_turns + 1):
        seen = sum(1 for g in gold_first_seen if 0 <= g < t)
        states.append(2 if seen == total else (0 if seen == 0 else 1))
    return states


def full_evidence_turn(gold_first_seen: list[int], n_turns: int) -> int | None:
    """The first turn t (1..n_turns) decided at ``E_t = 2``, read off :func:`evidence_states` (None: no turn
    was): the evidence half of the report's recovery time ``T_recover``.  A page first shown by turn t's
    observation counts from turn t + 1, the turn that decides with it."""
    states = evidence_states(gold_first_seen, n_turns)
    return states.index(2) + 1 if 2 in states else None


def pivot_hops(gold_first_seen: list[int], turn: int) -> list[int]:
    """The path positions whose gold page turn ``turn`` revealed first."""
    return [j for j, t in enumerate(gold_first_seen) if t == turn]


def grounded_turns(conv: Conversation, min_grounding: float) -> dict[int, bool]:
    """Turn -> whether all its judged tool calls are grounded (turns without one are absent)."""
    out: dict[int, bool] = {}
    for step in grounding(conv, min_grounding):
        out[step.turn] = out.get(step.turn, True) and step.grounded
    return out


def step_labels(conv: Conversation, gold_first_seen: list[int], n_turns: int,
                min_grounding: float) -> list[StepLabel]:
    """One :class:`StepLabel` per assistant turn of a trace (see the module docstring)."""
    states = evidence_states(list(gold_first_seen), n_turns)
    grounded = grounded_turns(conv, min_grounding)
    return [StepLabel(turn=t, evidence_state=states[t - 1], pivot_hops=pivot_hops(list(gold_first_seen), t),
                      grounded=grounded.get(t)) for t in range(1, n_turns + 1)]


def labels_of(trace, min_grounding: float) -> list[StepLabel]:
    """A trace's labels: those it carries, or, for a trace written before labels existed (or made by hand),
    computed now by the same rule."""
    if trace.step_labels:
        return [lab if isinstance(lab, StepLabel) else StepLabel(**lab) for lab in trace.step_labels]
    return step_labels(trace.conversation, trace.gold_first_seen, int(trace.n_turns), min_grounding)


def label_rows(labels: Iterable[StepLabel]) -> list[dict]:
    """The labels as table rows (``STEP_LABEL_TYPE`` dicts)."""
    return [{"turn": lab.turn, "evidence_state": lab.evidence_state, "pivot_hops": list(lab.pivot_hops),
             "grounded": lab.grounded} for lab in labels]


__all__ = ["evidence_states", "full_evidence_turn", "grounded_turns", "label_rows", "labels_of", "pivot_hops",
           "step_labels"]
