"""A local OpenAI-compatible chat-completions server for tests and benches.

It speaks just enough HTTP/1.1 (keep-alive, Content-Length bodies) over asyncio
streams, which keeps it fast (thousands of requests a second) and lets it do what a
framework hides: stall, send a broken body (or any bytes: :class:`Raw`, a stream: :func:`sse`),
or drop the connection mid-request or mid-body.
It runs on 127.0.0.1 with an ephemeral port, in a background thread::

    with serve(latency=0.2) as srv:            # srv.base_url == "http://127.0.0.1:PORT/v1"
        srv.push(Status(429, headers={"Retry-After": "3"}), Reply(content='{"a": 1}'))
        srv.handler = lambda req: Reply(tool_calls=[call("search", {"q": "x"})])

Each request takes the next scripted action from the queue, else ``handler(request_json)``
(which may return an action, a full response dict, or a content string), else the
default: an echo of the last message's content as JSON.  Every request is recorded
with its headers; ``count`` and ``max_in_flight`` are kept.

``slots=N`` makes it a server with N generation slots (llama.cpp ``--parallel N``): each
request holds a slot for ``latency`` seconds and the rest queue *in the server*.  A client
that gives up (closes the connection) while its request is queued or generating is
noticed and counted in ``cancelled``; ``max_busy`` is the most slots ever in use.

:func:`text_tools_handler` answers as a model whose server has no tool parser: the calls
are written in the content in one of the text formats (hermes, llama3, mistral, react).

``python tests/helpers/openai_server.py --latency 0.2`` serves in the foreground
(prints ``PORT <n>``), for benches that want the server out of their own process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import orjson

REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 404: "Not Found",
           429: "Too Many Requests",
           500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


@dataclass
class Reply:
    """A normal completion: text content and/or tool calls (and optional reasoning_content)."""

    content: str | None = None
    tool_calls: list[dict] | None = None
    reasoning_content: str | None = None
    finish_reason: str | None = None
    usage: dict | None = None
    model: str | None = None  # the model the answer says it came from (None: the one the request named)


@dataclass
class Status:
    """An HTTP error (e.g. 429, 500) with an OpenAI-style error body and optional headers; ``error`` adds
    fields to the body's error object (``{"type": "insufficient_quota", "code": "insufficient_quota"}``)."""

    code: int
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "scripted error"
    error: dict | None = None


@dataclass
class Stall:
    """Hold the request for ``seconds`` before answering (the client should time out first)."""

    seconds: float = 3600.0


@dataclass
class Malformed:
    """Status 200 with a body that is not valid JSON."""

    body: bytes = b'{"id": "x", "choices": [{"message": '


@dataclass
class Drop:
    """Close the connection without answering."""


@dataclass
class Raw:
    """Any answer, byte for byte: ``body`` under ``status`` and ``content_type``.  ``length`` declares a
    Content-Length other than the body's: a longer one, with the connection then closed, is a body cut
    mid-way."""

    body: bytes
    status: int = 200
    content_type: str = "application/json"
    length: int | None = None


def sse(*chunks: dict) -> Raw:
    """A streamed (SSE) answer of ``chunks``, as a server that only streams sends it to any request."""
    lines = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    return Raw(lines, content_type="text/event-stream")


@dataclass
class Recorded:
    """One request as received: path, headers (lower-cased names) and parsed JSON body."""

    path: str
    headers: dict[str, str]
    body: Any


