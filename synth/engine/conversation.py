"""The conversation of a trace: OpenAI-format messages, parsed once.

A trace stores its conversation as OpenAI-format JSON (``Trace.messages``: Arrow would merge
dict keys across rows); :class:`Conversation` is that JSON parsed, with its messages
(:class:`Message`) and their tool calls (:class:`ToolCall`, whose ``arguments`` stay the JSON
text the model wrote).  Filters, SFT rows, the report and the oracle agent read a trace
through :func:`parse_conversation`, one parse however often it is read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterator


# The id prefix of a tool call the harness played for the model (ACTGUIDE's guidance prefix,
# synth.rollout.loop.rollout_one): a turn of the trace that is not the model's own.
GUIDED_CALL = "guide_"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an assistant turn; ``arguments`` is the JSON text the model wrote."""

    id: str
    name: str
    arguments: str

    def args(self) -> dict | None:
        """The arguments as a dict; None when they are not a JSON object."""
        try:
            obj = json.loads(self.arguments)
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None

    @classmethod
    def from_openai(cls, tc: dict[str, Any], index: int, id_prefix: str = "call") -> "ToolCall":
        """A server's tool call in the one shape hopforge stores.

        Servers differ: some send ``arguments`` as an object instead of a JSON string, some
        omit the id (it becomes ``<id_prefix>_<index>``) or the name.  Arrow merges dict keys
        across rows, so the stored shape must not vary with the server.
        """
        fn = tc.get("function") or {}
        cid, name, args = tc.get("id"), fn.get("name"), fn.get("arguments")
        if not isinstance(args, str):
            args = json.dumps(args if args is not None else {}, ensure_ascii=False)
        return cls(cid if isinstance(cid, str) and cid else f"{id_prefix}_{index}",
                   name if isinstance(name, str) else "", args)

    def to_openai(self) -> dict[str, Any]:
        """The call as an OpenAI ``tool_calls`` item (the shape of :data:`TOOL_CALL_TYPE`)."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation.  ``content`` is text, or OpenAI content parts as given."""

    role: str
    content: str | list | None = None
    tool_calls: tuple[ToolCall, ...] = ()  # assistant turns only
    tool_call_id: str | None = None  # tool messages: the call they answer
    name: str | None = None  # tool messages: the tool that answered
    reasoning_content: str | None = None

    @property
    def text(self) -> str | None:
        """``content`` as plain text (content parts joined)."""
        if isinstance(self.content, list):
            return "".join(p.get("text") or "" for p in self.content if isinstance(p, dict))
        return self.content


@dataclass(frozen=True, slots=True)
class Conversation:
    """A parsed conversation.  Parsing is lenient: it stops at the first structural problem
    (JSON that is not a list of messages in OpenAI shape), described in ``problem``, and
    keeps what came before it, including the message it stopped in when that message is
    readable.  ``problem_at`` is that message's index; None when the problem is with the
    whole JSON."""

    messages: tuple[Message, ...] = ()
    problem: str | None = None
    problem_at: int | None = None

    @classmethod
    def from_json(cls, text: str) -> "Conversation":
        """Parse a JSON list of OpenAI messages; see :meth:`from_openai`."""
        try:
            raw = json.loads(text)
        except (TypeError, ValueError) as e:
            return cls((), f"messages are not JSON: {e}")
        return cls.from_openai(raw)

    @classmethod
    def from_openai(cls, raw: Any) -> "Conversation":
        """Read decoded OpenAI messages.  Structural problems: not a non-empty list, a message
        that is not an object or whose role is not a string, a tool message whose
        ``tool_call_id`` is not a string, and an assistant tool call that is not an object or
        lacks an id, a function object, a string name or string arguments."""
        if not isinstance(raw, list) or not raw:
            return cls((), "messages are not a non-empty list")
        out: list[Message] = []
        for i, m in enumerate(raw):
            if not isinstance(m, dict):
                return cls(tuple(out), f"message {i} is not an object", i)
            role = m.get("role")
            if not isinstance(role, str):
                return cls(tuple(out), f"message {i} has role {role!r}", i)
            cid = m.get("tool_call_id") if role == "tool" else None
            if cid is not None and not isinstance(cid, str):
                # The same words the format filter uses for an id that answers no call.
                return cls(tuple(out), f"message {i}: tool message answers {cid!r}, which no earlier "
                                       "unanswered call has", i)
            content, name, reasoning = m.get("content"), m.get("name"), m.get("reasoning_content")
            if not isinstance(content, (str, list)):
                content = None  # OpenAI content is text or parts; anything else is read as no content
            calls, problem = _read_calls(m.get("tool_calls")) if role == "assistant" else ((), None)
            out.append(Message(role, content, calls, cid, name if role == "tool" and isinstance(name, str) else None,
                               reasoning if isinstance(reasoning, str) else None))
            if problem is not None:
                return cls(tuple(out), f"message {i}: {problem}", i)
        return cls(tuple(out))

    def tool_calls(self) -> Iterator[tuple[int, ToolCall]]:
        """``(assistant turn, call)`` for every tool call, in order; turns count assistant messages from 1."""
        turn = 0
        for m in self.messages:
            if m.role == "assistant":
                turn += 1
                for tc in m.tool_calls:
                    yield turn, tc


def _read_calls(raw: Any) -> tuple[tuple[ToolCall, ...], str | None]:
    """An assistant message's tool calls, up to the first malformed one, and what is wrong with it."""
    calls: list[ToolCall] = []
    if not raw:
        return (), None
    if not isinstance(raw, list):
        return (), "a tool call is not an object"  # a dict or a string holds no call objects either
    for tc in raw:
        if not isinstance(tc, dict):
            return tuple(calls), "a tool call is not an object"
        cid = tc.get("id")
        if not isinstance(cid, str) or not cid:
            return tuple(calls), "a tool call has no id"
        fn = tc.get("function")
        if not isinstance(fn, dict):
            return tuple(calls), f"tool call {cid!r} has no function"
        name, args = fn.get("name"), fn.get("arguments")
        if not isinstance(name, str):
            return tuple(calls), f"tool call {cid!r} names unknown tool {name!r}"
        if not isinstance(args, str):
            return tuple(calls), f"tool call {cid!r}: arguments are not a JSON string"
        calls.append(ToolCall(cid, name, args))
    return tuple(calls), None


@lru_cache(maxsize=256)
def parse_conversation(messages_json: str) -> Conversation:
    """:meth:`Conversation.from_json`, cached: every filter and writer of a trace reads one parse."""
    return Conversation.from_json(messages_json)


__all__ = ["GUIDED_CALL", "ToolCall", "Message", "Conversation", "parse_conversation"]
