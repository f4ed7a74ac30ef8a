"""The ``openai`` backend: any OpenAI-compatible chat-completions server, via the official client.

The client is built with ``max_retries=0``: :class:`synth.teacher.client.Teacher` owns
retries, so backoff, Retry-After and accounting follow one policy whatever the
backend.  Each attempt either returns a :class:`ChatResponse` or raises a
:class:`BackendError` whose reason is one of ``http_<status>``, ``timeout``,
``unreachable`` (the connection was never made), ``connection`` (it dropped, mid-body
included), ``quota`` (the account has no quota or credit left) or ``bad_response`` (the answer
is not a completion: an error in a 200, a stream, not UTF-8 or not JSON, the wrong shape, usage
figures that are not token counts); each detail says what the server said, and every form of
the API key is scrubbed from it.

Tool calls travel as ``teacher.tool_protocol`` says (:mod:`synth.teacher.protocols`): a
text protocol is applied here, on the way out and back, so callers always see OpenAI's
``tool_calls``; ``auto`` asks the endpoint once (:mod:`synth.teacher.probe`).  Reasoning is read
from wherever the server puts it (``reasoning``, ``reasoning_content``, ``<think>`` in the content, or
``teacher.reasoning_field``) into ``reasoning_content``, and earlier turns' reasoning is sent back on
every request under the field the server used (:func:`synth.teacher.types.outgoing_reasoning`): found
from the first reply that carries any (the preflight's tool probe, a call, or a cached call), once per
process and endpoint.  JSON tasks
may go out with ``response_format`` (``teacher.structured_output``).  What a call's request
adds to the conversation (a protocol, a response format) is its *variant*
(:meth:`OpenAIBackend.prepare`), which the call cache keys on.

The key is read from ``os.environ[cfg.api_key_env]`` when the backend is built, so
a run without it fails in its first second (as does a key with a control or non-ASCII
character; surrounding whitespace is stripped: :func:`synth.teacher.config.read_api_key`).
Servers without auth (a local vLLM, llama.cpp or Ollama) still need the variable set to any
non-empty placeholder, e.g. ``OPENAI_API_KEY=EMPTY``, which they ignore.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import logging
import ssl
import os
import weakref
from typing import Any

from urllib.parse import urlsplit

import httpcore2
import httpx2
import openai
import orjson

from synth.engine.config import ConfigError
from synth.teacher.cache import canonical_json
from synth.teacher.breaker import says_quota
from synth.teacher.config import TeacherConfig, read_api_key
from synth.teacher import probe, protocols
from synth.teacher.limits import parse_retry_after
from synth.teacher.types import (BackendError, BaseChatModel, ChatResponse, ToolsUnusable, content_text,
                                 normalise_message, outgoing_reasoning, read_usage, reasoning_field_of, scrub,
                                 unread_reasoning_keys)

log = logging.getLogger("hopforge")
CONNECTIONS_PER_CLIENT = 8
_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    # One TLS context for every client: building one loads the CA bundle (~16 ms), and each
    # batch of calls makes fresh clients on its own event loop.
    # The client library's own default (CA bundle, SSL_CERT_FILE / SSL_CERT_DIR), built once.
    return httpcore2.default_ssl_context(_trust_env=True)


def derived_seed(model: str, messages: list[dict], tools: list[dict] | None, sample_index: int) -> int:
    """The ``seed`` sent for one sample: a hash of the prompt and the sample index.

    Sample i of a prompt is then reproducible on servers that honour ``seed`` (vLLM,
    llama.cpp), while samples 0..n-1 differ.  31 bits suits every server seen.
    """
    h = hashlib.sha256(canonical_json([model, messages, tools or None, sample_index])).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


def request_body(cfg: TeacherConfig, messages: list[dict], tools: list[dict] | None, sample_index: int = 0,
                 response_format: dict | None = None) -> dict[str, Any]:
    """The chat-completions JSON body for one request (the preflight's probes are built with it too)."""
    body: dict[str, Any] = {"model": cfg.model, "messages": messages, "temperature": cfg.temperature,
                            "seed": derived_seed(cfg.model, messages, tools, sample_index)}
    if "max_completion_tokens" not in cfg.extra_body:
        # Newer OpenAI reasoning models reject max_tokens; setting max_completion_tokens in
        # extra_body is the way to reach them, and then max_tokens must not be sent too.
        body["max_tokens"] = cfg.max_tokens
    if cfg.top_p is not None:
        body["top_p"] = cfg.top_p
    if tools:
        body["tools"] = tools
    if response_format is not None:
        body["response_format"] = response_format
    body.update(cfg.extra_body)
    return body


def response_format_for(task: Any, mode: str = "json_schema") -> dict:
    """``response_format`` for a JSON task: its required keys as a JSON schema, else (or when the endpoint
    honours only ``mode`` ``json_object``) ``json_object``."""
    if not task.required or mode == "json_object":
        return {"type": "json_object"}
    schema = {"type": "object", "properties": {k: {"type": _JSON_TYPES.get(t, "string")} for k, t in task.required},
              "required": [k for k, _ in task.required]}
    return {"type": "json_schema", "json_schema": {"name": task.name, "schema": schema}}


class OpenAIBackend(BaseChatModel):
    """One attempt per call against ``cfg.base_url`` with ``openai.AsyncOpenAI``."""

    name = "openai"

    def __init__(self, cfg: TeacherConfig, *, api_key: str | None = None, probes: probe.Probes | None = None):
        raw = api_key if api_key is not None else os.environ.get(cfg.api_key_env, "")
        try:
            key = read_api_key(raw, cfg.api_key_env)
        except ConfigError as e:
            raise ConfigError(f"teacher.backend is 'openai' but {e}") from None
        self.cfg = cfg
        self._key, self._raw_key = key, raw
        # httpx connection pools belong to the loop that opened them; Teacher.map runs each
        # batch under a fresh asyncio.run, so keep one client per live loop.
        self._clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[openai.AsyncOpenAI]]" = \
            weakref.WeakKeyDictionary()
        self._turn = itertools.count()
        self._endpoint = (cfg.base_url, cfg.model)
        # What the endpoint was found to do: shared by the teachers of a stage run (Teacher's ``shared``).
        self.probes = probes if probes is not None else probe.Probes()
        self._native = probe.NativeWatch(cfg.max_tokens)
        self._configured_reasoning = None if cfg.reasoning_field == "auto" else cfg.reasoning_field
        self._unread_said = False

    def _client(self) -> openai.AsyncOpenAI:
        # Requests are spread over several clients of about 8 connections each: httpcore's pool
        # scans every pooled connection (a poll() per idle one) on each request, which at 64+
        # connections costs more CPU than the rest of a call put together.
        loop = asyncio.get_running_loop()
        clients = self._clients.get(loop)
        if clients is None:
            shards = max(1, -(-self.cfg.concurrency // CONNECTIONS_PER_CLIENT))
            # The timeout runs from when a request is sent: waiting for a pooled connection is the
            # client's own queue (bounded by the teacher's gate), not the server being slow.
            timeout = httpx2.Timeout(self.cfg.timeout_s, connect=min(self.cfg.timeout_s, 10.0), pool=None)
            clients = [openai.AsyncOpenAI(api_key=self._key, base_url=self.cfg.base_url, timeout=timeout,
                                          max_retries=0,
                                          http_client=openai.DefaultAsyncHttpxClient(verify=_ssl_context()))
                       for _ in range(shards)]
            self._clients[loop] = clients
        return clients[next(self._turn) % len(clients)]

    def scrub(self, text: str) -> str:
        """``text`` with the API key, in any form it can take (:func:`synth.teacher.types.secret_forms`),
        and the base URL's userinfo and query string replaced (servers may echo them back in error bodies)."""
        text = scrub(text, self._key, self._raw_key)
        url = self.cfg.base_url
        if url:
            p = urlsplit(url)
            text = scrub(text, p.netloc.rpartition("@")[0] if "@" in p.netloc else None, p.query or None)
        return text

    @property
    def tool_protocol(self) -> str:
        """The protocol tool calls travel in: the configured one, or what ``auto`` found (``native`` before)."""
        if self.cfg.tool_protocol != "auto":
            return self.cfg.tool_protocol
        found = self.probes.recall(self._endpoint, "tools")
        return found.found if found is not None and found.found in protocols.PROTOCOLS else "native"

    @property
    def reasoning_field(self) -> str | None:
        """Where this endpoint reads earlier turns' reasoning: ``teacher.reasoning_field``, or what its replies
        showed (None until a reply carried reasoning)."""
        return self._configured_reasoning or self.probes.recall(self._endpoint, "reasoning")

    def observe(self, resp: ChatResponse) -> None:
        """Learn where the endpoint puts its reasoning from a reply (sent now, or replayed from the call cache)."""
        field = resp.reasoning_field
        if field and self._configured_reasoning is None and self.probes.recall(self._endpoint, "reasoning") is None:
            self.probes.remember(self._endpoint, "reasoning", field)
            where = "as <think> blocks in the content" if field == "think" else f"under `{field}`"
            log.info("teacher: %s returns its reasoning %s; earlier turns' reasoning goes back to it the same way",
                     self.cfg.display_url(), where)

    async def prepare(self, tools: list[dict] | None, task: Any = None) -> str:
        """This call's variant: what its request adds to the conversation (a text tool protocol, a
        ``response_format``), ``""`` for none.  Runs the ``auto`` probes the first time they are needed."""
        protocol, rf = await self._plan(tools, task)
        parts = [f"tools={protocol}"] if protocol not in (None, "native") else []
        if rf is not None:
            parts.append("rf=" + hashlib.sha256(canonical_json(rf)).hexdigest()[:12])
        return "|".join(parts)

    async def _plan(self, tools: list[dict] | None, task: Any) -> tuple[str | None, dict | None]:
        cfg = self.cfg
        protocol = None
        if tools:
            protocol = cfg.tool_protocol if cfg.tool_protocol != "auto" else await self._auto_protocol()
        rf = None
        if not tools and getattr(task, "output", None) == "json" and cfg.structured_output != "off":
            mode = "json_schema" if cfg.structured_output == "on" else await self.probes.once(
                self._endpoint, "format", self._probe_format)
            if mode:
                rf = response_format_for(task, mode)
        return protocol, rf

    async def _auto_protocol(self) -> str:
        found = await self.tool_support()
        problem = probe.tools_problem("auto", found)
        if problem is not None:
            raise ToolsUnusable(f"teacher endpoint {self.cfg.display_url()} (model {self.cfg.model!r}) {problem[0]}")
        return found.found

    async def _probe_tools(self) -> probe.Probe:
        body = request_body(self.cfg, probe.TOOL_PROBE_MESSAGES, probe.TOOL_PROBE_TOOLS)
        try:
            data = await self._post(body)
            # An answer that is no completion is an error, not "ignored tools"; one that thinks shows where.
            self.observe(self._to_response(data, 0.0))
            found = probe.read_tool_probe(data)
        except BackendError as e:
            if e.reason not in ("http_400", "http_422"):
                raise
            found = probe.rejected(int(e.reason[5:]), e.detail)
        found = probe.Probe(found.found, self.scrub(found.detail))  # a server may echo the key back
        log.info("teacher: %s answers a tool-call request: %s (%s)", self.cfg.display_url(), found.found, found.detail)
        return found

    async def _probe_format(self) -> str:
        """The ``response_format`` the endpoint honours: ``json_schema``, else ``json_object``, else ``""``.

        A refusal (any HTTP error but 429, which is retried) rules a format out: some servers answer a
        format they do not know with a 500 rather than a 400.  Unreachable endpoints and bad keys raise,
        as for any other request."""
        found, why = "", ""
        for mode, rf in (("json_schema", probe.FORMAT_PROBE_RESPONSE_FORMAT),
                         ("json_object", probe.FORMAT_PROBE_JSON_OBJECT)):
            body = request_body(self.cfg, probe.FORMAT_PROBE_MESSAGES, None, response_format=rf)
            try:
                if probe.read_format_probe(await self._post(body)):
                    found = mode
                    break
                why += f"; {mode}: not the JSON object asked for"
            except BackendError as e:
                if not e.reason.startswith("http_") or e.reason in ("http_401", "http_403", "http_404", "http_429"):
                    raise
                why += f"; {mode}: {e.reason}"
        log.info("teacher: %s %s (teacher.structured_output auto)%s", self.cfg.display_url(),
                 f"honours response_format {found}" if found else "does not honour response_format", why)
        return found

    async def chat(self, messages: list[dict], tools: list[dict] | None = None, *, sample_index: int = 0,
                   task: Any = None) -> ChatResponse:
        """One chat-completions request; ``task`` is read only for its JSON schema (a ``response_format``)."""
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        protocol, rf = await self._plan(tools, task)
        messages = outgoing_reasoning(messages, self.reasoning_field)
        if protocol in protocols.TEXT_PROTOCOLS:
            body = request_body(self.cfg, protocols.to_text_messages(protocol, messages, tools), None, sample_index, rf)
            if protocol == "react" and "stop" not in self.cfg.extra_body:
                body["stop"] = ["\nObservation:"]  # the model must not write the tool's answer itself
        else:
            body = request_body(self.cfg, messages, tools, sample_index, rf)
        resp = self._to_response(await self._post(body), loop.time() - t0)
        if protocol in protocols.TEXT_PROTOCOLS:
            self._read_calls(resp, protocol, tools, messages)
        elif protocol == "native":
            try:
                warning = self._native.check(resp.message, tools, resp.finish_reason)
            except probe.ToolCallsLost as e:
                raise probe.ToolCallsLost(f"teacher endpoint {self.cfg.display_url()} (model {self.cfg.model!r}): {e}; "
                                          "the stage stops, and nothing of it is committed") from None
            if warning:
                log.warning("teacher endpoint %s %s", self.cfg.display_url(), warning)
        resp.tool_protocol = protocol
        return resp

    def _read_calls(self, resp: ChatResponse, protocol: str, tools: list[dict], messages: list[dict]) -> None:
        """Move the calls a text protocol wrote in the content into ``tool_calls`` (OpenAI's shape)."""
        text, calls = protocols.parse_calls(protocol, resp.message.get("content"), tools)
        if calls:
            turn = sum(1 for m in messages if m.get("role") == "assistant") + 1
            resp.message["content"] = text or None
            resp.message["tool_calls"] = protocols.to_openai_calls(calls, turn)
            if resp.finish_reason == "stop":
                resp.finish_reason = "tool_calls"

    async def _post(self, body: dict[str, Any]) -> Any:
        """POST one body to /chat/completions; the parsed JSON answer, or :class:`BackendError` (an error
        the server wrote into a 200 is one too, with the server's message)."""
        err: BackendError | None = None
        try:
            # The client's generic ``post`` keeps its auth, timeouts, connection pool and error
            # classes but skips ``chat.completions.create``'s typed transform of every message and
            # its model construction: that costs about 0.4 ms of CPU a call, a third of the client's
            # whole cost, and the body is already plain JSON.  The raw response is parsed here.
            # The body is encoded once with orjson (the client would re-encode it with json.dumps).
            resp = await self._client().post("/chat/completions", cast_to=httpx2.Response, content=orjson.dumps(body),
                                             options={"headers": {"Content-Type": "application/json"}})
            raw = resp.content
            content_type = resp.headers.get("content-type", "")
        except (openai.OpenAIError, httpx2.HTTPError, ValueError, TypeError) as e:
            err = self.error_of(e)
        if err is None:
            err = self._decode(raw, content_type)
            if not isinstance(err, BackendError):
                return err
        # Raised here, outside the handlers, so the error carries no __context__: the client's
        # exception holds the request, and the request holds the Authorization header.
        raise err

    def _decode(self, raw: bytes, content_type: str) -> Any:
        """The JSON value of a 200 answer's body, or the :class:`BackendError` (returned, not raised) that
        names why it is none: a stream (SSE), not UTF-8, not JSON, or an error object."""
        head = raw.lstrip()[:6]
        if "text/event-stream" in content_type.lower() or head.startswith((b"data:", b"event:")):
            return BackendError("bad_response", "the server answered with a stream (SSE, text/event-stream) to a "
                                "request that asked for none; hopforge reads one JSON answer per request: serve the "
                                "model without forcing streaming", retryable=False)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            return BackendError("bad_response", f"the answer is not UTF-8 text (byte 0x{raw[e.start]:02x} at "
                                f"position {e.start} of {len(raw)})")
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            what = "empty" if not text.strip() else f"not JSON ({e}); it begins {self.scrub(text[:80])!r}"
            return BackendError("bad_response", f"the answer of {len(raw)} bytes is {what}")
        if isinstance(data, dict) and "choices" not in data and ("error" in data or data.get("object") == "error"):
            said = _server_message(data) or self.scrub(text[:300])
            reason = "quota" if says_quota(canonical_json(data).decode()) else "bad_response"
            return BackendError(reason, f"the server answered HTTP 200 with an error: {self.scrub(said)[:400]}")
        return data

    def error_of(self, e: BaseException, timeout_s: float | None = None) -> BackendError:
        """The :class:`BackendError` an exception of the client (or of reading its answer) stands for: the one
        mapping from the ``openai`` client's errors to failure reasons (``timeout``, ``unreachable``,
        ``connection``, ``http_<status>``, ``bad_response``), key scrubbed from every detail."""
        if isinstance(e, openai.APITimeoutError):
            return BackendError("timeout", f"no response within {timeout_s or self.cfg.timeout_s:g}s")
        if isinstance(e, openai.APIConnectionError):
            # Refused, unresolvable or unroutable: the request never reached a server.
            never_sent = any("Connect" in type(c).__name__ for c in _causes(e))
            return BackendError("unreachable" if never_sent else "connection", self.scrub(_cause(e)), retryable=True)
        if isinstance(e, openai.APIStatusError):
            status = e.status_code
            said = self.scrub(_server_message(e.body) or str(e.message))[:500]
            if 400 <= status < 500 and says_quota(f"{e.message} {e.code} {e.type}"):
                return BackendError("quota", f"HTTP {status}: {said}")
            ra = parse_retry_after(e.response.headers) if status in (429, 503) else None
            return BackendError(f"http_{status}", said, retry_after=ra)
        # An answer the client could not read (orjson's error is a ValueError).
        return BackendError("bad_response", self.scrub(f"{type(e).__name__}: {e}")[:500])

    # ---- what the preflight asks (the same client, errors and key scrubbing as every call) --------------
    async def served_models(self, timeout_s: float = 10.0) -> list[str] | None:
        """The model ids ``GET /models`` lists; None for a server without a model list (404).  A server that
        fails otherwise raises :class:`BackendError` as a chat request would."""
        err: BackendError | None = None
        try:
            page = await self._client().with_options(timeout=timeout_s).models.list()
            return [m.id for m in (page.data or [])]  # a page without a list reads as empty, as the client pages do
        except openai.NotFoundError:
            return None
        except (openai.OpenAIError, httpx2.HTTPError, ValueError, TypeError) as e:
            err = self.error_of(e, timeout_s)
        raise err

    async def ping(self, timeout_s: float = 10.0) -> None:
        """One chat request of one token (for a server without a model list: is the model served?)."""
        err: BackendError | None = None
        try:
            await self._client().with_options(timeout=timeout_s).post(
                "/chat/completions", cast_to=httpx2.Response,
                body={"model": self.cfg.model, "max_tokens": 1, "messages": [{"role": "user", "content": "ping"}]})
            return
        except (openai.OpenAIError, httpx2.HTTPError, ValueError, TypeError) as e:
            err = self.error_of(e, timeout_s)
        raise err

    async def tool_support(self) -> probe.Probe:
        """What the endpoint does with a tiny tool-call request (:mod:`synth.teacher.probe`), probed once per
        process and endpoint: the preflight's probe is the one ``auto`` then reuses."""
        return await self.probes.once(self._endpoint, "tools", self._probe_tools)

    def _to_response(self, data: Any, latency: float) -> ChatResponse:
        """A :class:`ChatResponse` from a chat-completions JSON body (``bad_response`` for the wrong shape)."""
        try:
            choice = data["choices"][0]
            raw = choice["message"]
            if not isinstance(raw, dict):
                raise TypeError("choices[0].message is not an object")
            resp = ChatResponse(
                message=normalise_message(raw, self._configured_reasoning),
                usage=read_usage(data.get("usage")),
                finish_reason=choice.get("finish_reason"),
                model=str(data.get("model") or self.cfg.model),
                latency_s=latency,
                reasoning_field=reasoning_field_of(raw, self._configured_reasoning),
            ).validate()
            self._say_unread(raw)
            self.observe(resp)
            return resp
        except (ValueError, TypeError) as e:  # ours name what is wrong; the server's shape is the detail
            raise BackendError("bad_response", self.scrub(str(e))[:500]) from None
        except (KeyError, IndexError, AttributeError) as e:
            raise BackendError("bad_response", self.scrub(f"the answer is no chat completion ({type(e).__name__}: "
                                                          f"{e})")[:500]) from None

    def _say_unread(self, raw: dict) -> None:
        """Warn once when a reply holds text under a key named like reasoning that is not read (a server's own
        name for it): that reasoning would be lost from the traces and never sent back."""
        if self._unread_said:
            return
        keys = unread_reasoning_keys(raw, self._configured_reasoning)
        if keys:
            self._unread_said = True
            log.warning("teacher endpoint %s returns text under %s, which hopforge does not read as reasoning: it is "
                        "not kept in the traces nor sent back; if it is the model's reasoning, set "
                        "teacher.reasoning_field to %s", self.cfg.display_url(),
                        ", ".join(f"`{k}`" for k in keys), keys[0])

    async def aclose(self) -> None:
        """Close the client of the running loop (its connections die with the loop otherwise)."""
        for client in self._clients.pop(asyncio.get_running_loop(), None) or []:
            await client.close()

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.cfg.model!r}, url={self.cfg.display_url()!r})"


