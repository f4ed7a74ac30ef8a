"""End to end through the real ``hopforge`` command line, as a user runs it.

Each command is a fresh subprocess (the venv's console script, or ``python -m
flows.cli`` when the script is not installed), so argument parsing, exit codes,
config loading, the store's symlinks and manifest, and the printed tables are all
exercised together.  The corpus is the embedded demo corpus (~10k pages), which
makes the whole run take a few seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from helpers.cli import hopforge_command

ROOT = Path(__file__).resolve().parents[2]
HOPS = 3
NUM_WALKS = 20
WALK_ARGS = ["--set", f"walk.num_walks={NUM_WALKS}", "--set", f"walk.hops={HOPS}"]


def hopforge(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``hopforge ARGS`` from the repo root (the default config path is relative to it); stdout+stderr merged."""
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1", TERM="dumb")  # wide, plain tables: no wrapped words
    return subprocess.run([*hopforge_command(), *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


def ok(*args: str) -> str:
    """Run ``hopforge ARGS``, assert exit code 0, return its output."""
    r = hopforge(*args)
    assert r.returncode == 0, f"hopforge {' '.join(args)} exited {r.returncode}:\n{r.stdout}"
    return r.stdout


def _check_funnel(report: dict, stage: str) -> None:
    assert report["stage"] == stage
    assert report["input"] == report["output"] + sum(report["dropped"].values()), report


def test_demo_corpus_ingest_walk_through_the_cli(tmp_path: Path) -> None:
    src, out = tmp_path / "kilt_demo.jsonl", tmp_path / "run"
    ok("corpus", "demo", "--out", str(src))
    assert src.stat().st_size > 0
    ok("ingest", "--kilt", str(src), "--out", str(out))
    first = ok("walk", "--out", str(out), *WALK_ARGS)
    assert "reused" not in first

    pages = ds.dataset(out / "corpus" / "pages").to_table(columns=["page_id"])
    links = ds.dataset(out / "corpus" / "links").to_table(columns=["src_id", "dst_id"])
    walks = ds.dataset(out / "walks").to_table()
    assert pages.num_rows > 1000 and links.num_rows > 1000
    assert walks.num_rows == NUM_WALKS  # the demo graph is big enough for every slot to find a walk

    page_ids = set(pages.column("page_id").to_pylist())
    linked = set(zip(links.column("src_id").to_pylist(), links.column("dst_id").to_pylist()))
    for path in walks.column("path").to_pylist():
        assert len(path) == HOPS + 1, path
        assert len(set(path)) == len(path), f"a page repeats in {path}"
        assert set(path) <= page_ids, path
        for u, v in zip(path, path[1:]):
            assert (u, v) in linked, f"walk step {u} -> {v} is not a link in corpus/links ({path})"

    for stage in ("ingest", "graph", "walks"):
        _check_funnel(json.loads((out / "reports" / f"{stage}.json").read_text()), stage)

    # Same args again: nothing recomputed, the output says so, the manifest key stays.
    key = json.loads((out / "manifest.json").read_text())["stages"]["walks"]["key"]
    again = ok("walk", "--out", str(out), *WALK_ARGS)
    assert "reused" in again, again
    assert json.loads((out / "manifest.json").read_text())["stages"]["walks"]["key"] == key
    assert ds.dataset(out / "walks").to_table().equals(walks)


def test_unknown_config_key_exits_2_naming_it(tmp_path: Path) -> None:
    r = hopforge("walk", "--out", str(tmp_path / "run"), "--set", "walk.hopz=3")
    assert r.returncode == 2, r.stdout
    assert "walk.hopz" in r.stdout
    assert "hops" in r.stdout  # the allowed keys are listed
    assert "Traceback" not in r.stdout


def test_missing_kilt_file_exits_2_with_a_clear_message(tmp_path: Path) -> None:
    r = hopforge("ingest", "--kilt", "/nonexistent", "--out", str(tmp_path / "run"))
    assert r.returncode == 2, r.stdout
    assert "/nonexistent" in r.stdout and "no such file" in r.stdout.lower(), r.stdout
    assert "Traceback" not in r.stdout


def _page(i: int) -> dict:
    title = f"Page {i}"
    body = f"{title} links to Page {i + 1}.\n"
    start = body.index(f"Page {i + 1}")
    return {"_id": str(100 + i), "wikipedia_id": str(100 + i), "wikipedia_title": title, "text": [title + "\n", body],
            "anchors": [{"text": f"Page {i + 1}", "href": f"Page%20{i + 1}", "paragraph_id": 1, "start": start,
                         "end": start + len(f"Page {i + 1}"), "wikipedia_title": f"Page {i + 1}",
                         "wikipedia_id": str(101 + i)}],
            "categories": "Tests"}


@pytest.mark.parametrize("strict", [True, False])
def test_bad_line_in_strict_mode_exits_2_naming_the_line(tmp_path: Path, strict: bool) -> None:
    src = tmp_path / "kilt_bad.jsonl"
    lines = [json.dumps(_page(i)) for i in range(5)]
    lines[2] = '{"_id": "102", "wikipedia_title": "Page 2", "text": ["Page 2\\n",'  # line 3: cut short
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "run"
    args = ["ingest", "--kilt", str(src), "--out", str(out)]
    if strict:
        r = hopforge(*args, "--strict")
        assert r.returncode == 2, r.stdout
        assert "line 3" in r.stdout, r.stdout
        assert "Traceback" not in r.stdout
        assert not (out / "corpus" / "pages").exists()  # nothing half-written is published
    else:  # the same file without --strict: the line is skipped and counted
        ok(*args)
        report = json.loads((out / "reports" / "ingest.json").read_text())
        _check_funnel(report, "ingest")
        assert report["output"] == 4 and report["dropped"]["bad_json"] == 1
