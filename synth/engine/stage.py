"""What a stage is: its declaration, the context it runs in, and what it reports.

A :class:`Stage` is a pure function over the store plus a little metadata: which stages it
reads, which config sections shape its output, which paths it publishes, and where its code
starts (``entry``, a ``"module:attribute"`` reference).  The engine never imports a stage
module until the stage runs, and it hashes the stage's code from ``entry``'s import closure
(:mod:`synth.engine.codekey`), so nothing here names a concrete stage.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from synth.engine.config import ConfigView, RootConfig
from synth.engine.progress import Bar
from synth.engine.reports import REPORT_TYPES, StageReport
from synth.engine.store import ShardWriter, Store
from synth.engine.workers import CpuPool, CpuWork, cpu_map, processes_for


# How many failed items a stage report names one by one (the counts by reason are always whole).
FAILED_LISTED = 50


@dataclass(frozen=True, slots=True)
class FailedItem:
    """An item whose teacher call failed: its id, the failure's reason (``http_503``, ``timeout``, ...) and a
    detail.  A shard summary and the stage report hold it as :meth:`as_dict` (JSON); :meth:`from_dict` reads it
    back."""

    id: str
    reason: str
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"id": self.id, "reason": self.reason, "detail": self.detail}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FailedItem":
        return cls(str(d["id"]), str(d["reason"]), str(d.get("detail") or ""))


@dataclass
class StageResult:
    """What a stage did: ``input == output + sum(dropped.values()) + sum(failed.values())`` must hold.

    ``dropped`` counts items the stage decided against (a rule said no); ``failed`` counts items whose
    teacher call failed (a transport or server error: no decision was made), by reason.  A failed item
    is never in the output; ``failed_items`` names them (:class:`FailedItem`), and the next plain run of the
    stage retries exactly them.
    """

    input: int
    output: int
    dropped: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    teacher_calls: int = 0  # requests paid for by this run (not cache hits, not resumed shards)
    failed: dict[str, int] = field(default_factory=dict)
    failed_items: list[FailedItem] = field(default_factory=list)
    # Why the stage had nothing to do by its configuration (expand.num_subgraphs is 0, rl.band_by is teacher,
    # a pretrained tokenizer copied rather than trained): its empty output is then a result, not a failure.
    idle: str = ""

    @property
    def n_failed(self) -> int:
        return sum(self.failed.values())

    def check(self, stage: str) -> None:
        """Raise when the funnel does not add up."""
        total = self.output + sum(self.dropped.values()) + self.n_failed
        if total != self.input:
            raise AssertionError(
                f"stage {stage}: funnel does not add up: input {self.input} != output {self.output} "
                f"+ dropped {sum(self.dropped.values())} {self.dropped} + failed {self.n_failed} {self.failed}"
            )


def failed_item(item_id: str, reason: str, detail: str = "") -> FailedItem:
    """One failed item, its detail cut to 300 characters."""
    return FailedItem(item_id, reason, detail[:300])


def summary_failed_items(summaries: Iterable[Any]) -> list[FailedItem]:
    """The failed items the shard summaries list (as :meth:`FailedItem.as_dict` wrote them), in shard order; a
    summary is a :class:`ShardSummary` with ``failed_items`` or its dict."""
    return [FailedItem.from_dict(f) for s in summaries
            for f in (s.get("failed_items") if isinstance(s, Mapping) else getattr(s, "failed_items", None)) or ()]


def _json(v: Any) -> Any:
    if isinstance(v, FailedItem):
        return v.as_dict()
    if isinstance(v, (list, tuple)):
        return [_json(x) for x in v]
    if isinstance(v, dict):
        return {k: _json(x) for k, x in v.items()}
    return v


class ShardSummary:
    """Mixin of a stage's shard summary: a frozen dataclass, defined beside the stage, that its ``Shards.run``
    returns and its ``Shards.finish`` reads by attribute (``Shards.summary`` names it).

    Between the two it travels as :meth:`to_dict` (JSON: to a worker process and back, and into the shard's mark,
    which a resumed run reads instead of redoing the shard); :meth:`from_dict` reads it back, a key it lacks (a
    mark written by an older hopforge) giving the field's default and a key it does not know left out."""

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _json(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]):
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})  # type: ignore[arg-type]


