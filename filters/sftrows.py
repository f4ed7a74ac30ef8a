"""Trace -> SFT row: the conversation as Arrow structs, in the exact shape TRL and chat templates read.

Every message gets the five keys of :data:`synth.engine.records.MESSAGE_TYPE` (role, content,
tool_calls, tool_call_id, name), with None where a key does not apply -- which is also
what Arrow gives back when the table is read, so the length filter measures exactly
what training renders.  Tool-call ``arguments`` stay JSON strings: as structs Arrow
would merge the argument keys of every tool into one type (a ``search`` call would gain
``offset: null``).  Keys outside the schema (e.g. ``reasoning_content``) are not kept.
"""

from __future__ import annotations

import json
from typing import Any

from synth.engine.records import SFT_SCHEMA

from filters.base import messages_of


def _text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict))
    return str(content)


def _tool_call(tc: dict, i: int) -> dict:
    fn = tc.get("function") or {}
    args = fn.get("arguments")
    if not isinstance(args, str):
        args = json.dumps(args if args is not None else {}, ensure_ascii=False)
    return {"id": tc.get("id") or f"call_{i}", "type": tc.get("type") or "function",
            "function": {"name": fn.get("name") or "", "arguments": args}}


def sft_message(m: dict) -> dict:
    """One OpenAI message as a MESSAGE_TYPE dict (all five keys present)."""
    calls = [_tool_call(tc, i) for i, tc in enumerate(m.get("tool_calls") or [])]
    return {
        "role": m.get("role"),
        "content": _text(m.get("content")),
        "tool_calls": calls or None,
        "tool_call_id": m.get("tool_call_id") if m.get("role") == "tool" else None,
        "name": m.get("name") if m.get("role") == "tool" else None,
    }


def sft_messages(row: dict) -> list[dict]:
    """The trace's conversation as SFT messages."""
    return [sft_message(m) for m in messages_of(row)]


def sft_row(row: dict, rubric: float) -> dict:
    """A row of the ``sft`` table (:data:`synth.engine.records.SFT_SCHEMA`) for a kept trace."""
    return {
        "messages": sft_messages(row),
        "tools": row["tools"],
        "question_id": row["question_id"],
        "trace_id": row["trace_id"],
        "rubric": float(rubric),
        "n_tool_calls": int(row["n_tool_calls"]),
        "teacher_model": row["teacher_model"],
    }


__all__ = ["SFT_SCHEMA", "sft_message", "sft_messages", "sft_row"]
