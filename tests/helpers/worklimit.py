"""Per-test limits on the work a test does, not on the clock (a pytest plugin: ``tests/conftest.py`` loads it).

pytest-timeout's ``timeout`` (``pyproject.toml``: 600) stays the setting, but it is spent in CPU seconds rather
than wall seconds: a test may use ``timeout`` times the cores this process may use, which is what it could do in
``timeout`` seconds on this machine idle.  Counted are the CPU seconds of the test's processes from its setup to
its teardown: this process (every thread but this watchdog's), the processes it started that are still running
(a pipeline's workers, a CLI run, Prefect's server), and those that ended.  On a loaded machine every test's
clock slows while its work does not, so a busy machine trips no limit that an idle one would not (the suite
held on an idle machine and failed at load 5 to 7).  Module fixtures count towards the first test that uses
them, as before; they run the smallest pipeline that shows what their tests check.

A hung test does no work, so two guards remain, keyed on progress: a test whose processes spend less than
``STALL_CPU_S`` CPU seconds in ``STALL_S`` seconds fails as stalled, and none may take ``WALL_FACTOR`` times
its budget in wall seconds.  Either fails the test as pytest-timeout's ``signal`` method does: the stacks of
the other threads are printed and the test fails, naming the limit.
"""

from __future__ import annotations

import os
import resource
import signal
import threading
import time

import pytest

POLL_S = float(os.environ.get("HOPFORGE_TEST_WORK_POLL_S", 2.0))  # how often the watchdog counts the work done
# a test whose processes are this long without STALL_CPU_S of work has hung (tests/test_work_limits.py shortens it)
STALL_S = float(os.environ.get("HOPFORGE_TEST_STALL_S", 300.0))
STALL_CPU_S = 2.0
WALL_FACTOR = 10  # the last guard: wall seconds, as a multiple of the work budget
_TICK = os.sysconf("SC_CLK_TCK")


def cores() -> int:
    """The cores this process may use (its CPU affinity)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds of it and of its children it waited for), from /proc (empty without)."""
    out: dict[int, tuple[int, float]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:  # gone meanwhile
            continue
        fields = data[data.rindex(b")") + 2:].split()  # after "pid (comm) ": state, ppid, ... utime is the 12th
        out[int(name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / _TICK)  # utime stime cutime cstime
    return out


def work_seconds(own_excluded: float = 0.0) -> float:
    """CPU seconds this process, its running descendants and its ended children have used, less
    ``own_excluded`` (the watchdog's own)."""
    done = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = time.process_time() - own_excluded + done.ru_utime + done.ru_stime
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        total += table[pid][1]
        todo += children.get(pid, [])
    return total


class WorkLimit:
    """The watchdog of one test: a thread that counts the work done and stops the test past a limit."""

    def __init__(self, item: pytest.Item, timeout: float):
        self.item = item
        self.budget = timeout * cores()
        self.why: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"work limit {item.nodeid}", daemon=True)
        self._mine = 0.0  # this watchdog's own CPU seconds, which are no work of the test

    def start(self) -> None:
        self._start = work_seconds()
        self._thread.start()

    def cancel(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _watch(self) -> None:
        began = last_work_at = time.monotonic()
        last_work = 0.0
        while not self._stop.wait(POLL_S):
            used = work_seconds(self._mine) - self._start
            self._mine = time.thread_time()
            now = time.monotonic()
            if used > self.budget:
                return self._fire(f"the test used {used:,.0f} CPU seconds, more than its budget of "
                                  f"{self.budget:,.0f} (pytest-timeout's timeout, {self.budget / cores():g} s, on "
                                  f"each of the {cores()} cores this process may use)")
            if used - last_work >= STALL_CPU_S:
                last_work, last_work_at = used, now
            elif now - last_work_at > STALL_S:
                return self._fire(f"the test's processes did less than {STALL_CPU_S:g} CPU seconds of work in "
                                  f"{STALL_S:g} s: it is stalled")
            if now - began > WALL_FACTOR * self.budget:
                return self._fire(f"the test ran {WALL_FACTOR} times its work budget of {self.budget:,.0f} s in "
                                  "wall seconds")

    def _fire(self, why: str) -> None:
        self.why = why
        signal.pthread_kill(threading.main_thread().ident, signal.SIGALRM)

    def on_alarm(self, signum, frame) -> None:
        __tracebackhide__ = True
        if self.why is None:  # an alarm that is not ours
            return
        import pytest_timeout

        terminal = self.item.config.get_terminal_writer()
        terminal.sep("+", title="Work limit")
        pytest_timeout.dump_stacks(terminal)
        terminal.sep("+", title="Work limit")
        pytest.fail(f"Work limit from tests/helpers/worklimit.py: {self.why}")


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings) -> bool | None:
    """pytest-timeout's timer, replaced by a limit on work (module docstring); its own where this cannot run (a
    test outside the main thread, or the ``thread`` method asked for)."""
    if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
        return None
    limit = WorkLimit(item, settings.timeout)
    signal.signal(signal.SIGALRM, limit.on_alarm)

    def cancel() -> None:
        limit.cancel()
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    item.cancel_timeout = cancel  # called by pytest-timeout's own cancel hook
    limit.start()
    return True
