"""``hopforge filter`` and ``hopforge report`` through typer, on a hand-made run folder."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from flows.cli import app
from helpers.filterstore import RunConfig, make_store, stages
from helpers.traces import call, make_question, make_trace
import flows.config as config_mod
import flows.stages as stages_mod

GOOD = [call("search", query="Alpha Station"), call("open", page="p1"), call("search", query="Delta City")]


def test_filter_and_report_commands(tmp_path: Path, monkeypatch) -> None:
    filt, rep = stages()
    # Until flows.stages / flows.config wire them, stand the stages and the `filters` section in.
    monkeypatch.setitem(stages_mod.BY_NAME, "filter", filt)
    monkeypatch.setitem(stages_mod.BY_NAME, "report", rep)
    monkeypatch.setattr(config_mod, "Config", RunConfig)
    assert [c.name for c in app.registered_commands].count("filter") == 1

    out = tmp_path / "run"
    traces = [make_trace("a", calls=GOOD), make_trace("b", sample_index=1, calls=GOOD, answer="Echo")]
    make_store(out, [make_question()], traces)
    runner = CliRunner()
    r = runner.invoke(app, ["filter", "--out", str(out), "--set", "filters.chain=[format,correctness,low_step]",
                            "--set", "filters.min_tool_calls=2"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert (out / "sft").exists() and (out / "rl_pool").exists() and (out / "reports" / "filter.json").exists()
    r = runner.invoke(app, ["report", "--out", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert (out / "report" / "index.md").exists()
    bad = runner.invoke(app, ["filter", "--out", str(out), "--set", "filters.chain=[format,nope]"])
    assert bad.exit_code == 2 and "unknown filter 'nope'" in " ".join(bad.output.split())
