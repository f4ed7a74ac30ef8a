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

The filter stage writes every pooled question's best reference to ``filter/references``
(:data:`REFERENCES`, :func:`write_references`), whoever measures the band: under ``rl.band_by: student``
the ``rl_band`` stage reads it back (:func:`load_references`) for the rows it writes, and guides an
all-wrong question of the *student's* band by the teacher's rollout (and measures ACTGUIDE's k* there,
see :mod:`sft.rlband`).

"Best" ranks a question's correct rollouts by, in order: whether the trace passed the whole
filter chain (grounded, not repetitive, within the step limits: a clean demonstration), the
entity rubric (:func:`filters.bestofn.rubric_raw`, as best-of-n ranks SFT traces), fewer tool
calls, and the trace id (deterministic).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from typing import Any, Iterable

from synth.engine.records import REFERENCE_SCHEMA, Question, Trace
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

    @property
    def n_actions(self) -> int:
        """K: the number of guidance actions (tool calls) a trainer may prefix."""
        return len(json.loads(self.calls or "[]"))

    def to_row(self) -> dict:
        """A ``filter/references`` row (:data:`synth.engine.records.REFERENCE_SCHEMA`)."""
        return {"question_id": self.question_id, "trace_id": self.trace_id, "passed_chain": self.passed_chain,
                "rubric_raw": float(self.rubric_raw), "n_tool_calls": int(self.n_tool_calls), "calls": self.calls,
                "step_labels": list(self.step_labels)}

    @classmethod
    def from_row(cls, row: dict) -> "Reference":
        return cls(row["question_id"], row["trace_id"], bool(row["passed_chain"]), float(row["rubric_raw"] or 0.0),
                   int(row["n_tool_calls"] or 0), row["calls"] or "[]", list(row["step_labels"] or []))

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


# The filter's table of each pooled question's best correct rollout.
REFERENCES = "filter/references"


def write_references(ctx: Any, best: dict[str, Reference]) -> int:
    """Write ``best`` (question id -> reference) to :data:`REFERENCES`, in question-id order; returns the rows."""
    w = ctx.writer(REFERENCES, REFERENCE_SCHEMA)
    w.write([best[q].to_row() for q in sorted(best)])
    w.close()
    return len(best)


def load_references(store: Any, question_ids: Iterable[str] | None = None) -> dict[str, Reference]:
    """Question id -> its best correct teacher rollout, from the filter's :data:`REFERENCES` (only
    ``question_ids`` when given)."""
    import pyarrow.dataset as ds

    table = store.dataset(REFERENCES, hint="filter")
    flt = None
    if question_ids is not None:
        flt = ds.field("question_id").isin(sorted(set(question_ids)))
    return {r["question_id"]: Reference.from_row(r) for r in table.to_table(filter=flt).to_pylist()}


__all__ = ["REFERENCES", "Reference", "guidance_calls", "keep_best", "load_references", "reference_of",
           "write_references"]
