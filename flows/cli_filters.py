"""``hopforge filter`` and ``hopforge report``.

``hopforge filter --out DIR`` runs the ``filter`` stage: traces -> ``sft`` (best-of-n),
``rl_pool`` (difficulty band), ``rejects/filter`` and ``filter/verdicts``.
``hopforge report --out DIR`` writes ``DIR/report/index.md`` with its figures.

The commands are plain functions; :func:`register` adds them to a typer app (once).
Importing this module also registers them on :data:`flows.cli.app`, as
``flows/cli_tools.py`` does: ``flows/cli.py`` then only needs ``import flows.cli_filters``
on its last line, and the import cycle is harmless whichever module loads first.
"""

from __future__ import annotations

from pathlib import Path

import typer

from flows.cli import DEFAULT_CONFIG, ConfigOpt, ForceOpt, OutOpt, SetOpt, _guard, _load, _run_stages
from flows.cli import app as _root_app


@_guard
def filter_cmd(config: ConfigOpt = Path(DEFAULT_CONFIG), set_: SetOpt = None, out: OutOpt = Path("data/demo"),
               force: ForceOpt = False) -> None:
    """Filter traces (format, correctness, low-step, repeats, length, decontamination), keep the best of n
    per question as `sft`, and put questions with 1 <= c <= n-1 correct rollouts in `rl_pool`."""
    cfg = _load(config, set_)
    _run_stages(["filter"], cfg, out, force)


@_guard
def report_cmd(config: ConfigOpt = Path(DEFAULT_CONFIG), set_: SetOpt = None, out: OutOpt = Path("data/demo"),
               force: ForceOpt = False) -> None:
    """Write DIR/report/index.md: the funnel with every drop reason, trace histograms, pass@n, the
    evidence-recovery curve, calibration and teacher cost per kept sample."""
    cfg = _load(config, set_)
    _run_stages(["report"], cfg, out, force)
    from synth.progress import console

    console.print(f"report: {Path(out) / 'report' / 'index.md'}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``filter`` and ``report`` to ``app`` (once)."""
    names = {c.name for c in app.registered_commands}
    if "filter" not in names:
        app.command("filter")(filter_cmd)
    if "report" not in names:
        app.command("report")(report_cmd)


register(_root_app)

__all__ = ["filter_cmd", "register", "report_cmd"]
