"""A small run folder for the filter and report stages, made in code.

``publish`` commits tables as the output of a named stage (manifest, symlinks, report),
so ``run_stage`` sees the ``questions`` / ``rollout`` / ``tokenizer`` stages it reads
as if they had run.  The ``filter`` and ``report`` Stage records come from
``synth.stages`` once they are wired there, and are defined here the same way until then.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import Field

from filters.config import FiltersConfig
from synth.config import Config
from synth.pipeline import Stage
from synth.records import Question, Trace
from synth.store import Store, write_parquet_atomic

from .tinytok import save_tokenizer

if "filters" in Config.model_fields:
    RunConfig = Config
else:
    class RunConfig(Config):  # type: ignore[no-redef]
        """The run config with the `filters` section (until synth.config wires it)."""

        filters: FiltersConfig = Field(default_factory=FiltersConfig)


def _lazy(module: str, fn: str):
    def run(ctx):
        return getattr(importlib.import_module(module), fn)(ctx)
    return run


def _filter_key_extra(cfg, store) -> str:
    return importlib.import_module("filters.stage").key_extra(cfg, store)


FILTER_MODULES = ("filters.base", "filters.config", "filters.format", "filters.correctness", "filters.low_step",
                  "filters.repeats", "filters.length", "filters.decontaminate", "filters.bestofn", "filters.band",
                  "filters.sftrows", "filters.stage", "synth.answers", "synth.prompting", "synth.records")


def stages() -> tuple[Stage, Stage]:
    """The ``filter`` and ``report`` stages (from synth.stages when wired)."""
    from synth import stages as S

    by = getattr(S, "BY_NAME", {})
    if "filter" in by and "report" in by:
        return by["filter"], by["report"]
    filt = Stage(name="filter", run=_lazy("filters.stage", "run_filter"), reads=("questions", "rollout", "tokenizer"),
                 sections=("filters",), modules=FILTER_MODULES, files=("synth/prompts/judge.jinja2",),
                 outputs=("sft", "rl_pool", "rejects/filter", "filter/verdicts"), command="filter",
                 key_extra=_filter_key_extra)
    rep = Stage(name="report", run=_lazy("synth.report", "run_report"), reads=("rollout",),
                optional_reads=("ingest", "graph", "walks", "expand", "questions", "filter", "assemble"),
                sections=("filters.min_f1",), modules=("synth.report", "synth.report_plots", "synth.answers"),
                outputs=("report",), command="report")
    return filt, rep


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


def make_store(root: Path, questions: list[dict], traces: list[dict], *, reports: dict[str, dict] | None = None,
               tokenizer: bool = True) -> Store:
    """A run folder with ``questions``, ``traces`` (stage ``rollout``) and a tiny ``tokenizer``."""
    store = Store(root)
    reports = reports or {}
    publish(store, "questions", {"questions": pa.Table.from_pylist(questions, schema=Question.SCHEMA)},
            reports.get("questions", {"stage": "questions", "input": len(questions), "output": len(questions),
                                      "dropped": {}}))
    publish(store, "rollout", {"traces": pa.Table.from_pylist(traces, schema=Trace.SCHEMA)},
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
    """A run config whose `filters` section has the given values."""
    return RunConfig(filters=FiltersConfig(**filters))


__all__ = ["FILTER_MODULES", "RunConfig", "config", "make_store", "publish", "stages"]
