"""The teacher: the one client through which every LLM call in hopforge goes.

``Teacher`` wraps a backend (:class:`ChatModel`: the offline ``oracle``, an
``openai``-compatible server, or ``hf``, a local transformers checkpoint) with, in order of
what a call meets:

1. the persistent call cache (a hit sends nothing and is not counted as a request; only an
   answer that validated as a :class:`ChatResponse` is stored, and an entry that no longer
   reads as one is a miss, asked again);
2. the in-flight gate (``cfg.concurrency`` requests at most, across threads and loops),
   capped further while requests time out (:class:`~synth.teacher.inflight.Throttle`), so
   a slow server's backlog waits here, untimed, not in the server's queue;
3. the rpm/tpm limiter (and any pause a server's Retry-After imposed);
4. retries of 429, 5xx, timeouts, dropped connections and malformed bodies, with
   full-jitter exponential backoff that never undercuts Retry-After, logged at the default
   level (a line per 30 s at most); a Retry-After longer than ``teacher.max_wait_s`` stops
   the stage instead (:class:`TeacherUnavailable`), as an exhausted quota does;
5. accounting (:class:`TeacherStats`).

The per-request timeout runs from when a request is sent, never while it waits in 1-3; a
request that times out is cancelled (its connection closed), so the server can drop it.

Stage code is synchronous; it runs async work with :meth:`Teacher.map`, which keeps
input order and returns a :class:`TeacherError` in the slot of an item that failed
instead of aborting the batch::

    teacher = open_teacher(cfg.teacher, store.root)
    snap = teacher.stats.snapshot()
    async def ask(q): return parse((await teacher.chat(format_messages(q))).content)
    results = teacher.map(ask, questions, progress=ctx.bar("questions", len(questions)))
    report["teacher"] = teacher.stats.since(snap)
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import itertools
import logging
import os
import random
import threading
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Iterator, Mapping, TypeVar

import orjson

from synth.engine.config import ConfigError
from synth.engine.faults import crash_point
from synth.engine.stage import STOP
from synth.engine.workers import limit_share
from synth.teacher.breaker import Breaker, TeacherUnavailable, failure_kind, unavailable_message
from synth.teacher.cache import CallCache, cache_key, canonical_json
from synth.teacher.config import TeacherConfig
from synth.teacher.inflight import Flight, RetryLog, Throttle
from synth.teacher.limits import Gate, RateLimiter, backoff_delay
from synth.teacher.probe import Probes
from synth.teacher.tasks import hinted, task_of
from synth.teacher.stats import PricedUsage, TeacherStats, TeacherUsage
from synth.teacher.types import BackendError, ChatModel, ChatResponse, TeacherError, ToolsUnusable, scrub

__all__ = ["BackendError", "Breaker", "ChatModel", "ChatResponse", "PricedUsage", "Teacher", "TeacherConfig",
           "TeacherError", "TeacherStats", "TeacherUnavailable", "TeacherUsage", "ToolsUnusable", "cache_path", "failure_kind",
           "make_backend", "open_teacher", "probes_path", "register_backend"]

log = logging.getLogger("hopforge")
T = TypeVar("T")
R = TypeVar("R")

# name -> factory, or "module:function" resolved on first use (the oracle is written elsewhere
# and the openai client is slow to import, so neither is loaded unless chosen).
_BACKENDS: dict[str, Callable[..., ChatModel] | str] = {
    "openai": "synth.teacher.openai_compat:make_openai",
    "oracle": "synth.teacher.oracle:make_oracle",
    "hf": "synth.teacher.hf:make_hf",
}


def register_backend(name: str, factory: Callable[..., ChatModel] | str) -> None:
    """Add a backend: ``factory(cfg, **kw) -> ChatModel``, or a lazy ``"module:function"`` reference."""
    _BACKENDS[name] = factory


def make_backend(cfg: TeacherConfig, **kw: Any) -> ChatModel:
    """Build the backend named by ``cfg.backend``; a missing module or key is a :class:`ConfigError`."""
    spec = _BACKENDS.get(cfg.backend)
    if spec is None:
        raise ConfigError(f"bad value for config key 'teacher.backend': {cfg.backend!r} "
                          f"(allowed: {', '.join(sorted(_BACKENDS))})")
    if isinstance(spec, str):
        module_name, _, fn_name = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name != module_name:
                raise  # the module exists but one of its own imports is missing: show that
            raise ConfigError(f"teacher.backend {cfg.backend!r} needs module {module_name} "
                              f"(with {fn_name}(cfg, **kw)), which is not installed") from None
        spec = getattr(module, fn_name, None)
        if spec is None:
            raise ConfigError(f"teacher.backend {cfg.backend!r}: module {module_name} has no {fn_name}()")
    return spec(cfg, **kw)


_FROZEN = 0
_FROZEN_LOCK = threading.Lock()


@contextmanager
def _frozen_heap() -> Iterator[None]:
    """Keep the objects alive before a batch of calls out of the cyclic GC while it runs.

    A rollout step allocates many short-lived objects, so collections run often, and each full
    one would walk the whole long-lived heap (index handles, questions, configs) for nothing.
    Nested and concurrent batches share one freeze.
    """
    global _FROZEN
    with _FROZEN_LOCK:
        if _FROZEN == 0:
            gc.freeze()
        _FROZEN += 1
    try:
        yield
    finally:
        with _FROZEN_LOCK:
            _FROZEN -= 1
            if _FROZEN == 0:
                gc.unfreeze()


# Paid calls written to ledgers by this process, counted from 1: crash tests kill at "ledger:N".
_LEDGER_LINES = itertools.count(1)

def per_process(cfg: TeacherConfig) -> TeacherConfig:
    """``cfg`` with its global limits (concurrency, rpm, tpm; unset ones stay unset) divided by the number of
    processes this one shares them with (:func:`synth.engine.workers.limit_share`, at least 1 each): N
    processes that each take 1/N keep them global."""
    n = limit_share()
    if n <= 1:
        return cfg
    return cfg.model_copy(update={f: max(1, int(getattr(cfg, f)) // n)
                                  for f in ("concurrency", "rpm", "tpm") if getattr(cfg, f)})


def _new_limits(cfg: TeacherConfig, clock: Callable[[], float] = time.monotonic,
                sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> tuple:
    """The flow control of one endpoint: gate, rate limiter, breaker, the gate's throttle, the retry log."""
    gate = Gate(cfg.concurrency)
    return (gate, RateLimiter(cfg.rpm, cfg.tpm, clock=clock, sleep=sleep),
            Breaker(cfg.abort_after, cfg.abort_grace_s, clock), Throttle(gate, cfg.concurrency),
            RetryLog(f"{cfg.display_url()} (model {cfg.model!r})"))


