"""What the stages left about a run: ``reports/<stage>.json`` by stage (:func:`synth.engine.reports.read_reports`,
typed), and the stage funnel.

Shared by the report (:mod:`synth.report.stage`) and the explorer (:mod:`synth.report.explorer`).
"""

from __future__ import annotations

from synth.engine.reports import RunReports, read_reports

STAGE_ORDER = ("ingest", "graph", "walks", "expand", "questions", "rollout", "filter", "assemble")
# What one record of each stage's input and output is (the stage table and the drops plot say it).
STAGE_UNITS = {"ingest": "pages", "graph": "links", "walks": "walks", "expand": "subgraphs",
               "questions": "question drafts", "rollout": "traces", "filter": "traces", "assemble": "longctx rows"}


def funnel_rows(reports: RunReports) -> list[dict]:
    """The pipeline stages that reported, in order, with their unit, input, output and drops by reason."""
    reports = RunReports.of(reports)
    rows = []
    for name in STAGE_ORDER:
        r = reports.get(name)
        if r is None:
            continue
        rows.append({"stage": name, "unit": STAGE_UNITS.get(name, "records"), "input": int(r.input or 0),
                     "output": int(r.output or 0), "dropped": dict(r.dropped)})
    return rows


__all__ = ["STAGE_ORDER", "STAGE_UNITS", "RunReports", "funnel_rows", "read_reports"]
