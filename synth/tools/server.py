"""The tools as a local HTTP service, for agents outside hopforge (e.g. an RL trainer's rollouts).

Like ASearcher's ``/retrieve`` and ``/access`` servers, over the same index and with the
same behaviour as :class:`synth.tools.toolbox.Toolbox`::

    GET  /health                         {"status": "ok", "docs": N, "index": DIR, "ranker": tools.ranker}
    GET  /tools                          the OpenAI function schemas
    GET  /search?q=...&k=5[&exclude=ID]  [{page_id, title, snippet}]
    GET  /open?page=...&offset=0         {page_id, title, offset, next_offset, total_chars, text}
    GET  /find?page=...&text=...         {page_id, title, text, total, passages}
    GET  /multi_search?queries=...&queries=...&k=5[&exclude=ID]   merged hits (only with tools.extra_tools)

Each tool endpoint also takes the same fields as a POST JSON body (``query`` is
accepted for ``q``; ``exclude`` may be a list), which is how source masking is
done per request.  A bad request answers ``{"error": "..."}`` with 400 (bad
arguments, a body that is not JSON or nests deeper than :data:`MAX_JSON_DEPTH`), 404 (unknown
page), 413 (a URL or body over ``tools.max_request_bytes``, refused before it is read whole, so
a large or slow client holds no more than that) or 415 (a POST body not sent as
``application/json``).

The service binds to loopback only: it has no authentication, and the corpus is not meant to be
served beyond this machine.  A web page the user opens could still reach a loopback port from the
browser, so two more checks keep browsers out:

* the ``Host`` header must name a loopback address or ``localhost`` (with or without a port),
  else 400: under DNS rebinding a page's own host name resolves to 127.0.0.1, and its requests
  carry that name;
* a POST body must be ``Content-Type: application/json``, else 415: a page may send a "simple"
  cross-origin request (``text/plain``, form encodings) without asking first, but JSON needs a
  CORS preflight, which this server never grants.

Limits on clients (all in ``tools:``, all operational):

* a connection must deliver a whole request, headers and body, within ``request_timeout_s``
  (10 s) of opening or of its previous answer, or it is closed without an answer; the time a
  tool takes to answer is not limited;
* a keep-alive connection that sends nothing for ``idle_timeout_s`` (5 s) after an answer is
  closed (uvicorn's ``timeout_keep_alive``);
* the request line and headers may hold ``max_request_bytes`` plus :data:`HEADER_SLACK`
  bytes; past that the HTTP parser answers 400;
* a client that goes away mid-request is not an error: nothing is logged for it.

The HTTP/1.1 protocol is uvicorn's h11 one, with the request deadline added
(:class:`ToolServerProtocol`), whether or not ``httptools`` is installed.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import logging
import re
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit
from typing import Any

import h11
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from synth.tools.rank import open_search
from synth.tools.search import SearchIndex
from synth.tools.registry import get_tool, tool_names
from synth.tools.toolbox import ToolError, check_arguments
from synth.tools.config import ToolsConfig
from synth.tools.schema import tool_schemas

_INT = re.compile(r"[+-]?\d+")
log = logging.getLogger("hopforge")
HEADER_SLACK = 8 << 10  # room for the request line and headers beside a URL of max_request_bytes
GONE = 499  # the status of an answer to a client that went away (never sent: nobody is there to read it)
# Tool arguments are flat (a page id list at most); the bound keeps every body far from the recursion limit
# of the JSON parser and of anything that walks the parsed value.
MAX_JSON_DEPTH = 32
JSON_TYPE = "application/json"


def served_ranker(index: SearchIndex) -> str:
    """The ``tools.ranker`` an open index's ``search`` serves (``bm25`` for the index's own ``tool`` ranking)."""
    return "bm25" if index.default_ranking == "tool" else index.default_ranking


def create_app(index: SearchIndex, cfg: ToolsConfig | None = None) -> FastAPI:
    """The FastAPI app over one open index, which must search with ``cfg.ranker`` (open it with
    :func:`synth.tools.rank.open_search`)."""
    cfg = cfg or ToolsConfig()
    schemas = tool_schemas(cfg)
    ranker = served_ranker(index)
    if ranker != cfg.ranker:
        raise ValueError(f"the index searches with {ranker} but tools.ranker is {cfg.ranker}: open it with "
                         "synth.tools.rank.open_search(index_dir, tools)")
    app = FastAPI(title="hopforge tools", description="search / open / find over a local Wikipedia index")

    limit = cfg.max_request_bytes

    async def body_of(request: Request) -> bytes:
        """The request body, read no further than ``limit`` bytes (413 past it)."""
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise ToolError(f"the request body is {int(declared):,} bytes; at most {limit:,} are accepted", status=413)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ToolError(f"the request body is over {limit:,} bytes", status=413)
            chunks.append(chunk)
        return b"".join(chunks)

    # The integer arguments of each tool, parsed from a query string (where every value is text).
    integers = {sc["function"]["name"]: {k for k, v in sc["function"]["parameters"]["properties"].items()
                                         if v.get("type") == "integer"} for sc in schemas}
    # The list arguments: a query string repeats the field (queries=a&queries=b), as it does for exclude.
    lists = {sc["function"]["name"]: {k for k, v in sc["function"]["parameters"]["properties"].items()
                                      if v.get("type") == "array"} for sc in schemas}

    async def arguments(request: Request, tool: str) -> dict:
        """Query-string fields, overridden by a POST JSON body; integers in a query string parsed."""
        if len(request.url.path) + len(request.url.query) > limit:
            raise ToolError(f"the request URL is over {limit:,} bytes", status=413)
        args: dict[str, Any] = {}
        for key in request.query_params:
            values = request.query_params.getlist(key)
            value = values if key == "exclude" or key in lists[tool] else values[-1]
            numeric = isinstance(value, str) and key in integers[tool] and _INT.fullmatch(value)
            args[key] = int(value) if numeric else value
        if request.method == "POST":
            declared = request.headers.get("content-type")
            if declared is not None and not _is_json(declared):
                raise ToolError(_not_json(declared), status=415)  # refused before the body is read
            raw = await body_of(request)
            if raw.strip():
                if declared is None:
                    raise ToolError(_not_json(None), status=415)
                body = parse_json_body(raw)
                if not isinstance(body, dict):
                    raise ToolError("the request body must be a JSON object")
                args.update(body)
        return args

    async def answer(request: Request, tool: str) -> JSONResponse:
        """Run ``tool`` on the request's fields in a worker thread; a ToolError becomes a 4xx."""
        try:
            args = await arguments(request, tool)
            spec = get_tool(tool)
            for alias, name in spec.aliases.items():
                if alias in args:
                    args[name] = args.pop(alias)
            # Only a masked tool reads `exclude` (the pages masked from it); to any other it is an unknown argument.
            exclude = _exclude_list(args.pop("exclude", None)) if spec.masked else ()
            checked = check_arguments(tool, args, schemas)
            result = await run_in_threadpool(spec.run, index, cfg, checked, tuple(exclude))
        except ToolError as e:
            return JSONResponse({"error": str(e)}, status_code=e.status)
        except ClientDisconnect:  # the client closed mid-body (or was timed out): not the server's error
            return Response(status_code=GONE)
        return JSONResponse(result)

    def route(tool: str):
        # A closure, not a default argument: FastAPI would expose a default as a query parameter.
        async def endpoint(request: Request) -> JSONResponse:
            return await answer(request, tool)

        return endpoint

    for tool in tool_names(cfg):  # the tools cfg offers (an optional one only where tools.extra_tools names it)
        app.add_api_route(f"/{tool}", route(tool), methods=["GET", "POST"], name=tool)

    @app.get("/health")
    def health() -> dict:
        """Liveness, and how many pages the index holds."""
        return {"status": "ok", "docs": index.num_docs, "index": str(index.index_dir), "ranker": ranker}

    @app.get("/tools")
    def tools() -> list[dict]:
        """The OpenAI function schemas of the registered tools."""
        return schemas

    app.add_middleware(LoopbackHostOnly)
    return app


