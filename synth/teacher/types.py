"""The teacher's types: the backend interface, its response, and its errors.

They live apart from :mod:`synth.teacher.client` so backends (:mod:`synth.teacher.openai_compat`,
:mod:`synth.teacher.hf`, :mod:`synth.teacher.oracle`) can import them without importing the client
that loads them.
:mod:`synth.teacher.client` re-exports all of them; callers import from there.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote, quote_plus

from synth.engine.errors import StageFailed
from synth.engine.conversation import ToolCall

# Failure reasons a backend reports.  Stages count dropped items by these names.  Besides these,
# ``http_<status>`` and ``unreachable``; ``quota`` (the account has no quota or credit left) is never
# retried and stops the stage (:func:`synth.teacher.breaker.failure_kind`).
RETRYABLE_REASONS = frozenset({"http_429", "timeout", "connection", "bad_response"})
# The largest token count a usage figure may hold: SQLite's and orjson's integers are 64-bit.
MAX_TOKENS_FIGURE = 2**63 - 1


@dataclass(slots=True)
class ChatResponse:
    """One assistant turn.

    ``message`` is an OpenAI assistant message dict: ``role``, ``content`` (str or None; a server's
    list of content parts is read as its text, see :func:`content_text`),
    optionally ``tool_calls`` (``[{id, type: "function", function: {name, arguments}}]``,
    ``arguments`` always a JSON string) and ``reasoning_content`` (thinking models; ``reasoning_field`` says
    where the server put it: ``reasoning``, ``reasoning_content``, ``think`` or a configured name).
    ``usage`` holds ``prompt_tokens`` and ``completion_tokens`` (and ``server_cached_prompt_tokens``,
    the part of the prompt the server served from its prefix cache, when it says so: :func:`read_usage`).
    ``finish_reason`` is the server's (``stop``, ``length`` when cut at max_tokens, ``tool_calls``), kept in the cache.
    ``tool_protocol`` is how this turn's tool calls travelled (``native``, ``hermes``, ...; see
    :mod:`synth.teacher.protocols`), None when the request offered no tools or the backend
    does not say.  ``cached`` is True when the answer came from the call cache (no request was
    sent); ``latency_s`` is then the lookup time.
    """

    message: dict[str, Any]
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    finish_reason: str | None = None
    model: str = ""
    cached: bool = False
    latency_s: float = 0.0
    # Seconds the model took to produce this answer: measured when it was sent, kept in the cache,
    # so a trace's latency is the same whether its calls were sent or replayed.  A simulated
    # backend (the oracle) sets its own, deterministic value.
    model_latency_s: float | None = None
    tool_protocol: str | None = None
    reasoning_field: str | None = None

    @property
    def content(self) -> str | None:
        """The assistant text (None for a pure tool-call turn)."""
        return self.message.get("content")

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls of this turn ([] when there are none)."""
        return self.message.get("tool_calls") or []

    def to_record(self) -> dict[str, Any]:
        """The part of the response worth caching (everything but ``cached`` and ``latency_s``)."""
        rec = {"message": self.message, "usage": self.usage, "finish_reason": self.finish_reason, "model": self.model,
               "model_latency_s": self.model_latency_s, "tool_protocol": self.tool_protocol}
        if self.reasoning_field is not None:  # absent otherwise: records of models that do not think stay as they were
            rec["reasoning_field"] = self.reasoning_field
        return rec

    @classmethod
    def from_record(cls, rec: dict[str, Any], *, cached: bool, latency_s: float) -> "ChatResponse":
        """Rebuild a response from :meth:`to_record` output; ValueError (naming what is wrong) for a
        record that is not one (a cache entry written by an older version, or damaged)."""
        if not isinstance(rec, dict) or not isinstance(rec.get("message"), dict):
            raise ValueError("the record has no message object")
        resp = cls(rec["message"], rec.get("usage"), rec.get("finish_reason"), rec.get("model", ""), cached,
                   latency_s, rec.get("model_latency_s"), rec.get("tool_protocol"), rec.get("reasoning_field"))
        resp.validate()
        return resp

    def validate(self) -> "ChatResponse":
        """This response, once it has the shape every caller reads (content text or None, tool calls
        with a name and JSON-string arguments, usage figures that are token counts); ValueError naming
        the first thing that is not.  Nothing enters the call cache before it passes."""
        m = self.message
        if not isinstance(m, dict):
            raise ValueError(f"the message is a {type(m).__name__}, not an object")
        if m.get("content") is not None and not isinstance(m["content"], str):
            raise ValueError(f"message.content is a {type(m['content']).__name__}, not text")
        calls = m.get("tool_calls") or []
        if not isinstance(calls, list):
            raise ValueError("message.tool_calls is not a list")
        for i, tc in enumerate(calls):
            fn = tc.get("function") if isinstance(tc, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or \
                    not isinstance(fn.get("arguments"), str):
                raise ValueError(f"message.tool_calls[{i}] has no function name and JSON-string arguments")
        if m.get("reasoning_content") is not None and not isinstance(m["reasoning_content"], str):
            raise ValueError("message.reasoning_content is not text")
        self.usage = read_usage(self.usage)
        if self.finish_reason is not None and not isinstance(self.finish_reason, str):
            raise ValueError("finish_reason is not text")
        if self.reasoning_field is not None and not isinstance(self.reasoning_field, str):
            raise ValueError("reasoning_field is not text")
        if not isinstance(self.model, str):
            raise ValueError("model is not text")
        return self


def read_usage(raw: Any) -> dict[str, int]:
    """``{"prompt_tokens": n, "completion_tokens": m}`` from a server's ``usage`` (a missing figure or a
    missing ``usage`` is 0), plus ``server_cached_prompt_tokens`` when the server reports prompt tokens it
    served from its own prefix cache (``prompt_tokens_details.cached_tokens``, part of ``prompt_tokens``;
    capped at it).  That is the server's cache, billed at a lower rate; hopforge's call cache is another
    thing (:class:`~synth.teacher.stats.TeacherUsage`).  A record this function wrote reads back the same
    (the flat key is read too).  A figure that is not a whole number in ``[0, 2**63)`` (negative,
    fractional, text, a boolean, or too large for a 64-bit integer) raises ValueError naming it: it must
    never reach reports, costs or the cache."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValueError(f"usage is a {type(raw).__name__}, not an object")
    details = raw.get("prompt_tokens_details")
    if details is not None and not isinstance(details, dict):
        raise ValueError("usage.prompt_tokens_details is not an object")
    figures = {"prompt_tokens": raw.get("prompt_tokens"), "completion_tokens": raw.get("completion_tokens"),
               "prompt_tokens_details.cached_tokens": (details or {}).get("cached_tokens"),
               "server_cached_prompt_tokens": raw.get("server_cached_prompt_tokens")}
    for name, v in figures.items():
        if v is None:
            continue
        # JSON readers hand a figure past 64 bits over as a float: it is out of range before it is fractional.
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not 0 <= v <= MAX_TOKENS_FIGURE:
            raise ValueError(f"usage.{name} is {_clip_value(v)}, out of range (0 to 2**63-1 tokens)")
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"usage.{name} is {_clip_value(v)}, not a whole number of tokens")
    out = {"prompt_tokens": figures["prompt_tokens"] or 0, "completion_tokens": figures["completion_tokens"] or 0}
    served = figures["prompt_tokens_details.cached_tokens"] or figures["server_cached_prompt_tokens"] or 0
    if served:  # absent when the server reports none, so records of servers without prefix caching stay as they were
        out["server_cached_prompt_tokens"] = min(served, out["prompt_tokens"])
    return out


def _clip_value(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


@runtime_checkable
class ChatModel(Protocol):
    """A chat backend: everything :class:`~synth.teacher.client.Teacher` calls.  It makes one attempt per
    call; retries, caching and limits live in ``Teacher``.

    A failed attempt raises :class:`BackendError` with a reason (``http_429``, ``timeout``...).
    ``task`` is the call's :class:`~synth.teacher.tasks.Task` (what output it expects), None for none.  What
    else the caller knows (the oracle's hint) is never handed to a backend: a scripted one reads
    :func:`~synth.teacher.tasks.current_hint`.
    :class:`BaseChatModel` gives the defaults a backend without them needs.
    """

    name: str
    tool_protocol: str  # how tool calls travel: "native" (the server's tool_calls) or a text protocol
    cache_salt: str  # added to every cache key: a scripted backend's code version ("" for a real model)

    async def prepare(self, tools: list[dict] | None, task: Any = None) -> str:
        """The call's variant: what the request adds to the conversation (a text tool protocol, a response
        format), which enters the cache key; ``""`` for none.  May probe the endpoint once."""
        ...

    async def chat(
        self, messages: list[dict], tools: list[dict] | None = None, *, sample_index: int = 0, task: Any = None
    ) -> ChatResponse:
        """Send one chat request and return the assistant turn."""
        ...

    async def aclose(self) -> None:
        """Release connections opened on the running event loop."""
        ...


class BaseChatModel:
    """The defaults of a :class:`ChatModel`: native tool calls, no cache salt, no variant, nothing to close."""

    name: str = "model"
    tool_protocol: str = "native"
    cache_salt: str = ""

    async def prepare(self, tools: list[dict] | None, task: Any = None) -> str:
        """No variant: the request is the conversation as it is."""
        return ""

    async def aclose(self) -> None:
        """Nothing to close."""


class TeacherError(Exception):
    """A teacher call failed for good.  ``reason`` is a short slug such as ``http_500`` or ``timeout``.

    Messages are scrubbed of the API key before they are stored here.
    """

    def __init__(self, reason: str, detail: str = "", attempts: int = 1):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        self.attempts = attempts

    def __reduce__(self):  # keep reason/detail across pickling (process pools, Prefect results)
        return (type(self), (self.reason, self.detail, self.attempts))


class BackendError(TeacherError):
    """One attempt failed.  ``retryable`` says whether a retry may succeed; ``retry_after`` is the
    server's Retry-After in seconds (never retry sooner), if it sent one."""

    def __init__(self, reason: str, detail: str = "", *, retryable: bool | None = None,
                 retry_after: float | None = None):
        super().__init__(reason, detail)
        if retryable is None:
            retryable = reason in RETRYABLE_REASONS or (reason.startswith("http_5"))
        self.retryable = retryable
        self.retry_after = retry_after

    def __reduce__(self):
        return (_rebuild_backend_error, (self.reason, self.detail, self.retryable, self.retry_after))


def _rebuild_backend_error(reason: str, detail: str, retryable: bool, retry_after: float | None) -> BackendError:
    return BackendError(reason, detail, retryable=retryable, retry_after=retry_after)


class ToolsUnusable(StageFailed):
    """The endpoint cannot be given tools the way ``teacher.tool_protocol`` asks (it ignores or
    rejects them); the message names the fix.  Stops the stage: every rollout would otherwise
    end without a tool call."""


_THINK = re.compile(r"<think>(.*?)</think>", re.S)


def split_reasoning(text: str | None) -> tuple[str | None, str]:
    """``(text without its reasoning, the reasoning)`` for a reply that thinks in ``<think>`` tags.

    Qwen3 served without a reasoning parser and DeepSeek-R1 put their thinking in the content.
    Their templates often open ``<think>`` in the prompt, so a reply may hold only the closing
    tag; a reply cut short while thinking has only the opening one.  Text without tags is
    returned unchanged.
    """
    if not text or "think>" not in text:
        return text, ""
    parts: list[str] = []
    head, sep, tail = text.partition("</think>")
    if sep and "<think>" not in head:
        parts.append(head)
        text = tail
    parts += _THINK.findall(text)
    text = _THINK.sub("", text)
    if "<think>" in text:
        text, _, rest = text.partition("<think>")
        parts.append(rest)
    return text.strip(), "\n\n".join(p.strip() for p in parts if p.strip())


def content_text(content: Any) -> str | None:
    """A message's ``content`` as text: a string as it is, None as None, and a list of content parts
    (OpenAI's ``[{"type": "text", "text": "..."}, ...]``, which several servers send) as its text
    parts joined; parts of other types (an image, a refusal) hold no answer text and are skipped.
    Any other shape raises :class:`TypeError` naming it."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise TypeError(f"message.content is a {type(content).__name__}, not text or a list of content parts")
    texts = []
    for i, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise TypeError(f"message.content[{i}] is not a content part (an object with a type)")
        if part["type"] == "text":
            if not isinstance(part.get("text"), str):
                raise TypeError(f"message.content[{i}] is a text part without text")
            texts.append(part["text"])
    return "".join(texts)


# Where a server puts an assistant turn's reasoning, and so where it reads an earlier turn's back
# (``ChatResponse.reasoning_field``, ``teacher.reasoning_field``): vLLM since PR 27752 and OpenRouter send
# ``reasoning``; DeepSeek and vLLM before send ``reasoning_content``; a server without a reasoning parser
# leaves ``<think>...</think>`` in the content (``think``).  A server of its own may use another name.
REASONING_FIELDS = ("reasoning", "reasoning_content")
THINK = "think"
# A reply key that looks like reasoning but is none of the above: the openai backend says so once.
_LOOKS_LIKE_REASONING = re.compile(r"reason|think|thought", re.I)


def reasoning_field_of(raw: dict[str, Any], field: str | None = None) -> str | None:
    """Which field of a server's assistant message ``raw`` carries its reasoning: ``field`` (a configured
    name) when it holds text, else ``reasoning`` or ``reasoning_content``, else ``think`` for ``<think>`` tags in
    the content; None when it carries none."""
    for name in ((field,) if field and field != THINK else ()) + REASONING_FIELDS:
        if isinstance(raw.get(name), str) and raw[name].strip():
            return name
    content = raw.get("content")
    if isinstance(content, str) and "think>" in content and split_reasoning(content)[1]:
        return THINK
    return None


def unread_reasoning_keys(raw: dict[str, Any], field: str | None = None) -> list[str]:
    """Keys of ``raw`` that hold text and are named like reasoning (``thinking``, ``reasoning_text``...) but that
    :func:`normalise_message` does not read: a server's own name for its reasoning."""
    known = {"role", "content", "tool_calls", "name", "refusal", "annotations", "audio", "function_call",
             *REASONING_FIELDS, field or ""}
    return sorted(k for k, v in raw.items() if k not in known and isinstance(v, str) and v.strip()
                  and _LOOKS_LIKE_REASONING.search(k))


