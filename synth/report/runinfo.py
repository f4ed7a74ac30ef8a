"""What the stages left about a run: ``reports/<stage>.json`` by stage (:func:`synth.engine.reports.read_reports`,
typed), and the stage funnel.

Shared by the report (:mod:`synth.report.stage`) and the explorer (:mod:`synth.report.explorer`).
"""

from __future__ import annotations

from synth.engine.reports import RunReports, read_reports
from synth.text.markdown import md_code

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


def search_text(facts: dict | None) -> str:
    """How the agents' search ranked (the rollout report's ``search``, :func:`synth.tools.rank.search_facts`), as
    Markdown: ``tools.ranker`` and, for dense or hybrid, the embedding model's name and the sha of its files.  A
    report without it is of a run before the ranker existed: BM25."""
    facts = facts or {}
    ranker = facts.get("ranker") or "bm25"
    if ranker == "bm25":
        return f"a local BM25 index of the corpus (tools.ranker {md_code('bm25')})"
    model = f"embedding model {md_code(facts.get('model'))}, files sha {md_code(facts.get('model_sha'))}"
    if ranker == "dense":
        return f"dense retrieval over every page's vector (tools.ranker {md_code('dense')}; {model})"
    if facts.get("fusion"):
        w_bm25, w_dense = (facts.get("weights") or [None, None])[:2]
        gate = facts.get("dense_gate") or []
        gated = (f", the dense list's say gated by its top cosine similarity {gate[0]}-{gate[1]}"
                 if len(gate) == 2 else "")
        return (f"a local BM25 index and dense retrieval fused by their scores ({facts['fusion']}, weights BM25 "
                f"{w_bm25} / dense {w_dense}{gated}; tools.ranker {md_code(ranker)}; {model})")
    # a run of the hybrid before it fused by scores
    return (f"a local BM25 index and dense retrieval fused by reciprocal rank fusion, k = {facts.get('rrf_k', 60)} "
            f"(tools.ranker {md_code(ranker)}; {model})")


__all__ = ["STAGE_ORDER", "STAGE_UNITS", "RunReports", "funnel_rows", "read_reports", "search_text"]
