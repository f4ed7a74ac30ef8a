"""The Prefect flows: same tables as the plain runner, incremental reruns, Dask, preflight, artifacts.

One ephemeral Prefect server serves the whole module (``prefect_test_harness``, about 4 s);
pure logic is tested without one.  The pipeline runs on the embedded demo corpus with a few
walks and one training step, so a full run takes seconds; each fixture runs only the stages
its tests compare (the plain runner's tables up to the filter, the flow every stage).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "configs" / "demo.yaml")
# 8 walks hold out no question for eval, so the eval stage is empty: the run accepts that (runner.allow_empty).
# One training step: the flow's tests check that sft runs and is reused, not what it learns (the tiny recipe's 40
# steps took two minutes of the fixture, and past pytest's limit on a loaded machine).
SMALL = ["questions.route=false", "walk.num_walks=150", "walk.hops=3", "expand.num_subgraphs=2", "rollout.n=2", "runner.allow_empty=true",
         "sft.overrides=[max_steps=1]"]
TABLES = ["questions", "traces", "sft"]
SECRET = "sk-hopforge-test-secret-0123456789"


# Every table the stages with worker processes write (filter, assemble; questions' shards), and the ids they
# are compared by; and overrides that give each of those stages several items to spread.
ALL_TABLES = {"questions": "question_id", "rejects/questions": "record_id", "traces": "trace_id", "sft": "trace_id",
              "rl_pool": "extra_info", "filter/verdicts": "trace_id", "rejects/filter": "trace_id",
              "longctx": "sample_id", "rejects/assemble": "record_id"}
SPREAD = ["questions.shard_size=4", "rollout.shard_size=4", "assemble.questions_per_pass=1"]


def read(out: Path, table: str):
    return ds.dataset(out / table).to_table()


def by_id(out: Path, table: str) -> list[dict]:
    key = ALL_TABLES[table]
    return sorted(read(out, table).to_pylist(), key=lambda r: json.dumps(r[key], sort_keys=True, default=str))


def same_tables(a: Path, b: Path) -> None:
    """Every table of ALL_TABLES holds the same rows in ``a`` and ``b``, sorted by id and as written."""
    for table in ALL_TABLES:
        assert by_id(a, table) == by_id(b, table), table
        assert read(a, table).equals(read(b, table)), table
    assert by_id(a, "longctx") and by_id(a, "sft") and by_id(a, "rejects/questions")
    # The explorer's data: its question shards byte for byte, its index but for the run's name and timings (meta).
    shards = sorted(p.name for p in (a / "report" / "explorer").glob("shard-*.js"))
    assert shards and all((a / "report/explorer" / n).read_bytes() == (b / "report/explorer" / n).read_bytes()
                          for n in shards)

    def index(out: Path) -> dict:
        text = (out / "report" / "explorer" / "index-data.js").read_text()
        data = json.loads(text[text.index("(") + 1:text.rindex(")")])
        data.pop("meta")
        return data

    assert index(a) == index(b)


@pytest.fixture(scope="module")
def harness():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=None):  # PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS
        yield


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> str:
    """The demo corpus, built once for every run of this module."""
    from synth.corpus.demo import build_demo_corpus

    path = tmp_path_factory.mktemp("source") / "kilt_demo.jsonl"
    build_demo_corpus(path)
    return str(path)


@pytest.fixture(scope="module")
def overrides(source) -> list[str]:
    return [*SMALL, f"corpus.source={source}"]


@pytest.fixture(scope="module")
def plain(tmp_path_factory, overrides) -> Path:
    """The pipeline run without Prefect (the engine's run loop), up to the filter: what the flows' TABLES are
    compared with."""
    from flows.config import load_config
    from flows.stages import PIPELINE
    from synth.engine.store import Store

    out = tmp_path_factory.mktemp("plain")
    PIPELINE.run(PIPELINE.upto("filter"), load_config(CONFIG, overrides), Store(out))
    return out


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, overrides) -> Path:
    """The pipeline in this process alone: shards on threads, no worker processes (runner.cpu_workers=1)."""
    from flows.config import load_config
    from flows.stages import PIPELINE
    from synth.engine.store import Store

    out = tmp_path_factory.mktemp("one")
    PIPELINE.run(PIPELINE.upto("report"), load_config(CONFIG, [*overrides, *SPREAD, "runner.cpu_workers=1"]), Store(out))
    return out


@pytest.fixture(scope="module")
def flow_run(harness, tmp_path_factory, overrides):
    """The synth flow (thread runner), run twice into one folder with a secret in the environment."""
    from flows.synth_flow import synth_flow

    out = tmp_path_factory.mktemp("flow")
    old = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = SECRET
    try:
        first = synth_flow(config=CONFIG, overrides=overrides, out=str(out), return_state=True)
        second = synth_flow(config=CONFIG, overrides=overrides, out=str(out), return_state=True)
    finally:
        if old is None:
            os.environ.pop("OPENAI_API_KEY")
        else:
            os.environ["OPENAI_API_KEY"] = old
    return out, first, second


# ---- 1. the flow gives the runner's tables, and a rerun reuses everything -------------------
def test_flow_matches_plain_runner_and_rerun_reuses_every_stage(flow_run, plain) -> None:
    from flows.stages import PIPELINE

    out, first, second = flow_run
    assert first.is_completed() and second.is_completed()
    one = first.result()
    assert one["teacher_calls"] > 0 and set(one["ran"]) == {s.name for s in PIPELINE}
    for table in TABLES:
        a, b = read(plain, table), read(out, table)
        assert a.num_rows > 0 and a.equals(b), table

    two = second.result()
    assert two["ran"] == [] and two["teacher_calls"] == 0
    run = json.loads((out / "reports" / "run.json").read_text())
    assert run["finished"] and run["teacher_calls"] == 0
    assert set(run["stages"]) == {s.name for s in PIPELINE}
    assert all(s["reused"] and s["teacher_calls"] == 0 for s in run["stages"].values())


# ---- 2. worker processes and Dask workers give the same tables ---------------------------------
def test_worker_processes_give_the_tables_of_one_process(tmp_path, overrides, one_process) -> None:
    """Questions' shards, the filter's batches and assemble's passes in 2 processes: the one-process tables."""
    from flows.config import load_config
    from flows.stages import PIPELINE
    from synth.engine.store import Store

    out = tmp_path / "processes"
    PIPELINE.run(PIPELINE.upto("report"), load_config(CONFIG, [*overrides, *SPREAD, "runner.cpu_workers=2"]), Store(out))
    assert json.loads((out / "reports" / "assemble.json").read_text())["workers"] == 2
    assert json.loads((one_process / "reports" / "assemble.json").read_text())["workers"] == 1
    same_tables(one_process, out)


def test_dask_runner_gives_the_same_tables(harness, tmp_path, overrides, plain, one_process) -> None:
    from flows.synth_flow import synth_flow

    out = tmp_path / "dask"
    # Small shards and passes, so questions, rollout, the filter and assemble spread over both Dask workers.
    extra = ["runner.task_runner=dask", "runner.dask_workers=2", *SPREAD]
    summary = synth_flow(config=CONFIG, overrides=[*overrides, *extra], out=str(out))
    assert summary["teacher_calls"] > 0
    for table in TABLES:
        assert read(plain, table).equals(read(out, table)), table
    # Assemble's passes ran on the cluster's 2 workers, not in this process.
    assert json.loads((out / "reports" / "assemble.json").read_text())["workers"] == 2
    same_tables(one_process, out)


def test_shards_split_the_teacher_limits_across_processes(tmp_path, monkeypatch) -> None:
    """A shard job carries how many processes run the stage's shards at once, and the process that runs it takes
    that share of the teacher's global limits."""
    from flows.config import load_config
    from flows.stages import BY_NAME, PIPELINE
    from flows.synth_flow import run_shard_job, task_runner_for
    from synth.engine import workers
    from synth.engine.stage import ShardJob, Shards
    from synth.teacher.client import per_process

    cfg = load_config(CONFIG, ["teacher.concurrency=16", "teacher.rpm=600", "runner.task_runner=dask"])
    monkeypatch.setattr(workers, "_LIMIT_SHARE", 1)
    seen = []

    def shard(ctx, i, desc):
        seen.append((per_process(ctx.cfg.teacher).concurrency, per_process(ctx.cfg.teacher).rpm))
        return {}

    probe = dataclasses.replace(BY_NAME["rollout"], entry=Shards(plan=lambda ctx: [0], run=shard,
                                                                 finish=lambda ctx, s: None))
    monkeypatch.setitem(PIPELINE.by_name, "rollout", probe)
    run_shard_job(ShardJob("rollout", cfg.model_dump(mode="json"), str(tmp_path), "k", 0, 0, share=3))
    run_shard_job(ShardJob("rollout", cfg.model_dump(mode="json"), str(tmp_path), "k", 1, 1))
    assert seen == [(5, 200), (16, 600)]
    assert type(task_runner_for(cfg)).__name__ == "DaskTaskRunner"
    threads = task_runner_for(load_config(CONFIG, ["runner.shard_workers=3"]))
    assert type(threads).__name__ == "ThreadPoolTaskRunner" and threads._max_workers == 3


# ---- 3. preflight: missing inputs fail first, and clearly ----------------------------------
def test_preflight_names_the_missing_settings(tmp_path) -> None:
    from flows.preflight import check

    env = {"PATH": "/bin"}
    problems = check(CONFIG, ["corpus.source=null"], tmp_path, env=env, network=False)
    assert len(problems) == 1 and problems[0].startswith("corpus.source is not set")
    assert "--param overrides='[\"corpus.source=" in problems[0] and "configs/demo.yaml" in problems[0]
    assert "--set corpus.source=" in check(CONFIG, ["corpus.source=null"], tmp_path, via="cli", env=env,
                                           network=False)[0]
    openai = ["teacher.backend=openai", "teacher.model=qwen3", "teacher.api_key_env=HOPFORGE_NO_SUCH_KEY"]
    [p] = check(CONFIG, openai, tmp_path, env=env, network=False)
    assert p.startswith("HOPFORGE_NO_SUCH_KEY is not set") and "hopforge serve" in p
    assert check(CONFIG, openai, tmp_path, env={"HOPFORGE_NO_SUCH_KEY": "x"}, network=False) == []
    [p] = check(CONFIG, ["teacher.backend=openai"], tmp_path, env={"OPENAI_API_KEY": "x"}, network=False)
    assert "teacher.model" in p
    [p] = check(CONFIG, [f"corpus.source={tmp_path / 'nope.json'}"], tmp_path, env=env, network=False)
    assert "no such file" in p
    [p] = check(CONFIG, ["corpus.source=hf:facebook/kilt_wikipedia"], tmp_path, env={"HF_HUB_OFFLINE": "1"})
    assert "cannot be reached" in p and "corpus.source=" in p
    assert check(CONFIG, ["walk.nope=1"], tmp_path)[0].startswith("config ")


def test_synth_flow_fails_before_any_stage(harness, tmp_path) -> None:
    from flows.preflight import PreflightError
    from flows.synth_flow import synth_flow

    out = tmp_path / "never"
    bad = ["corpus.source=null", "teacher.backend=openai", "teacher.model=qwen3",
           "teacher.api_key_env=HOPFORGE_NO_SUCH_KEY"]
    with pytest.raises(PreflightError) as e:
        synth_flow(config=CONFIG, overrides=bad, out=str(out))
    assert "corpus.source is not set" in str(e.value) and "HOPFORGE_NO_SUCH_KEY is not set" in str(e.value)
    assert not out.exists()  # no stage started: no store, no report


def test_check_command_exits_2_with_the_problems(tmp_path) -> None:
    from typer.testing import CliRunner

    import flows.cli_serve  # noqa: F401  (registers `check` and `serve`)
    from flows.cli import app

    r = CliRunner().invoke(app, ["check", "--config", CONFIG, "--set", "corpus.source=null", "--out", str(tmp_path)])
    text = " ".join(r.output.split())  # rich wraps long lines
    assert r.exit_code == 2 and "corpus.source is not set" in text and "--set corpus.source=" in text


# ---- 4. artifacts: funnel, stages, cost, report; no secret -------------------------------
def test_artifacts_and_logs_reach_the_server(flow_run) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (FlowRunFilter, FlowRunFilterId, FlowRunFilterParentFlowRunId, LogFilter,
                                                LogFilterFlowRunId)

    from flows.stages import PIPELINE

    out, first, _ = flow_run
    run_id = first.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run_id])))
        child = client.read_flow_runs(flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(
            any_=[run_id])))
        ids = [run_id, *(r.id for r in child)]
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=ids)))
    by_key = {a.key: a for a in arts}
    assert set(by_key) >= {"synth-funnel", "synth-stages", "synth-cost", "synth-report"}
    stages = json.loads(by_key["synth-stages"].data)
    assert [r["stage"] for r in stages] == [s.name for s in PIPELINE]
    assert all(r["status"] == "ran" for r in stages)
    assert {"input", "output", "dropped", "teacher calls", "seconds"} <= set(stages[0])
    funnel = json.loads(by_key["synth-funnel"].data)  # questions -> traces -> kept rows, no graph stage
    assert funnel[0]["step"] == "drafted" and funnel[-1]["step"] == "kept: best of n (SFT rows)"
    assert funnel[-1]["count"] == json.loads((out / "reports" / "filter.json").read_text())["output"]
    assert not any(r["unit"] in ("pages", "links", "walks") for r in funnel)
    from flows.artifacts import PER_KEPT

    cost = {r["stage"]: r for r in json.loads(by_key["synth-cost"].data) if r["status"] != PER_KEPT}
    assert cost["rollout"]["requests"] > 0 and cost["total"]["requests"] >= cost["rollout"]["requests"]
    report = by_key["synth-report"].data
    assert f"`{out / 'report' / 'index.md'}`" in report and "file://" not in report
    assert report.count("](data:image/png;base64,") >= 5 and "*Funnel, top to bottom" in report
    assert "api_key_env: OPENAI_API_KEY" in report
    for a in arts:
        assert SECRET not in f"{a.data} {a.description}"
    assert any(lg.name == "hopforge" and "running (key" in lg.message for lg in logs), "hopforge lines reach Prefect"


