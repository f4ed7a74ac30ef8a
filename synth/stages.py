"""The pipeline's stages in order, as :class:`~synth.pipeline.Stage` records.

Each stage's work lives in its own module; this file only says what each one
reads, which config and code shape its output, and what it publishes.  Stage
modules are imported lazily so the CLI starts fast.
"""

from __future__ import annotations

import importlib
from typing import Callable

from .config import Config
from .pipeline import STAGE_COMMANDS, Stage, StageContext, StageResult


def _lazy(module: str, fn: str) -> Callable[[StageContext], StageResult]:
    def run(ctx: StageContext) -> StageResult:
        return getattr(importlib.import_module(module), fn)(ctx)

    run.__name__ = f"{module}.{fn}"
    return run


def _lazy_shards(module: str):
    def shards():
        return importlib.import_module(module).SHARDS

    return shards


def _unsharded(ctx: StageContext) -> StageResult:  # pragma: no cover - never called for sharded stages
    raise RuntimeError(f"stage {ctx.stage.name} is sharded")


def _source_identity(cfg: Config, store) -> str:
    from .kilt import resolve_source, source_identity

    return source_identity(resolve_source(cfg.corpus.source, store.root))


INGEST = Stage(
    name="ingest",
    run=_lazy("synth.ingest", "run_ingest"),
    sections=("corpus",),
    modules=("synth.kilt", "synth.kiltlines", "synth.kiltnorm", "synth.linkresolve", "synth.ingest", "synth.records"),
    outputs=("corpus/pages", "corpus/links", "rejects/ingest.jsonl"),
    command="ingest",
    key_extra=_source_identity,
)

GRAPH = Stage(
    name="graph",
    run=_lazy("synth.graph", "run_graph"),
    reads=("ingest",),
    sections=("graph",),
    modules=("synth.graph",),
    outputs=("graph",),
    command="graph",
)

WALKS = Stage(
    name="walks",
    run=_lazy("synth.walks", "run_walks"),
    reads=("ingest", "graph"),
    sections=("walk",),
    modules=("synth.walks", "synth.evidence", "synth.nodefilter", "synth.records", "synth.rng"),
    outputs=("walks",),
    command="walk",
)

EXPAND = Stage(
    name="expand",
    run=_lazy("synth.expand", "run_expand"),
    reads=("ingest", "graph"),
    sections=("expand", "walk.max_in_degree", "walk.exclude_patterns"),
    modules=("synth.expand", "synth.evidence", "synth.nodefilter", "synth.records", "synth.rng"),
    outputs=("subgraphs",),
    command="expand",
)

INDEX = Stage(
    name="index",
    run=_lazy("synth.index_stage", "run_index"),
    reads=("ingest",),
    sections=(),  # only the pages and the code shape the index; tools.* act at query time
    modules=("synth.index_stage", "synth.search_build", "synth.search_text"),
    outputs=("index",),
    command="index",
)

QUESTIONS = Stage(
    name="questions",
    run=_unsharded,
    shards=_lazy_shards("synth.question_stage"),
    reads=("ingest", "walks"),
    optional_reads=("expand", "index"),  # the index only for the shortcut check
    sections=("questions", "teacher"),
    modules=("synth.questions", "synth.question_stage", "synth.prompting", "synth.answers", "synth.teacher_oracle",
             "synth.records"),
    files=("synth/prompts/question.jinja2", "synth/prompts/subgraph_question.jinja2", "synth/prompts/obfuscate.jinja2",
           "synth/prompts/closed_book.jinja2", "synth/prompts/solvable.jinja2"),
    outputs=("questions", "rejects/questions"),
    command="questions",
)

ROLLOUT = Stage(
    name="rollout",
    run=_unsharded,
    shards=_lazy_shards("synth.rollout_stage"),
    reads=("questions", "index", "ingest", "walks"),
    optional_reads=("expand",),
    sections=("rollout", "teacher", "tools"),
    modules=("synth.rollout", "synth.rollout_stage", "synth.oracle_agent", "synth.tools", "synth.tools_schema",
             "synth.search", "synth.search_snippet", "synth.prompting", "synth.records"),
    files=("synth/prompts/agent.jinja2",),
    outputs=("traces",),
    command="rollout",
)

