"""``hopforge tools``: the agent's tools from the command line.

``hopforge tools serve --out DIR`` serves search / open / find over ``DIR/index`` on
loopback (see :mod:`synth.tools.server`); ``hopforge tools search --out DIR --query Q``
prints one search's results as JSON, the quickest way to see what an agent sees.
Both read the ``tools`` section of the config (window sizes, k, snippet length).

Importing this module registers ``tools_app`` on :data:`flows.cli_common.app`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from flows.cli_common import DEFAULT_CONFIG, ConfigOpt, OutOpt, SetOpt, UsageError, guard, load
from flows.cli_common import app as _root_app

tools_app = typer.Typer(no_args_is_help=True, help="The agent's tools (search / open / find) over DIR/index.")


def _open_index(out: Path, cfg):
    """The index under ``out`` searched with ``tools.ranker`` (:func:`synth.tools.rank.open_search`); a missing one
    raises MissingInput naming `hopforge index --out DIR` (missing page vectors: `hopforge embed`)."""
    from synth.tools.rank import open_search

    return open_search(out / "index", cfg.tools)


@tools_app.command("serve")
@guard
def serve_cmd(
    port: Annotated[int, typer.Option("--port", "-p", help="TCP port to listen on (1-65535).")] = 8765,
    host: Annotated[str, typer.Option("--host", help="Loopback address to bind (127.0.0.1, ::1 or localhost).")] = "127.0.0.1",
    config: ConfigOpt = Path(DEFAULT_CONFIG),
    set_: SetOpt = None,
    out: OutOpt = Path("data/demo"),
) -> None:
    """Serve the tools over HTTP on loopback: /search, /open, /find, /tools, /health."""
    from synth.tools.server import check_loopback, serve

    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port}: a TCP port is between 1 and 65535 (0: any free port)")
    cfg = load(config, set_)
    try:
        check_loopback(host)
    except ValueError as e:
        raise UsageError(str(e)) from None
    serve(out / "index", cfg.tools, host=host, port=port)


@tools_app.command("search")
@guard
def search_cmd(
    query: Annotated[str, typer.Option("--query", "-q", help="The search query (any text).")],
    k: Annotated[Optional[int], typer.Option("--k", "-k", help="Number of results (default: tools.search_k).")] = None,
    exclude: Annotated[Optional[list[str]], typer.Option("--exclude", help="A page id to mask (repeatable).")] = None,
    config: ConfigOpt = Path(DEFAULT_CONFIG),
    set_: SetOpt = None,
    out: OutOpt = Path("data/demo"),
) -> None:
    """Run one search and print the results as JSON: [{page_id, title, snippet}]."""
    from synth.tools.toolbox import ToolError, check_arguments, run_search
    from synth.tools.schema import tool_schemas

    cfg = load(config, set_)
    try:
        args = check_arguments("search", {"query": query, "k": k}, tool_schemas(cfg.tools))
    except ToolError as e:
        raise UsageError(str(e).replace("search: ", "", 1)) from None
    index = _open_index(out, cfg)
    results = run_search(index, cfg.tools, args["query"], args.get("k"), exclude=exclude or ())
    sys.stdout.write(json.dumps(results, ensure_ascii=False, indent=2) + "\n")


if not any(g.typer_instance is tools_app for g in _root_app.registered_groups):
    _root_app.add_typer(tools_app, name="tools")

__all__ = ["tools_app"]