def call(name: str, arguments: dict, id: str | None = None) -> dict:
    """A tool call in OpenAI's wire shape (``arguments`` as a JSON string)."""
    return {"id": id or f"call_{name}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


def default_handler(req: dict) -> Reply:
    """Echo the last message's content back as JSON content."""
    msgs = req.get("messages") or [{}]
    return Reply(content=json.dumps({"echo": msgs[-1].get("content"), "seed": req.get("seed")}))


class OpenAIServer:
    """The server; use :func:`serve` to run one for a ``with`` block."""

    def __init__(self, latency: float = 0.0, handler: Callable[[dict], Any] | None = None, record: bool = True,
                 slots: int | None = None):
        self.latency = latency
        self.slots = slots
        self._slots: asyncio.Semaphore | None = None  # made on the server's loop
        self.cancelled = 0
        self.busy = self.max_busy = 0
        self.handler = handler
        self.record = record
        self.queue: deque = deque()
        self.requests: list[Recorded] = []
        self.count = 0
        self.max_in_flight = 0
        # In-flight requests per epoch: reset() starts a new epoch, so a request left stalled by
        # an earlier test never counts towards the next test's max_in_flight.
        self._epoch = 0
        self._flight: dict[int, int] = {}
        self.port = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The URL to give a client, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *actions: Any) -> None:
        """Queue actions for the next requests, in order."""
        with self._lock:
            self.queue.extend(actions)

    def reset(self) -> None:
        """Forget recorded requests, counters and queued actions."""
        with self._lock:
            self.queue.clear()
            self.requests.clear()
            self.count = self.max_in_flight = self.cancelled = self.max_busy = 0
            self._epoch += 1

    # ---- serving --------------------------------------------------------------------------
    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1] if " " in lines[0] else "/"
                headers = {}
                for ln in lines[1:]:
                    if ":" in ln:
                        k, v = ln.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                raw = await reader.readexactly(int(headers.get("content-length", "0")))
                if not await self._answer(path, headers, raw, reader, writer):
                    return
                if headers.get("connection", "").lower() == "close":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:
            return  # server shutdown; finishing quietly keeps asyncio from logging each connection
        finally:
            self._tasks.discard(task)
            if not writer.transport.is_closing():
                writer.close()

    @property
    def in_flight(self) -> int:
        """Requests being answered now (of the current epoch)."""
        return self._flight.get(self._epoch, 0)

    async def _answer(self, path: str, headers: dict, raw: bytes, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> bool:
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = None
        with self._lock:
            self.count += 1
            epoch = self._epoch
            self._flight[epoch] = self._flight.get(epoch, 0) + 1
            self.max_in_flight = max(self.max_in_flight, self._flight[epoch])
            if self.record:
                self.requests.append(Recorded(path, headers, body))
            action = self.queue.popleft() if self.queue else None
        try:
            if self.slots is not None:
                if not await self._generate(reader):
                    writer.transport.abort()
                    return False
            elif self.latency:
                await asyncio.sleep(self.latency)
            if action is None:
                action = (self.handler or default_handler)(body or {})
            if isinstance(action, Stall):
                # Stall until the time is up or the client gives up and closes (read returns b"").
                waits = [asyncio.ensure_future(asyncio.sleep(action.seconds)), asyncio.ensure_future(reader.read(1))]
                done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for w in pending:
                    w.cancel()
                if waits[1] in done:
                    writer.transport.abort()
                    return False
                action = default_handler(body or {})
            if isinstance(action, Drop):
                writer.transport.abort()
                return False
            if isinstance(action, Raw):
                length = len(action.body) if action.length is None else action.length
                writer.write(f"HTTP/1.1 {action.status} {REASONS.get(action.status, 'Status')}\r\ncontent-type: "
                             f"{action.content_type}\r\ncontent-length: {length}\r\n\r\n".encode() + action.body)
                await writer.drain()
                if length != len(action.body):
                    writer.transport.abort()  # the rest never comes
                    return False
                return True
            status, extra, payload = self._render(action, body or {})
            reason = REASONS.get(status, "Status")
            hdr = "".join(f"{k}: {v}\r\n" for k, v in extra.items())
            writer.write(f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
                         f"content-length: {len(payload)}\r\n{hdr}\r\n".encode() + payload)
            await writer.drain()
            return True
        finally:
            with self._lock:
                self._flight[epoch] -= 1

    async def _generate(self, reader: asyncio.StreamReader) -> bool:
        """Queue for a slot, then hold it for ``latency``; False (counted in ``cancelled``) when the
        client closed the connection first."""
        gone = asyncio.ensure_future(reader.read(1))  # b"" once the client closes
        held = False
        try:
            slot = asyncio.ensure_future(self._slots.acquire())
            await asyncio.wait([slot, gone], return_when=asyncio.FIRST_COMPLETED)
            if not slot.done() or slot.cancelled():
                slot.cancel()
                self.cancelled += 1
                return False
            held = True
            with self._lock:
                self.busy += 1
                self.max_busy = max(self.max_busy, self.busy)
            if gone.done():
                self.cancelled += 1
                return False
            work = asyncio.ensure_future(asyncio.sleep(self.latency))
            await asyncio.wait([work, gone], return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                work.cancel()
                self.cancelled += 1
                return False
            return True
        finally:
            gone.cancel()
            # Let the cancelled read finish before the connection reads its next request.
            await asyncio.gather(gone, return_exceptions=True)
            if held:
                with self._lock:
                    self.busy -= 1
                self._slots.release()

    def _render(self, action: Any, req: dict) -> tuple[int, dict, bytes]:
        if isinstance(action, Status):
            err = {"error": {"message": action.message, "type": "scripted", "code": str(action.code),
                             **(action.error or {})}}
            return action.code, action.headers, orjson.dumps(err)
        if isinstance(action, Malformed):
            return 200, {}, action.body
        if isinstance(action, dict):
            return 200, {}, orjson.dumps(action)
        if isinstance(action, str):
            action = Reply(content=action)
        msg: dict[str, Any] = {"role": "assistant", "content": action.content}
        if action.tool_calls:
            msg["tool_calls"] = action.tool_calls
        if action.reasoning_content is not None:
            msg["reasoning_content"] = action.reasoning_content
        finish = action.finish_reason or ("tool_calls" if action.tool_calls else "stop")
        usage = action.usage or {"prompt_tokens": len(orjson.dumps(req.get("messages"))) // 4,
                                 "completion_tokens": len(action.content or "") // 4 + 1}
        usage = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
        out = {"id": f"chatcmpl-{self.count}", "object": "chat.completion", "created": 0,
               "model": action.model or req.get("model", "test-model"),
               "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage}
        return 200, {}, orjson.dumps(out)

    async def _start(self) -> None:
        if self.slots is not None:
            self._slots = asyncio.Semaphore(self.slots)
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        self._server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def start(self) -> "OpenAIServer":
        """Start serving in a daemon thread; returns once the port is bound."""
        ready = threading.Event()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._start())
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._shutdown())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="openai-test-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        """Stop serving, cancelling stalled requests."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None


@contextmanager
def serve(latency: float = 0.0, handler: Callable[[dict], Any] | None = None,
          record: bool = True, slots: int | None = None) -> Iterator[OpenAIServer]:
    """Run an :class:`OpenAIServer` for the duration of a ``with`` block."""
    srv = OpenAIServer(latency=latency, handler=handler, record=record, slots=slots).start()
    try:
        yield srv
    finally:
        srv.stop()


def react_handler(turns: int) -> Callable[[dict], Reply]:
    """A ReAct agent: a search per turn for ``turns - 1`` turns, then an answer (for rollout benches)."""

    def handler(req: dict) -> Reply:
        msgs = req.get("messages") or []
        turn = sum(1 for m in msgs if m.get("role") == "assistant") + 1
        if turn >= turns:
            return Reply(content="Found it. <answer>done</answer>")
        question = msgs[1].get("content", "") if len(msgs) > 1 else ""
        words = question.split()
        query = " ".join(words[(turn * 2) % max(len(words), 1):][:3]) or "page"
        return Reply(content=f"Step {turn}: searching.", tool_calls=[call("search", {"query": query}, id=f"c{turn}")])

    return handler


def tool_text(protocol: str, name: str, arguments: dict) -> str:
    """One tool call written as text the way a model of ``protocol``'s family writes it."""
    args = json.dumps(arguments)
    if protocol == "hermes":
        return f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'
    if protocol == "llama3":
        return f'<|python_tag|>{{"name": "{name}", "parameters": {args}}}'
    if protocol == "mistral":
        return f'[TOOL_CALLS][{{"name": "{name}", "arguments": {args}}}]'
    if protocol == "react":
        return f"Action: {name}\nAction Input: {args}"
    raise ValueError(protocol)


# What each text protocol's instructions say, so the fake model knows it was taught the format.
_TAUGHT = {"hermes": "<tool_call>", "llama3": '"parameters"', "mistral": "[TOOL_CALLS]", "react": "Action Input"}


def text_tools_handler(protocol: str, turns: int = 3, think: bool = False,
                       renders_tools: bool = False) -> Callable[[dict], Reply]:
    """A model behind a server without a tool parser, writing its calls as text in ``protocol``'s format.

    The model calls tools when its system prompt taught the format (a text protocol's instructions)
    or, with ``renders_tools``, when the request carries ``tools`` (a server whose chat template
    shows them but that parses nothing back); otherwise it answers in prose, as a model whose
    server dropped the tools does (llama.cpp without --jinja).  It searches for ``turns - 1``
    turns, then answers; ``think`` puts a ``<think>`` block before every reply.
    """

    def handler(req: dict) -> Reply:
        msgs = req.get("messages") or []
        system = msgs[0].get("content", "") if msgs and msgs[0].get("role") == "system" else ""
        names = [t["function"]["name"] for t in req.get("tools") or []]
        head = "<think>The user wants facts; a tool would help.</think>\n" if think else ""
        if not (_TAUGHT[protocol] in system or renders_tools and names):
            return Reply(content=head + "I cannot look that up, but Paris is usually mild.")
        if "get_weather" in names or "get_weather" in system:  # the preflight's probe
            return Reply(content=head + tool_text(protocol, "get_weather", {"city": "Paris"}))
        turn = sum(1 for m in msgs if m.get("role") == "assistant") + 1
        if turn >= turns:
            return Reply(content=head + "Found it. <answer>done</answer>")
        return Reply(content=head + f"Step {turn}: searching.\n" + tool_text(protocol, "search", {"query": f"q{turn}"}))

    return handler


def main(argv: list[str] | None = None) -> None:
    """Serve in the foreground until stdin closes (benches run it as a subprocess)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.0, help="seconds added to every response")
    ap.add_argument("--react", type=int, default=0, help="answer as a ReAct agent that searches for N-1 turns")
    args = ap.parse_args(argv)
    handler = react_handler(args.react) if args.react else None
    with serve(latency=args.latency, handler=handler, record=False) as srv:
        print(f"PORT {srv.port}", flush=True)
        sys.stdin.read()  # the parent closes our stdin to stop us


if __name__ == "__main__":
    main()
