"""Trace -> SFT row: the conversation as Arrow structs, in the exact shape TRL and chat templates read.

Every message gets the six keys of :data:`synth.engine.records.MESSAGE_TYPE` (role, content,
tool_calls, tool_call_id, name, reasoning_content), with None where a key does not apply -- which is also
what Arrow gives back when the table is read, so the length filter measures exactly
what training renders.  Tool-call ``arguments`` stay JSON strings: as structs Arrow
would merge the argument keys of every tool into one type (a ``search`` call would gain
``offset: null``).  An assistant turn keeps the teacher's reasoning (``reasoning_content``): distilling a
thinking teacher without it throws away the most valuable part of the trace; how a template renders it is
``sft.reasoning`` (:mod:`synth.tokenizer.reasoning`).  A row also carries
the trace's step labels (``step_labels``, one per assistant turn: E_t, pivot hops, grounded).

``sft.context`` decides what a row holds (:func:`samples`; which of its messages are trained is the loss
policy's, :mod:`synth.tokenizer.losspolicy`):

- ``full``: one row per kept trace, every observation in full, every assistant turn trained (``turn`` null);
- ``as_seen``: one row per assistant turn ``t`` of a kept trace: the context the teacher saw when it wrote
  turn ``t`` (:func:`synth.rollout.loop.teacher_view`: under ``rollout.compress_observations`` the older
  observations are placeholders), then turn ``t`` itself, the only message trained (``turn = t``).
"""

from __future__ import annotations

from synth.engine.records import SFT_SCHEMA, Trace
from synth.engine.conversation import Message
from synth.rollout.labels import label_rows, labels_of
from synth.rollout.loop import teacher_view
from synth.tokenizer.losspolicy import AS_SEEN, CONTEXTS, FULL, TRAINED_ROLE

from filters.config import FiltersConfig

MIN_GROUNDING = FiltersConfig.model_fields["min_grounding"].default


def sft_message(m: Message) -> dict:
    """One message as a MESSAGE_TYPE dict (all six keys present)."""
    return {
        "role": m.role,
        "content": m.text,
        "tool_calls": [tc.to_openai() for tc in m.tool_calls] or None,
        "tool_call_id": m.tool_call_id if m.role == "tool" else None,
        "name": m.name if m.role == "tool" else None,
        "reasoning_content": (m.reasoning_content or None) if m.role == "assistant" else None,
    }


def sft_messages(trace: Trace) -> list[dict]:
    """The trace's conversation as SFT messages."""
    return [sft_message(m) for m in trace.conversation.messages]



def samples(messages: list[dict], context: str = FULL, compress: bool = True, keep: int = 2
            ) -> list[tuple[int | None, list[dict]]]:
    """``(turn, messages)`` of each SFT row a conversation gives under ``context``: ``full``, the conversation
    (turn None: every assistant turn trained); ``as_seen``, for each assistant turn ``t`` (from 1) the context the
    model was sent for it (:func:`~synth.rollout.loop.teacher_view` with ``compress``, ``keep``: the rollout's
    ``compress_observations``, ``keep_observations``) and the turn itself, the one trained."""
    if context == FULL:
        return [(None, messages)]
    if context != AS_SEEN:
        raise ValueError(f"unknown sft.context {context!r} (allowed: {', '.join(CONTEXTS)})")
    out, turn = [], 0
    for i, m in enumerate(messages):
        if m["role"] == TRAINED_ROLE:
            turn += 1
            out.append((turn, [*teacher_view(messages[:i], compress, keep), m]))
    return out


def sft_rows(trace: Trace, rubric: float, min_grounding: float = MIN_GROUNDING, context: str = FULL,
             compress: bool = True, keep: int = 2) -> list[dict]:
    """The rows of the ``sft`` table (:data:`synth.engine.records.SFT_SCHEMA`) for a kept trace under
    ``context`` (:func:`samples`), each with the trace's step labels (:mod:`synth.rollout.labels`;
    ``min_grounding`` only for a trace that carries none)."""
    labels = label_rows(labels_of(trace, min_grounding))
    return [{
        "messages": messages,
        "tools": trace.tools,
        "question_id": trace.question_id,
        "trace_id": trace.trace_id,
        "rubric": float(rubric),
        "n_tool_calls": int(trace.n_tool_calls),
        "teacher_model": trace.teacher_model,
        "split": trace.split,
        "step_labels": labels,
        "turn": turn,
    } for turn, messages in samples(sft_messages(trace), context, compress, keep)]


def sft_row(trace: Trace, rubric: float, min_grounding: float = MIN_GROUNDING) -> dict:
    """The one ``full`` row of a kept trace (:func:`sft_rows`)."""
    return sft_rows(trace, rubric, min_grounding)[0]


__all__ = ["AS_SEEN", "CONTEXTS", "FULL", "SFT_SCHEMA", "samples", "sft_message", "sft_messages", "sft_row",
           "sft_rows"]
