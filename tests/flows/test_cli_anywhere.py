"""The command line works from any directory: the default config and the relative input paths are found in
the project, while --out is relative to where the user is.

The rule: a relative input path (``--config``, and the paths a config holds: ``corpus.source``,
``filters.decontaminate``, ``tokenizer``, ``sft.config``) is looked for in the current directory, then in
the project root; output folders are relative to the current directory.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from helpers.cli import hopforge_command

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--set", "questions.route=false", "--set", "walk.num_walks=60", "--set", "walk.hops=3", "--set", "expand.num_subgraphs=0",
         "--set", "rollout.n=2"]


def hopforge(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``hopforge ARGS`` run in ``cwd`` (not the project), stdout and stderr merged."""
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
    env.pop("PYTHONPATH", None)
    return subprocess.run([*hopforge_command(), *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)


def ok(cwd: Path, *args: str) -> str:
    r = hopforge(cwd, *args)
    assert r.returncode == 0, f"hopforge {' '.join(args)} in {cwd} exited {r.returncode}:\n{r.stdout[-4000:]}"
    assert "config file not found" not in r.stdout
    return r.stdout


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory) -> Path:
    """A working directory outside the project, with no configs/ of its own."""
    cwd = tmp_path_factory.mktemp("elsewhere")
    assert not (cwd / "configs").exists() and ROOT not in cwd.parents
    return cwd


@pytest.fixture(scope="module")
def run_dir(elsewhere) -> Path:
    """A small run made from outside the project, with a relative --out (made in the current directory)."""
    ok(elsewhere, "run", "--out", "run", "--until", "filter", *SMALL)
    out = elsewhere / "run"
    assert (out / "manifest.json").is_file() and not (ROOT / "run").exists()
    return out


def test_check_from_another_directory(elsewhere) -> None:
    text = ok(elsewhere, "check", "--out", "checked")
    assert "ok: configs/demo.yaml can run into checked" in text


def test_report_publish_and_tools_search_from_another_directory(elsewhere, run_dir) -> None:
    ok(elsewhere, "report", "--out", "run", *SMALL)
    assert (run_dir / "report" / "index.md").is_file()

    ok(elsewhere, "publish", "--out", "run", "--to", "local:published", *SMALL)
    assert (elsewhere / "published" / "README.md").is_file()
    assert list((elsewhere / "published" / "data" / "sft").glob("*.parquet"))

    text = ok(elsewhere, "tools", "search", "--out", "run", "--query", "river", "--k", "2")
    results = json.loads(text[text.index("["):])
    assert len(results) == 2 and {"page_id", "title", "snippet"} <= set(results[0])


def test_a_relative_config_path_is_the_current_directorys_first(elsewhere) -> None:
    own = elsewhere / "configs" / "mine.yaml"
    own.parent.mkdir(exist_ok=True)
    own.write_text("walk:\n  hopz: 3\n")
    r = hopforge(elsewhere, "check", "--config", "configs/mine.yaml", "--out", "checked")
    assert r.returncode == 2 and "walk.hopz" in r.stdout, r.stdout  # this directory's file, not the project's
    r = hopforge(elsewhere, "check", "--config", "configs/absent.yaml", "--out", "checked")
    assert r.returncode == 2 and "config file not found: configs/absent.yaml" in r.stdout, r.stdout
    assert str(ROOT) in r.stdout  # it says where it looked


def test_deployments_take_the_projects_paths() -> None:
    from flows.serve import DEPLOYMENTS, project_parameters

    for spec in DEPLOYMENTS:
        params = project_parameters(spec.parameters)
        for name in ("config", "out", "accelerate_config"):
            if params.get(name):
                assert Path(params[name]).is_absolute() and Path(params[name]).is_relative_to(ROOT), (spec.name, name)
        assert Path(params["config"]).is_file(), spec.name
    assert project_parameters({"out": "/abs/x", "overrides": []}) == {"out": "/abs/x", "overrides": []}


def test_flows_default_config_loads_from_another_directory(elsewhere, monkeypatch) -> None:
    import inspect

    from flows.config import load_config
    from flows.publish_flow import publish_flow
    from flows.sft_flow import check_inputs, sft_flow
    from flows.synth_flow import synth_flow

    monkeypatch.chdir(elsewhere)
    for flow in (synth_flow, publish_flow):
        default = inspect.signature(flow.fn).parameters["config"].default
        assert load_config(default).corpus.source == "demo"
    recipe = inspect.signature(sft_flow.fn).parameters["config"].default
    problems = check_inputs(recipe, str(elsewhere / "nothing"), None, 1)
    assert not any(p.startswith("config:") for p in problems), problems
