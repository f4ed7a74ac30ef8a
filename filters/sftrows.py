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
"""

from __future__ import annotations

from synth.engine.records import SFT_SCHEMA, Trace
from synth.engine.conversation import Message
from synth.rollout.labels import label_rows, labels_of

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


def sft_row(trace: Trace, rubric: float, min_grounding: float = MIN_GROUNDING) -> dict:
    """A row of the ``sft`` table (:data:`synth.engine.records.SFT_SCHEMA`) for a kept trace, with its step
    labels (:mod:`synth.rollout.labels`; ``min_grounding`` only for a trace that carries none)."""
    return {
        "messages": sft_messages(trace),
        "tools": trace.tools,
        "question_id": trace.question_id,
        "trace_id": trace.trace_id,
        "rubric": float(rubric),
        "n_tool_calls": int(trace.n_tool_calls),
        "teacher_model": trace.teacher_model,
        "split": trace.split,
        "step_labels": label_rows(labels_of(trace, min_grounding)),
    }


__all__ = ["SFT_SCHEMA", "sft_message", "sft_messages", "sft_row"]
