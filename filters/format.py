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

A trajectory whose teacher call failed is no data and the rollout stage never commits one; one
that reaches the filter anyway (a table written by other means) is dropped as ``teacher_failed``,
never relabelled as a format failure.
"""

from __future__ import annotations

import json

from synth.engine.records import TEACHER_FAILED, Trace
from synth.engine.conversation import Conversation, ToolCall
from synth.teacher.prompting import extract_answer

from filters.base import BaseFilter, FilterContext, Verdict, register

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


def format_problem(conv: Conversation, tools_json: str) -> str | None:
    """What is wrong with a parsed conversation and its tools, or None when both are well formed."""
    if conv.problem is not None and conv.problem_at is None:
        return conv.problem  # not a JSON list of messages
    known = tool_names(tools_json)
    if known is None:
        return "tools are not a JSON list of function schemas"
    pending: set[str] = set()  # calls of the last assistant turn not answered yet
    seen_ids: set[str] = set()
    seen_user = False
    for i, m in enumerate(conv.messages):
        if m.role not in ROLES:
            return f"message {i} has role {m.role!r}"
        if m.role == "system" and i != 0:
            return f"system message at position {i}"
        if m.role == "user":
            seen_user = True
        if m.role in ("user", "assistant") and pending:
            return f"tool call {sorted(pending)[0]!r} is not answered before message {i}"
        if m.role == "assistant":
            if not seen_user:
                return "an assistant turn comes before any user message"
            for tc in m.tool_calls:
                problem = _call_problem(tc, known, seen_ids)
                if problem:
                    return f"message {i}: {problem}"
                pending.add(tc.id)
                seen_ids.add(tc.id)
        elif m.role == "tool":
            if m.tool_call_id not in pending:
                return f"message {i}: tool message answers {m.tool_call_id!r}, which no earlier unanswered call has"
            pending.discard(m.tool_call_id)
    if conv.problem is not None:
        return conv.problem  # the structural problem parsing stopped at, after what came before it
    if pending:
        return f"tool call {sorted(pending)[0]!r} is never answered"
    last = conv.messages[-1]
    if last.role != "assistant" or last.tool_calls:
        return "the trace does not end with an assistant answer"
    if not isinstance(last.content, str) or not extract_answer(last.content):
        return "the last turn has no <answer>...</answer>"
    return None


def _call_problem(tc: ToolCall, known: set[str], seen_ids: set[str]) -> str | None:
    # Parsing checked the call's shape (an id, a function with a string name and string arguments).
    if tc.id in seen_ids:
        return f"tool call id {tc.id!r} is used twice"
    if tc.name not in known:
        return f"tool call {tc.id!r} names unknown tool {tc.name!r}"
    if tc.args() is None:
        return f"tool call {tc.id!r}: arguments are not a JSON object"
    return None


@register("format", "format", TEACHER_FAILED)
class FormatFilter(BaseFilter):
    """Drops malformed conversations (reason ``format``) and failed trajectories (``teacher_failed``); see
    the module docstring."""

    def __call__(self, trace: Trace, ctx: FilterContext) -> Verdict:
        if trace.stop_reason == TEACHER_FAILED:
            return False, TEACHER_FAILED, f"the teacher call failed: {trace.error or 'no reason recorded'}"
        problem = format_problem(trace.conversation, trace.tools)
        if problem:
            return False, "format", problem
        return True


__all__ = ["FormatFilter", "ROLES", "format_problem", "tool_names"]
