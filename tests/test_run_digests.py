"""scripts/run_digests.py: one row per output of every run folder, and whether the runs hold the same data."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("run_digests", ROOT / "scripts" / "run_digests.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A demo run up to the walks, and a copy of it (in a folder of another name)."""
    from helpers.demostore import build_demo_store

    first, _ = build_demo_store(tmp_path_factory.mktemp("one") / "run1", "walk.hops=3", "walk.num_walks=240",
                                "expand.num_subgraphs=2")
    second = tmp_path_factory.mktemp("two") / "run2"
    shutil.copytree(first.root, second, symlinks=True)
    return first.root, second


def test_runs_that_hold_the_same_data_agree(script, two_runs, capsys):
    assert script.main([str(p) for p in two_runs] + ["--until", "walks"]) == 0
    out = capsys.readouterr().out
    assert "| walks | walks |" in out and "every run holds the same data" in out
    assert all(line.endswith("| yes |") for line in out.splitlines() if line.startswith("| ingest"))


def test_a_changed_table_is_the_row_that_differs(script, two_runs, tmp_path, capsys):
    changed = tmp_path / "run3"
    shutil.copytree(two_runs[1], changed, symlinks=True)
    part = sorted((changed / "walks").glob("*.parquet"))[0]
    pq.write_table(pq.read_table(part).slice(1), part)
    assert script.main([str(two_runs[0]), str(changed), "--until", "walks"]) == 1
    out = capsys.readouterr().out
    assert [line.split("|")[2].strip() for line in out.splitlines() if line.endswith("| NO |")] == ["walks"]
    assert script.main([str(tmp_path / "nothing")]) == 2
