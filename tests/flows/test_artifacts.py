"""The synth run's Prefect artifacts: the funnel, the stages, the cost priced now, the report with its images.

Pure functions are checked on a run folder made by hand; one tiny flow on Prefect's test
server attaches the artifacts and reads them back through the client, to check that the
report's figures travel inside the markdown (data URIs, which the UI's markdown renderer
shows as images) and that no ``file://`` link is left.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from helpers.markdown import code_spans, fences, raw_html, tables

from flows.artifacts import (PER_KEPT, cost_table, funnel_table, png_data_uri, report_figures, report_markdown,
                             stages_table)
from flows.config import load_config
from synth.engine.stage import StageOutcome
from synth.engine.store import Store
from synth.report.stage import build_report

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "configs" / "demo.yaml")
TEACHER = {"calls": 12, "requests": 10, "cache_hits": 2, "prompt_tokens": 3_000_000, "completion_tokens": 250_000,
           "cached_prompt_tokens": 1_000_000, "cached_completion_tokens": 50_000}
REPORTS = {
    "graph": {"stage": "graph", "input": 70_475, "output": 70_475, "dropped": {}},
    "questions": {"stage": "questions", "input": 10, "output": 8, "dropped": {"prose": 2}, "teacher": TEACHER},
    "rollout": {"stage": "rollout", "input": 32, "output": 32, "n": 4, "dropped": {}, "teacher": TEACHER},
    "filter": {"stage": "filter", "input": 32, "output": 6, "chain": ["format", "correctness"],
               "reason_order": ["format", "wrong_answer"], "pass": {"pass@1": 0.75, "pass@n": 0.9},
               "dropped": {"wrong_answer": 8, "held_out": 10, "not_best": 8}},
}
DATA_IMAGE = re.compile(r"!\[[^\]]*\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)")


def _price(prompt: float, completion: float):
    return load_config(CONFIG, [f"teacher.price_per_mtok={{prompt: {prompt}, completion: {completion}}}"])


@pytest.fixture()
def run(tmp_path: Path) -> Path:
    """A run folder: stage reports (tokens recorded without a price) and a report with its figures."""
    store = Store(tmp_path / "run")
    (store.root / "reports").mkdir(parents=True)
    for name, r in REPORTS.items():
        (store.root / "reports" / f"{name}.json").write_text(json.dumps(r))
    build_report(store, store.root / "report")
    return store.root


def _outcomes(reused: bool = True) -> list[StageOutcome]:
    return [StageOutcome(s, "k", reused, 0.0, REPORTS[s]) for s in ("questions", "rollout", "filter")]


def test_funnel_table_is_the_one_unit_funnel(run: Path) -> None:
    rows = funnel_table(run)
    assert [(r["step"], r["count"], r["unit"]) for r in rows] == [
        ("drafted", 10, "questions"), ("accepted by the validators", 8, "questions"),
        ("rollouts (n = 4 per question)", 32, "traces"), ("after format", 32, "traces"),
        ("after wrong_answer", 24, "traces"), ("after held_out (sft-split questions only)", 14, "traces"),
        ("kept: best of n (SFT rows)", 6, "SFT rows")]
    assert "graph" not in json.dumps(rows)
    assert [r["stage"] for r in stages_table(_outcomes())] == ["questions", "rollout", "filter"]


def test_cost_table_prices_recorded_tokens_with_the_price_set_now(run: Path) -> None:
    unpriced = {r["stage"]: r for r in cost_table(run, _outcomes()) if r["status"] != PER_KEPT}
    assert unpriced["total"]["cost_usd"] is None and unpriced["rollout"]["status"] == "reused"
    cfg = _price(1.0, 4.0)
    priced = {r["stage"]: r for r in cost_table(run, _outcomes(), cfg.teacher.price_per_mtok) if r["status"] != PER_KEPT}
    assert priced["rollout"]["cost_usd"] == pytest.approx(3.0 + 1.0)
    assert priced["rollout"]["cost_with_cache_usd"] == pytest.approx(4.0 + 1.2)
    assert priced["total"]["cost_usd"] == pytest.approx(8.0)
    assert priced["total"]["prompt tokens"] == 6_000_000


def test_report_markdown_embeds_the_figures_and_links_no_file(run: Path) -> None:
    md = report_markdown(run, _price(1.0, 4.0), _outcomes())
    assert "file://" not in md
    names = [n for n, _ in report_figures(run / "report")]
    assert names[:2] == ["funnel.png", "drops.png"]
    images = DATA_IMAGE.findall(md)
    assert len(images) == len(names)
    for data in images:
        raw = base64.b64decode(data)
        assert raw.startswith(b"\x89PNG\r\n\x1a\n")
    assert f"`{run / 'report' / 'index.md'}`" in md
    assert f"Explorer (open it in a browser on the machine that holds the run): `{run / 'report' / 'index.html'}`" in md
    page = run / "report" / "index.html"
    page.rename(page.with_suffix(".bak"))  # a report without the explorer names none
    try:
        assert "Explorer" not in report_markdown(run, _price(1.0, 4.0), _outcomes())
    finally:
        page.with_suffix(".bak").rename(page)
    # The funnel, the cost priced now, and the captions of the report.
    rows = [row for table in tables(md) for row in table]
    assert ["after wrong_answer", "24 traces", "8", "-"] in rows
    assert {("questions", "reused"), ("rollout", "reused")} <= {tuple(r[:2]) for r in rows}
    assert "$10.4000" in md  # both stages with the cache: 2 x (4 + 1.2) USD
    assert "per kept SFT row" in md and "*Funnel, top to bottom in stage order" in md
    assert "api_key_env: OPENAI_API_KEY" in md


HOSTILE = "evil` | x | <script>alert(1)</script>\n```\n<img src=x onerror=alert(1)>"


def test_configured_and_recorded_strings_stay_text_in_the_report_artifact(tmp_path: Path) -> None:
    """A model name, a drop reason and the run's own path that hold Markdown and HTML show as what they are."""
    store = Store(tmp_path / "run`| <b>x</b>")
    (store.root / "reports").mkdir(parents=True)
    reports = json.loads(json.dumps(REPORTS))
    reports["questions"]["dropped"] = {"pro|se <i>": 2}
    for name, r in reports.items():
        (store.root / "reports" / f"{name}.json").write_text(json.dumps(r))
    build_report(store, store.root / "report")
    cfg = load_config(CONFIG, [f"teacher.model={json.dumps(HOSTILE)}"])
    outcomes = [StageOutcome(s, "k", True, 0.0, reports[s]) for s in ("questions", "rollout", "filter")]
    md = report_markdown(store.root, cfg, outcomes)
    assert raw_html(md) == []  # no tag of the strings reaches the page as markup
    assert code_spans(md)[0] == str(store.root)  # the heading names the folder whole
    funnel = next(t for t in tables(md) if t[0][0] == "step")
    assert all(len(row) == 4 for row in funnel)  # the reason's pipe cut no row
    assert ["accepted by the validators", "8 questions", "2", "pro|se <i> 2"] in funnel
    (info, config), = [f for f in fences(md) if f[0] == "yaml"]
    assert "alert(1)" in config and "```" in config  # the config block holds the model name and is not closed by it


