"""Worker processes for the CPU-bound Python of a stage: one mechanism, whichever stage uses it.

A stage whose items are independent and whose work is Python (the filter's batches, assemble's
passes of questions, the report's trace views) describes that work as a :class:`CpuWork`:

* ``setup(*args)``, a module-level function that builds what every item needs (the questions, a
  tokenizer, a corpus) once per process, from plain data;
* ``step(state, item)``, a module-level function that does one item and returns plain data.

:func:`cpu_map` runs it over the items and yields the results **in item order**, however many
processes ran them, so a stage that writes what it gets in that order writes the same tables for
any worker count (what an item computes must depend on the item, never on the worker: seed by
item id).  At most two items per worker are in flight, so memory stays bounded, and the caller
advances its progress bar per result.  The work runs

* in this process, with one worker (``runner.cpu_workers: 1``), a single item, or when this
  process is daemonic (a Dask worker may not start processes of its own);
* in ``runner.cpu_workers`` local worker processes (0: one per core this process may use), by
  default.  Where processes fork, the state is built once in this process and the workers inherit
  it (N workers importing the same libraries at once would pay N times for it); a spawned worker
  builds its own when the pool starts;
* on the Dask cluster's workers when the run is the Prefect flow with ``runner.task_runner: dask``:
  the flow hands the stage a :class:`DaskPool` (``StageContext.cpu_pool``).  Each Dask worker
  builds the state once and keeps it for the stage run.

A failed item stops the stage with :class:`WorkerFailed`, whose message names the stage and the
item (the worker's traceback is its cause); an error the user can act on (bad input, a missing
table, a full disk) keeps its type, with a note naming the item, so the CLI still prints it as one
line.  Nothing is lost: results already yielded were written by the caller, and the stage commits
only when every item is done.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import signal
import sys
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Protocol

from synth.engine.config import cpu_workers


class WorkerFailed(RuntimeError):
    """A worker failed on one item of a stage's CPU work; the message names the stage and the item."""


@dataclass(frozen=True)
class CpuWork:
    """The CPU-bound work of a stage, as plain data a worker process can rebuild.

    ``setup`` and ``step`` are module-level functions (they pickle by name); ``args`` is what
    ``setup`` needs (a config, the store's folder).  ``token`` names the state: a worker that
    already holds the state of this token reuses it.  ``name(i, item)`` says which item failed.
    """

    stage: str
    token: str
    setup: Callable[..., Any]
    args: tuple
    step: Callable[[Any, Any], Any]
    name: Callable[[int, Any], str] | None = field(default=None, compare=False)

    def describe(self, i: int, item: Any) -> str:
        return self.name(i, item) if self.name is not None else f"item {i}"


class CpuPool(Protocol):
    """Where a stage's CPU work runs when it is not this machine's processes (the flow's Dask cluster)."""

    def workers(self) -> int: ...

    def submit(self, work: CpuWork, item: Any) -> Any: ...  # a future with .result()

    def cancel(self, futures: Iterable[Any]) -> None: ...


# ---- in the worker -----------------------------------------------------------------------------
_STATE: dict[str, Any] = {}  # token -> state: the stage run this process last worked for


def _state(work: CpuWork) -> Any:
    if work.token not in _STATE:
        _STATE.clear()  # one stage run at a time: the state of an earlier one is dropped
        _STATE[work.token] = work.setup(*work.args)
    return _STATE[work.token]


def _step(work: CpuWork, item: Any) -> Any:
    return work.step(_state(work), item)


def _local_step(token: str, item: Any) -> Any:
    """A local pool's worker: the work came with the initializer, only the item travels.  The state is built
    on the first item, so an error there (a missing input) is that item's error, not a broken pool."""
    work = _WORK[token]
    return work.step(_state(work), item)


def _local_warm(token: str) -> None:
    """Build the state before the first item arrives (the pool starts while the stage still reads its first
    item).  A failing setup is left for the first item to meet again, as that item's error."""
    try:
        _state(_WORK[token])
    except Exception:  # noqa: BLE001 - raised again, with the item named, by the first step
        pass


