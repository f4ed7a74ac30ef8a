"""Measuring one command as its own process: wall time, CPU time and the peak RSS of its whole process tree.

Shared by the benchmarks that time hopforge commands through the real CLI (``bench/scale.py``,
``bench/downstream.py``).  The peak is the larger of two readings: the RSS of the process and all
its children, summed and polled every 50 ms with psutil, and the kernel's own high-water mark of
the child (``ru_maxrss`` from ``wait4``), which a short spike between two polls cannot escape.
The kernel's figure starts from the RSS of the process that starts the command (Linux keeps the
high-water mark across ``exec``), so that process must stay small.  The RSS sum counts twice a page that forked workers still share with their parent; the sum of
PSS (polled every 0.5 s) splits such pages between their sharers, and is reported beside it.
Run as a script, this module does nothing (``make bench`` runs every ``bench/*.py``).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psutil

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30
POLL_S = 0.05
DISK_POLL_S = 1.0
PSS_EVERY = 10  # polls between two PSS readings (0.5 s)


@dataclass
class Step:
    """One measured command and what it reported."""

    name: str  # the stage name (reports/<name>.json)
    argv: list[str]
    label: str = ""  # how a table names the step (the stage name when empty)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_tree: int = 0  # bytes, polled sum over the process tree
    peak_kernel: int = 0  # bytes, ru_maxrss of the child
    peak_at_s: float = 0.0  # when the polled peak was seen, seconds after start
    peak_pss: int = 0  # bytes, polled sum of PSS over the tree (shared pages split between their sharers)
    disk: int = 0  # bytes in the stage's own output folders when it ended (filled in by the caller)
    disk_peak: int = 0  # bytes: the largest the watched output folder was while the step ran
    out_after: int = 0  # bytes in the watched output folder when it ended
    samples: list[tuple[float, int]] = field(default_factory=list)
    report: dict = field(default_factory=dict)
    error: str = ""  # the failure's last line, when a caller measured a failed command and went on

    def __post_init__(self) -> None:
        self.label = self.label or self.name

    @property
    def peak(self) -> int:
        """The true peak: the larger of the polled tree sum and the kernel's high-water mark."""
        return max(self.peak_tree, self.peak_kernel)


def _tree_sum(proc: psutil.Process, read: Callable[[psutil.Process], int]) -> int:
    """``read(p)`` summed over ``proc`` and every live descendant (one that exits mid-poll counts as 0)."""
    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += read(p)
        except (psutil.Error, AttributeError):
            pass
    return total


def tree_rss(proc: psutil.Process) -> int:
    """RSS of ``proc`` plus every live descendant."""
    return _tree_sum(proc, lambda p: p.memory_info().rss)


def tree_pss(proc: psutil.Process) -> int:
    """PSS of ``proc`` plus every live descendant: unlike the RSS sum, a page that forked workers share with
    their parent (copy-on-write) counts once.  Slower to read than RSS (the kernel walks the page tables)."""
    return _tree_sum(proc, lambda p: p.memory_full_info().pss)


def du(path: Path) -> int:
    """Bytes ``path`` (a file or a folder) takes on disk (allocated blocks); 0 when it is missing."""
    total = 0
    try:
        if path.is_file():
            return path.stat().st_blocks * 512
        for root, _, files in os.walk(path):
            for f in files:
                try:
                    total += os.lstat(os.path.join(root, f)).st_blocks * 512
                except OSError:
                    pass  # written and removed between the listing and the stat
    except OSError:
        pass
    return total


def run_step(step: Step, log_path: Path, env: dict[str, str] | None = None, cwd: Path = ROOT,
             out: Path | None = None) -> None:
    """Run ``step.argv`` in ``cwd``; fill in wall time, CPU time and peak RSS.  Raises on a non-zero exit.

    ``env`` is added to this process's environment.  The CPU time and ``ru_maxrss`` are the child's
    (``wait4``); the CPU time of grandchildren that the child waited for is in it too.  With ``out``,
    the folder's size on disk is polled once a second as well (``disk_peak``, ``out_after``): a merge
    or a spill may need more room while it runs than it leaves behind.
    """
    full_env = dict(os.environ, COLUMNS="160", NO_COLOR="1", **(env or {}))
    with open(log_path, "wb") as log:
        t0 = time.monotonic()
        child = subprocess.Popen(step.argv, cwd=cwd, env=full_env, stdout=log, stderr=subprocess.STDOUT)
        proc = psutil.Process(child.pid)
        done = threading.Event()

        def poll() -> None:
            n = 0
            while not done.is_set():
                rss = tree_rss(proc)
                now = time.monotonic() - t0
                step.samples.append((now, rss))
                if rss > step.peak_tree:
                    step.peak_tree, step.peak_at_s = rss, now
                if n % PSS_EVERY == 0:
                    step.peak_pss = max(step.peak_pss, tree_pss(proc))
                n += 1
                done.wait(POLL_S)

        def poll_disk() -> None:
            while not done.is_set():
                step.disk_peak = max(step.disk_peak, du(out))
                done.wait(DISK_POLL_S)

        watchers = [threading.Thread(target=poll, daemon=True)]
        if out is not None:
            watchers.append(threading.Thread(target=poll_disk, daemon=True))
        for w in watchers:
            w.start()
        # wait4 rather than Popen.wait: it also returns the child's rusage, whose ru_maxrss
        # (KiB on Linux) is the kernel's high-water mark of its RSS.
        _, status, usage = os.wait4(child.pid, 0)
        step.wall_s = time.monotonic() - t0
        done.set()
        for w in watchers:
            w.join()
        child.returncode = os.waitstatus_to_exitcode(status)
    step.peak_kernel = usage.ru_maxrss * 1024
    step.cpu_s = usage.ru_utime + usage.ru_stime
    if out is not None:
        step.out_after = du(out)
        step.disk_peak = max(step.disk_peak, step.out_after)
    if child.returncode != 0:
        tail = log_path.read_text(errors="replace")[-4000:]
        raise RuntimeError(f"{' '.join(step.argv[1:])} exited {child.returncode}:\n{tail}")


def gib(b: float) -> float:
    return b / GIB


def timeline(step: Step, points: int = 12) -> str:
    """A coarse RSS-over-time line (GiB at evenly spaced moments), to see which phase holds the peak."""
    if not step.samples:
        return ""
    out = []
    for k in range(points):
        t = step.wall_s * (k + 1) / points
        rss = max((r for s, r in step.samples if step.wall_s * k / points <= s < t), default=0)
        out.append(f"{gib(rss):.1f}")
    return " ".join(out)


__all__ = ["GIB", "ROOT", "Step", "du", "gib", "run_step", "timeline", "tree_pss", "tree_rss"]
