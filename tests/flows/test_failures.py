"""Failure-safe runs, through the real command line: every bad input or broken environment ends in
one line that names the file, option or setting, a failed teacher is never committed as a finished
stage, and one output folder takes one run at a time."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.cli import hopforge_command
from synth.engine.store import RunLock

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--set", "questions.route=false", "--set", "walk.num_walks=80", "--set", "walk.hops=3", "--set", "expand.num_subgraphs=0",
         "--set", "rollout.n=2", "--set", "questions.shard_size=4", "--set", "rollout.shard_size=2",
         "--set", "runner.shard_workers=2"]


def hopforge(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    e = dict(os.environ, COLUMNS="400", NO_COLOR="1", TERM="dumb", **(env or {}))
    return subprocess.run([*hopforge_command(), *args], cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)


def one_line_error(r: subprocess.CompletedProcess, code: int = 2) -> str:
    """The error line of a failed command (asserting it failed with ``code``, no traceback)."""
    assert r.returncode == code, r.stdout[-2000:]
    assert "Traceback" not in r.stdout and "╭" not in r.stdout, r.stdout[-2000:]
    errors = [line for line in r.stdout.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, r.stdout[-2000:]
    return errors[0]


def preflight_problems(r: subprocess.CompletedProcess) -> str:
    """What a preflight that stopped a command said (asserting exit 2, no traceback)."""
    line = one_line_error(r, code=2)
    assert line.startswith("error: the run cannot start"), line
    return r.stdout.split(line, 1)[1]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("source")
    r = hopforge("corpus", "demo", "--out", str(d / "kilt.jsonl"))
    assert r.returncode == 0, r.stdout
    return d / "kilt.jsonl"


@pytest.fixture(scope="module")
def walked(tmp_path_factory, source) -> Path:
    """A folder with ingest, graph, walks and index done (small), to copy per test."""
    out = tmp_path_factory.mktemp("walked") / "run"
    r = hopforge("run", "--out", str(out), "--set", f"corpus.source={source}", *SMALL, "--until", "index")
    assert r.returncode == 0, r.stdout[-3000:]
    return out


def _copy(walked: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(walked, dst, symlinks=True)
    return dst


# ---- bad sources ------------------------------------------------------------------------------
def test_truncated_and_corrupt_sources(tmp_path, source):
    data = source.read_bytes()
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(data)[:4000])
    import bz2

    (tmp_path / "cut.jsonl.bz2").write_bytes(bz2.compress(data)[: len(bz2.compress(data)) // 2])
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not parquet")
    for name in ("cut.jsonl.gz", "cut.jsonl.bz2", "bad.parquet"):
        path = tmp_path / name
        line = one_line_error(hopforge("ingest", "--kilt", str(path), "--out", str(tmp_path / f"out-{name}")))
        assert str(path) in line and "truncated or corrupt" in line
        assert not (tmp_path / f"out-{name}" / "corpus").exists()  # nothing committed
    # The preflight reads the first compressed block and the Parquet footers before any stage runs.
    line = one_line_error(hopforge("check", "--set", f"corpus.source={tmp_path / 'bad.parquet'}"))
    assert "cannot start" in line
    tiny = tmp_path / "tiny.jsonl.gz"
    tiny.write_bytes(gzip.compress(data)[:1000])
    r = hopforge("check", "--set", f"corpus.source={tiny}")
    assert r.returncode == 2 and f"{tiny} is truncated or corrupt" in r.stdout


def test_kilt_paths_are_taken_verbatim(tmp_path, source):
    for name in ("2019", "yes", "a: b.jsonl", "x #y.jsonl"):
        weird = tmp_path / name
        weird.write_bytes(source.read_bytes()[:200_000].rsplit(b"\n", 1)[0] + b"\n")
        r = hopforge("ingest", "--kilt", str(weird), "--out", str(tmp_path / "out"), "--force")
        assert r.returncode == 0, r.stdout[-1500:]
        assert json.loads((tmp_path / "out" / "reports" / "ingest.json").read_text())["output"] > 0


# ---- bad options and folders ------------------------------------------------------------------
def test_out_is_a_file_or_a_dangling_link(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    assert "is a file, not a folder" in one_line_error(hopforge("graph", "--out", str(f)))
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    assert "which does not exist" in one_line_error(hopforge("graph", "--out", str(link)))


def test_port_out_of_range():
    assert "--port 99999" in one_line_error(hopforge("tools", "serve", "--port", "99999"))


def test_config_values_are_checked_and_errors_stay_short():
    assert "walk.hops" in one_line_error(hopforge("walk", "--set", "walk.hops=true"))
    assert "rollout.n" in one_line_error(hopforge("rollout", "--set", "rollout.n=true"))
    bomb = "walk.exclude_patterns=[&a [x,x,x,x,x,x,x,x,x], &b [*a,*a,*a,*a,*a,*a,*a,*a,*a], " \
           "&c [*b,*b,*b,*b,*b,*b,*b,*b,*b], &d [*c,*c,*c,*c,*c,*c,*c,*c,*c], *d]"
    r = hopforge("check", "--set", bomb)
    assert r.returncode == 2 and len(r.stdout) < 1000 and "aliases are not allowed" in r.stdout
    r = hopforge("check", "--set", "walk.exclude_patterns=[" + ",".join(["y" * 60] * 400) + ", [1]]")
    assert r.returncode == 2 and len(r.stdout) < 1000


def test_a_walk_count_past_this_machines_memory_is_refused_before_anything_runs(tmp_path):
    """walk.num_walks=10**13 passed `check` and died in `run` with a MemoryError traceback ("Unable to allocate
    146. TiB"): `check`, `run` and the stage's own command now refuse it in one problem line that says the most
    this machine holds, and nothing is written; a count that fits is not a problem."""
    from flows.config import load_config
    from flows.preflight import memory_problems
    from synth.engine.config import machine_memory
    from synth.graph.config import walk_slot_bytes

    most = machine_memory() // walk_slot_bytes(8)  # the demo config walks 8 hops
    out = tmp_path / "out"
    for command in ("check", "run", "walk"):
        said = preflight_problems(hopforge(command, "--set", "walk.num_walks=10000000000000", "--out", str(out)))
        lines = [line for line in said.splitlines() if line.strip()]
        assert len(lines) == 1 and "walk.num_walks=10,000,000,000,000 needs " in lines[0], said
        assert f"it holds at most {most:,} walk slots; pass --set walk.num_walks={most} " in lines[0]
        assert not out.exists()
    assert memory_problems(load_config(None, [f"walk.num_walks={most}", "walk.hops=8"]), None, "cli") == []
    assert memory_problems(load_config(None, [f"walk.num_walks={most + 1}", "walk.hops=8"]), None, "cli")
    assert memory_problems(load_config(None, [f"walk.num_walks={most + 1}", "walk.hops=8"]), None, "cli",
                           stages=["ingest", "graph"]) == []  # a run that walks nothing holds no slot


def test_corrupted_call_cache(tmp_path, walked):
    out = _copy(walked, tmp_path)
    (out / "cache").mkdir(exist_ok=True)
    (out / "cache" / "teacher.sqlite").write_bytes(b"this is not a database at all" * 100)
    line = one_line_error(hopforge("questions", "--out", str(out), *SMALL))
    assert "teacher.sqlite" in line and "not a readable SQLite database" in line


def test_sft_on_an_empty_table(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from helpers.tinytok import save_tokenizer
    from synth.engine.records import SFT_SCHEMA

    save_tokenizer(tmp_path / "tokenizer")
    (tmp_path / "sft").mkdir()
    pq.write_table(pa.Table.from_pylist([], schema=SFT_SCHEMA), tmp_path / "sft" / "part-00000.parquet")
    line = one_line_error(hopforge("sft", "--out", str(tmp_path)))
    assert "has no rows" in line and "reports/filter.json" in line


def test_warm_start_without_a_gpu_names_the_cause(tmp_path):
    import torch

    from flows.sft_flow import check_inputs

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    (tmp_path / "sft").mkdir()
    problems = check_inputs(str(ROOT / "configs/sft/qwen2.5-7b-lora.yaml"), str(tmp_path), None, 8)
    assert any("bf16" in p for p in problems) and any("no GPU" in p for p in problems)
    assert check_inputs(str(ROOT / "configs/sft/tiny.yaml"), str(tmp_path), None, 1) == []


# ---- the teacher's endpoint ---------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dead_endpoint_is_not_cached_as_success(tmp_path, walked):
    from helpers.openai_server import Status, serve

    out = _copy(walked, tmp_path)
    env = {"OPENAI_API_KEY": "sk-wrong"}
    dead = ["--set", "teacher.backend=openai", "--set", "teacher.model=m", *SMALL]
    # The single-stage command runs the preflight `hopforge run` runs: it fails before any stage starts.
    r = hopforge("questions", "--out", str(out), "--set", f"teacher.base_url=http://127.0.0.1:{_free_port()}/v1",
                 *dead, env=env)
    line = preflight_problems(r)
    assert "nothing answers at" in line and "teacher.base_url" in line
    assert "questions" not in json.loads((out / "manifest.json").read_text())["stages"]
    with serve(handler=lambda req: Status(401, message="Incorrect API key")) as srv:
        url = ["--set", f"teacher.base_url={srv.base_url}"]
        line = preflight_problems(hopforge("questions", "--out", str(out), *url, *dead, env=env))
        assert "rejected the API key" in line and "$OPENAI_API_KEY" in line and "sk-wrong" not in line
        assert "questions" not in json.loads((out / "manifest.json").read_text())["stages"]
        assert srv.count < 20
        # `hopforge check` asks the endpoint too.
        r = hopforge("check", "--out", str(out), *url, *dead, env=env)
        assert r.returncode == 2 and "rejected the API key (401)" in r.stdout
    r = hopforge("check", "--out", str(out), "--set", f"teacher.base_url=http://127.0.0.1:{_free_port()}/v1", *dead,
                 env=env)
    assert r.returncode == 2 and "nothing answers at" in r.stdout
    # Fixed (here: back to the offline teacher): the stage runs now, it is not "unchanged, reused".
    r = hopforge("questions", "--out", str(out), *SMALL)
    assert r.returncode == 0 and "reused" not in r.stdout.split("questions: running")[0][-200:]
    assert json.loads((out / "reports" / "questions.json").read_text())["output"] > 0


def test_a_single_stage_command_probes_the_tool_format_before_it_pays(tmp_path, walked):
    """A server that writes its tool calls as text: `hopforge rollout` with `native` stops in its preflight
    naming the format, instead of committing traces without a tool call; the default (`auto`) reads them."""
    from helpers.openai_server import serve, text_tools_handler

    out = _copy(walked, tmp_path)
    assert hopforge("questions", "--out", str(out), *SMALL).returncode == 0
    with serve(handler=text_tools_handler("hermes", renders_tools=True)) as srv:
        args = ["--out", str(out), "--set", "teacher.backend=openai", "--set", "teacher.model=m",
                "--set", f"teacher.base_url={srv.base_url}", *SMALL]
        line = preflight_problems(hopforge("rollout", *args, "--set", "teacher.tool_protocol=native",
                                           env={"OPENAI_API_KEY": "x"}))
        assert "returns tool calls as text (hermes format" in line and "teacher.tool_protocol" in line
        assert "rollout" not in json.loads((out / "manifest.json").read_text())["stages"]
        r = hopforge("rollout", *args, env={"OPENAI_API_KEY": "x"})
        assert r.returncode == 0, r.stdout[-2000:]
    import pyarrow.dataset as ds

    traces = ds.dataset(out / "traces").to_table(columns=["n_tool_calls"]).to_pylist()
    assert traces and all(t["n_tool_calls"] >= 1 for t in traces)


def test_a_stage_whose_every_item_failed_is_not_committed(tmp_path, walked):
    from helpers.openai_server import serve

    out = _copy(walked, tmp_path)
    with serve(handler=lambda req: "I would rather not write JSON today.") as srv:
        args = ["--out", str(out), "--set", "teacher.backend=openai", "--set", "teacher.model=m",
                "--set", f"teacher.base_url={srv.base_url}", *SMALL]
        line = one_line_error(hopforge("questions", *args, env={"OPENAI_API_KEY": "x"}), code=1)
        assert "every one of its" in line and "prose" in line and "runner.allow_empty" in line
        assert "questions" not in json.loads((out / "manifest.json").read_text())["stages"]
        r = hopforge("questions", *args, "--set", "runner.allow_empty=true", env={"OPENAI_API_KEY": "x"})
        assert r.returncode == 0, r.stdout[-1500:]
    assert json.loads((out / "reports" / "questions.json").read_text())["output"] == 0


def test_a_stage_whose_items_were_dropped_or_failed_is_not_committed(tmp_path, walked):
    """Most items dropped (prose) and one failed (a 400 no retry cures): under runner.max_failed_fraction or
    not, an empty `questions` is never committed as a finished stage."""
    from helpers.openai_server import Status, serve

    out = _copy(walked, tmp_path)
    failing: list[str] = []

    def handler(req):
        text = json.dumps(req.get("messages") or "")
        if "hop" in text and "Reply with the JSON object" not in text and failing in ([], [text]):  # a question
            failing[:] = [text]
            return Status(400, message="This model's maximum context length is 8192 tokens")
        return "I would rather not write JSON today."

    with serve(handler=handler) as srv:
        args = ["--out", str(out), "--set", "teacher.backend=openai", "--set", "teacher.model=m",
                "--set", f"teacher.base_url={srv.base_url}", *SMALL]
        line = one_line_error(hopforge("questions", *args, env={"OPENAI_API_KEY": "x"}), code=1)
    assert "stage questions: none of its" in line and "were dropped (prose" in line, line
    assert "and the teacher call of 1 failed (http_400 1" in line and "runner.allow_empty=true" in line, line
    assert "questions" not in json.loads((out / "manifest.json").read_text())["stages"]


def test_an_empty_stage_stops_the_run_where_the_data_ran_out(tmp_path):
    """A 3-page corpus has no 8-hop path: `walks` makes nothing and the run stops there, exit 1, instead of
    every later stage "running" on 0 rows and exiting 0."""
    source = tmp_path / "three.jsonl"
    pages = [("1", "Alpha", "Alpha is a town near Beta.", "Beta", "2"),
             ("2", "Beta", "Beta is a river flowing to Gamma.", "Gamma", "3"),
             ("3", "Gamma", "Gamma is a sea east of Alpha.", "Alpha", "1")]
    source.write_text("".join(json.dumps({
        "_id": pid, "wikipedia_id": pid, "wikipedia_title": title, "text": [title + "\n", text + "\n"],
        "anchors": [{"text": to, "href": to, "paragraph_id": 1, "start": text.index(to),
                     "end": text.index(to) + len(to), "wikipedia_title": to, "wikipedia_id": to_id}]}) + "\n"
        for pid, title, text, to, to_id in pages))
    out = tmp_path / "run"
    args = ["--out", str(out), "--set", f"corpus.source={source}", "--set", "walk.hops=8"]
    line = one_line_error(hopforge("run", *args), code=1)
    assert line.startswith("error: stage walks: every one of its") and "dead_end" in line, line
    assert "nothing is committed" in line and "runner.allow_empty=true" in line
    stages = json.loads((out / "manifest.json").read_text())["stages"]
    assert {"ingest", "graph"} <= set(stages) and "walks" not in stages and not (out / "walks").exists()
    r = hopforge("run", *args, "--until", "walks", "--set", "runner.allow_empty=true")
    assert r.returncode == 0, r.stdout[-2000:]
    assert json.loads((out / "reports" / "walks.json").read_text())["output"] == 0


# ---- one run per folder -----------------------------------------------------------------------
def test_second_run_on_one_folder_stops_at_once(tmp_path, walked):
    out = _copy(walked, tmp_path)
    lock = RunLock(out)
    lock.acquire("test")
    try:
        line = one_line_error(hopforge("graph", "--out", str(out)))
        assert f"in use by pid {os.getpid()}" in line and str(out) in line
    finally:
        lock.release()
    assert hopforge("graph", "--out", str(out)).returncode == 0


def test_a_killed_runs_lock_is_taken_over(tmp_path, walked):
    out = _copy(walked, tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from synth.engine.store import RunLock\n"
                               f"lock = RunLock({str(out)!r})\nlock.acquire('holder')\nprint('held', flush=True)\ntime.sleep(600)"],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    assert hopforge("graph", "--out", str(out)).returncode == 2
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert hopforge("graph", "--out", str(out)).returncode == 0


# ---- stopping ---------------------------------------------------------------------------------
def _wait_for(predicate, what: str, limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_sigint_stops_a_run_and_leaves_it_resumable(tmp_path, walked, sig, code):
    """Ctrl-C, and SIGTERM (which exited 143 with no message): the same resume message, each its exit code."""
    out = _copy(walked, tmp_path)
    ledger = out / "cache" / "ledger.jsonl"
    env = dict(os.environ, COLUMNS="200")
    # policy fixed and n = 6: every question's 6 rollouts, calls enough to interrupt the run in the middle of
    # them (SMALL's 12 walks give 2 or 3 questions whose every clue no search of the agents' tool enters)
    fixed = ["--set", "rollout.policy=fixed", "--set", "rollout.n=6"]
    p = subprocess.Popen([*hopforge_command(), "run", "--out", str(out), *SMALL, *fixed, "--until", "rollout",
                          "--set", "teacher.concurrency=2"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # as a background job
    # Interrupt once the rollout has paid for some calls (a progress point, not a delay).
    _wait_for(lambda: ledger.exists() and len(ledger.read_text().splitlines()) > 60 or p.poll() is not None,
              "rollout calls")
    assert p.poll() is None, "the run finished before it could be interrupted"
    p.send_signal(sig)
    text, _ = p.communicate(timeout=120)
    assert p.returncode == code and "interrupted" in text and "Traceback" not in text
    assert "finished stages and shards are kept; run the same command again to resume" in text
    assert json.loads((out / "reports" / "run.json").read_text())["finished"] is False
    paid = len(ledger.read_text().splitlines())
    r = hopforge("run", "--out", str(out), *SMALL, *fixed, "--until", "rollout")
    assert r.returncode == 0, r.stdout[-2000:]
    keys = [json.loads(x)["key"] for x in ledger.read_text().splitlines()]
    assert len(keys) == len(set(keys)) and len(keys) >= paid  # nothing paid twice


def test_sigint_stops_a_long_running_server(tmp_path, walked):
    port = _free_port()
    p = subprocess.Popen([*hopforge_command(), "tools", "serve", "--out", str(walked), "--port", str(port)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))

    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return p.poll() is not None

    _wait_for(listening, "the server listening", limit=120)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=60)
    assert p.returncode is not None and p.returncode != -signal.SIGKILL