_WORK: dict[str, CpuWork] = {}


def _init_local(work: CpuWork, run_pid: int) -> None:
    from synth.engine import faults

    _die_with(run_pid)
    faults.RUN_PID = run_pid
    _WORK.clear()
    _WORK[work.token] = work


def _die_with(run_pid: int) -> None:
    """End this worker when the run's main process ends, however it ends (a kill -9 included): a forked worker
    holds both ends of its task pipe, so it would otherwise wait for work forever, holding the run's stdout."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != run_pid:  # the main process ended before this worker could ask
        os._exit(1)


# ---- in the stage ------------------------------------------------------------------------------
def processes_for(requested: int, items: int | None = None, pool: CpuPool | None = None) -> int:
    """How many processes a stage's CPU work runs in: ``runner.cpu_workers`` (0: every core), or the
    Dask cluster's workers; never more than the items, and 1 in a daemonic process."""
    if mp.current_process().daemon:
        return 1
    n = pool.workers() if pool is not None else cpu_workers(requested)
    return max(1, min(n, items)) if items is not None else max(1, n)


def cpu_map(work: CpuWork, items: Iterable[Any], workers: int, pool: CpuPool | None = None) -> Iterator[Any]:
    """``work.step(state, item)`` of every item, yielded in item order; see the module docstring.

    ``workers`` is :func:`processes_for`'s count: 1 runs here, more runs on ``pool`` when given,
    else in that many local processes (forked where the platform can, so nothing is re-imported).
    """
    if workers <= 1:
        state = work.setup(*work.args)
        for i, item in enumerate(items):
            try:
                result = work.step(state, item)
            except Exception as e:
                raise _failed(work, i, item, e) from e
            yield result
        return
    if pool is not None:
        yield from _windowed(work, items, 2 * workers, lambda item: pool.submit(work, item), pool.cancel)
        return
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    if method == "fork":
        # Built once here and inherited by every forked worker: N workers importing the same libraries at once
        # would spend N times the CPU on it, and the parent has nothing else to do until the first result.
        _STATE.clear()
        _STATE[work.token] = work.setup(*work.args)
    with ProcessPoolExecutor(workers, mp_context=mp.get_context(method), initializer=_init_local,
                             initargs=(work, os.getpid())) as ex:
        try:
            # Frozen, the objects this process made so far (its imports, the state) are never walked by a forked
            # worker's garbage collector: no CPU spent on them there, and no page copied for it.
            gc.freeze()
            try:
                for _ in range(workers):  # a spawned worker builds its state now, while the first items are read
                    ex.submit(_local_warm, work.token)
            finally:
                gc.unfreeze()
            _STATE.clear()  # the workers hold their copies; this process needs none
            yield from _windowed(work, items, 2 * workers, lambda item: ex.submit(_local_step, work.token, item),
                                 lambda fs: [f.cancel() for f in fs])
        except BaseException:
            ex.shutdown(wait=True, cancel_futures=True)
            raise


def _windowed(work: CpuWork, items: Iterable[Any], window: int, submit: Callable[[Any], Any],
              cancel: Callable[[Iterable[Any]], Any]) -> Iterator[Any]:
    """Submit items keeping ``window`` in flight; yield their results in order."""
    flight: deque[tuple[int, Any, Any]] = deque()

    def first() -> Any:
        i, item, fut = flight.popleft()
        try:
            return fut.result()
        except BrokenProcessPool as e:
            # The pool cannot say which worker held which item: every item in flight is named.
            held = "; ".join(work.describe(j, it) for j, it, _ in [(i, item, fut), *flight])
            raise WorkerFailed(f"stage {work.stage}: a worker process died (killed, or out of memory?) while it "
                               f"worked on one of: {held}; nothing is committed, and the same command runs the "
                               "stage again") from e
        except Exception as e:
            raise _failed(work, i, item, e) from e

    try:
        for i, item in enumerate(items):
            try:
                fut = submit(item)
            except BrokenProcessPool as e:  # a worker died on an item in flight: that one is named
                while flight:
                    yield first()
                raise WorkerFailed(f"stage {work.stage}: a worker process died (killed, or out of memory?) "
                                   f"before {work.describe(i, item)}; nothing is committed, and the same command "
                                   "runs the stage again") from e
            flight.append((i, item, fut))
            if len(flight) >= window:
                yield first()
        while flight:
            yield first()
    except BaseException:
        cancel([f for _, _, f in flight])
        raise


