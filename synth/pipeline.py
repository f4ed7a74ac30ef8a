"""Stages, their content keys, and the runner that skips unchanged work.

A stage is a pure function over the store plus a little metadata: which stages it
reads, which config sections and code modules shape its output, and which paths
it publishes.  Its content key is::

    sha256(stage name, hopforge version, code hash, config-section hash, keys of the stages it reads)

A stage whose key matches the manifest (or whose complete output for that key is
still on disk) is reused and says so; otherwise it runs into ``<key>.partial`` and
is committed atomically (see :mod:`synth.store`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .config import Config
from .progress import Bar
from .store import MissingInput, ShardWriter, Store

log = logging.getLogger("hopforge")

VERSION = "0.1.0"


@dataclass
class StageResult:
    """What a stage did: ``input == output + sum(dropped.values())`` must hold."""

    input: int
    output: int
    dropped: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def check(self, stage: str) -> None:
        total = self.output + sum(self.dropped.values())
        if total != self.input:
            raise AssertionError(
                f"stage {stage}: funnel does not add up: input {self.input} != output {self.output} "
                f"+ dropped {sum(self.dropped.values())} {self.dropped}"
            )


@dataclass(frozen=True)
class Stage:
    """A pipeline stage.  ``run(ctx)`` does the work and returns a :class:`StageResult`."""

    name: str
    run: Callable[["StageContext"], StageResult]
    reads: tuple[str, ...] = ()
    optional_reads: tuple[str, ...] = ()  # read when present (e.g. subgraphs); their keys enter ours then
    sections: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # extra files (prompts, templates) relative to the repo package roots
    outputs: tuple[str, ...] = ()
    command: str = ""  # the CLI command that runs it, for error messages
    key_extra: Callable[[Config, Store], str] | None = None  # e.g. the identity of an external source file


def code_hash(modules: tuple[str, ...], files: tuple[str, ...] = ()) -> str:
    """Hash of the source text of the given modules and package data files."""
    h = hashlib.sha256()
    for m in modules:
        spec = importlib.util.find_spec(m)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"module {m} not found")
        h.update(m.encode())
        h.update(Path(spec.origin).read_bytes())
    for f in files:
        pkg, _, rel = f.partition("/")
        spec = importlib.util.find_spec(pkg)
        assert spec is not None and spec.origin is not None
        h.update(f.encode())
        h.update((Path(spec.origin).parent / rel).read_bytes())
    return h.hexdigest()[:16]


class StageContext:
    """Everything a running stage may touch: config, store, its staging folder, progress."""

    def __init__(self, stage: Stage, cfg: Config, store: Store, key: str, progress: bool | None = None):
        self.stage, self.cfg, self.store, self.key = stage, cfg, store, key
        self.staging = store.partial_dir(stage.name, key)
        self.staging.mkdir(parents=True, exist_ok=True)
        self._progress = progress
        self.counters: dict[str, float] = {}

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
        return Bar(f"{self.stage.name}: {desc}", total=total, unit=unit, enabled=self._progress)


@dataclass
class StageOutcome:
    name: str
    key: str
    reused: bool
    seconds: float
    report: dict


def stage_key(stage: Stage, cfg: Config, store: Store) -> tuple[str, dict]:
    """The content key of ``stage`` and the parts it was made from."""
    input_keys = {}
    for up in stage.reads:
        entry = store.stage_entry(up)
        if entry is None:
            raise MissingInput(f"stage '{stage.name}' needs the output of stage '{up}', which is not in {store.root}"
                               f" (run `hopforge {STAGE_COMMANDS.get(up, up)} --out {store.root}` first)")
        input_keys[up] = entry["key"]
    for up in stage.optional_reads:
        entry = store.stage_entry(up)
        if entry is not None:
            input_keys[up] = entry["key"]
    parts = {
        "stage": stage.name,
        "version": VERSION,
        "code": code_hash(stage.modules, stage.files),
        "config": cfg.section_hash(*stage.sections),
        "inputs": input_keys,
        "extra": stage.key_extra(cfg, store) if stage.key_extra else "",
    }
    key = hashlib.sha256(repr(sorted(parts.items())).encode()).hexdigest()[:20]
    return key, parts


STAGE_COMMANDS: dict[str, str] = {}


def run_stage(stage: Stage, cfg: Config, store: Store, force: bool = False, progress: bool | None = None) -> StageOutcome:
    """Run one stage unless its content key is unchanged; commit its outputs atomically."""
    t0 = time.monotonic()
    key, parts = stage_key(stage, cfg, store)
    entry = store.stage_entry(stage.name)
    final = store.stage_dir(stage.name, key)
    if not force and final.exists():
        manifest_entry = dict(entry or {}, **parts, key=key) if not entry or entry.get("key") != key else entry
        report = store.republish(stage.name, key, stage.outputs, manifest_entry) or {}
        log.info("%s: unchanged (key %s), reused", stage.name, key)
        return StageOutcome(stage.name, key, True, time.monotonic() - t0, report)
    if force and final.exists():
        import shutil

        shutil.rmtree(final)
    ctx = StageContext(stage, cfg, store, key, progress=progress)
    log.info("%s: running (key %s)", stage.name, key)
    result = stage.run(ctx)
    result.check(stage.name)
    seconds = time.monotonic() - t0
    report = {
        "stage": stage.name,
        "key": key,
        "input": result.input,
        "output": result.output,
        "dropped": dict(sorted(result.dropped.items())),
        "seconds": round(seconds, 3),
        **result.extra,
    }
    entry = dict(parts, key=key, seconds=round(seconds, 3), finished_at=time.time())
    store.commit(stage.name, key, stage.outputs, entry, report)
    return StageOutcome(stage.name, key, False, seconds, report)