# ---- 5. deployments: prefect.yaml, hopforge serve ------------------------------------------
def test_prefect_yaml_declares_the_six_deployments(monkeypatch) -> None:
    import inspect

    from prefect.flows import load_flow_from_entrypoint

    from flows.serve import DEPLOYMENTS

    raw = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    try:  # Prefect's own model of the file, where this Prefect has one
        from prefect.cli.deploy._models import PrefectYamlModel

        deployments = [d.model_dump(exclude_unset=True) for d in PrefectYamlModel.model_validate(raw).deployments]
    except ImportError:  # pragma: no cover
        deployments = raw["deployments"]
    monkeypatch.chdir(ROOT)  # entrypoints are relative to the repo root
    found = {}
    for d in deployments:
        flow = load_flow_from_entrypoint(d["entrypoint"])
        accepted = set(inspect.signature(flow.fn).parameters)
        assert set(d["parameters"]) <= accepted, d["name"]
        assert d["work_pool"]["name"] == "hopforge"
        found[f"{flow.name}/{d['name']}"] = d
    assert set(found) == {"synth/full", "synth/demo", "synth/incremental", "publish/hub", "sft/warm-start", "synth/eval"}
    # hopforge serve serves the same six, read from the same file.
    assert [spec.full_name for spec in DEPLOYMENTS] == list(found)
    for spec in DEPLOYMENTS:
        d = found[spec.full_name]
        assert (d["entrypoint"], d["parameters"]) == (spec.entrypoint, spec.parameters), spec.full_name
        assert " ".join(d["description"].split()) == spec.description