def _failed(work: CpuWork, i: int, item: Any, e: Exception) -> Exception:
    """The error a failed item stops the stage with: the user's own errors keep their type."""
    from synth.engine.config import ConfigError
    from synth.engine.errors import InputError, StageFailed, machine_error
    from synth.engine.store import MissingInput

    where = f"stage {work.stage}: {work.describe(i, item)}"
    if isinstance(e, (ConfigError, InputError, MissingInput, StageFailed, WorkerFailed)) or machine_error(e) is not None:
        e.add_note(f"(in {where})")
        return e
    return WorkerFailed(f"{where} failed: {type(e).__name__}: {e}")


def guided_batches(batches: Iterable[Any], total: int, workers: int, least: int = 16,
                   most: int = 512) -> Iterator[Any]:
    """Arrow record batches re-cut for ``workers`` processes: each about a third of one worker's share of the
    rows still to come (``least`` to ``most`` rows), so the first batches are large and the last ones small and
    no worker finishes long after the others.  The rows and their order are unchanged."""
    import pyarrow as pa

    left, buf, have = total, [], 0

    def size() -> int:
        return max(least, min(most, -(-max(left, 1) // (3 * workers))))

    for b in batches:
        if not b.num_rows:
            continue
        buf.append(b)
        have += b.num_rows
        while buf and have >= size():
            want = size()
            table = pa.Table.from_batches(buf)
            buf = table.slice(want).to_batches()
            have -= want
            left -= want
            yield table.slice(0, want).combine_chunks().to_batches()[0]
    if have:
        yield pa.Table.from_batches(buf).combine_chunks().to_batches()[0]


_LIMIT_SHARE = 1  # how many processes of this run share its global limits (the teacher's): this one is 1 of them


def set_limit_share(processes: int) -> None:
    """Say that this process is one of ``processes`` that run a stage's shards at once (the runner and the
    flow set it before a shard runs); global limits such as the teacher's concurrency, rpm and tpm are then
    divided by it here (:func:`synth.teacher.client.per_process`), so N processes keep them global.
    Those limits are operational: neither keys nor outputs change."""
    global _LIMIT_SHARE
    _LIMIT_SHARE = max(1, int(processes))


def limit_share() -> int:
    """The share set by :func:`set_limit_share` (1: this process alone)."""
    return _LIMIT_SHARE


def submit_on_dask(client: Any, work: CpuWork, item: Any) -> Future:
    """Submit one item to a Dask client (used by the flow's :class:`DaskPool`)."""
    return client.submit(_step, work, item, pure=False)


class DaskPool:
    """A :class:`CpuPool` over a ``distributed`` client: each item is a Dask task, its state built once per
    Dask worker process."""

    def __init__(self, client: Any):
        self.client = client

    def workers(self) -> int:
        return max(1, len(self.client.nthreads()))

    def submit(self, work: CpuWork, item: Any) -> Any:
        return submit_on_dask(self.client, work, item)

    def cancel(self, futures: Iterable[Any]) -> None:
        futures = list(futures)
        if futures:
            self.client.cancel(futures)


__all__ = ["CpuPool", "CpuWork", "DaskPool", "WorkerFailed", "cpu_map", "guided_batches", "limit_share",
           "processes_for", "set_limit_share"]
