"""The headline figures of a run: what one kept SFT row took of the teacher, by stage and by split.

Computed here once (:func:`headline_figures`, read from a run folder by :func:`read_headline`);
the run summary of ``hopforge run``, the report, the dataset card and the Prefect cost artifact
all show what this module returns, never a figure of their own.

Every figure is what the data took to make: the calls and tokens the teacher stages recorded,
answers from hopforge's call cache included (a cache hit was paid once, by an earlier run), so a
rerun does not make the data look cheaper.  ``prompt_tokens`` includes
``server_cached_prompt_tokens``, the part the server served from its own prefix cache.  Costs
need ``teacher.price_per_mtok`` (server-cached prompt tokens at its ``cached_prompt`` rate when
set, else at the prompt rate); without it they are None.

How a stage's usage is split (``sft``, ``rl``, ``eval``):

- **rollout**: from the ``traces`` table, by each trace's split (the split of its question): a
  trace's calls are its turns, its tokens those it recorded.  What the stage's report counted
  beyond the committed traces (calls of trajectories that failed and were retried, a probe) is
  ``other``.
- **questions**: the stage does not record calls per question, so its usage is apportioned by
  draft: each drafted question (the stage's input) takes an equal share, the accepted ones under
  their split (the ``questions`` table), the rejected ones under ``dropped``.
- **filter** (the LLM judge, when on) is not split: it appears as its stage total only.

Each figure is divided by the kept SFT rows (the filter stage's output) for ``per_kept_sft_row``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa

from synth.engine.records import SPLITS
from synth.engine.store import MissingInput, Store
from synth.engine.reports import RunReports, StageReport
from synth.report.runinfo import read_reports
from synth.teacher.config import Price
from synth.teacher.stats import TeacherUsage
from synth.text.markdown import md_text

SPLIT_STAGES = ("questions", "rollout")  # the stages broken down by split
STAGES = (*SPLIT_STAGES, "filter")
DROPPED = "dropped"  # questions stage: the share of drafts the validators rejected
OTHER = "other"      # rollout stage: what its report counted beyond the committed traces
ALL = "all"
FIGURES = ("calls", "prompt_tokens", "server_cached_prompt_tokens", "completion_tokens")
RULE = ("rollout by each trace's split (other: calls no committed trace accounts for); questions apportioned "
        "equally per drafted question, rejected drafts as dropped; the filter judge is not split")


@dataclass(frozen=True)
class Spend:
    """Calls and tokens (floats: an apportioned share need not be whole)."""

    calls: float = 0.0
    prompt_tokens: float = 0.0
    server_cached_prompt_tokens: float = 0.0
    completion_tokens: float = 0.0

    @classmethod
    def of_usage(cls, u: TeacherUsage) -> "Spend":
        """What a stage's recorded usage took: sent calls and call-cache hits together."""
        return cls(u.calls, u.all_prompt_tokens, u.all_server_cached_prompt_tokens, u.all_completion_tokens)

    def plus(self, other: "Spend") -> "Spend":
        return Spend(*(getattr(self, f) + getattr(other, f) for f in FIGURES))

    def scaled(self, k: float) -> "Spend":
        return Spend(*(getattr(self, f) * k for f in FIGURES))

    def beyond(self, other: "Spend") -> "Spend":
        """What ``self`` holds beyond ``other``, figure by figure (never below 0)."""
        return Spend(*(max(0.0, getattr(self, f) - getattr(other, f)) for f in FIGURES))

    def is_zero(self) -> bool:
        return not any(getattr(self, f) for f in FIGURES)

    def cost(self, price: Price | None) -> float | None:
        return None if price is None else price.usd(self.prompt_tokens, self.completion_tokens,
                                                    self.server_cached_prompt_tokens)


@dataclass(frozen=True)
class Cell:
    """One row of the headline: a stage (or ``all``) and a split (or ``all``), with its spend."""

    stage: str
    split: str
    spend: Spend
    cost_usd: float | None = None


