"""The format filter (reason ``format``): a trace must be a well-formed OpenAI tool conversation.

It checks what SFT and chat templates rely on:

- ``messages`` is a JSON list of message objects and ``tools`` a JSON list of function schemas;
- roles are system / user / assistant / tool, a system message only comes first, and a
  user message comes before the first assistant turn;
- every tool call has an id, names a tool of the trace's ``tools``, and its ``arguments``
  are a JSON string holding an object;
- every ``tool`` message answers a tool call of an earlier assistant turn that was not
  answered yet, and every call is answered before the next assistant turn;
- the last message is an assistant turn without tool calls that holds ``<answer>...</answer>``.
"""

from __future__ import annotations

import json

from synth.teacher.prompting import extract_answer

from filters.base import BaseFilter, FilterContext, Verdict, call_arguments, messages_of, register

ROLES = frozenset({"system", "user", "assistant", "tool"})


def tool_names(tools_json: str) -> set[str] | None:
    """Names of the function schemas in a ``tools`` JSON string; None when it is not a list of schemas."""
    try:
        tools = json.loads(tools_json)
    except (json.JSONDecodeError, TypeError, ValueError):
        return None
    if not isinstance(tools, list):
        return None
    names = set()
    for t in tools:
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            return None
        names.add(fn["name"])
    return names


def format_problem(messages_json: str, tools_json: str) -> str | None:
    """What is wrong with a conversation, or None when it is well formed."""
    try:
        messages = json.loads(messages_json)
    except (json.JSONDecodeError, TypeError, ValueError) as e:
        return f"messages are not JSON: {e}"
    if not isinstance(messages, list) or not messages:
        return "messages are not a non-empty list"
    known = tool_names(tools_json)
    if known is None:
        return "tools are not a JSON list of function schemas"
    pending: set[str] = set()  # calls of the last assistant turn not answered yet
    seen_ids: set[str] = set()
    seen_user = False
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            return f"message {i} is not an object"
        role = m.get("role")
        if role not in ROLES:
            return f"message {i} has role {role!r}"
        if role == "system" and i != 0:
            return f"system message at position {i}"
        if role == "user":
            seen_user = True
        if role in ("user", "assistant") and pending:
            return f"tool call {sorted(pending)[0]!r} is not answered before message {i}"
        if role == "assistant":
            if not seen_user:
                return "an assistant turn comes before any user message"
            for tc in m.get("tool_calls") or []:
                problem = _call_problem(tc, known, seen_ids)
                if problem:
                    return f"message {i}: {problem}"
                pending.add(tc["id"])
                seen_ids.add(tc["id"])
        elif role == "tool":
            cid = m.get("tool_call_id")
            if cid not in pending:
                return f"message {i}: tool message answers {cid!r}, which no earlier unanswered call has"
            pending.discard(cid)
    if pending:
        return f"tool call {sorted(pending)[0]!r} is never answered"
    last = messages[-1]
    if last.get("role") != "assistant" or last.get("tool_calls"):
        return "the trace does not end with an assistant answer"
    content = last.get("content")
    if not isinstance(content, str) or not extract_answer(content):
        return "the last turn has no <answer>...</answer>"
    return None


def _call_problem(tc: object, known: set[str], seen_ids: set[str]) -> str | None:
    if not isinstance(tc, dict):
        return "a tool call is not an object"
    cid = tc.get("id")
    if not isinstance(cid, str) or not cid:
        return "a tool call has no id"
    if cid in seen_ids:
        return f"tool call id {cid!r} is used twice"
    fn = tc.get("function")
    if not isinstance(fn, dict):
        return f"tool call {cid!r} has no function"
    name = fn.get("name")
    if name not in known:
        return f"tool call {cid!r} names unknown tool {name!r}"
    if not isinstance(fn.get("arguments"), str):
        return f"tool call {cid!r}: arguments are not a JSON string"
    if call_arguments(tc) is None:
        return f"tool call {cid!r}: arguments are not a JSON object"
    return None


@register
class FormatFilter(BaseFilter):
    """Drops malformed conversations (reason ``format``); see the module docstring."""

    name = "format"
    reasons = ("format",)

    def __call__(self, row: dict, ctx: FilterContext) -> Verdict:
        problem = format_problem(row["messages"], row["tools"])
        if problem:
            return False, "format", problem
        messages_of(row)  # parse once for the filters after this one
        return True


__all__ = ["FormatFilter", "ROLES", "format_problem", "tool_names"]