@dataclass(frozen=True)
class Shards:
    """A stage that works shard by shard (so a flow can spread shards over workers and a rerun
    after a crash skips the shards already done).

    ``plan(ctx)`` lists JSON-able shard descriptors; ``run(ctx, i, desc)`` does shard ``i``,
    writes its rows under ``ctx.shard_out(table, i)`` and returns its summary: a ``summary``
    (a :class:`ShardSummary`) or, without one, a JSON-able dict (its ``paid_calls``, when present,
    counts the teacher requests the shard paid for); ``finish(ctx, summaries)`` turns the
    summaries (in shard order, each a ``summary`` again) into the stage result.
    """

    plan: Callable[["StageContext"], list[Any]]
    run: Callable[["StageContext", int, Any], Any]
    finish: Callable[["StageContext", list[Any]], StageResult]
    summary: type[ShardSummary] | None = None


@dataclass(frozen=True)
class ShardJob:
    """One shard of a stage run, as plain data: it pickles to another process (a Dask worker),
    which rebuilds the stage context from it."""

    stage: str
    config: dict
    root: str
    key: str
    index: int
    desc: Any
    progress: bool | None = None
    share: int = 1  # processes running the stage's shards at once: each takes 1/share of the global limits


# A shard executor runs every job and returns the summaries in job order.
ShardExecutor = Callable[[Sequence[ShardJob]], list[dict]]


@dataclass(frozen=True)
class Stage:
    """A pipeline stage.

    ``entry`` is a function ``run(ctx) -> StageResult`` or, with ``sharded=True``, a
    :class:`Shards`; the stage table names it as ``"module:attribute"`` so it is imported only
    when the stage runs.  ``key_extra(cfg, store)`` adds what lies outside the store and the
    config to the content key (e.g. the identity of a source file).

    ``sections`` are the config sections and dotted fields the stage reads (its key hashes them, and its
    ``ctx.cfg`` shows it nothing else: :class:`~synth.engine.config.ConfigView`); ``more_sections(cfg)`` adds
    those it reads only under some settings (the teacher, for a filter whose LLM judge is on), so a change
    to them reruns the stage only then.  ``more_reads(cfg)`` likewise adds stages it reads only under some
    settings (:meth:`required`).

    ``by_content`` maps a read stage to the tables of it the stage reads, when those are all it
    reads of it: that input enters the key by the content of those tables (a hash of their files,
    :meth:`Store.content_hash`) instead of by the read stage's key, so an upstream rerun that
    writes the same tables leaves the stage reused (the student is not retrained for nothing).
    """

    name: str
    entry: Any
    reads: tuple[str, ...] = ()
    optional_reads: tuple[str, ...] = ()  # read when present (e.g. subgraphs); their keys enter ours then
    sections: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    command: str = ""  # the CLI command that runs it, for error messages
    key_extra: Callable[[Any, Store], str] | None = None
    more_sections: Callable[[Any], Iterable[str]] | None = None
    # Stages it reads only under some settings (the page vectors, for a rollout under a dense ranker): required then,
    # and their keys enter ours only then.
    more_reads: Callable[[Any], Iterable[str]] | None = None
    sharded: bool = False
    by_content: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    # The shards' work is CPU-bound Python (the questions validators): `hopforge run` runs them in runner.cpu_workers
    # processes instead of threads; each process's teacher takes 1/N of the global limits (ShardJob.share).
    cpu_shards: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.by_content) - set(self.reads) - set(self.optional_reads)
        if unknown:
            raise ValueError(f"stage {self.name}: by_content names {sorted(unknown)}, which it does not read")
        object.__setattr__(self, "by_content", {k: tuple(v) for k, v in self.by_content.items()})

    def required(self, cfg: Any) -> tuple[str, ...]:
        """The stages it reads under ``cfg``: ``reads`` and, after them, ``more_reads(cfg)``."""
        more = tuple(m for m in (self.more_reads(cfg) if self.more_reads else ()) if m not in self.reads)
        return self.reads + tuple(dict.fromkeys(more))

    def declared(self, cfg: Any) -> tuple[str, ...]:
        """The config the stage reads under ``cfg``: ``sections`` and, after them, ``more_sections(cfg)``."""
        more = tuple(m for m in (self.more_sections(cfg) if self.more_sections else ()) if m not in self.sections)
        return self.sections + tuple(dict.fromkeys(more))

    @property
    def module(self) -> str:
        """The module the stage's code starts from."""
        if isinstance(self.entry, str):
            return self.entry.partition(":")[0]
        fn = self.entry.run if isinstance(self.entry, Shards) else self.entry
        return fn.__module__

    def load(self) -> Any:
        """The entry point (imported now, so the CLI starts without loading every stage)."""
        if not isinstance(self.entry, str):
            return self.entry
        module, _, attr = self.entry.partition(":")
        return getattr(importlib.import_module(module), attr)


