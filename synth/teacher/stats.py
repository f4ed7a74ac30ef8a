"""Accounting of teacher calls, for ``reports/<stage>.json`` (under the ``teacher`` key).

Counters are updated from every thread and loop that shares a teacher, so they sit
behind one lock.  A stage takes a :meth:`TeacherStats.snapshot` when it starts and
reports ``stats.since(snapshot)``; one teacher can then serve several stages.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any

from synth.teacher.config import Price


@dataclass
class StatsSnapshot:
    """Frozen counter values at one moment (see :meth:`TeacherStats.snapshot`)."""

    calls: int = 0              # logical calls made (cache hits included)
    requests: int = 0           # requests actually sent, retries included
    completed: int = 0          # calls answered by the backend (each stored in the cache)
    cache_hits: int = 0
    retries: int = 0
    failed: int = 0             # calls that finally failed
    cache_errors: int = 0       # completed calls the cache could not store (disk full, lock timeout)
    failures: Counter = field(default_factory=Counter)       # final failures by reason
    attempt_errors: Counter = field(default_factory=Counter)  # every failed attempt by reason, retried or not
    prompt_tokens: int = 0      # of requests sent
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0      # of answers served from the cache (not paid again)
    cached_completion_tokens: int = 0
    latency_s: float = 0.0      # summed over completed requests
    backoff_s: float = 0.0      # summed sleeps before retries
    rate_wait_s: float = 0.0    # summed waits imposed by rpm/tpm limits
    wall_s: float = 0.0         # time with at least one call in flight

    def minus(self, other: "StatsSnapshot") -> "StatsSnapshot":
        """Counter differences ``self - other`` (what happened between two snapshots)."""
        out = StatsSnapshot()
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            setattr(out, f.name, Counter({k: v for k, v in (a - b).items() if v}) if isinstance(a, Counter) else a - b)
        return out

    def as_dict(self, price: Price | None = None) -> dict[str, Any]:
        """A JSON-ready report; includes ``cost_usd`` (and what the cache saved) when ``price`` is set."""
        d: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            d[f.name] = dict(sorted(v.items())) if isinstance(v, Counter) else (round(v, 3) if isinstance(v, float) else v)
        d["mean_latency_s"] = round(self.latency_s / self.completed, 4) if self.completed else None
        if price is not None:
            d["cost_usd"] = price.usd(self.prompt_tokens, self.completion_tokens)
            d["cost_saved_by_cache_usd"] = price.usd(self.cached_prompt_tokens, self.cached_completion_tokens)
        return d


def merge_reports(reports: list[dict[str, Any]], price: Price | None = None) -> dict[str, Any] | None:
    """One report from several (e.g. one per shard): counters summed, ``wall_s`` the longest."""
    reports = [r for r in reports if r]
    if not reports:
        return None
    total = StatsSnapshot()
    for r in reports:
        for f in fields(total):
            v = r.get(f.name)
            if v is None:
                continue
            cur = getattr(total, f.name)
            if isinstance(cur, Counter):
                cur.update(v)
            elif f.name == "wall_s":
                total.wall_s = max(total.wall_s, v)
            else:
                setattr(total, f.name, cur + v)
    out = total.as_dict(price)
    for key in ("cost_usd", "cost_saved_by_cache_usd"):
        if price is None and any(key in r for r in reports):
            out[key] = round(sum(r.get(key, 0.0) for r in reports), 6)
    return out


class TeacherStats:
    """Live, thread-safe counters of one teacher."""

    def __init__(self, price: Price | None = None):
        self.price = price
        self._lock = threading.Lock()
        self._s = StatsSnapshot()
        self._in_flight = 0
        self._busy_since = 0.0

    def add(self, **deltas: Any) -> None:
        """Add to counters, e.g. ``add(requests=1, prompt_tokens=12)``; Counter fields take a reason string."""
        with self._lock:
            for name, v in deltas.items():
                cur = getattr(self._s, name)
                if isinstance(cur, Counter):
                    cur[v] += 1
                else:
                    setattr(self._s, name, cur + v)

    def enter(self) -> None:
        """A call started (wall time counts while any call is in flight)."""
        with self._lock:
            if self._in_flight == 0:
                self._busy_since = time.monotonic()
            self._in_flight += 1

    def exit(self) -> None:
        """A call ended."""
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._s.wall_s += time.monotonic() - self._busy_since

    def snapshot(self) -> StatsSnapshot:
        """A copy of the counters now (busy time so far included)."""
        with self._lock:
            s = StatsSnapshot(**{f.name: getattr(self._s, f.name) for f in fields(self._s)})
            s.failures, s.attempt_errors = Counter(s.failures), Counter(s.attempt_errors)
            if self._in_flight:
                s.wall_s += time.monotonic() - self._busy_since
            return s

    def since(self, snap: StatsSnapshot) -> dict[str, Any]:
        """The report of everything since ``snap`` (as :meth:`StatsSnapshot.as_dict`)."""
        return self.snapshot().minus(snap).as_dict(self.price)

    def as_dict(self) -> dict[str, Any]:
        """The report of everything since creation or the last :meth:`reset`."""
        return self.snapshot().as_dict(self.price)

    def reset(self) -> None:
        """Zero every counter."""
        with self._lock:
            self._s = StatsSnapshot()
            if self._in_flight:
                self._busy_since = time.monotonic()