def normalise_message(raw: dict[str, Any], field: str | None = None) -> dict[str, Any]:
    """An assistant message in the one shape hopforge stores.

    Servers differ in their tool calls (see :meth:`ToolCall.from_openai`) and their content (a
    list of content parts is read as text, :func:`content_text`; another shape raises TypeError),
    and in where they put the reasoning: ``reasoning`` (current vLLM, OpenRouter), ``reasoning_content``
    (DeepSeek, older vLLM), ``<think>`` blocks in the content, or ``field`` (``teacher.reasoning_field``, a
    server's own name).  Whichever it was, the reasoning is kept as ``reasoning_content`` (``<think>`` blocks
    leave the content, so parsers read the answer alone), and :func:`outgoing_reasoning` puts it back where the
    server reads it.  Arrow merges dict keys across rows, so the shape must not vary with the server.
    """
    content, thought = split_reasoning(content_text(raw.get("content")))
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    calls = [ToolCall.from_openai(tc, i).to_openai() for i, tc in enumerate(raw.get("tool_calls") or [])]
    if calls:
        msg["tool_calls"] = calls
    names = ((field,) if field and field != THINK else ()) + REASONING_FIELDS
    reasoning = next((raw[n] for n in names if isinstance(raw.get(n), str) and raw[n].strip()), "")
    reasoning = "\n\n".join(r for r in (reasoning, thought) if r)
    if reasoning:
        msg["reasoning_content"] = reasoning
    return msg


