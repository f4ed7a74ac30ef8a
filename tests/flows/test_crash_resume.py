"""Crash-resume: SIGKILL a real `hopforge run` at several points, rerun, and compare with an
uninterrupted run: same rows, no duplicates, no partial shards, no completed teacher call repeated."""

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

HOPFORGE = [sys.executable, "-m", "flows.cli"]
ROOT = Path(__file__).resolve().parents[2]
# Routed walks (questions.route): most 3-hop walks then get a question, enough rollout shards for every kill.
SMALL = ["--set", "walk.num_walks=60", "--set", "walk.hops=3", "--set", "questions.route=true", "--set", "expand.num_subgraphs=4",
         "--set", "rollout.n=2", "--set", "questions.shard_size=4", "--set", "rollout.shard_size=2",
         "--set", "runner.shard_workers=2", "--until", "report"]
TABLES = ["corpus/pages", "corpus/links", "walks", "subgraphs", "questions", "rejects/questions", "traces", "sft",
          "rl_pool", "rejects/filter", "filter/verdicts"]


def _run(out: Path, crash_at: str | None = None) -> int:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("HOPFORGE_CRASH_AT", None)
    if crash_at:
        env["HOPFORGE_CRASH_AT"] = crash_at
    cmd = HOPFORGE + ["run", "--config", str(ROOT / "configs/demo.yaml"), "--out", str(out)] + SMALL
    p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert p.returncode in (0, -9), p.stderr[-3000:]
    return p.returncode


def _tables(out: Path) -> dict:
    return {t: ds.dataset(out / t).to_table() for t in TABLES}


def _ledger_keys(out: Path) -> list[str]:
    path = out / "cache" / "ledger.jsonl"
    return [json.loads(line)["key"] for line in path.read_text().splitlines()] if path.exists() else []


def _cache_keys(out: Path) -> set[str]:
    import sqlite3

    with sqlite3.connect(out / "cache" / "teacher.sqlite") as db:
        return {k for (k,) in db.execute("SELECT key FROM calls")}


def _check_clean(out: Path) -> None:
    assert not list(out.glob(".stages/*/*.partial")), "a partial stage folder was left behind"
    assert not [p for p in out.rglob("*.tmp")], "a temporary file was left behind"
    manifest = json.loads((out / "manifest.json").read_text())
    for stage, entry in manifest["stages"].items():
        assert (out / ".stages" / stage / entry["key"]).is_dir()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    assert _run(out) == 0
    return out, _tables(out)


def _assert_same(out: Path, reference) -> None:
    ref_dir, ref = reference
    got = _tables(out)
    for t in TABLES:
        assert got[t].equals(ref[t]), f"table {t} differs from the uninterrupted run"
    for t in ("questions", "traces", "sft"):
        ids = got[t].column({"questions": "question_id", "traces": "trace_id", "sft": "trace_id"}[t]).to_pylist()
        assert len(ids) == len(set(ids)), f"duplicate rows in {t}"
    keys = _ledger_keys(out)
    repeated = [k for k, n in collections.Counter(keys).items() if n > 1]
    assert not repeated, f"{len(repeated)} completed teacher calls were sent again"
    # The same calls were made as in the uninterrupted run, no more.  (A SIGKILL between a call's
    # cache entry and its ledger line can lose the line, never the call, so the cache is compared.)
    assert set(keys) <= set(_ledger_keys(ref_dir))
    assert _cache_keys(out) == _cache_keys(ref_dir)
    _check_clean(out)


@pytest.mark.slow
def test_kill_at_named_points_then_resume(tmp_path, reference):
    out = tmp_path / "run"
    points = ["shard:questions:1", "commit:questions", "shard:rollout:3", "shard:rollout:6", "commit:rollout",
              "commit:filter"]
    for point in points:
        assert _run(out, crash_at=point) == -9, f"the run did not reach {point}"
    assert _run(out) == 0
    run = json.loads((out / "reports" / "run.json").read_text())
    assert run["finished"] and run["teacher_calls"] == 0  # everything paid was already in the cache
    _assert_same(out, reference)


@pytest.mark.slow
def test_kill_mid_shard_then_resume(tmp_path, reference):
    # Killed right after the N-th newly paid call of each attempt: inside question and rollout
    # shards, between a call's cache entry and the next.  Progress points, not wall-clock delays,
    # so the kills land in the same places on a loaded machine.
    out = tmp_path / "run"
    kills = 0
    for n in (3, 40, 150, 400, 1000):
        if _run(out, crash_at=f"ledger:{n}") != -9:
            break
        kills += 1
    assert kills >= 3, "the run finished before the kills it was meant to survive"
    assert _run(out) == 0
    _assert_same(out, reference)
