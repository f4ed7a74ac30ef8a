"""A small run folder for the filter and report stages, made in code.

``publish`` commits tables as the output of a named stage (manifest, symlinks, report),
so ``run_stage`` sees the ``questions`` / ``rollout`` / ``tokenizer`` stages it reads
as if they had run; the ``filter`` and ``report`` stages are the production ones.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
from filters.config import FiltersConfig
from flows.config import Config
from synth.engine.stage import Stage
from synth.engine.records import Question, Trace
from synth.engine.store import Store, write_parquet_atomic

from .tinytok import save_tokenizer

RunConfig = Config


def stages() -> tuple[Stage, Stage]:
    """The production ``filter`` and ``report`` stages."""
    from flows.stages import FILTER, REPORT

    return FILTER, REPORT


def publish(store: Store, stage: str, tables: dict[str, pa.Table | Path], report: dict | None = None) -> None:
    """Commit ``tables`` (Arrow tables, or folders to copy) as the output of ``stage``."""
    key = f"test-{stage}"
    partial = store.partial_dir(stage, key)
    for rel, t in tables.items():
        target = partial / rel
        if isinstance(t, pa.Table):
            write_parquet_atomic(t, target / "part-00000.parquet")
        else:
            shutil.copytree(t, target)
    store.commit(stage, key, list(tables), {"key": key}, report)


def make_store(root: Path, questions: list[Question], traces: list[Trace], *, reports: dict[str, dict] | None = None,
               tokenizer: bool = True) -> Store:
    """A run folder with ``questions``, ``traces`` (stage ``rollout``) and a tiny ``tokenizer``."""
    store = Store(root)
    reports = reports or {}
    publish(store, "questions", {"questions": Question.to_table(questions)},
            reports.get("questions", {"stage": "questions", "input": len(questions), "output": len(questions),
                                      "dropped": {}}))
    publish(store, "rollout", {"traces": Trace.to_table(traces)},
            reports.get("rollout", {"stage": "rollout", "input": len(questions), "output": len(traces),
                                    "dropped": {}}))
    if tokenizer:
        tok = save_tokenizer(root.parent / f"{root.name}-tok")
        publish(store, "tokenizer", {"tokenizer": tok}, None)
    for name, rep in reports.items():
        if name not in ("questions", "rollout"):
            (store.root / "reports").mkdir(exist_ok=True)
            import json

            (store.root / "reports" / f"{name}.json").write_text(json.dumps(rep))
    return store


def config(**filters: Any) -> Config:
    """A run config whose `filters` section has the given values.  Its ``rollout.n`` is 1: a hand-made store holds
    whatever samples its test writes, and the pool bands a question only on at least ``rollout.n`` of them
    (``filters.pool``); a test of that guard sets it."""
    cfg = RunConfig(filters=FiltersConfig(**filters))
    cfg.rollout.n = 1
    return cfg


__all__ = ["RunConfig", "config", "make_store", "publish", "stages"]
