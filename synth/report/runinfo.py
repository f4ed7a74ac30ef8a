"""What the stages left about a run: ``reports/<stage>.json`` by stage, and the stage funnel.

Shared by the report (:mod:`synth.report.stage`) and the explorer (:mod:`synth.report.explorer`).
"""

from __future__ import annotations

import json
from pathlib import Path

STAGE_ORDER = ("ingest", "graph", "walks", "expand", "questions", "rollout", "filter", "assemble")
# What one record of each stage's input and output is (the stage table and the drops plot say it).
STAGE_UNITS = {"ingest": "pages", "graph": "links", "walks": "walks", "expand": "subgraphs",
               "questions": "question drafts", "rollout": "traces", "filter": "traces", "assemble": "longctx rows"}


def read_reports(root: Path) -> dict[str, dict]:
    """``reports/<stage>.json`` of every stage that ran, by stage name."""
    out = {}
    for p in sorted((root / "reports").glob("*.json")):
        try:
            out[p.stem] = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
    return out


def funnel_rows(reports: dict[str, dict]) -> list[dict]:
    """The pipeline stages that reported, in order, with their unit, input, output and drops by reason."""
    rows = []
    for name in STAGE_ORDER:
        r = reports.get(name)
        if r is None:
            continue
        rows.append({"stage": name, "unit": STAGE_UNITS.get(name, "records"), "input": int(r.get("input", 0)),
                     "output": int(r.get("output", 0)), "dropped": dict(r.get("dropped") or {})})
    return rows


__all__ = ["STAGE_ORDER", "STAGE_UNITS", "funnel_rows", "read_reports"]
