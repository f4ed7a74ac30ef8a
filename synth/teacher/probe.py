"""What an endpoint does with tools and with ``response_format``, found by one tiny request each.

A server may answer a request with tools by calling them (``native``), by writing the call
as text in some model's format (``hermes``, ``llama3``, ``mistral``, ``react``), by ignoring
the tools (``ignored``: HTTP 200, no call; llama.cpp without ``--jinja``, vLLM without a tool
parser), or by refusing them (``rejected``: HTTP 400).  The preflight asks once and names the
fix; with ``teacher.tool_protocol: auto`` the openai backend asks once per stage run, process and
endpoint (:class:`Probes`) and uses what it found.  Requests are built by the caller (it owns the client and
the sampling settings); this module only says what to send and how to read the answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

from synth.engine.errors import StageFailed
from synth.engine.store import atomic_write_json
from synth.teacher.prompting import read_json
from synth.teacher.protocols import VLLM_PARSERS, detect
from synth.teacher.types import content_text, split_reasoning

TOOL_PROBE_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city."}},
                   "required": ["city"]}}}]
TOOL_PROBE_MESSAGES = [{"role": "user", "content": "What is the weather in Paris right now? Use the get_weather tool."}]

FORMAT_PROBE_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
FORMAT_PROBE_MESSAGES = [{"role": "user", "content": 'Reply with the JSON object {"ok": true}.'}]
FORMAT_PROBE_RESPONSE_FORMAT = {"type": "json_schema",
                                "json_schema": {"name": "probe", "schema": FORMAT_PROBE_SCHEMA}}
# What a server that refuses JSON schemas may still honour (llama-cpp-python 0.3 answers a `json_schema`
# response_format with a 500, and takes `json_object`).
FORMAT_PROBE_JSON_OBJECT = {"type": "json_object"}


@dataclass(frozen=True)
class Probe:
    """What the endpoint did: ``found`` is ``native``, a text protocol, ``ignored``, ``rejected`` or
    ``truncated`` (cut at max_tokens before any call: nothing learnt); ``detail`` says more."""

    found: str
    detail: str = ""


def read_tool_probe(data: dict[str, Any]) -> Probe:
    """Classify a 200 answer to the tool probe (a chat-completions body)."""
    try:
        choice = data["choices"][0]
        msg = choice["message"] or {}
    except (KeyError, IndexError, TypeError):
        return Probe("ignored", "the answer has no choices[0].message")
    if msg.get("tool_calls"):
        return Probe("native", "answered with tool_calls")
    try:
        text = split_reasoning(content_text(msg.get("content")))[0] or ""
    except TypeError as e:
        return Probe("ignored", str(e))
    protocol = detect(text, TOOL_PROBE_TOOLS)
    if protocol is not None:
        return Probe(protocol, f"wrote the call as text: {_clip(text)}")
    if choice.get("finish_reason") == "length":
        return Probe("truncated", "the reply was cut at max_tokens before any tool call")
    return Probe("ignored", f"HTTP 200 with no tool call; it wrote: {_clip(text) or '(nothing)'}")


def rejected(status: int, message: str) -> Probe:
    """The probe for an HTTP error answer to the tool probe (400/422: the server refuses tools)."""
    return Probe("rejected", f"HTTP {status}: {_clip(message)}")


def read_format_probe(data: dict[str, Any]) -> bool:
    """Whether a 200 answer to the ``response_format`` probe is the JSON object it asked for."""
    try:
        msg = data["choices"][0]["message"] or {}
        content = content_text(msg.get("content"))
    except (KeyError, IndexError, TypeError):
        return False
    objs, _, _ = read_json(content)
    return bool(objs) and isinstance(objs[0].get("ok"), bool)


def _clip(text: str, n: int = 120) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 3] + "..."


def tools_problem(configured: str, probe: Probe) -> tuple[str, str] | None:
    """``(what is wrong, the tool_protocol to suggest)`` when ``probe`` shows that tools will not work
    with ``teacher.tool_protocol: configured``; None when they will."""
    if configured not in ("native", "auto"):
        return None  # a text protocol never relies on the server's tool support
    found = probe.found
    if found == "native":
        return None
    if found in VLLM_PARSERS or found == "react":
        if configured == "auto":
            return None
        parser = VLLM_PARSERS.get(found)
        server = f"start vLLM with `--enable-auto-tool-choice --tool-call-parser {parser}`, or " if parser else ""
        return (f"returns tool calls as text ({found} format: {probe.detail}) instead of tool_calls, so every call "
                f"would be lost: {server}set teacher.tool_protocol to {found} (or auto)", found)
    if found == "truncated":
        if configured == "native":
            return None  # nothing learnt, and native may well work: the run's own replies will tell (NativeWatch)
        return (f"did not finish a tiny tool-call request within teacher.max_tokens ({probe.detail}): raise "
                "teacher.max_tokens, or set teacher.tool_protocol to the model's format (hermes, llama3, mistral, "
                "react)", "hermes")
    how = "ignores the tools it is sent" if found == "ignored" else "rejects requests with tools"
    return (f"{how} ({probe.detail}), so rollouts would make no tool call: serve the model with tool calling "
            "(vLLM: `--enable-auto-tool-choice --tool-call-parser hermes`, or the parser of the model's family; "
            "llama.cpp: `--jinja`), or set teacher.tool_protocol to a text protocol hopforge parses itself "
            "(hermes for Qwen/Hermes, llama3, mistral, or react for any model)", "react")


class NativeWatch:
    """Notices, in a ``native`` run's replies, that tool calling is not working: calls that arrive as
    text, or ``SILENT_AFTER`` replies to requests with tools and never a call.  Says each once, naming
    what the replies were: cut at ``teacher.max_tokens`` before they ended, empty, or complete answers in
    text (then the server may be ignoring the tools).  And once ``LOST_AFTER`` replies wrote their calls
    as text and none came as ``tool_calls``, every call of the stage would be lost, so :meth:`check`
    raises :class:`ToolCallsLost` (the stage stops, nothing of it committed) rather than let it commit
    trajectories without a tool call."""

    SILENT_AFTER = 8
    LOST_AFTER = 3

    def __init__(self, max_tokens: int | None = None) -> None:
        self.max_tokens = max_tokens  # teacher.max_tokens, named when replies are cut at it
        self._silent = 0  # replies without a call, until the first call shows tools work (-1)
        self._kinds: Counter[str] = Counter()  # those replies by kind: cut, empty, text
        self._text = 0  # replies that wrote their calls as text
        self._said: set[str] = set()
        self._lock = threading.Lock()

    def check(self, message: dict, tools: list[dict], finish_reason: str | None = None) -> str | None:
        """A warning (said once per kind) when ``message``, a reply to a request with ``tools`` that ended with
        ``finish_reason``, shows that tool calls are lost; None otherwise.  Raises :class:`ToolCallsLost` once
        they all are."""
        if message.get("tool_calls"):
            with self._lock:
                self._silent = -1
            return None
        found = detect(message.get("content"), tools)
        if found is not None:
            problem = tools_problem("native", Probe(found, "seen in a reply"))[0]
            with self._lock:
                self._text += 1
                lost = self._silent >= 0 and self._text >= self.LOST_AFTER
            if lost:
                raise ToolCallsLost(f"{self._text} replies wrote their tool calls as text and none came as "
                                    f"tool_calls: it {problem}")
            return self._once("text", problem)
        with self._lock:
            if self._silent < 0:
                return None
            self._silent += 1
            self._kinds["cut" if finish_reason == "length" else
                        "text" if (message.get("content") or "").strip() else "empty"] += 1
            if self._silent < self.SILENT_AFTER:
                return None
            kinds = dict(self._kinds)
        return self._once("silent", f"was sent tools {self._silent} times and never called one: "
                          + "; ".join(self._why(kind, n) for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1])))

    def _why(self, kind: str, n: int) -> str:
        """What ``n`` replies of ``kind`` say of the cause, and what to do."""
        if kind == "cut":
            limit = f"teacher.max_tokens={self.max_tokens}" if self.max_tokens is not None else "teacher.max_tokens"
            return (f"{n} were cut at {limit} before they ended (finish_reason `length`): a call would come at "
                    "their end, so raise teacher.max_tokens (a thinking model spends many tokens first)")
        if kind == "empty":
            return (f"{n} were empty (no text, no tool call): look at the server's log, its chat template and "
                    "that it serves the model")
        return (f"{n} answered in text without a call: the server may be ignoring the tools. `hopforge check` "
                "probes it; teacher.tool_protocol auto, or a text protocol (hermes, llama3, mistral, react), works "
                "without the server's tool support")

    def _once(self, kind: str, text: str) -> str | None:
        with self._lock:
            if kind in self._said:
                return None
            self._said.add(kind)
        return text


class ToolCallsLost(StageFailed):
    """A ``native`` run whose server writes every tool call as text: the stage stops (nothing of it is
    committed) instead of committing trajectories that made no tool call."""


# ---- what a stage run already found ----------------------------------------------------------
class Probes:
    """What probes found at each endpoint, for the teachers that share this object: those of one stage run in
    one process (``ctx.shared``, :class:`~synth.teacher.client.Teacher`), else one backend's own.  Keys are
    ``(endpoint, kind)``, ``kind`` one of ``tools``, ``format``, ``reasoning``."""

    def __init__(self, found: dict[tuple, Any] | None = None) -> None:
        self._found: dict[tuple, Any] = dict(found or {})
        self._pending: dict[tuple, concurrent.futures.Future] = {}
        self._lock = threading.Lock()

    @classmethod
    def recorded(cls, path: str | Path, endpoint: tuple) -> "Probes":
        """Probes that start from the tool probe the preflight recorded for ``endpoint`` at ``path``
        (:func:`record_tools`), so a run's stages and their worker processes do not ask it again; none when the
        file is missing or unreadable, or holds nothing for that endpoint."""
        try:
            found, detail = json.loads(Path(path).read_text())["tools"][_endpoint_digest(endpoint)]
            return cls({(*endpoint, "tools"): Probe(str(found), str(detail))})
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return cls()

    async def once(self, endpoint: tuple, kind: str, run: Callable[[], Awaitable[Any]]) -> Any:
        """What ``await run()`` finds for ``(endpoint, kind)``, probed once.

        Calls that arrive while a probe is under way wait for it (from any thread or loop) instead
        of sending their own; a probe that fails is not remembered, so the next call tries again.
        """
        key = (*endpoint, kind)
        while True:
            with self._lock:
                if key in self._found:
                    return self._found[key]
                fut = self._pending.get(key)
                owner = fut is None
                if owner:
                    fut = self._pending[key] = concurrent.futures.Future()
            if not owner:
                await asyncio.wrap_future(fut)
                continue
            try:
                value = await run()
            except BaseException:
                with self._lock:
                    self._pending.pop(key, None)
                fut.set_result(None)  # wake the waiters: one of them probes again
                raise
            with self._lock:
                self._found[key] = value
                self._pending.pop(key, None)
            fut.set_result(None)
            return value

    def remember(self, endpoint: tuple, kind: str, value: Any) -> None:
        """Keep what a probe of ``kind`` found at ``endpoint``."""
        with self._lock:
            self._found[(*endpoint, kind)] = value

    def recall(self, endpoint: tuple, kind: str) -> Any:
        """What a probe of ``kind`` found at ``endpoint`` earlier, or None."""
        with self._lock:
            return self._found.get((*endpoint, kind))


def _endpoint_digest(endpoint: tuple) -> str:
    # The file names an endpoint by a digest: a base URL may carry credentials (user:password@host, ?key=).
    return hashlib.sha256("\n".join(map(str, endpoint)).encode()).hexdigest()[:24]


def record_tools(path: str | Path, endpoint: tuple, found: Probe) -> None:
    """Record what the tool probe found at ``endpoint`` (``(base_url, model)``, named in the file by a digest) in
    ``path`` (the run's ``cache/probes.json``), for :meth:`Probes.recorded`; the preflight probes every run again
    and rewrites it."""
    path = Path(path)
    try:
        rows = dict(json.loads(path.read_text())["tools"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        rows = {}
    rows[_endpoint_digest(endpoint)] = [found.found, found.detail]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"tools": rows})