def test_serve_builds_runner_deployments() -> None:
    from flows.serve import DEPLOYMENTS, runner_deployments

    deps = runner_deployments()
    assert [(d.flow_name, d.name) for d in deps] == [(s.flow_name, s.name) for s in DEPLOYMENTS]
    assert deps[0].entrypoint == "flows.synth_flow.synth_flow"


# ---- publish and sft flows: their logic through .fn() ----------------------------------------
def test_publish_flow_calls_publish(monkeypatch, flow_run) -> None:
    import types

    from flows.publish_flow import check_target, publish_flow
    from synth.engine.config import ConfigError

    out = flow_run[0]
    calls = []
    fake = types.ModuleType("synth.publish.publisher")
    fake.publish = lambda out_dir, target, cfg, overwrite: calls.append((out_dir, target, cfg.seed, overwrite)) \
        or {"ok": True}
    monkeypatch.setitem(sys.modules, "synth.publish.publisher", fake)
    assert publish_flow.fn(to="local:/tmp/hopforge-pub", out=str(out), config=CONFIG) == {"ok": True}
    assert publish_flow.fn(to="local:/tmp/hopforge-pub", out=str(out), config=CONFIG, overwrite=True) == {"ok": True}
    assert calls == [(str(out), "local:/tmp/hopforge-pub", 0, False), (str(out), "local:/tmp/hopforge-pub", 0, True)]
    assert check_target("hub:org/name") == ("hub", "org/name")
    for bad in ("org/name", "hub:name", "s3:x"):
        with pytest.raises(ConfigError):
            check_target(bad)
    with pytest.raises(ConfigError, match="no manifest.json"):
        publish_flow.fn(to="local:/tmp/x", out="/nonexistent/out", config=CONFIG)


