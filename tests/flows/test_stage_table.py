"""The stage table is the pipeline: the flow body and the CLI follow it."""

from __future__ import annotations

import ast
import inspect

from flows import stages as table
from flows.stages import PIPELINE


def test_the_flow_body_names_the_stages_in_table_order():
    from flows import synth_flow

    body = ast.parse(inspect.getsource(synth_flow.synth_stages.fn))
    called = [node.args[0].id for node in ast.walk(body)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "run"
              and node.args and isinstance(node.args[0], ast.Name)]
    assert [getattr(table, name).name for name in called] == [s.name for s in PIPELINE]


def test_every_stage_has_a_command_and_its_inputs_come_first():
    from typer.main import get_command

    from flows.cli import app

    commands = set(get_command(app).commands)
    seen: set[str] = set()
    for stage in PIPELINE:
        assert stage.command in commands, stage.name
        assert set(stage.reads) <= seen, stage.name  # a stage only reads stages before it
        seen.add(stage.name)


def test_one_table_one_run_loop(tmp_path):
    from flows.config import Config
    from synth.engine.store import Store

    calls = []

    def fake(stage):
        from synth.engine.stage import StageOutcome

        calls.append(stage.name)
        return StageOutcome(stage.name, "k", False, 0.0, {"input": 1, "output": 1, "dropped": {}})

    with PIPELINE.start(Config(), Store(tmp_path), only=["graph", "filter"], run_one=fake) as run:
        for stage in PIPELINE:
            run(stage)
    outcomes = run.outcomes
    assert calls == ["graph", "filter"] and [o.name for o in outcomes] == calls
    import json

    report = json.loads((tmp_path / "reports" / "run.json").read_text())
    assert report["finished"] is True and set(report["stages"]) == {"graph", "filter"}
