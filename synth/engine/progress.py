"""Progress bars, summary tables and log lines, on a terminal or in a log file.

On a terminal a ``rich`` bar is drawn per stage.  Elsewhere (a piped ``make demo``, CI,
Prefect workers) the same calls log a line at most every ``HOPFORGE_PROGRESS_EVERY``
seconds (default 10), so long stages still show progress without carriage returns, and
:func:`quiet_library_progress` turns off the bars of tqdm, ``datasets``, ``transformers``
and ``huggingface_hub``.  Tables are as wide as their content there (``COLUMNS`` when set),
never wrapped at 80 columns, and :func:`print_line` prints a line rich never breaks.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any, Iterable

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

log = logging.getLogger("hopforge")

LOG_WIDTH = 200  # console width when stderr is not a terminal and COLUMNS is not set


def _log_width() -> int | None:
    """None on a terminal (rich measures it); else ``COLUMNS`` when set, or :data:`LOG_WIDTH`."""
    if sys.stderr.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) >= 40 else LOG_WIDTH


def _log_every() -> float:
    try:
        return max(0.0, float(os.environ.get("HOPFORGE_PROGRESS_EVERY", "10")))
    except ValueError:
        return 10.0


console = Console(stderr=True, width=_log_width())


def interactive() -> bool:
    """Whether progress is drawn as bars (stderr is a terminal) rather than logged as lines."""
    return console.is_terminal


# Environment switches read by the libraries when they are imported (and by subprocesses, which inherit
# them): tqdm itself, datasets' map/filter bars, and the bars of transformers and huggingface_hub.
_QUIET_ENV = {"TQDM_DISABLE": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def quiet_library_progress(force: bool = False) -> bool:
    """Outside a terminal (or with ``force``), stop tqdm, ``datasets``, ``transformers`` and ``huggingface_hub``
    from drawing ``\r`` progress bars, in this process and in the subprocesses it starts; returns whether it did.

    The environment switches reach libraries imported later; those already imported are told directly.
    """
    if interactive() and not force:
        return False
    for k, v in _QUIET_ENV.items():
        os.environ.setdefault(k, v)
    if "datasets" in sys.modules:
        import datasets

        datasets.disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    return True


def print_line(text: str) -> None:
    """Print one line to stderr as it is: no markup, no highlighting, and never broken by rich (a printed
    command stays one line that can be pasted)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


class Bar:
    """A progress bar: ``update(n)``, and ``set_postfix(text)`` for what is under way; use as a context manager."""

    def __init__(self, desc: str, total: float | None = None, unit: str = "it", enabled: bool | None = None,
                 log_every_s: float | None = None):
        self.desc, self.total, self.unit = desc, total, unit
        self.n = 0.0
        self.postfix = ""
        self._t0 = time.monotonic()
        self._last_log = self._t0
        self._log_every = _log_every() if log_every_s is None else log_every_s
        self._logged: float | None = None  # the count last logged (None: nothing logged yet)
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
            self._log(now)

    def _log(self, now: float) -> None:
        self._last_log, self._logged = now, self.n
        of = f"/{self.total:,.0f}" if self.total else ""
        rate = self.n / max(now - self._t0, 1e-9)
        log.info("%s: %s%s %s (%s/s)%s", self.desc, f"{self.n:,.0f}", of, self.unit,
                 f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}", f"; {self.postfix}" if self.postfix else "")

    def set_total(self, total: float) -> None:
        self.total = total
        if self._progress is not None:
            self._progress.update(self._task, total=total)

    def close(self) -> None:
        """Stop the bar; in logs, a bar that logged progress logs where it ended too."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        elif self._logged is not None and self._logged != self.n:
            self._log(time.monotonic())

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def print_table(title: str, columns: list[str], rows: Iterable[Iterable[Any]]) -> None:
    """Print a summary table to stderr (ASCII outside a terminal).  A title wider than the table (a long
    path) goes on a line of its own above it rather than being folded into the table's width."""
    # In a log file the table is drawn in ASCII: box-drawing characters are 3 bytes each, which byte-counting
    # tools (awk, cut, column limits of log viewers) take for three characters.
    t = Table(show_lines=False, box=box.HEAVY_HEAD if interactive() else box.ASCII2)
    for c in columns:
        t.add_column(c, justify="left" if c == columns[0] else "right")
    for r in rows:
        t.add_row(*[_fmt(x) for x in r])
    if len(title) <= console.measure(t).maximum:
        t.title = title
        console.print(t)
    else:
        print_line(title)
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
