"""Flow control for teacher calls: the in-flight gate, rate limits, and retry delays.

A :class:`Teacher` outlives event loops: ``Teacher.map`` runs each batch under its
own ``asyncio.run``, possibly in several worker threads at once.  ``asyncio.Semaphore``
binds itself to the first loop that waits on it, so the gate and the limiter here
are thread-safe and loop-agnostic instead: state sits behind a ``threading.Lock``
and waiters are woken on their own loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import threading
import time
from collections import deque
from typing import Awaitable, Callable


class Gate:
    """A counting semaphore shared by every loop and thread that uses one teacher.

    Slots are handed over FIFO, so a waiter is never starved by later arrivals.
    """

    def __init__(self, slots: int):
        self._free = slots
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = deque()

    async def acquire(self) -> None:
        """Wait for a free slot."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._free > 0 and not self._waiters:
                self._free -= 1
                return
            fut = loop.create_future()
            self._waiters.append((loop, fut))
        try:
            await fut
        except asyncio.CancelledError:
            with self._lock:
                try:
                    self._waiters.remove((loop, fut))
                    granted = False
                except ValueError:
                    granted = True  # release() already chose us
            # A slot handed to us but not yet delivered is given back by _deliver (it finds the
            # future cancelled); one delivered just before the cancel must be released here.
            if granted and fut.done() and not fut.cancelled():
                self.release()
            raise

    def release(self) -> None:
        """Free a slot, handing it straight to the oldest waiter if there is one."""
        with self._lock:
            while self._waiters:
                loop, fut = self._waiters.popleft()
                if loop.is_closed():
                    continue
                loop.call_soon_threadsafe(self._deliver, fut)
                return
            self._free += 1

    def _deliver(self, fut: asyncio.Future) -> None:
        if fut.done():  # the waiter was cancelled meanwhile: pass the slot on
            self.release()
        else:
            fut.set_result(None)

    async def __aenter__(self) -> "Gate":
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()


class RateLimiter:
    """Requests-per-minute and tokens-per-minute limits as a virtual scheduler (GCRA).

    Each acquisition reserves the earliest send time that keeps both budgets, under a
    lock and without waiting there, then sleeps until it.  Sending at reserved times
    means concurrent callers never burst past the limit, and the schedule is a pure
    function of the clock, which is what lets tests check it with a fake clock.
    Bursts are limited to one second's budget (OpenAI enforces per-minute limits over
    shorter windows too), and the steady rate is trimmed by that burst so that no
    60-second window ever holds more than ``rpm`` sends.  A request costing more tokens
    than the burst is let through once the bucket is full and leaves it in debt, so the
    long-run token rate still holds.
    """

    def __init__(self, rpm: int | None, tpm: int | None, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        # One bucket per limit: [units per second, burst in units, theoretical arrival time, per-token?]
        self._buckets: list[list] = []
        for limit, per_token in ((rpm, False), (tpm, True)):
            if limit:
                burst = max(1, limit // 60)
                # GCRA admits at most ceil(W * rate) + burst - 1 units in any window W; with this
                # rate a 60 s window holds at most `limit` (the last factor keeps float rounding
                # from landing a send exactly on the window's edge).
                rate = (limit - burst + 1) / 60.0 * (1 - 1e-9)
                self._buckets.append([rate, float(burst), float("-inf"), per_token])
        self._not_before = float("-inf")

    @property
    def active(self) -> bool:
        """Whether any limit is set (or a Retry-After pause is pending)."""
        return bool(self._buckets) or self._not_before > self._clock()

    def reserve(self, tokens: int) -> float:
        """Reserve a send slot for a request costing ``tokens``; returns seconds to wait before sending."""
        with self._lock:
            now = self._clock()
            start = max(now, self._not_before)
            for rate, burst, tat, per_token in self._buckets:
                cost = max(1.0, float(tokens)) if per_token else 1.0
                # Allowed once the arrival time, less the burst tolerance, has passed.
                start = max(start, tat - max(0.0, burst - cost) / rate)
            for b in self._buckets:
                cost = max(1.0, float(tokens)) if b[3] else 1.0
                b[2] = max(b[2], start) + cost / b[0]
            return start - now

    async def acquire(self, tokens: int) -> float:
        """Wait until a request costing ``tokens`` may be sent; returns the seconds waited."""
        delay = self.reserve(tokens)
        if delay > 0:
            await self._sleep(delay)
        return max(delay, 0.0)

    def pause_for(self, seconds: float) -> None:
        """Hold every send for ``seconds`` (a server's Retry-After applies to all requests, not one)."""
        with self._lock:
            self._not_before = max(self._not_before, self._clock() + seconds)


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random,
                  retry_after: float | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (0-based).

    Full jitter (Brooker, "Exponential Backoff And Jitter", AWS 2015): uniform in
    ``[0, min(cap, base * 2**attempt)]``, which spreads a herd of clients far better
    than a fixed exponential.  A server's Retry-After is a floor, never shortened.
    ``rng`` is the teacher's private generator; it shapes timing only, never outputs.
    """
    ceiling = min(cap, base * (2.0 ** min(attempt, 64)))  # the exponent is clamped: 2.0**1024 overflows
    delay = rng.uniform(0.0, ceiling) if ceiling > 0 else 0.0
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay


def wall_clock() -> float:
    """The time an HTTP-date ``Retry-After`` is counted from (a module function, so tests can pin it)."""
    return time.time()


def parse_retry_after(headers: dict[str, str] | object, now: Callable[[], float] | None = None) -> float | None:
    """Seconds from a ``retry-after-ms`` or ``Retry-After`` header (delta-seconds or an HTTP date)."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    ms = get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    raw = get("retry-after")
    if raw is None:
        return None
    raw = str(raw).strip()
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (now or wall_clock)())