PROBES_FILE = "probes.json"


def cache_path(root: str | Path) -> Path:
    """Where stages keep the call cache under output folder ``root``: ``DIR/cache/teacher.sqlite``."""
    return Path(root) / "cache" / "teacher.sqlite"


def probes_path(root: str | Path) -> Path:
    """Where the preflight records what the endpoint does with tools, for the run's stages:
    ``DIR/cache/probes.json`` (next to the call cache, which :class:`Teacher` reads it beside)."""
    return cache_path(root).with_name(PROBES_FILE)


def open_teacher(cfg: TeacherConfig, root: str | Path, **kw: Any) -> "Teacher":
    """A teacher whose cache lives in the output folder ``root`` (shared by every stage).  Pass a stage run's
    ``shared=ctx.shared`` (as :func:`stage_teacher` does) to share its cache connections, concurrency gate,
    rate limits and probes with the run's other teachers in this process."""
    return Teacher(cfg, cache_path(root), **kw)


class Teacher:
    """Cached, rate-limited, retrying LLM calls with accounting.  See the module docstring.

    ``sleep``, ``clock`` and ``rng`` are injectable so tests can observe backoff and rate
    limits without waiting; ``rng`` is private to the teacher and only shapes timing.
    """

    def __init__(self, cfg: TeacherConfig, cache_path: str | Path | None = None, *, backend: ChatModel | None = None,
                 sleep: Callable[[float], Awaitable[None]] | None = None, clock: Callable[[], float] | None = None,
                 rng: random.Random | None = None, shared: Callable[..., Any] | None = None, **backend_kw: Any):
        """``shared`` is a stage run's :meth:`~synth.engine.stage.StageContext.shared`: the teachers of one run
        in one process then share the call cache's connections, each endpoint's gate, rate limiter and breaker
        (so concurrency and rpm/tpm hold across every shard and thread) and what probes found; without it
        this teacher has its own."""
        cfg = per_process(cfg)  # a process running 1 of N shards at once takes 1/N of the global limits
        self.cfg = cfg
        self.backend = backend if backend is not None else make_backend(cfg, **backend_kw)
        self._owns_cache = shared is None
        if cache_path is None:
            self.cache = None
        elif shared is None:
            self.cache = CallCache(cache_path)
        else:
            # A long-lived process may see the output folder deleted and made again: a cache whose file is no
            # longer the one at the path is closed and opened again, so no call is written into a deleted file.
            self.cache = shared(f"teacher-cache:{Path(cache_path).absolute()}", lambda: CallCache(cache_path),
                                valid=CallCache.is_current)
        # The ledger: one JSON line per request that completed, appended after its cache entry is
        # stored, so spend can be audited and a repeated paid call would show as a repeated key.
        self.ledger = Path(cache_path).with_name("ledger.jsonl") if cache_path is not None else None
        self.stats = TeacherStats(cfg.price_per_mtok)
        self._sleep = sleep or asyncio.sleep
        if shared is not None and sleep is None and clock is None:
            key = (cfg.backend, cfg.base_url, cfg.model, cfg.concurrency, cfg.rpm, cfg.tpm)
            self._gate, self._limiter, self.breaker, self._throttle, self._retries = shared(
                f"teacher-limits:{key}", lambda: _new_limits(cfg))
        else:
            self._gate, self._limiter, self.breaker, self._throttle, self._retries = _new_limits(
                cfg, clock or time.monotonic, self._sleep)
        if shared is not None and backend is None and isinstance(getattr(self.backend, "probes", None), Probes):
            recorded = Path(cache_path).with_name(PROBES_FILE) if cache_path is not None else None
            endpoint = (cfg.base_url, cfg.model)
            self.backend.probes = shared("teacher-probes",
                                         lambda: Probes.recorded(recorded, endpoint) if recorded else Probes())
        self._rng = rng or random.Random()
        self._reported: set[str] = set()
        self._flight = Flight()

    # ---- one call ------------------------------------------------------------------------
    @property
    def tool_protocol(self) -> str:
        """How tool calls travel to and from the backend (:attr:`ChatModel.tool_protocol`)."""
        return self.backend.tool_protocol

    def key(self, messages: list[dict], tools: list[dict] | None = None, sample_index: int = 0,
            variant: str = "") -> str:
        """The cache key of a call (the hint, the endpoint and the key never enter it).

        ``variant`` is what the backend's request adds to the conversation (a text tool protocol,
        a response format; see ``OpenAIBackend.prepare``): answers to different requests must
        not replay for each other.  A plain request has none, so its key is what it always was.
        """
        c = self.cfg
        # A scripted backend (the oracle) salts keys with its code version, so editing its
        # script never replays answers the old script gave; a real model has no salt.
        model = c.model + self.backend.cache_salt + (f"|{variant}" if variant else "")
        return cache_key(backend=c.backend, model=model, messages=messages, tools=tools, temperature=c.temperature,
                         top_p=c.top_p, max_tokens=c.max_tokens, extra_body=c.extra_body, sample_index=sample_index)

    async def chat(self, messages: list[dict], tools: list[dict] | None = None, *, sample_index: int = 0,
                   hint: Any = None) -> ChatResponse:
        """One assistant turn for ``messages``: from the cache, or from the backend (retried as configured).

        ``sample_index`` makes distinct samples of one prompt distinct calls (and seeds).
        Raises :class:`TeacherError` (``.reason``) once the call has failed for good.
        """
        self.stats.enter()
        try:
            self.stats.add(calls=1)
            key = self.key(messages, tools, sample_index, await self._variant(tools, hint))
            if self.cache is not None:
                t0 = time.perf_counter()
                hit = self._cached(key)
                if hit is not None:
                    hit.latency_s = time.perf_counter() - t0
                    observe = getattr(self.backend, "observe", None)
                    if observe is not None:  # a replayed reply tells the backend what a sent one would
                        observe(hit)
                    self.stats.add(cache_hits=1, cached_prompt_tokens=hit.usage["prompt_tokens"],
                                   cached_completion_tokens=hit.usage["completion_tokens"],
                                   cached_server_cached_prompt_tokens=hit.usage.get("server_cached_prompt_tokens", 0))
                    return self._served(hit)
            resp = self._served(await self._send(messages, tools, sample_index, hint))
            if self.cache is not None:
                try:
                    self.cache.put(key, self.cfg.model, resp.to_record())
                except sqlite3.Error as e:
                    # The call is paid for and its answer is good: losing the cache entry only
                    # costs a repeat after a restart, so warn and count rather than fail the item.
                    self.stats.add(cache_errors=1)
                    self._log_failure("cache_write", f"{type(e).__name__}: {e}", 1, what="cache write")
            if self.ledger is not None:
                self._write_ledger(key, resp)
            return resp
        finally:
            self.stats.exit()

    def _served(self, resp: ChatResponse) -> ChatResponse:
        """Count the model an answer came from, as the endpoint named it (``resp.model``; the configured name
        when it named none), and warn once per process when a served endpoint names another model than the
        configured one: the rows record the name it gave (``teacher_model``), the stage report counts them
        (``teacher.served_models``)."""
        served = resp.model or self.cfg.model
        resp.model = served
        self.stats.add(served_models=served)
        if served != self.cfg.model and self.cfg.backend == "openai" and (self.cfg.model, served) not in _SERVED_SAID:
            _SERVED_SAID.add((self.cfg.model, served))
            log.warning("teacher endpoint %s answers as model %r, not the configured teacher.model %r: the rows "
                        "record %r as teacher_model and the stage reports count it under teacher.served_models; "
                        "check that the endpoint serves the model you meant", self.cfg.display_url(), served,
                        self.cfg.model, served)
        return resp

    def _cached(self, key: str) -> ChatResponse | None:
        """The cached answer of ``key``, or None.  An entry that does not read back as a
        :class:`ChatResponse` (written before its shape was checked, or damaged) is dropped and is a miss:
        the call is asked again rather than failing every rerun the same way."""
        try:
            rec = self.cache.get(key)
            return None if rec is None else ChatResponse.from_record(rec, cached=True, latency_s=0.0)
        except ValueError as e:  # orjson's JSONDecodeError is a ValueError too
            self._log_failure("cache_read", f"the entry is no answer ({e}); asking again", 1, what="cache read")
            self.cache.discard(key)
            return None

    async def _variant(self, tools: list[dict] | None, hint: Any) -> str:
        """The backend's variant of this call (:meth:`ChatModel.prepare`).  Preparing may probe the endpoint
        once (``auto`` settings); a probe that fails fails this call like a request."""
        try:
            return await self.backend.prepare(tools, task_of(hint))
        except BackendError as e:
            detail = self._scrub(e.detail)
            self.stats.add(attempt_errors=e.reason)
            kind = failure_kind(e.reason)
            if kind is not None and self.breaker.failure(kind, e.reason, detail):
                self._raise_if_tripped()
            self.stats.add(failed=1, failures=e.reason)
            self._log_failure(e.reason, detail, 1, what="probe")
            raise TeacherError(e.reason, detail) from None

    async def _send(self, messages: list[dict], tools: list[dict] | None, sample_index: int, hint: Any) -> ChatResponse:
        """One call: requests under flow control (:meth:`_request`) until one is answered, or the retry policy
        (:meth:`_retry_delay`) gives up or the breaker trips."""
        tokens = self._estimate_tokens(messages, tools) if self.cfg.tpm else 1
        attempt = 0
        while True:
            resp, err, latency = await self._request(messages, tools, sample_index, hint, tokens)
            if err is None or err.reason != "unreachable":  # a request that never connected was not sent
                self.stats.add(requests=1)
            if err is None:
                return self._answered(resp, latency)
            # The slot was released before sleeping: other calls proceed while this one backs off.
            delay = self._retry_delay(err, attempt)
            await self._sleep(delay)
            attempt += 1

    async def _request(self, messages: list[dict], tools: list[dict] | None, sample_index: int, hint: Any,
                       tokens: int) -> tuple[ChatResponse | None, BackendError | None, float]:
        """One request under the flow control: the breaker, the in-flight gate (its slot kept back after a
        timeout, :class:`Throttle`), the rate limiter, and an outer deadline.  Returns (response, error, seconds
        from the send)."""
        # An outer deadline in case a backend's own timeout does not fire (httpx times each read,
        # not the whole response, so a server trickling bytes could hold a slot forever).
        deadline = self.cfg.timeout_s * 1.25 + 1.0
        self._raise_if_tripped()
        self._flight.move(waiting=1)
        try:
            await self._gate.acquire()
        finally:
            self._flight.move(waiting=-1)
        withhold = False
        resp: ChatResponse | None = None
        try:
            waited = await self._limiter.acquire(tokens)
            self.stats.add(rate_wait_s=waited)
            # The clock starts here, at the send: time spent waiting for a slot above is not the server's.
            t0 = time.perf_counter()
            self._flight.move(sending=1)
            try:
                # Leaving this block on a timeout cancels the request: the connection is closed,
                # so the server can drop the work instead of finishing it for nobody.
                async with asyncio.timeout(deadline):
                    with hinted(hint):  # for a scripted backend (the oracle); a real one gets the task alone
                        resp = await self.backend.chat(messages, tools, sample_index=sample_index, task=task_of(hint))
                err = _invalid(resp)
            except BackendError as e:
                err = e
            except TimeoutError:
                err = BackendError("timeout", f"no response within {deadline:g}s")
            finally:
                self._flight.move(sending=-1)
            latency = time.perf_counter() - t0
            # A timeout means more was sent than the server keeps up with: keep this slot back.
            withhold = err is not None and err.reason == "timeout" and self._throttle.timed_out()
        finally:
            if not withhold:
                self._gate.release()
        return resp, err, latency

    def _answered(self, resp: ChatResponse, latency: float) -> ChatResponse:
        """An answered request, counted (the throttle and the breaker hear of it)."""
        self._throttle.answered()
        self.breaker.success()
        resp.latency_s, resp.cached = latency, False
        if resp.model_latency_s is None:
            resp.model_latency_s = latency
        u = resp.usage
        self.stats.add(completed=1, latency_s=latency, prompt_tokens=u.get("prompt_tokens", 0),
                       completion_tokens=u.get("completion_tokens", 0),
                       server_cached_prompt_tokens=u.get("server_cached_prompt_tokens", 0))
        return resp

    def _retry_delay(self, err: BackendError, attempt: int) -> float:
        """The retry policy for a failed request: the seconds to back off before the next attempt, or a raise
        (:class:`TeacherError` once the call's retries are used up or the error cannot be retried;
        :class:`TeacherUnavailable` when the breaker trips or the server asks to wait past ``max_wait_s``)."""
        cfg = self.cfg
        detail = self._scrub(err.detail)
        self.stats.add(attempt_errors=err.reason)
        kind = failure_kind(err.reason)
        final = not err.retryable or attempt >= cfg.max_retries
        # A rejected key, an unknown model or nothing listening fail the same way every time: each
        # attempt counts.  A 5xx or a timeout counts only once its call has used up its retries.
        if kind is not None and (kind != "server" or final) and self.breaker.failure(kind, err.reason, detail):
            self.stats.add(failed=1, failures=err.reason)
            self._raise_if_tripped()
        if err.retryable and err.retry_after is not None and err.retry_after > cfg.max_wait_s:
            # Waiting would stall the stage for hours with nothing on screen: stop it, saying why.
            self.stats.add(failed=1, failures=err.reason)
            self.breaker.failure("wait", err.reason, f"the server asks to wait {err.retry_after:g} s "
                                 f"(Retry-After), more than teacher.max_wait_s={cfg.max_wait_s:g}")
            self._raise_if_tripped()
        if final:
            self.stats.add(failed=1, failures=err.reason)
            self._log_failure(err.reason, detail, attempt + 1)
            raise TeacherError(err.reason, detail, attempts=attempt + 1) from None
        if err.retry_after:
            self._limiter.pause_for(err.retry_after)
        delay = backoff_delay(attempt, cfg.backoff_base_s, cfg.backoff_max_s, self._rng, err.retry_after)
        self._retries.retry(err.reason, detail, delay, self._throttle.cap, cfg.concurrency)
        self.stats.add(retries=1, backoff_s=delay)
        return delay

    def _raise_if_tripped(self) -> None:
        if self.breaker.tripped is not None:
            raise TeacherUnavailable(unavailable_message(self.cfg, *self.breaker.tripped)) from None

    def _write_ledger(self, key: str, resp: ChatResponse) -> None:
        u = resp.usage
        line = orjson.dumps({"key": key, "model": self.cfg.model, "prompt_tokens": u.get("prompt_tokens", 0),
                             "completion_tokens": u.get("completion_tokens", 0), "latency_s": round(resp.latency_s, 4),
                             "t": round(time.time(), 3)}) + b"\n"
        # One short line with O_APPEND is written whole, even with other writers on the file.
        try:
            fd = os.open(self.ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as e:
            self._log_failure("ledger_write", f"{type(e).__name__}: {e}", 1, what="ledger write")
        crash_point(f"ledger:{next(_LEDGER_LINES)}")

    def _estimate_tokens(self, messages: list[dict], tools: list[dict] | None) -> int:
        # About four characters a token for English; the tpm limit only needs the right scale.
        chars = len(canonical_json([messages, tools]))
        return chars // 4 + self.cfg.max_tokens

    def _scrub(self, text: str) -> str:
        # Defence in depth: backends scrub too, but a new backend might forget.
        return scrub(text, os.environ.get(self.cfg.api_key_env, ""))

    def _log_failure(self, reason: str, detail: str, attempts: int, what: str = "call") -> None:
        # One warning per reason: a flaky endpoint must not flood the log; the report counts them all.
        level = logging.DEBUG if reason in self._reported else logging.WARNING
        self._reported.add(reason)
        log.log(level, "teacher %s failed after %d attempt(s): %s: %s (further failures are counted in the "
                "stage report)", what, attempts, reason, detail)

    # ---- many calls from sync code ------------------------------------------------------
    def map(self, fn: Callable[[T], Awaitable[R]], items: Iterable[T], *, progress: Any = None,
            limit: int | None = None) -> list[R | TeacherError]:
        """Run ``await fn(item)`` for every item, concurrently, and return the results in input order.

        An item whose ``fn`` raises :class:`TeacherError` gets that error in its slot; the
        batch carries on.  Any other exception is a bug and propagates (completed calls are
        already cached, so a rerun pays nothing for them).  At most ``limit`` items run at
        once (default ``2 * concurrency``, so tool work overlaps requests); ``progress`` is
        anything with ``update(n)``, e.g. ``ctx.bar(...)``; if it has ``set_postfix(text)`` it is told
        every second how many calls are being sent and how many wait for a slot.  Safe from worker threads; from a
        thread whose event loop is running it runs on a helper thread instead.
        """
        items = list(items)
        coro = self._map_async(fn, items, progress, limit or 2 * self.cfg.concurrency)
        try:
            asyncio.get_running_loop()
            nested = True
        except RuntimeError:
            nested = False
        with _frozen_heap():
            if not nested:  # run outside the handler, or every error would chain this RuntimeError
                return asyncio.run(coro)
            with ThreadPoolExecutor(1, thread_name_prefix="hopforge-teacher") as ex:
                return ex.submit(asyncio.run, coro).result()

    async def _map_async(self, fn: Callable[[T], Awaitable[R]], items: list[T], progress: Any,
                         limit: int) -> list[R | TeacherError]:
        results: list[Any] = [None] * len(items)
        todo = iter(enumerate(items))  # shared by the workers; safe, they all run on this loop

        async def worker() -> None:
            for i, item in todo:
                try:
                    results[i] = await fn(item)
                except TeacherError as e:
                    results[i] = e
                if progress is not None:
                    progress.update(1)

        tasks = [asyncio.create_task(worker()) for _ in range(min(limit, len(items)))]

        postfix = getattr(progress, "set_postfix", None)

        async def watch() -> None:
            # The run was interrupted: stop this batch now (completed calls are cached, so the
            # rerun pays for none of them again), not when its last item is done.
            tick = 0
            while not STOP.is_set():
                await asyncio.sleep(0.2)
                tick += 1
                if postfix is not None and tick % 5 == 0:  # a slow endpoint shows as "sending" vs "waiting"
                    postfix(self._flight.describe())
            for t in tasks:
                t.cancel()

        watcher = asyncio.create_task(watch())
        try:
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            if STOP.is_set():
                raise KeyboardInterrupt("the run was interrupted") from None
            raise
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            watcher.cancel()
            await self.aclose()
        return results

    def chat_sync(self, messages: list[dict], tools: list[dict] | None = None, *, sample_index: int = 0,
                  hint: Any = None) -> ChatResponse:
        """:meth:`chat` from synchronous code (scripts, the CLI); raises :class:`TeacherError`."""
        async def one(_: Any) -> ChatResponse:
            return await self.chat(messages, tools, sample_index=sample_index, hint=hint)
        out = self.map(one, [None])[0]
        if isinstance(out, TeacherError):
            raise out
        return out

    # ---- lifecycle ------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the backend's connections on the running loop (call before that loop ends)."""
        await self.backend.aclose()

    def close(self) -> None:
        """Close the cache's database connections (a cache shared by a stage run's teachers stays open)."""
        if self.cache is not None and self._owns_cache:
            self.cache.close()

    def __enter__(self) -> "Teacher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        # Built from chosen fields only, so nothing secret can slip in through a backend's attributes.
        cache = str(self.cache.path) if self.cache is not None else None
        return (f"Teacher(backend={self.cfg.backend!r}, model={self.cfg.model!r}, url={self.cfg.display_url()!r}, "
                f"cache={cache!r}, concurrency={self.cfg.concurrency})")


# (configured, served) model names a warning was given for in this process: said once, whichever teacher saw it
_SERVED_SAID: set[tuple[str, str]] = set()


def _invalid(resp: ChatResponse) -> BackendError | None:
    """None when a backend's answer has the shape callers read (:meth:`ChatResponse.validate`), else the
    ``bad_response`` it is: checked for every backend before the answer is counted or cached."""
    try:
        resp.validate()
    except ValueError as e:
        return BackendError("bad_response", str(e)[:500])
    return None


# ---- the teacher of a running stage ----------------------------------------------------------

def stage_teacher(ctx: Any) -> Teacher:
    """The teacher of a running stage (or shard): opened on first use, shared by everything the
    stage does in this process, and closed with the stage's context."""
    return ctx.resource("teacher", lambda: open_teacher(ctx.cfg.teacher, ctx.store.root, shared=ctx.shared))


def shard_usage(teacher: Teacher) -> dict[str, Any]:
    """What a shard's teacher did, for the shard's summary: its report under ``teacher`` and the
    requests it paid for under ``paid_calls`` (which the runner counts for fresh shards only)."""
    report = teacher.stats.as_dict()
    return {"teacher": report, "paid_calls": report["requests"]}


def merged_usage(summaries: list[Any], price: Any) -> dict[str, Any]:
    """``{"teacher": report}`` for a sharded stage's report, merged from its shards' summaries
    (empty when no shard used the teacher)."""
    merged = TeacherUsage.merged(TeacherUsage.from_report(s.get("teacher") if isinstance(s, Mapping)
                                                          else getattr(s, "teacher", None)) for s in summaries)
    return {} if merged is None else {"teacher": merged.as_dict(price)}