@dataclass(frozen=True)
class Headline:
    """The headline figures: ``cells`` in display order; the last one is the run's total."""

    kept_sft_rows: int
    cells: list[Cell] = field(default_factory=list)
    priced: bool = False

    @property
    def total(self) -> Cell:
        return self.cells[-1]

    def per_kept(self, cell: Cell) -> dict[str, float | None]:
        """``cell``'s figures divided by the kept SFT rows (None when nothing was kept)."""
        k = self.kept_sft_rows
        out: dict[str, float | None] = {f: (getattr(cell.spend, f) / k if k else None) for f in FIGURES}
        out["cost_usd"] = cell.cost_usd / k if k and cell.cost_usd is not None else None
        return out

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the kept rows, the total per kept row, and every cell with its absolute and per-row figures."""
        def cell(c: Cell) -> dict[str, Any]:
            return {"stage": c.stage, "split": c.split, **{f: _round(getattr(c.spend, f)) for f in FIGURES},
                    "cost_usd": _round(c.cost_usd), "per_kept_sft_row": {k: _round(v) for k, v in
                                                                         self.per_kept(c).items()}}
        return {"kept_sft_rows": self.kept_sft_rows, "priced": self.priced, "rule": RULE,
                "per_kept_sft_row": cell(self.total)["per_kept_sft_row"], "cells": [cell(c) for c in self.cells]}

    COLUMNS = ["stage", "split", "calls / row", "prompt tok / row", "server-cached prompt tok / row",
               "completion tok / row", "cost USD / row"]

    def rows(self) -> list[list[Any]]:
        """One table row per cell, per kept SFT row (for the CLI table and the markdown)."""
        out = []
        for c in self.cells:
            p = self.per_kept(c)
            out.append([c.stage, c.split, *(_show(p[f], 2 if f == "calls" else 1) for f in FIGURES),
                        "-" if p["cost_usd"] is None else f"{p['cost_usd']:.6f}"])
        return out

    def markdown(self) -> list[str]:
        """The headline as a markdown table with the sentence that says how it is counted."""
        how = (f"Teacher calls and tokens per kept SFT row ({self.kept_sft_rows:,} rows), by stage and split; call-"
               "cache hits included (what the data took to make). Prompt tokens include the server-cached ones. "
               f"Split rule: {RULE}."
               + ("" if self.priced else " Costs need teacher.price_per_mtok."))
        lines = [how, "", "| " + " | ".join(self.COLUMNS) + " |", "| --- | --- |" + " ---: |" * (len(self.COLUMNS) - 2)]
        for r in self.rows():
            bold = r[0] == ALL and r[1] == ALL
            lines.append("| " + " | ".join(f"**{md_text(x)}**" if bold else md_text(x) for x in r) + " |")
        return lines + [""]


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def _show(v: float | None, digits: int) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def headline_figures(reports: RunReports, rollout_by_split: Mapping[str, Spend] | None = None,
                     questions_by_split: Mapping[str, int] | None = None, price: Price | None = None
                     ) -> Headline | None:
    """The headline from the stage reports (``reports/<stage>.json``), the rollout's spend by split (from
    the traces, :func:`traces_by_split`) and the accepted questions by split; None when no stage recorded
    teacher usage or no filter stage reported the kept rows."""
    reports = RunReports.of(reports)
    f = reports.filter
    usage = {s: TeacherUsage.from_report(reports.teacher(s)) for s in STAGES}
    if f is None or all(u is None for u in usage.values()):
        return None
    cells: list[Cell] = []
    by_split: dict[str, Spend] = {}

    def add(stage: str, split: str, spend: Spend) -> None:
        cells.append(Cell(stage, split, spend, spend.cost(price)))
        if split != ALL:
            by_split[split] = by_split.get(split, Spend()).plus(spend)

    for stage in STAGES:
        u = usage[stage]
        if u is None:
            continue
        total = Spend.of_usage(u)
        parts = _split(stage, total, reports.get(stage) or StageReport(), rollout_by_split, questions_by_split)
        for split, spend in parts.items():
            add(stage, split, spend)
        if stage == "rollout" and parts:  # the traces may account for more than the report (a reused shard)
            total = Spend(*(max(getattr(total, k), sum(getattr(s, k) for s in parts.values())) for k in FIGURES))
        add(stage, ALL, total)
    stage_totals = [c.spend for c in cells if c.split == ALL]
    for split in (*SPLITS, DROPPED, OTHER):
        if split in by_split:
            add(ALL, split, by_split[split])
    grand = Spend()
    for s in stage_totals:
        grand = grand.plus(s)
    add(ALL, ALL, grand)
    return Headline(int(f.output or 0), cells, price is not None)


def _split(stage: str, total: Spend, report: StageReport, rollout_by_split: Mapping[str, Spend] | None,
           questions_by_split: Mapping[str, int] | None) -> dict[str, Spend]:
    if stage == "rollout" and rollout_by_split:
        parts = {s: rollout_by_split[s] for s in SPLITS if s in rollout_by_split}
        summed = Spend()
        for s in parts.values():
            summed = summed.plus(s)
        if not (rest := total.beyond(summed)).is_zero():
            parts[OTHER] = rest
        return parts
    if stage == "questions" and questions_by_split:
        accepted = {s: int(questions_by_split[s]) for s in SPLITS if questions_by_split.get(s)}
        drafted = max(int(report.input or 0), sum(accepted.values()))
        if not drafted:
            return {}
        parts = {s: total.scaled(n / drafted) for s, n in accepted.items()}
        if drafted > sum(accepted.values()):
            parts[DROPPED] = total.scaled((drafted - sum(accepted.values())) / drafted)
        return parts
    return {}


def traces_by_split(store: Store) -> dict[str, Spend]:
    """The rollout's spend by split from the ``traces`` table: calls (turns) and tokens; {} without traces."""
    try:
        dset = store.dataset("traces")
    except MissingInput:
        return {}
    want = ["split", "n_turns", "prompt_tokens", "server_cached_prompt_tokens", "completion_tokens"]
    t = dset.to_table(columns=[c for c in want if c in dset.schema.names])
    if "split" not in t.column_names or not t.num_rows:
        return {}
    if "server_cached_prompt_tokens" not in t.column_names:  # traces written before the column
        t = t.append_column("server_cached_prompt_tokens", pa.array([0] * t.num_rows, pa.int64()))
    sums = t.group_by("split").aggregate([(c, "sum") for c in want[1:]]).to_pylist()
    return {r["split"]: Spend(*(float(r[f"{c}_sum"] or 0) for c in want[1:])) for r in sums}


def questions_by_split(store: Store) -> dict[str, int]:
    """Accepted questions by split (the ``questions`` table); {} without it."""
    try:
        t = store.dataset("questions").to_table(columns=["split"])
    except (MissingInput, KeyError, pa.ArrowInvalid):
        return {}
    rows = t.group_by("split").aggregate([("split", "count")]).to_pylist() if t.num_rows else []
    return {r["split"]: int(r["split_count"]) for r in rows}


def read_headline(root: str | Path, price: Price | None = None) -> Headline | None:
    """The headline figures of the run in ``root`` (its reports, traces and questions), priced at ``price``."""
    store = Store(Path(root))
    return headline_figures(read_reports(store.root), traces_by_split(store), questions_by_split(store), price)


__all__ = ["ALL", "DROPPED", "FIGURES", "OTHER", "RULE", "Cell", "Headline", "Spend", "headline_figures",
           "questions_by_split", "read_headline", "traces_by_split"]
