"""``hopforge verify DIR``: a run re-derives equal stage by stage, a hand-edited table is named with its stage, a
folder that is no run (or that a run holds) is one line, and DIR is never written."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.cli import hopforge_command

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "configs" / "demo.yaml")
SMALL = ["questions.route=false", "walk.num_walks=60", "walk.hops=3", "expand.num_subgraphs=2", "rollout.n=2"]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, list[str]]:
    """A small demo run up to the report (the student's stages train a model: the demo's own verify covers them),
    and its overrides."""
    from flows.config import load_config
    from flows.stages import PIPELINE
    from synth.corpus.demo import build_demo_corpus
    from synth.engine.store import Store

    src = tmp_path_factory.mktemp("source") / "kilt_demo.jsonl"
    build_demo_corpus(src)
    overrides = [*SMALL, f"corpus.source={src}"]
    out = tmp_path_factory.mktemp("made") / "run"
    PIPELINE.run(PIPELINE.upto("report"), load_config(CONFIG, overrides), Store(out))
    return out, overrides


def verify(folder: Path, overrides: list[str], *extra: str, seed: str = "11") -> subprocess.CompletedProcess:
    cmd = [*hopforge_command(), "verify", str(folder), "--config", CONFIG, *extra]
    for s in overrides:
        cmd += ["--set", s]
    env = dict(os.environ, PYTHONHASHSEED=seed, COLUMNS="300")
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)


def table_rows(text: str) -> dict[tuple[str, str], list[str]]:
    """The summary table's rows by (stage, output): [run, re-derived, verdict, detail]."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 6 and cells[0] != "stage":
            out[(cells[0], cells[1])] = cells[2:]
    return out


def snapshot(folder: Path) -> dict[str, tuple]:
    """Everything in a folder, hidden files and links included: kind, size, mtime and content (or target)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            if p.is_symlink():
                out[str(p.relative_to(folder))] = ("link", os.readlink(p))
            elif p.is_file():
                out[str(p.relative_to(folder))] = ("file", st.st_size, st.st_mtime_ns,
                                                   hashlib.sha256(p.read_bytes()).hexdigest())
            else:
                out[str(p.relative_to(folder))] = ("dir", st.st_mtime_ns)
    return out


def one_error_line(p: subprocess.CompletedProcess) -> str:
    lines = [line for line in (p.stdout + p.stderr).splitlines() if line.strip()]
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), p.stdout + p.stderr
    return lines[0]


def test_a_run_re_derives_equal_stage_by_stage_and_is_not_written(made):
    out, overrides = made
    before = snapshot(out)
    p = verify(out, overrides)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = table_rows(p.stderr)
    from flows.stages import PIPELINE

    assert {stage for stage, _ in rows} == {s.name for s in PIPELINE.upto("report")}  # every stage the run made
    for what in [("filter", "sft"), ("questions", "questions"), ("rollout", "traces"), ("index", "index"),
                 ("report", "report"), ("filter", "(report)")]:
        assert rows[what][2] == "equal" and rows[what][0] == rows[what][1], what
    assert all(r[2] == "equal" for r in rows.values())
    assert "re-derives equal" in p.stderr
    assert snapshot(out) == before


def test_a_hand_edited_sft_is_named_with_its_stage(made, tmp_path):
    out, overrides = made
    edited = tmp_path / "run"
    shutil.copytree(out, edited, symlinks=True)
    part = sorted((edited / "sft").glob("*.parquet"))[0]
    table = pq.read_table(part)
    rows = table.to_pylist()
    rows[0]["messages"][-1]["content"] += " (edited)"
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), part)
    p = verify(edited, overrides, "--until", "filter", seed="5")
    assert p.returncode == 1, p.stdout + p.stderr
    found = table_rows(p.stderr)
    assert found[("filter", "sft")][2] == "DIFFERS" and "rows" in found[("filter", "sft")][0]
    assert [k for k, r in found.items() if r[2] != "equal"] == [("filter", "sft")]
    assert "does not re-derive: filter/sft" in p.stderr


def test_a_truncated_table_is_marked_damaged_and_every_other_stage_is_still_checked(made, tmp_path):
    """A committed Parquet part cut to 100 bytes (sft), another cut in half (questions) and a search-index
    segment cut short: each output is a DAMAGED line naming its file, no traceback, the other outputs of those
    stages and every other stage compared as usual, exit 1."""
    out, overrides = made
    cut = tmp_path / "run"
    shutil.copytree(out, cut, symlinks=True)
    sft = sorted((cut / "sft").resolve().glob("*.parquet"))[0]
    os.truncate(sft, 100)
    questions = sorted((cut / "questions").resolve().glob("*.parquet"))[0]
    os.truncate(questions, questions.stat().st_size // 2)
    segment = max((cut / "index").resolve().glob("*.store"), key=lambda f: f.stat().st_size)
    os.truncate(segment, 100)
    p = verify(cut, overrides, "--until", "filter", seed="7")
    text = p.stdout + p.stderr
    assert p.returncode == 1 and "Traceback" not in text, text[-3000:]
    found = table_rows(p.stderr)
    damaged = {k: r for k, r in found.items() if r[2] != "equal"}
    assert set(damaged) == {("filter", "sft"), ("questions", "questions"), ("index", "index")}, damaged
    for (stage, output), (run, again, verdict, detail) in damaged.items():
        assert verdict == "DAMAGED" and run == "damaged" and "rows" in again, (stage, output)
        assert "in the run cannot be read (" in detail
    assert "sft/part-00000.parquet in the run cannot be read (Parquet magic bytes not found in footer)" in \
        found[("filter", "sft")][3]
    assert "Footer magic byte mismatch" in found[("index", "index")][3]
    from flows.stages import PIPELINE

    assert {stage for stage, _ in found} == {s.name for s in PIPELINE.upto("filter")}
    assert found[("filter", "rejects/filter")][2] == found[("questions", "(report)")][2] == "equal"
    assert "index/index, questions/questions, filter/sft cannot be read (DAMAGED" in p.stderr


def test_a_config_that_is_not_the_runs_is_named_by_the_keys(made):
    out, overrides = made
    p = verify(out, [*overrides, "corpus.strict=true"], "--until", "graph")
    assert p.returncode == 1, p.stdout + p.stderr
    found = table_rows(p.stderr)
    assert found[("ingest", "(key)")][2] == "DIFFERS" and "config" in found[("ingest", "(key)")][3]
    assert found[("ingest", "corpus/pages")][2] == "equal"  # strictness changes no row of this corpus
    assert "--config and --set the run was made with" in p.stderr


def test_what_is_no_run_is_one_line(made, tmp_path):
    out, overrides = made
    assert "not a hopforge run folder" in one_error_line(verify(tmp_path, overrides))
    (tmp_path / "file").write_text("x")
    assert "is a file" in one_error_line(verify(tmp_path / "file", overrides))
    assert "does not exist" in one_error_line(verify(tmp_path / "nowhere", overrides))
    assert "inside" in one_error_line(verify(out, overrides, "--scratch", str(out / "scratch")))
    assert not (out / "scratch").exists()


def test_a_folder_a_run_holds_is_refused(made):
    from synth.engine.store import RunLock

    out, overrides = made
    lock = RunLock(out)
    lock.acquire()
    try:
        assert "in use" in one_error_line(verify(out, overrides, "--until", "ingest"))
    finally:
        lock.release()