def test_publish_flow_publishes_locally(flow_run, tmp_path) -> None:
    from flows.publish_flow import publish_flow

    result = publish_flow.fn(to=f"local:{tmp_path / 'pub'}", out=str(flow_run[0]), config=CONFIG)
    assert result["rows"]["sft"] == read(flow_run[0], "sft").num_rows and (tmp_path / "pub").is_dir()


def test_sft_flow_command_and_failure(tmp_path) -> None:
    import logging

    from flows.sft_flow import SFTFailed, check_inputs, stream
    from sft.stage import training_command

    cmd = training_command("configs/sft/tiny.yaml", "data/demo", ["max_steps=2"])
    assert cmd[1:] == ["-m", "sft.train", "--config", "configs/sft/tiny.yaml", "--data_dir", "data/demo",
                       "--output_dir", "data/demo/runs/tiny", "--max_steps", "2"]
    acc = training_command("c.yaml", "d", ["output_dir=/ckpt"], num_processes=4, accelerate_config="fsdp.yaml")
    assert acc[1:3] == ["-m", "accelerate.commands.launch"] and acc[acc.index("--num_processes") + 1] == "4"
    assert acc[acc.index("--config_file") + 1] == "fsdp.yaml" and acc[acc.index("--output_dir") + 1] == "/ckpt"
    problems = check_inputs("nope.yaml", str(tmp_path), "nope-acc.yaml", 1)
    assert len(problems) == 3 and "sft table" in problems[2]
    code, tail = stream([sys.executable, "-c", "print('step 1'); print('boom'); raise SystemExit(3)"],
                        logging.getLogger("test"))
    assert code == 3 and tail == ["step 1", "boom"]
    assert "exited with code 3" in str(SFTFailed(code, tail, ["x"])) and "boom" in str(SFTFailed(code, tail, ["x"]))
