"""``hopforge serve`` and ``hopforge check``: the Prefect side of the command line.

``hopforge serve`` serves the six deployments (:data:`flows.serve.DEPLOYMENTS`) from this
process, so ``prefect deployment run synth/full`` works with nothing but a Prefect server.
``hopforge check`` runs the preflight (:mod:`flows.preflight`) of a config and prints
every problem, the same check the ``synth`` flow makes before its first stage.

Importing this module registers the commands on :data:`flows.cli_common.app`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from flows.cli_common import DEFAULT_CONFIG, ConfigOpt, OutOpt, SetOpt, UsageError, guard
from flows.cli_common import app as _root_app


@_root_app.command("serve")
@guard
def serve_cmd(
    limit: Annotated[Optional[int], typer.Option("--limit", help="Most flow runs at once (default: no limit).")] = None,
    poll: Annotated[float, typer.Option("--poll", help="Seconds between looks for new runs.")] = 5.0,
) -> None:
    """Serve the deployments synth/full, synth/demo, synth/incremental, publish/hub and sft/warm-start.

    Run it from any directory (the deployments' config and output paths are the project's) with
    PREFECT_API_URL pointing at a running server (`prefect server start`); flow runs inherit this process's
    environment (OPENAI_API_KEY, HF_TOKEN).  Stop it with Ctrl-C.
    """
    from synth.engine.progress import print_line

    from flows.serve import DEPLOYMENTS, api_url, serve

    if not api_url():
        raise UsageError("PREFECT_API_URL is not set, so runs could not reach this process: start a server "
                         "(`prefect server start`) and `export PREFECT_API_URL=http://127.0.0.1:4200/api` "
                         "(or `prefect config set PREFECT_API_URL=...`)")
    print_line(f"serving {', '.join(d.full_name for d in DEPLOYMENTS)} against {api_url()}")
    serve(limit=limit, poll_seconds=poll)


@_root_app.command("check")
@guard
def check_cmd(config: ConfigOpt = Path(DEFAULT_CONFIG), set_: SetOpt = None,
              out: OutOpt = Path("data/demo")) -> None:
    """Check that a run can start: config, corpus source, teacher key and endpoint, task runner, output folder."""
    from synth.engine.progress import print_line

    from flows.preflight import PreflightError, check

    problems = check(config, list(set_ or []), out, via="cli")
    if problems:
        raise PreflightError(problems)
    print_line(f"ok: {config} can run into {out}")