def _is_json(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == JSON_TYPE


def _not_json(content_type: str | None) -> str:
    sent = "no Content-Type" if content_type is None else f"Content-Type {content_type[:100]!r}"
    return f"a POST body must be sent as Content-Type: {JSON_TYPE} (this request had {sent})"


def parse_json_body(raw: bytes) -> Any:
    """``raw`` parsed as JSON; :class:`ToolError` (400) for bytes that are not JSON or nest past
    :data:`MAX_JSON_DEPTH` levels (a body nested thousands deep would hit the parser's recursion limit)."""
    too_deep = ToolError(f"the request body nests arrays or objects more than {MAX_JSON_DEPTH} levels deep")
    try:
        body = json.loads(raw)
    except RecursionError:
        raise too_deep from None
    except ValueError as e:  # bad JSON, or bytes that are not UTF-8
        raise ToolError(f"the request body is not valid JSON: {getattr(e, 'msg', e)}") from None
    if json_depth(body) > MAX_JSON_DEPTH:
        raise too_deep
    return body


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests lists and dicts (a scalar is 0), without recursing."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if children is None:
            continue
        deepest = max(deepest, d)
        todo.extend((c, d + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def host_problem(host: str | None) -> str | None:
    """Why a request's ``Host`` header is refused (None: it names loopback, with or without a port)."""
    if not host:
        return "the request has no Host header; the tool server answers only requests addressed to loopback"
    try:
        parts = urlsplit(f"//{host}")
        name, _ = parts.hostname, parts.port  # .port raises on a port that is not a number in range
        if not name or parts.username is not None or parts.path or parts.query or parts.fragment:
            raise ValueError
        check_loopback(name)
    except ValueError:
        return (f"the Host header {host[:100]!r} does not name this machine's loopback (localhost, 127.0.0.1 or "
                "[::1], with or without a port); the tool server answers only requests addressed to loopback")
    return None


class LoopbackHostOnly:
    """ASGI middleware: a request whose ``Host`` header does not name loopback gets a 400, before any route.

    A browser sends the host name of the page's own URL: under DNS rebinding that is the attacker's name,
    resolved to 127.0.0.1, so checking the bound address is not enough (:func:`host_problem`)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = host_problem(Headers(scope=scope).get("host"))
            if problem is not None:
                await JSONResponse({"error": problem}, status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _exclude_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ToolError("'exclude' must be a page id or a list of page ids")
    # A query string may also carry them comma-separated: exclude=1,2
    return [p.strip() for v in value for p in v.split(",") if p.strip()]


def check_loopback(host: str) -> None:
    """Raise ValueError unless ``host`` is a loopback address (or ``localhost``)."""
    if host == "localhost":
        return
    try:
        ok = ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"the tool server binds to loopback only (127.0.0.1, ::1 or localhost), not {host!r}")


class ToolServerProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on reading each request.

    The deadline is armed when the connection opens and again after each answer, and
    disarmed once a whole request (headers and body) has arrived; when it passes first, the
    connection is closed without an answer.  uvicorn alone times out only a keep-alive
    connection that sends nothing at all, so a client that sends half a request, or
    connects and sends nothing, would otherwise hold its connection (and a request's
    handler, awaiting the body) for ever.
    """

    def __init__(self, *args: Any, request_timeout_s: float, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.request_timeout_s = request_timeout_s
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):  # the request is in whole
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
            self._arm()  # the next request (or the rest of this one's body) is due

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()  # connection_lost tells a handler awaiting the body that the client is gone


def server_config(index: SearchIndex, cfg: ToolsConfig, host: str, port: int, **kwargs: Any) -> uvicorn.Config:
    """The uvicorn config of a tool server: the app, its timeouts and its header limit (see the module)."""
    return uvicorn.Config(
        create_app(index, cfg), host=host, port=port, log_level="warning",
        http=functools.partial(ToolServerProtocol, request_timeout_s=cfg.request_timeout_s),  # type: ignore[arg-type]
        timeout_keep_alive=cfg.idle_timeout_s,  # type: ignore[arg-type] - a float works: it goes to call_later
        h11_max_incomplete_event_size=cfg.max_request_bytes + HEADER_SLACK, **kwargs)


def serve(index_dir: str | Path, cfg: ToolsConfig | None = None, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve the tools over the index in ``index_dir`` until interrupted (blocks); ``search`` ranks with
    ``cfg.ranker`` (:func:`synth.tools.rank.open_search`: under dense or hybrid, the page vectors beside the index)."""
    check_loopback(host)
    cfg = cfg or ToolsConfig()
    index = open_search(index_dir, cfg)
    log.info("hopforge tools: %s pages from %s on http://%s:%d, search ranked by %s", f"{index.num_docs:,}",
             index.index_dir, host, port, cfg.ranker)
    uvicorn.Server(server_config(index, cfg, host, port)).run()


class RunningServer:
    """A tool server running in a background thread (for tests and notebooks); ``stop()`` ends it."""

    def __init__(self, server: uvicorn.Server, thread: threading.Thread, host: str, port: int):
        self._server, self._thread = server, thread
        self.host, self.port = host, port
        self.url = f"http://{host}:{port}"

    @property
    def requests_in_flight(self) -> int:
        """Requests whose handler is running now (one awaiting a body counts)."""
        return len(self._server.server_state.tasks)

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the server to exit and wait for its thread."""
        self._server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> "RunningServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_server(index: SearchIndex | str | Path, cfg: ToolsConfig | None = None, host: str = "127.0.0.1",
                 port: int = 0, timeout: float = 30.0) -> RunningServer:
    """Start the tool server in this process, in a thread; ``port=0`` takes a free port (see ``.url``).  Given a
    folder, the index is opened with ``cfg.ranker`` (:func:`synth.tools.rank.open_search`); an open index is served
    with the ranking it has."""
    check_loopback(host)
    cfg = cfg or ToolsConfig()
    if not isinstance(index, SearchIndex):
        index = open_search(index, cfg)
    server = uvicorn.Server(server_config(index, cfg, host, port, lifespan="off"))
    thread = threading.Thread(target=server.run, name="hopforge-toolserver", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the tool server did not start on {host}:{port}")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    return RunningServer(server, thread, host, bound)


__all__ = ["MAX_JSON_DEPTH", "LoopbackHostOnly", "create_app", "served_ranker", "serve", "server_config", "start_server",
           "RunningServer", "ToolServerProtocol", "check_loopback", "host_problem", "json_depth", "parse_json_body"]
