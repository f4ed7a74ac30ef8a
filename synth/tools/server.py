"""The tools as a local HTTP service, for agents outside hopforge (e.g. an RL trainer's rollouts).

Like ASearcher's ``/retrieve`` and ``/access`` servers, over the same index and with the
same behaviour as :class:`synth.tools.toolbox.Toolbox`::

    GET  /health                         {"status": "ok", "docs": N, "index": DIR}
    GET  /tools                          the OpenAI function schemas
    GET  /search?q=...&k=5[&exclude=ID]  [{page_id, title, snippet}]
    GET  /open?page=...&offset=0         {page_id, title, offset, next_offset, total_chars, text}
    GET  /find?page=...&text=...         {page_id, title, text, total, passages}

Each tool endpoint also takes the same fields as a POST JSON body (``query`` is
accepted for ``q``; ``exclude`` may be a list), which is how source masking is
done per request.  A bad request answers ``{"error": "..."}`` with 400 (bad
arguments), 404 (unknown page) or 413 (a URL or body over ``tools.max_request_bytes``,
refused before it is read whole, so a large or slow client holds no more than that).  The service binds to loopback only: it has no
authentication, and the corpus is not meant to be served beyond this machine.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from synth.tools.search import SearchIndex
from synth.tools.toolbox import ToolError, check_arguments, run_find, run_open, run_search
from synth.tools.config import ToolsConfig
from synth.tools.schema import tool_schemas

_INT = re.compile(r"[+-]?\d+")
log = logging.getLogger("hopforge")


def create_app(index: SearchIndex, cfg: ToolsConfig | None = None) -> FastAPI:
    """The FastAPI app over one open index."""
    cfg = cfg or ToolsConfig()
    schemas = tool_schemas(cfg)
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

    async def arguments(request: Request) -> dict:
        """Query-string fields, overridden by a POST JSON body; integers in a query string parsed."""
        if len(request.url.path) + len(request.url.query) > limit:
            raise ToolError(f"the request URL is over {limit:,} bytes", status=413)
        args: dict[str, Any] = {}
        for key in request.query_params:
            values = request.query_params.getlist(key)
            value = values if key == "exclude" else values[-1]
            args[key] = int(value) if isinstance(value, str) and key in ("k", "offset") and _INT.fullmatch(value) else value
        if request.method == "POST":
            raw = await body_of(request)
            if raw.strip():
                try:
                    body = json.loads(raw)
                except ValueError as e:  # bad JSON, or bytes that are not UTF-8
                    raise ToolError(f"the request body is not valid JSON: {getattr(e, 'msg', e)}") from None
                if not isinstance(body, dict):
                    raise ToolError("the request body must be a JSON object")
                args.update(body)
        return args

    async def answer(request: Request, tool: str) -> JSONResponse:
        """Run ``tool`` on the request's fields in a worker thread; a ToolError becomes a 4xx."""
        try:
            args = await arguments(request)
            if tool == "search":
                if "q" in args:
                    args["query"] = args.pop("q")
                exclude = _exclude_list(args.pop("exclude", None))
                checked = check_arguments(tool, args, schemas)
                result = await run_in_threadpool(run_search, index, cfg, checked["query"], checked.get("k"), exclude)
            elif tool == "open":
                checked = check_arguments(tool, args, schemas)
                result = await run_in_threadpool(run_open, index, cfg, checked["page"], checked.get("offset", 0))
            else:
                checked = check_arguments(tool, args, schemas)
                result = await run_in_threadpool(run_find, index, cfg, checked["page"], checked["text"])
        except ToolError as e:
            return JSONResponse({"error": str(e)}, status_code=e.status)
        return JSONResponse(result)

    def route(tool: str):
        # A closure, not a default argument: FastAPI would expose a default as a query parameter.
        async def endpoint(request: Request) -> JSONResponse:
            return await answer(request, tool)

        return endpoint

    for tool in ("search", "open", "find"):
        app.add_api_route(f"/{tool}", route(tool), methods=["GET", "POST"], name=tool)

    @app.get("/health")
    def health() -> dict:
        """Liveness, and how many pages the index holds."""
        return {"status": "ok", "docs": index.num_docs, "index": str(index.index_dir)}

    @app.get("/tools")
    def tools() -> list[dict]:
        """The OpenAI function schemas of search, open and find."""
        return schemas

    return app


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


def serve(index_dir: str | Path, cfg: ToolsConfig | None = None, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve the tools over the index in ``index_dir`` until interrupted (blocks)."""
    check_loopback(host)
    cfg = cfg or ToolsConfig()
    index = SearchIndex.open(index_dir, snippet_chars=cfg.snippet_chars)
    log.info("hopforge tools: %s pages from %s on http://%s:%d", f"{index.num_docs:,}", index.index_dir, host, port)
    uvicorn.run(create_app(index, cfg), host=host, port=port, log_level="warning")


class RunningServer:
    """A tool server running in a background thread (for tests and notebooks); ``stop()`` ends it."""

    def __init__(self, server: uvicorn.Server, thread: threading.Thread, host: str, port: int):
        self._server, self._thread = server, thread
        self.host, self.port = host, port
        self.url = f"http://{host}:{port}"

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
    """Start the tool server in this process, in a thread; ``port=0`` takes a free port (see ``.url``)."""
    check_loopback(host)
    cfg = cfg or ToolsConfig()
    if not isinstance(index, SearchIndex):
        index = SearchIndex.open(index, snippet_chars=cfg.snippet_chars)
    server = uvicorn.Server(uvicorn.Config(create_app(index, cfg), host=host, port=port, log_level="warning",
                                           lifespan="off"))
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


__all__ = ["create_app", "serve", "start_server", "RunningServer", "check_loopback"]
