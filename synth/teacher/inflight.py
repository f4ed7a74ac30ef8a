"""What is in flight to a slow endpoint: an adaptive cap, the retry log, and counts for progress.

A single-slot server (llama.cpp with one slot, a small GPU) answers one request at a time
and queues the rest itself.  Sending ``teacher.concurrency`` requests at once then makes
the later ones wait in the *server's* queue, where the request timeout runs: they time
out, are retried, and the abandoned ones may keep the server busy, so nothing finishes.
:class:`Throttle` lets the teacher keep such requests in its own queue instead, where no
timeout runs: every timeout withholds one slot of the gate (never the last), and slots come
back one at a time after a run of answers, so the cap follows what the server keeps up with.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import Callable

from synth.teacher.limits import Gate

log = logging.getLogger("hopforge")

# Answers in a row after which one withheld slot is given back.
GROW_AFTER = 4


class Throttle:
    """The gate's slots less those withheld after timeouts; shared like the gate it caps."""

    def __init__(self, gate: Gate, slots: int):
        self.gate, self.slots = gate, slots
        self.withheld = 0
        self._streak = 0
        self._lock = threading.Lock()

    @property
    def cap(self) -> int:
        """Requests that may be in flight now."""
        return self.slots - self.withheld

    def timed_out(self) -> bool:
        """A request holding a slot timed out.  True: keep that slot withheld (do not release it);
        False: release it as usual (the cap is already down to one)."""
        with self._lock:
            self._streak = 0
            if self.withheld < self.slots - 1:
                self.withheld += 1
                return True
            return False

    def answered(self) -> None:
        """A request was answered (its own slot is released by the caller); after a run of answers,
        give one withheld slot back to the gate."""
        with self._lock:
            self._streak += 1
            give = self.withheld > 0 and self._streak >= GROW_AFTER
            if give:
                self.withheld -= 1
                self._streak = 0
        if give:
            self.gate.release()


class RetryLog:
    """Retries at the default log level, without flooding it: the first at once, then one summary
    line (count by reason, the latest detail) at most every ``every_s`` seconds."""

    def __init__(self, where: str, every_s: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.where, self.every_s, self.clock = where, every_s, clock
        self._lock = threading.Lock()
        self._pending: Counter = Counter()
        self._last_line = float("-inf")
        self._latest = ""

    def retry(self, reason: str, detail: str, delay: float, cap: int, slots: int) -> None:
        """Count one retry of ``reason``; log a line when one is due."""
        with self._lock:
            self._pending[reason] += 1
            self._latest = f"{reason}: {' '.join(detail.split())[:160]}"
            now = self.clock()
            if now - self._last_line < self.every_s:
                return
            counts = ", ".join(f"{r} {n}" for r, n in self._pending.most_common())
            n, latest = sum(self._pending.values()), self._latest
            self._pending.clear()
            self._last_line = now
        capped = f"; sending at most {cap} of teacher.concurrency={slots} at once" if cap < slots else ""
        log.warning("teacher %s: %d retr%s (%s); latest %s; next in %.1fs%s (counted in the stage report)",
                    self.where, n, "y" if n == 1 else "ies", counts, latest, delay, capped)


class Flight:
    """Calls of one teacher waiting for a slot and being sent, for progress displays."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.waiting = 0
        self.sending = 0

    def move(self, waiting: int = 0, sending: int = 0) -> None:
        """Add to the counts (negative to take away)."""
        with self._lock:
            self.waiting += waiting
            self.sending += sending

    def describe(self) -> str:
        """``"N sending, M waiting"``, for a progress bar's postfix."""
        return f"{self.sending} sending, {self.waiting} waiting"
