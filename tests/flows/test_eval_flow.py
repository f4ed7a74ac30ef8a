"""The ``synth/eval`` deployment's flow: the same parameters as ``hopforge eval --benchmark``, the table as its
artifact.  Its logic runs through ``.fn()`` (no Prefect server), with the artifact calls recorded."""

from __future__ import annotations

import json

import pytest

from helpers.benchmodel import Play, judge_handler, model_handler, spec
from helpers.demostore import demo_config
from helpers.openai_server import serve

SECRET = "sk-eval-flow-secret-0123456789"
SETTINGS = ["teacher.tool_protocol=native", "teacher.max_retries=0"]
PLAYS = {"Angel Falls lies": Play((("open", {"page": "Angel Falls"}),), "Caracas"),
         "Gustave Flaubert and H. G. Wells": Play((), "no"),
         "deepest oceanic trench": Play((("search", {"query": "deepest trench"}),), "Atlantic Ocean")}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    from flows.stages import INDEX, INGEST
    from synth.engine.runner import run_stage
    from synth.engine.store import Store

    root = tmp_path_factory.mktemp("evalflow") / "run"
    for stage in (INGEST, INDEX):
        run_stage(stage, demo_config(), Store(root), progress=False)
    return root


@pytest.fixture()
def artifacts(monkeypatch):
    import prefect.artifacts as pa

    made: list[tuple[str, str, object, str]] = []
    monkeypatch.setattr(pa, "create_table_artifact",
                        lambda data, key, description: made.append(("table", key, data, description)))
    monkeypatch.setattr(pa, "create_markdown_artifact",
                        lambda data, key, description: made.append(("markdown", key, data, description)))
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    return made


def test_the_flow_evaluates_and_attaches_the_table(out, artifacts):
    from flows.eval_flow import eval_flow
    from sft.benchmarks.table import table_rows

    model = model_handler(PLAYS)
    with serve(handler=model.handler()) as srv, serve(handler=judge_handler({"Caracas", "no"})) as judge:
        result = eval_flow.fn(benchmarks=[spec("hotpotqa")], out=str(out), overrides=SETTINGS,
                              model=f"flow-model@{srv.base_url}", judge=f"flow-judge@{judge.base_url}")
    report = json.loads((out / "evals" / "flow-model" / "benchmarks" / "eval_report.json").read_text())
    assert result["report_dir"] == str(out / "evals" / "flow-model" / "benchmarks")
    by_key = {key: (kind, data) for kind, key, data, _ in artifacts}
    assert set(by_key) == {"synth-eval", "synth-eval-report"}
    assert by_key["synth-eval"] == ("table", table_rows(report))
    row = by_key["synth-eval"][1][0]
    assert (row["benchmark"], row["questions"], row["accuracy (rule)"], row["accuracy (judge)"]) == \
        ("hotpotqa", "3", "66.7%", "66.7%")
    assert report["judge"]["prompt_sha256"] in by_key["synth-eval-report"][1]
    assert all(SECRET not in f"{data} {description}" for _, _, data, description in artifacts)


def test_the_flow_compares_two_models(out, artifacts):
    from flows.eval_flow import eval_flow
    from synth.engine.config import ConfigError

    a, b = model_handler(PLAYS), model_handler({k: Play(p.calls, "Paris") for k, p in PLAYS.items()})
    with serve(handler=a.handler()) as sa, serve(handler=b.handler()) as sb:
        with pytest.raises(ConfigError, match="two models"):
            eval_flow.fn(benchmarks=[spec("hotpotqa")], out=str(out), overrides=SETTINGS, compare=["x@http://h/v1"])
        eval_flow.fn(benchmarks=[spec("hotpotqa")], out=str(out), overrides=SETTINGS, limit=2,
                     compare=[f"a@{sa.base_url}", f"b@{sb.base_url}"])
    kind, key, rows, _ = artifacts[0]
    assert (kind, key) == ("table", "synth-eval-compare") and len(rows) == 1
    assert rows[0]["questions"].startswith("2 (sample of 3") and rows[0]["accuracy (rule) B"] == "0.0%"
