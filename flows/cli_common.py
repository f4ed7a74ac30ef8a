"""What every ``hopforge`` command shares: the typer app, the common options, config loading
and the guard that turns user errors (exit 2) and errors of the machine (exit 1) into one line.

The command modules (``flows/cli.py``, ``cli_tools.py``, ``cli_publish.py``, ``cli_serve.py``)
import this module and register their commands on :data:`app`; ``flows/cli.py`` imports the
others, so the console entry point sees every command.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

app = typer.Typer(add_completion=False, no_args_is_help=True, help="hopforge: Wikipedia -> warm-start data for search agents.")
corpus_app = typer.Typer(no_args_is_help=True, help="Build corpora.")
app.add_typer(corpus_app, name="corpus")

# Found from any directory: a relative config path is looked for in the current directory, then in the
# project root (synth.engine.config.project_path), and so are the relative paths inside the file.
DEFAULT_CONFIG = "configs/demo.yaml"
ConfigOpt = Annotated[Path, typer.Option("--config", "-c", help="YAML config file (a relative path: the current "
                                                                "directory's, else the project's).")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", "-s", help="Override a config key: dotted.key=value (repeatable).")]
OutOpt = Annotated[Path, typer.Option("--out", "-o", help="Output folder DIR: every stage reads and writes here.")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Recompute even if inputs, config and code are unchanged.")]


class UsageError(Exception):
    """Bad input from the user: printed and exit 2."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill PID``, a scheduler's stop, a container's shutdown), raised in the main thread as a
    KeyboardInterrupt is for Ctrl-C: shards stop the same way, finished ones are kept, and the command says how
    to resume; it exits 143 (128 + SIGTERM) rather than 130."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum


def stop_on_sigterm() -> None:
    """Make SIGTERM stop this process as Ctrl-C does (:class:`Terminated`).  A process forked from it (a
    worker) is not the one that asked: there the signal does what it did before, and ends it."""
    import signal

    main = os.getpid()

    def terminate(signum: int, frame) -> None:
        if os.getpid() != main:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated(signum)

    signal.signal(signal.SIGTERM, terminate)


def fail(msg: str, code: int = 2) -> None:
    from rich.markup import escape

    from synth.engine.progress import console

    # One line, whatever its length; escaped, or rich would eat "[title, sent_id]" as markup.
    console.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def load(config: Path, overrides: list[str] | None):
    from flows.config import ConfigError, load_config

    try:
        return load_config(config, overrides or [])
    except ConfigError as e:
        fail(e.told(str(config), "cli") if e.override is not None else str(e))


def run_stages(names: list[str], cfg, out: Path, force: bool = False) -> None:
    """Run the named stages in order through the pipeline's run loop, then print the summary tables."""
    from flows.stages import PIPELINE
    from synth.engine.progress import print_table
    from synth.engine.runner import SUMMARY_COLUMNS, summary_rows
    from synth.engine.store import Store

    outcomes = PIPELINE.run([PIPELINE[n] for n in names], cfg, Store(out), force=force)
    if rows := teacher_rows(outcomes):
        print_table("teacher calls (as recorded when each stage ran)", TEACHER_COLUMNS, rows)
    if (headline := run_headline(out, cfg)) is not None:
        print_table(f"teacher per kept SFT row ({headline.kept_sft_rows:,} rows; call-cache hits included)",
                    headline.COLUMNS, headline.rows())
    print_table(f"hopforge: {out}", SUMMARY_COLUMNS, summary_rows(outcomes))
    if (line := depth_line(outcomes, cfg)) is not None:
        from synth.engine.progress import print_line

        print_line(line)


def depth_line(outcomes, cfg) -> str | None:
    """One line on the kept questions' depth when the questions stage ran: the mean effective hops and how many
    questions keep >= 6, and a warning when the mean falls far (below three quarters) of ``walk.hops``."""
    from synth.engine.reports import QuestionsReport

    o = next((o for o in outcomes if o.name == "questions"), None)
    report = o.typed_report if o is not None else None
    depth = report.depth if isinstance(report, QuestionsReport) else None
    kept = depth.kept if depth is not None else None
    if kept is None or not kept.questions or kept.mean_effective is None:
        return None
    deep = sum(n for d, n in kept.effective.items() if int(d) >= 6)
    line = (f"questions: {kept.questions:,} kept, mean effective depth {kept.mean_effective:.2f} hops "
            f"(nominal {kept.mean_nominal:.2f}); {deep:,} at >= 6 effective hops")
    if kept.mean_effective < 0.75 * cfg.walk.hops:
        line += (f". WARNING: far below walk.hops = {cfg.walk.hops}: the questions are shallower than the walks "
                 "they were written from (see reports/questions.json: depth, routing)")
    return line


def run_headline(out: Path, cfg):
    """The run's headline figures (:func:`synth.report.headline.read_headline`) priced at the config's
    ``teacher.price_per_mtok``; None before a filter stage has reported kept rows."""
    from synth.report.headline import read_headline

    return read_headline(out, cfg.teacher.price_per_mtok)


# prompt tokens include the server-cached ones (served from the server's prefix cache, billed at
# teacher.price_per_mtok.cached_prompt); cache hits are hopforge's own call cache, nothing sent.
TEACHER_COLUMNS = ["stage", "requests", "cache hits", "retries", "failed", "prompt tokens",
                   "server-cached prompt tokens", "completion tokens", "cost (USD)"]


def teacher_rows(outcomes) -> list[list]:
    """Rows for the teacher accounting table: what each stage's calls cost (as recorded in its report)."""
    from synth.teacher.stats import TeacherUsage

    rows = []
    for o in outcomes:
        t = TeacherUsage.from_report(o.typed_report.teacher)
        if t is None:
            continue
        rows.append([o.name + (" (reused)" if o.reused else ""), t.requests, t.cache_hits, t.retries, t.failed,
                     t.prompt_tokens, t.server_cached_prompt_tokens, t.completion_tokens,
                     "-" if t.cost_usd is None else round(t.cost_usd, 4)])
    return rows


def guard(fn):
    """Turn known user errors into exit code 2 with a clear message, and errors of the machine (a full
    disk, a read-only folder, a permission denied: :func:`synth.engine.errors.machine_error`) into exit
    code 1 with one line naming the path and what was being written."""
    import functools

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        from flows.config import ConfigError
        from synth.engine.errors import InputError, StageFailed, damaged_table, machine_error
        from synth.engine.store import MissingInput

        try:
            return fn(*a, **kw)
        except (ConfigError, MissingInput, InputError, UsageError) as e:
            fail(str(e))
        except StageFailed as e:
            fail(str(e), code=1)
        except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (Terminated): the same resume, their own exit codes
            code, how = (128 + e.signum, " (SIGTERM)") if isinstance(e, Terminated) else (130, "")
            fail(f"interrupted{how}: finished stages and shards are kept; run the same command again to resume",
                 code=code)
        except Exception as e:  # a full disk, a read-only folder, a permission error: one line, not a traceback
            if (m := machine_error(e, kw.get("out"))) is not None:
                fail(str(m), code=1)
            if (d := damaged_table(e)) is not None:  # a truncated or overwritten table: the file and its stage
                fail(str(d))
            raise

    return wrapper