def _server_message(body: Any) -> str | None:
    """The message an error body carries (``{"error": {"message": ...}}``, ``{"error": "..."}``, vLLM's
    ``{"object": "error", "message": ...}``, FastAPI's ``{"detail": ...}``), with its type or code; None
    when there is none."""
    if not isinstance(body, dict):
        return None
    err = body.get("error", body)
    if isinstance(err, str):
        return err
    if not isinstance(err, dict):
        return None
    msg = err.get("message") if isinstance(err.get("message"), str) else err.get("detail")
    if not isinstance(msg, str) or not msg.strip():
        return None
    tags = [str(err[k]) for k in ("type", "code") if isinstance(err.get(k), (str, int)) and str(err[k]) not in msg]
    return f"{msg} ({', '.join(dict.fromkeys(tags))})" if tags else msg


def _causes(e: BaseException) -> list[BaseException]:
    """The chain of exceptions behind ``e`` (its causes and contexts), innermost last."""
    out, seen = [], {id(e)}
    c = e.__cause__ or e.__context__
    while c is not None and id(c) not in seen:
        out.append(c)
        seen.add(id(c))
        c = c.__cause__ or c.__context__
    return out


def _cause(e: BaseException) -> str:
    """The low-level reason of a connection error (the client's own message is just 'Connection error.')."""
    inner = e.__cause__ or e.__context__
    return f"{e}: {type(inner).__name__}: {inner}" if inner is not None else str(e)


def make_openai(cfg: TeacherConfig, **kw: Any) -> OpenAIBackend:
    """Factory used by :func:`synth.teacher.client.make_backend` for ``backend: openai``."""
    return OpenAIBackend(cfg, **kw)