class StageContext:
    """Everything a running stage may touch: config, store, its staging folder, progress, and
    resources shared by the stage run (a teacher client, say), closed when it ends."""

    def __init__(self, stage: Stage, cfg: Any, store: Store, key: str, progress: bool | None = None,
                 cpu_pool: CpuPool | None = None):
        # The stage sees only what its key hashes: the sections it declares (and the seed, and operational fields).
        if isinstance(cfg, RootConfig):
            cfg = ConfigView(cfg, stage.declared(cfg), stage.name)
        self.stage, self.cfg, self.store, self.key = stage, cfg, store, key
        self.staging = store.partial_dir(stage.name, key)
        self.staging.mkdir(parents=True, exist_ok=True)
        self.progress = progress
        self.cpu_pool = cpu_pool  # where CPU work runs instead of local processes (the flow's Dask cluster)
        self._lock = threading.Lock()
        self._resources: dict[str, Any] = {}

    def out(self, rel: str) -> Path:
        """Where to write output ``rel`` (inside the staging folder)."""
        p = self.staging / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def writer(self, rel: str, schema, **kw) -> ShardWriter:
        """A shard writer for output table ``rel``."""
        return ShardWriter(self.out(rel), schema, **kw)

    def bar(self, desc: str, total: float | None = None, unit: str = "it") -> Bar:
        """A progress bar for this stage."""
        return Bar(f"{self.stage.name}: {desc}", total=total, unit=unit, enabled=self.progress)

    def shared_bar(self, desc: str, total: float | None = None, unit: str = "it") -> Bar:
        """One bar shared by every shard of this stage run in this process (closed when the stage ends)."""
        return self.shared(f"{_BAR}{desc}", lambda: self.bar(desc, total, unit))

    def cpu_work(self, setup: Callable[..., Any], args: tuple, step: Callable[[Any, Any], Any],
                 name: Callable[[int, Any], str] | None = None) -> CpuWork:
        """This stage run's CPU-bound work (:mod:`synth.engine.workers`): ``setup(*args)`` once per process,
        then ``step(state, item)`` per item."""
        token = f"{self.store.root}:{self.stage.name}:{self.key}:{setup.__module__}.{setup.__qualname__}"
        return CpuWork(self.stage.name, token, setup, args, step, name)

    def cpu_workers(self, items: int | None = None) -> int:
        """How many processes this stage's CPU work runs in (``runner.cpu_workers``, or the Dask cluster's)."""
        return processes_for(self.cfg.runner.cpu_workers, items, self.cpu_pool)

    def cpu_map(self, work: CpuWork, items: Iterable[Any], workers: int) -> Iterator[Any]:
        """``work`` over ``items`` in ``workers`` processes, results in item order (:func:`cpu_map`)."""
        return cpu_map(work, items, workers, self.cpu_pool)

    def shard_out(self, rel: str, i: int) -> Path:
        """Where shard ``i`` writes its part of table ``rel`` (one Parquet file)."""
        p = self.staging / "_parts" / rel / f"part-{i:05d}.parquet"
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def shard_parts(self, rel: str) -> list[Path]:
        """The parts every shard wrote for table ``rel``, in shard order."""
        return sorted((self.staging / "_parts" / rel).glob("part-*.parquet"))

    def publish_parts(self, rel: str, schema) -> int:
        """Move the shards' parts of ``rel`` into the output table (order kept); returns the row count."""
        import pyarrow.parquet as pq

        out = self.out(rel)
        out.mkdir(parents=True, exist_ok=True)
        rows = 0
        for j, part in enumerate(self.shard_parts(rel)):
            rows += pq.ParquetFile(part).metadata.num_rows
            part.replace(out / f"part-{j:05d}.parquet")
        if rows == 0 and not any(out.iterdir()):
            ShardWriter(out, schema).close()
        return rows

    def resource(self, name: str, opener: Callable[[], Any]) -> Any:
        """The resource ``name`` of this stage run, opened by ``opener()`` on first use and closed
        (its ``close()``, when it has one) when the stage or shard ends."""
        with self._lock:
            if name not in self._resources:
                self._resources[name] = opener()
            return self._resources[name]

    def shared(self, name: str, opener: Callable[[], Any], valid: Callable[[Any], bool] | None = None) -> Any:
        """The value ``name`` of this stage run in this process, made by ``opener()`` on first use and kept for
        every shard of the run this process works on (a shard's context is its own, so :meth:`resource` is per
        shard): the sources a stage slices, the index it searches, the teacher's call cache and flow control.
        A process keeps one stage run's values: asking for another run's drops them.  ``opener`` may itself
        ask for another shared value.  A kept value for which ``valid(value)`` is false (a cache whose file was
        replaced) is closed, when it has a ``close()``, and made again."""
        run = (str(self.store.root), self.stage.name, self.key)
        with _SHARED_LOCK:
            for k in [k for k in _SHARED if k[:3] != run]:
                del _SHARED[k]
            k = (*run, name)
            if k in _SHARED and valid is not None and not valid(_SHARED[k]):
                close = getattr(_SHARED.pop(k), "close", None)
                if close is not None:
                    close()
            if k not in _SHARED:
                _SHARED[k] = opener()
            return _SHARED[k]

    def close(self) -> None:
        """Close every resource the stage opened."""
        with self._lock:
            resources, self._resources = list(self._resources.values()), {}
        for r in resources:
            close = getattr(r, "close", None)
            if close is not None:
                close()

    def close_bars(self) -> None:
        """Close the bars shared by this stage run's shards."""
        run = (str(self.store.root), self.stage.name, self.key)
        with _SHARED_LOCK:
            bars = [k for k in _SHARED if k[:3] == run and k[3].startswith(_BAR)]
            for k in bars:
                _SHARED.pop(k).close()


_BAR = "bar:"  # the names of shared progress bars in _SHARED
# StageContext.shared: (root, stage, key, name) -> value, one stage run's at a time (a value's opener may ask for
# another, hence the re-entrant lock).
_SHARED: dict[tuple, Any] = {}
_SHARED_LOCK = threading.RLock()

# Set when the user interrupts a run (Ctrl-C) while shards run on worker threads: long batches of
# work (teacher calls) watch it and stop within a second, so the run ends with a resumable folder
# instead of finishing every in-flight shard first.
STOP = threading.Event()


@dataclass
class StageOutcome:
    """What running (or reusing) a stage gave: its key, whether it was reused, its report."""

    name: str
    key: str
    reused: bool
    seconds: float
    report: dict
    teacher_calls: int = 0  # requests this run paid for (0 when reused)

    @property
    def typed_report(self) -> StageReport:
        """:attr:`report`, typed (:mod:`synth.engine.reports`)."""
        return REPORT_TYPES.get(self.name, StageReport).from_dict(self.report)