def test_report_markdown_keeps_images_within_budget_and_links_the_explorer(run: Path) -> None:
    (run / "report" / "index.html").write_text("<html></html>")
    one = len(png_data_uri(run / "report" / "funnel.png")) * 3 // 4
    md = report_markdown(run, budget=one)
    assert len(DATA_IMAGE.findall(md)) == 1
    assert f"`{run / 'report' / 'drops.png'}`" in md and "Not embedded (size budget)" in md
    assert f"`{run / 'report' / 'index.html'}`" in md
    assert "not priced: set teacher.price_per_mtok" in md


def test_png_data_uri_downscales_wide_figures(tmp_path: Path) -> None:
    from PIL import Image

    wide = tmp_path / "wide.png"
    Image.new("RGB", (2400, 600), "white").save(wide)
    raw = base64.b64decode(png_data_uri(wide, max_width=600).split(",", 1)[1])
    from io import BytesIO

    assert Image.open(BytesIO(raw)).size == (600, 150)


def test_report_markdown_without_a_report(tmp_path: Path) -> None:
    assert "did not run" in report_markdown(tmp_path)
    assert cost_table(tmp_path, []) == [] and funnel_table(tmp_path) == []


def test_artifacts_reach_prefect_with_their_images(run: Path) -> None:
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.testing.utilities import prefect_test_harness

    from flows.artifacts import attach

    cfg = _price(1.0, 4.0)

    @flow(name="attach-artifacts", persist_result=False)
    def attach_flow() -> None:
        attach(run, cfg, _outcomes())

    with prefect_test_harness(server_startup_timeout=None):  # PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS
        state = attach_flow(return_state=True)
        with get_client(sync_client=True) as client:
            arts = client.read_artifacts(flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=[state.state_details.flow_run_id])))
    by_key = {a.key: a for a in arts}
    assert set(by_key) == {"synth-funnel", "synth-stages", "synth-cost", "synth-report"}
    assert by_key["synth-report"].type == "markdown"
    report = by_key["synth-report"].data
    assert len(DATA_IMAGE.findall(report)) == len(report_figures(run / "report")) >= 2
    assert "file://" not in report
    funnel = json.loads(by_key["synth-funnel"].data)
    assert funnel[-1] == {"step": "kept: best of n (SFT rows)", "count": 6, "unit": "SFT rows", "dropped": 8,
                          "reasons": "not_best"}
    cost = {r["stage"]: r for r in json.loads(by_key["synth-cost"].data)}
    assert cost["total"]["cost_usd"] == pytest.approx(8.0)
