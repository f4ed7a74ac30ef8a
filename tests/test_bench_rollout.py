"""``bench/rollout.py`` at toy size: every rollout step answered once, and hopforge's one tool-protocol probe
counted apart from the steps (it used to be counted as a step, and the bench stopped: "12289 answers for
12288 steps")."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from bench.rollout import is_probe, run_arm, server
from bench.search import synthetic_pages
from flows.config import load_config
from synth.teacher.openai_compat import request_body
from synth.teacher.probe import TOOL_PROBE_MESSAGES, TOOL_PROBE_TOOLS
from synth.tools.search import build_index

pytestmark = pytest.mark.slow


def test_the_probe_is_told_from_a_step() -> None:
    cfg = load_config(None, ["teacher.backend=openai", "teacher.model=bench"]).teacher
    assert is_probe(request_body(cfg, TOOL_PROBE_MESSAGES, TOOL_PROBE_TOOLS))
    assert not is_probe(request_body(cfg, [{"role": "system", "content": "You are a researcher."},
                                           {"role": "user", "content": "Which page follows Alpha?"}], TOOL_PROBE_TOOLS))


def test_each_arm_runs_to_the_end_and_ours_probes_once(tmp_path: Path) -> None:
    titles, _ = synthetic_pages(300, tmp_path / "pages")
    build_index(ds.dataset(tmp_path / "pages"), tmp_path / "index")
    (tmp_path / "titles.json").write_text(json.dumps(titles))
    args = argparse.Namespace(questions=12, concurrency=4, turns=3)
    with server(latency=0.01, turns=3) as url:
        ours = run_arm("ours", url, tmp_path, args)  # raised SystemExit when the probe was counted as a step
        bare = run_arm("bare", url, tmp_path, args)
    assert (ours["probes"], bare["probes"]) == (1, 0)
    assert ours["steps"] == bare["steps"] == 12 * 3 and ours["bad"] == bare["bad"] == []
    assert ours["tool_calls"] == bare["tool_calls"] == 12 * 2  # a search a turn, then the answer
