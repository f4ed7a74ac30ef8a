"""``hopforge verify DIR``: re-derive a run's stages in a scratch folder and say, stage by stage, whether
they equal the committed ones (:mod:`flows.verify`).  Exit code 0 when every output is equal, 1 when
something differs, a committed file cannot be read (a DAMAGED line; the other outputs are still compared) or a
stage cannot be re-derived, 2 for bad input (DIR is no run folder, a run holds it).

Importing this module registers the command on :data:`flows.cli_common.app`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from flows.cli_common import DEFAULT_CONFIG, ConfigOpt, SetOpt, guard, load
from flows.cli_common import app as _root_app

DirArg = Annotated[Path, typer.Argument(metavar="DIR", help="The run folder to verify (the --out of `hopforge run`).",
                                        show_default=False)]
ScratchOpt = Annotated[Optional[Path], typer.Option("--scratch", help="Re-derive under this folder (new or empty; "
                                                    "default: a temporary folder, removed afterwards).")]
KeepOpt = Annotated[bool, typer.Option("--keep", help="Keep the temporary scratch folder (say where it is).")]
NoCacheOpt = Annotated[bool, typer.Option("--no-call-cache", help="Ask the teacher again instead of answering from a "
                                                                  "copy of DIR's call cache (the oracle writes "
                                                                  "anew; a paid endpoint is paid again).")]
UntilOpt = Annotated[Optional[str], typer.Option("--until", help="Verify the stages up to this one only.")]


@guard
def verify_cmd(folder: DirArg, config: ConfigOpt = Path(DEFAULT_CONFIG), set_: SetOpt = None,
               scratch: ScratchOpt = None, keep: KeepOpt = False, no_call_cache: NoCacheOpt = False,
               until: UntilOpt = None) -> None:
    """Re-derive DIR's stages into a scratch folder (teacher calls from a copy of DIR's call cache) and compare
    every table, artefact and report with the committed ones; DIR is never written.  Give the --config and
    --set the run was made with."""
    from flows.verify import COLUMNS, check_run_folder, verify
    from synth.engine.progress import print_line, print_table

    check_run_folder(folder)  # a folder that is no run fails before the config is read
    cfg = load(config, set_)
    v = verify(folder, cfg, scratch=scratch, keep=keep, call_cache=not no_call_cache, until=until)
    print_table(f"hopforge verify: {folder}", COLUMNS, v.rows())
    if v.keys:
        print_line(f"the re-derived keys of {', '.join(v.keys)} are not the run's: verify with the code, --config and "
                   "--set the run was made with")
    if v.scratch is not None:
        print_line(f"scratch folder kept: {v.scratch}")
    if v.teacher_calls:
        print_line(f"{v.teacher_calls:,} teacher calls were sent (the call cache had no answer for them)")
    if v.equal:
        print_line(f"every stage of {folder} re-derives equal: {len(v.stages)} stages, {len(v.lines)} outputs")
        return
    bad = [f"{line.stage}/{line.output}" for line in v.differing() if not line.damaged]
    what = ", ".join(bad[:6]) + (f" and {len(bad) - 6} more" if len(bad) > 6 else "")
    if damaged := [f"{line.stage}/{line.output}" for line in v.lines if line.damaged]:
        what = f"{', '.join(damaged)} cannot be read (DAMAGED: `hopforge run` recomputes them)" + \
            (f"; {what}" if what else "")
    if v.error is not None:
        what = (what + "; " if what else "") + f"stage {v.error[0]} could not be re-derived"
    print_line(f"{folder} does not re-derive: {what}")
    raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``verify`` to ``app`` (once)."""
    if "verify" not in {c.name for c in app.registered_commands}:
        app.command("verify")(verify_cmd)


register(_root_app)

__all__ = ["verify_cmd", "register"]
