"""Progress bars and end-of-run summaries.

On a terminal a ``rich`` bar is drawn per stage.  Elsewhere (CI logs, Prefect
workers) the same calls log a line at most every few seconds, so long stages
still show progress in the logs without flooding them.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, Iterable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

log = logging.getLogger("hopforge")
# Logs and CI are not terminals: give tables room instead of rich's 80-column default.
console = Console(stderr=True, width=None if sys.stderr.isatty() else 150)


class Bar:
    """A progress bar: ``update(n)``, and ``set_postfix(text)`` for what is under way; use as a context manager."""

    def __init__(self, desc: str, total: float | None = None, unit: str = "it", enabled: bool | None = None,
                 log_every_s: float = 10.0):
        self.desc, self.total, self.unit = desc, total, unit
        self.n = 0.0
        self.postfix = ""
        self._t0 = time.monotonic()
        self._last_log = self._t0
        self._log_every = log_every_s
        use_rich = console.is_terminal if enabled is None else enabled
        self._progress: Progress | None = None
        if use_rich:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                TextColumn("{task.fields[postfix]}"), console=console, transient=False,
            )
            self._task = self._progress.add_task(desc, total=total, unit=unit, postfix="")
            self._progress.start()

    def update(self, n: float = 1) -> None:
        """Advance by ``n``."""
        self.n += n
        if self._progress is not None:
            self._progress.update(self._task, advance=n)
            return
        self._maybe_log()

    def set_postfix(self, text: str) -> None:
        """Show ``text`` after the counts (e.g. the teacher's ``"3 sending, 9 waiting"``); in logs it also
        keeps a stage that completes nothing for minutes visibly alive."""
        self.postfix = text
        if self._progress is not None:
            self._progress.update(self._task, postfix=text)
        else:
            self._maybe_log()

    def _maybe_log(self) -> None:
        now = time.monotonic()
        if now - self._last_log >= self._log_every:
            self._last_log = now
            of = f"/{self.total:,.0f}" if self.total else ""
            rate = self.n / max(now - self._t0, 1e-9)
            log.info("%s: %s%s %s (%.0f/s)%s", self.desc, f"{self.n:,.0f}", of, self.unit, rate,
                     f"; {self.postfix}" if self.postfix else "")

    def set_total(self, total: float) -> None:
        self.total = total
        if self._progress is not None:
            self._progress.update(self._task, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def print_table(title: str, columns: list[str], rows: Iterable[Iterable[Any]]) -> None:
    """Print a summary table to stderr (a plain layout when not on a terminal)."""
    t = Table(title=title, show_lines=False)
    for c in columns:
        t.add_column(c, justify="left" if c == columns[0] else "right")
    for r in rows:
        t.add_row(*[_fmt(x) for x in r])
    console.print(t)


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:,.2f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def setup_logging(level: int = logging.INFO) -> None:
    """Log hopforge's lines to stderr once."""
    if not log.handlers:
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
        log.addHandler(h)
        log.setLevel(level)
        log.propagate = False