def _tokenizer_identity(cfg: Config, store) -> str:
    from .tokenizer import tokenizer_identity

    return tokenizer_identity(cfg, store)


def _filter_key_extra(cfg: Config, store) -> str:
    from filters.stage import key_extra

    return key_extra(cfg, store)


TOKENIZER = Stage(
    name="tokenizer",
    run=_lazy("synth.tokenizer", "run_tokenizer"),
    reads=("ingest",),
    sections=("tokenizer",),
    modules=("synth.tokenizer", "sft.chat_templates", "synth.tools_schema", "synth.tools_config"),
    files=("sft/templates/tiny_chatml.jinja2", "sft/templates/qwen2_5_tools.jinja2"),
    outputs=("tokenizer",),
    command="tokenizer",
    key_extra=_tokenizer_identity,
)

FILTER = Stage(
    name="filter",
    run=_lazy("filters.stage", "run_filter"),
    reads=("questions", "rollout", "tokenizer"),
    sections=("filters",),
    modules=("filters.base", "filters.config", "filters.format", "filters.correctness", "filters.low_step",
             "filters.repeats", "filters.length", "filters.decontaminate", "filters.bestofn", "filters.band",
             "filters.sftrows", "filters.stage", "synth.answers", "synth.prompting", "synth.records"),
    files=("synth/prompts/judge.jinja2",),
    outputs=("sft", "rl_pool", "rejects/filter", "filter/verdicts"),
    command="filter",
    key_extra=_filter_key_extra,
)

ASSEMBLE = Stage(
    name="assemble",
    run=_lazy("synth.assemble", "run_assemble"),
    reads=("questions", "rollout", "filter", "index", "tokenizer", "ingest"),
    sections=("assemble",),
    modules=("synth.assemble", "synth.assemble_pack", "synth.assemble_config", "synth.seeding", "synth.records",
             "synth.search"),
    outputs=("longctx", "rejects/assemble"),
    command="assemble",
)

def _sft_recipe(cfg: Config, store) -> str:
    from sft.cli import recipe_identity

    return recipe_identity(cfg, store)


SFT = Stage(
    name="sft",
    run=_lazy("sft.cli", "run_sft"),
    reads=("filter", "tokenizer"),
    sections=("sft",),
    modules=("sft.train", "sft.masking", "sft.rows", "sft.batching", "sft.chat_templates", "sft.report", "sft.cli",
             "synth.tokenizer"),
    files=("sft/templates/qwen2_5_tools.jinja2", "sft/templates/tiny_chatml.jinja2"),
    outputs=("student",),
    command="sft",
    key_extra=_sft_recipe,
)

EVAL = Stage(
    name="eval",
    run=_lazy("sft.evaluate", "run_eval"),
    reads=("sft", "questions", "rollout", "index"),
    sections=("eval", "tools", "filters.min_f1"),
    modules=("sft.evaluate", "synth.rollout", "synth.teacher_hf", "synth.tools", "synth.prompting", "synth.report"),
    files=("synth/prompts/agent.jinja2",),
    outputs=("eval",),
    command="eval",
)

REPORT = Stage(
    name="report",
    run=_lazy("synth.report", "run_report"),
    reads=("rollout",),
    optional_reads=("ingest", "graph", "walks", "expand", "questions", "filter", "assemble"),
    sections=("filters.min_f1",),
    modules=("synth.report", "synth.report_plots", "synth.answers"),
    outputs=("report",),
    command="report",
)

PIPELINE: list[Stage] = [INGEST, GRAPH, WALKS, EXPAND, INDEX, QUESTIONS, ROLLOUT, TOKENIZER, FILTER, ASSEMBLE, REPORT,
                         SFT, EVAL]
BY_NAME: dict[str, Stage] = {s.name: s for s in PIPELINE}
STAGE_COMMANDS.update({s.name: s.command for s in PIPELINE})
