"""The Prefect artifacts a synth run attaches: the funnel, the teacher's cost, the report.

The tables are built by pure functions (:func:`funnel_table`, :func:`cost_table`,
:func:`report_markdown`) from what the run left on disk and its stage outcomes, so
tests can check them without a server.  Nothing here reads the environment: the
config appears only as it is stored (the API key's variable *name*, ``api_key_env``;
the endpoint as :meth:`~synth.teacher.config.TeacherConfig.display_url`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import yaml

from flows.config import Config
from synth.engine.stage import StageOutcome
from synth.engine.runner import SUMMARY_COLUMNS, summary_rows

COST_COLUMNS = ["stage", "status", "requests", "cache hits", "prompt tokens", "completion tokens", "cost_usd"]


def funnel_table(outcomes: Sequence[StageOutcome]) -> list[dict[str, Any]]:
    """One row per stage: stage, status, input, output, dropped, teacher calls, seconds."""
    return [dict(zip(SUMMARY_COLUMNS, row)) for row in summary_rows(outcomes)]


def cost_table(out: str | Path, outcomes: Sequence[StageOutcome]) -> list[dict[str, Any]]:
    """One row per stage that used the teacher, from ``reports/<stage>.json`` ``teacher``, plus a total.

    A reused stage's numbers are those of the run that computed it (its status says so);
    ``cost_usd`` is filled when ``teacher.price_per_mtok`` was set.
    """
    rows = []
    for o in outcomes:
        t = _stage_report(out, o.name).get("teacher") or o.report.get("teacher")
        if not t:
            continue
        rows.append({"stage": o.name, "status": "reused" if o.reused else "ran",
                     "requests": t.get("requests", 0), "cache hits": t.get("cache_hits", 0),
                     "prompt tokens": t.get("prompt_tokens", 0), "completion tokens": t.get("completion_tokens", 0),
                     "cost_usd": t.get("cost_usd")})
    if rows:
        total = {c: sum(r[c] or 0 for r in rows) for c in COST_COLUMNS[2:]}
        if all(r["cost_usd"] is None for r in rows):
            total["cost_usd"] = None
        else:
            total["cost_usd"] = round(total["cost_usd"], 6)
        rows.append({"stage": "total", "status": "", **total})
    return rows


def _stage_report(out: str | Path, stage: str) -> dict:
    p = Path(out) / "reports" / f"{stage}.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}


def safe_config(cfg: Config) -> dict:
    """The config as a mapping fit to show: the key's variable name only, the endpoint without query."""
    data = cfg.model_dump(mode="json")
    if cfg.teacher.base_url is not None:
        data["teacher"]["base_url"] = cfg.teacher.display_url()
    return data


def report_markdown(out: str | Path, cfg: Config | None = None) -> str:
    """A markdown page pointing at the run's report (``DIR/report/index.md``) and its figures."""
    root = Path(out).absolute()
    report = root / "report"
    lines = [f"# hopforge run: `{root}`", ""]
    index = report / "index.md"
    if index.exists():
        lines += [f"Report: [{index}]({index.as_uri()})", ""]
        pngs = sorted(report.glob("*.png"))
        if pngs:
            lines += ["| figure | file |", "| --- | --- |"]
            lines += [f"| {p.stem} | [{p.name}]({p.as_uri()}) |" for p in pngs]
            lines.append("")
    else:
        lines += ["No report was written (the `report` stage did not run).", ""]
    lines += [f"Run summary: `{root / 'reports' / 'run.json'}`", ""]
    if cfg is not None:
        lines += ["## Config", "", "```yaml", yaml.safe_dump(safe_config(cfg), sort_keys=False).rstrip(), "```", ""]
    return "\n".join(lines)


def attach(out: str | Path, cfg: Config, outcomes: Sequence[StageOutcome]) -> dict[str, Any]:
    """Create the three artifacts in the current flow run; returns their ids by name."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    ids = {
        "funnel": create_table_artifact(
            funnel_table(outcomes), key="synth-funnel",
            description=f"Records into and out of each stage of `{Path(out).absolute()}` (status: ran or reused)."),
        "cost": create_table_artifact(
            cost_table(out, outcomes), key="synth-cost",
            description="Teacher requests, cache hits and tokens per stage (cost_usd when teacher.price_per_mtok "
                        "is set); a reused stage shows the run that computed it."),
        "report": create_markdown_artifact(
            report_markdown(out, cfg), key="synth-report", description="The run's report and figures."),
    }
    return ids