def outgoing_reasoning(messages: list[dict], field: str | None) -> list[dict]:
    """``messages`` as a server whose replies carry reasoning under ``field`` reads them: each earlier assistant
    turn's ``reasoning_content`` under ``field`` (``reasoning``, or a server's own name), or as a ``<think>``
    block opening its content (``think``).  Models with interleaved thinking need their earlier reasoning back on
    every turn, where their server reads it.  ``reasoning_content`` or an unknown field (None) sends the
    messages as they are; messages without reasoning are never copied."""
    if field in (None, "reasoning_content") or not any(m.get("reasoning_content") for m in messages):
        return messages
    out = []
    for m in messages:
        r = m.get("reasoning_content")
        if m.get("role") != "assistant" or not r:
            out.append(m)
            continue
        m = {k: v for k, v in m.items() if k != "reasoning_content"}
        if field == THINK:
            m["content"] = f"<think>\n{r}\n</think>\n\n{m.get('content') or ''}"
        else:
            m[field] = r
        out.append(m)
    return out


def secret_forms(secret: str) -> list[str]:
    """Every way ``secret`` may be written into a message, longest first: as it is and without its
    surrounding whitespace, each raw, as a ``repr`` or bytes literal would escape it (``b'Bearer
    sk-...\\r'`` shows the key as ``sk-...\\r``), JSON-escaped and URL-encoded.  Forms shorter than
    4 characters are left out: replacing them would shred ordinary text."""
    forms: set[str] = set()
    for s in {secret, secret.strip()}:
        forms |= {s, repr(s)[1:-1], repr(s.encode("utf-8", "backslashreplace"))[2:-1], json.dumps(s)[1:-1],
                  json.dumps(s, ensure_ascii=False)[1:-1], quote(s, safe=""), quote_plus(s, safe="")}
    return sorted((f for f in forms if len(f) >= 4), key=len, reverse=True)


def scrub(text: str, *secrets: str | None) -> str:
    """``text`` with every form of every secret (:func:`secret_forms`) replaced by ``***``."""
    for secret in secrets:
        if secret:
            for form in secret_forms(secret):
                text = text.replace(form, "***")
    return text
