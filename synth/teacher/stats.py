"""Accounting of teacher calls: :class:`TeacherUsage`, the one shape of a stage's teacher usage.

Counters are updated from every thread and loop that shares a teacher, so they sit
behind one lock.  A stage takes a :meth:`TeacherStats.snapshot` when it starts and
reports ``stats.since(snapshot)``; one teacher can then serve several stages.  The report
(``reports/<stage>.json``, under ``teacher``) is :meth:`TeacherUsage.as_dict`; everything that
reads one back -- the run summary, the report, the dataset card, the Prefect artifacts -- reads
it with :meth:`TeacherUsage.from_report` and prices it with :meth:`TeacherUsage.priced`.

Two caches, never confused: ``cached_*`` counts answers served from hopforge's own *call cache*
(no request was sent, nothing was paid again); ``server_cached_prompt_tokens`` counts prompt tokens
of requests that *were* sent which the server reports it served from its own prefix cache
(``usage.prompt_tokens_details.cached_tokens``, vLLM and the OpenAI API), which a provider bills
at a lower rate (``teacher.price_per_mtok.cached_prompt``).  The latter are part of
``prompt_tokens``, not added to them.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Iterable, Mapping

from synth.teacher.config import Price


@dataclass
class TeacherUsage:
    """What the teacher did for a stage (or between two snapshots): every counter, and the cost the
    stage recorded when it ran priced (``cost_usd``, ``cost_saved_by_cache_usd``; None otherwise)."""

    calls: int = 0              # logical calls made (cache hits included)
    requests: int = 0           # requests actually sent, retries included
    completed: int = 0          # calls answered by the backend (each stored in the cache)
    cache_hits: int = 0
    retries: int = 0
    failed: int = 0             # calls that finally failed
    cache_errors: int = 0       # completed calls the cache could not store (disk full, lock timeout)
    failures: Counter = field(default_factory=Counter)       # final failures by reason
    attempt_errors: Counter = field(default_factory=Counter)  # every failed attempt by reason, retried or not
    # answers by the model that gave them, as the endpoint named it (sent and cache hits): what a row records
    served_models: Counter = field(default_factory=Counter)
    prompt_tokens: int = 0      # of requests sent
    completion_tokens: int = 0
    # Of prompt_tokens, those the *server* says it served from its prefix cache (billed at the cached rate).
    server_cached_prompt_tokens: int = 0
    cached_prompt_tokens: int = 0      # of answers served from hopforge's call cache (not paid again)
    cached_completion_tokens: int = 0
    # Of cached_prompt_tokens, those the server had served from its prefix cache when the call was paid.
    cached_server_cached_prompt_tokens: int = 0
    latency_s: float = 0.0      # summed over completed requests
    backoff_s: float = 0.0      # summed sleeps before retries
    rate_wait_s: float = 0.0    # summed waits imposed by rpm/tpm limits
    wall_s: float = 0.0         # time with at least one call in flight
    cost_usd: float | None = None  # as recorded when the stage ran with a price (None: not priced then)
    cost_saved_by_cache_usd: float | None = None

    COSTS: ClassVar[tuple[str, ...]] = ("cost_usd", "cost_saved_by_cache_usd")
    COUNTED: ClassVar[tuple[str, ...]] = ("failures", "attempt_errors", "served_models")  # the Counter fields

    def counters(self) -> list[str]:
        """The names of the counting fields (the costs aside)."""
        return [f.name for f in fields(self) if f.name not in self.COSTS]

    def minus(self, other: "TeacherUsage") -> "TeacherUsage":
        """Counter differences ``self - other`` (what happened between two snapshots)."""
        out = TeacherUsage()
        for name in self.counters():
            a, b = getattr(self, name), getattr(other, name)
            setattr(out, name, Counter({k: v for k, v in (a - b).items() if v}) if isinstance(a, Counter) else a - b)
        return out

    def as_dict(self, price: Price | None = None) -> dict[str, Any]:
        """The JSON-ready report; includes ``cost_usd`` (and what the cache saved) when ``price`` is set, or
        when the usage recorded them."""
        d: dict[str, Any] = {}
        for name in self.counters():
            v = getattr(self, name)
            d[name] = dict(sorted(v.items())) if isinstance(v, Counter) else (round(v, 3) if isinstance(v, float) else v)
        d["mean_latency_s"] = round(self.latency_s / self.completed, 4) if self.completed else None
        if price is not None:
            d["cost_usd"] = price.usd(self.prompt_tokens, self.completion_tokens, self.server_cached_prompt_tokens)
            d["cost_saved_by_cache_usd"] = price.usd(self.cached_prompt_tokens, self.cached_completion_tokens,
                                                     self.cached_server_cached_prompt_tokens)
        else:
            d.update({k: getattr(self, k) for k in self.COSTS if getattr(self, k) is not None})
        return d

    @classmethod
    def from_report(cls, report: Mapping[str, Any] | None) -> "TeacherUsage | None":
        """The usage a report recorded (``reports/<stage>.json`` ``teacher``), None for none."""
        if not isinstance(report, Mapping) or not report:
            return None
        kw: dict[str, Any] = {}
        for f in fields(cls):
            v = report.get(f.name)
            if v is None:
                continue
            kw[f.name] = Counter(v) if f.name in cls.COUNTED else v
        return cls(**kw)

    @classmethod
    def merged(cls, usages: Iterable["TeacherUsage | None"]) -> "TeacherUsage | None":
        """One usage from several (e.g. one per shard): counters and recorded costs summed, ``wall_s`` the
        longest; None when none is given."""
        usages = [u for u in usages if u is not None]
        if not usages:
            return None
        total = cls()
        for u in usages:
            for name in total.counters():
                cur, v = getattr(total, name), getattr(u, name)
                if isinstance(cur, Counter):
                    cur.update(v)
                else:
                    setattr(total, name, max(cur, v) if name == "wall_s" else cur + v)
        for key in cls.COSTS:
            if any(getattr(u, key) is not None for u in usages):
                setattr(total, key, round(sum(getattr(u, key) or 0.0 for u in usages), 6))
        return total

    @property
    def all_prompt_tokens(self) -> int:
        """Prompt tokens of the calls sent and of those the cache answered (what the data took to make)."""
        return int(self.prompt_tokens) + int(self.cached_prompt_tokens)

    @property
    def all_completion_tokens(self) -> int:
        """Completion tokens of the calls sent and of those the cache answered."""
        return int(self.completion_tokens) + int(self.cached_completion_tokens)

    @property
    def all_server_cached_prompt_tokens(self) -> int:
        """Of :attr:`all_prompt_tokens`, those the server served from its prefix cache when it was paid."""
        return int(self.server_cached_prompt_tokens) + int(self.cached_server_cached_prompt_tokens)

    def priced(self, price: Price | None = None) -> "PricedUsage":
        """The usage with its cost in USD (:class:`PricedUsage`).

        With ``price`` (the config's ``teacher.price_per_mtok`` now), the cost is computed from the
        recorded tokens, so a price set after the teacher stages ran still prices them:
        ``cost_usd`` the tokens sent, ``cost_with_cache_usd`` with the tokens the call cache answered
        (calls an earlier run paid for); server-cached prompt tokens at ``price.cached_prompt`` when it
        is set.  Without a price, the costs recorded when the stage ran (if it had one); otherwise none.
        """
        if price is not None:
            cost = price.usd(self.prompt_tokens, self.completion_tokens, self.server_cached_prompt_tokens)
            with_cache = price.usd(self.all_prompt_tokens, self.all_completion_tokens,
                                   self.all_server_cached_prompt_tokens)
        elif self.cost_usd is not None:
            cost = float(self.cost_usd)
            with_cache = round(cost + float(self.cost_saved_by_cache_usd or 0.0), 6)
        else:
            cost = with_cache = None
        return PricedUsage(self.calls, self.requests, self.prompt_tokens, self.server_cached_prompt_tokens,
                           self.completion_tokens, self.cached_prompt_tokens, self.cached_completion_tokens, cost,
                           with_cache)


@dataclass(frozen=True)
class PricedUsage:
    """Tokens and cost of one stage's teacher usage, or of several summed (:meth:`total`).
    ``server_cached_prompt_tokens`` is the part of ``prompt_tokens`` the server served from its prefix
    cache; ``cached_*`` are the tokens of answers hopforge's call cache served (not sent)."""

    calls: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    server_cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    cost_usd: float | None = None
    cost_with_cache_usd: float | None = None

    TOKENS: ClassVar[tuple[str, ...]] = ("calls", "requests", "prompt_tokens", "server_cached_prompt_tokens",
                                         "completion_tokens", "cached_prompt_tokens", "cached_completion_tokens")
    COSTS: ClassVar[tuple[str, ...]] = ("cost_usd", "cost_with_cache_usd")

    def as_dict(self) -> dict[str, float]:
        """The figures as a report's mapping (a cost that is None is left out)."""
        out: dict[str, float] = {k: getattr(self, k) for k in self.TOKENS}
        out.update({k: getattr(self, k) for k in self.COSTS if getattr(self, k) is not None})
        return out

    @classmethod
    def total(cls, parts: Iterable["PricedUsage"]) -> "PricedUsage":
        """The sum of ``parts``; a cost only when every part has one."""
        parts = list(parts)
        tokens = {k: sum(getattr(p, k) for p in parts) for k in cls.TOKENS}
        costs = {k: round(sum(getattr(p, k) for p in parts), 6) if parts and all(getattr(p, k) is not None for p in parts)
                 else None for k in cls.COSTS}
        return cls(**tokens, **costs)


class TeacherStats:
    """Live, thread-safe counters of one teacher."""

    def __init__(self, price: Price | None = None):
        self.price = price
        self._lock = threading.Lock()
        self._s = TeacherUsage()
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

    def snapshot(self) -> TeacherUsage:
        """A copy of the counters now (busy time so far included)."""
        with self._lock:
            s = TeacherUsage(**{f.name: getattr(self._s, f.name) for f in fields(self._s)})
            for name in TeacherUsage.COUNTED:
                setattr(s, name, Counter(getattr(s, name)))
            if self._in_flight:
                s.wall_s += time.monotonic() - self._busy_since
            return s

    def since(self, snap: TeacherUsage) -> dict[str, Any]:
        """The report of everything since ``snap`` (as :meth:`TeacherUsage.as_dict`)."""
        return self.snapshot().minus(snap).as_dict(self.price)

    def as_dict(self) -> dict[str, Any]:
        """The report of everything since creation or the last :meth:`reset`."""
        return self.snapshot().as_dict(self.price)

    def reset(self) -> None:
        """Zero every counter."""
        with self._lock:
            self._s = TeacherUsage()
            if self._in_flight:
                self._busy_since = time.monotonic()
