"""Each question's best correct teacher rollout: the reference of its ``rl_pool`` row, and ACTGUIDE-RL's guidance.

ACTGUIDE-RL: for a question whose unguided rollouts all fail, a trainer prefixes the first k
actions of a successful trajectory (k as small as works) and trains guided and unguided
rollouts together.  hopforge holds those trajectories: the teacher's correct rollouts.  With
``rl.guidance: true``, an rl question whose band is all-wrong (``c = 0`` of the model that
measured the band) enters ``rl_pool`` with ``extra_info.guidance``, the tool-call sequence of
its best correct rollout as a JSON list of ``{"name", "arguments"}``.  A question with no
correct rollout has no guidance and stays out (counted, ``without_correct_rollout``).

Every ``rl_pool`` row also names its question's best correct rollout (``reference_trace_id``)
and carries its step labels (``step_labels``), so the pivot steps of a successful path travel
with the RL data.

"Best" ranks a question's correct rollouts by, in order: whether the trace passed the whole
filter chain (grounded, not repetitive, within the step limits: a clean demonstration), the
entity rubric (:func:`filters.bestofn.rubric_raw`, as best-of-n ranks SFT traces), fewer tool
calls, and the trace id (deterministic).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from synth.engine.records import Question, Trace
from synth.rollout.labels import label_rows, labels_of

from filters.bestofn import rubric_raw


@dataclass(slots=True)
class Reference:
    """A correct rollout of a question, as the ranking and the ``rl_pool`` row need it (plain data)."""

    question_id: str
    trace_id: str
    passed_chain: bool
    rubric_raw: float
    n_tool_calls: int
    calls: str  # guidance_calls(trace)
    step_labels: list[dict] = field(default_factory=list)

    def rank(self) -> tuple:
        """Sort key: lower is better (see the module docstring)."""
        return (not self.passed_chain, -self.rubric_raw, self.n_tool_calls, self.trace_id)

    def as_reference(self) -> dict:
        """What :func:`filters.band.rl_row` takes as ``reference``."""
        return {"trace_id": self.trace_id, "step_labels": self.step_labels}


def guidance_calls(trace: Trace) -> str:
    """The trace's tool calls in order, ``[{"name", "arguments"}]`` as JSON (arguments parsed when they are a
    JSON object, else kept as the string the model wrote)."""
    out = []
    for _, tc in trace.conversation.tool_calls():
        args = tc.args()
        out.append({"name": tc.name, "arguments": args if args is not None else tc.arguments})
    return json.dumps(out, ensure_ascii=False)


def reference_of(trace: Trace, question: Question, passed_chain: bool, min_grounding: float) -> Reference:
    """The :class:`Reference` of one correct rollout."""
    return Reference(trace.question_id, trace.trace_id, bool(passed_chain), rubric_raw(trace, question),
                     int(trace.n_tool_calls), guidance_calls(trace), label_rows(labels_of(trace, min_grounding)))


def keep_best(best: dict[str, Reference], refs: list[Reference]) -> None:
    """Merge ``refs`` into ``best`` (question id -> its best reference so far)."""
    for r in refs:
        cur = best.get(r.question_id)
        if cur is None or r.rank() < cur.rank():
            best[r.question_id] = r


__all__ = ["Reference", "guidance_calls", "keep_best", "reference_of"]
