"""Curriculum stages of the RL pool: every band row goes to the first stage its hops and c/n fit."""

from __future__ import annotations

import pytest

from filters.curriculum import split_curriculum, stage_of
from filters.rlconfig import CurriculumStage, RLConfig


def _row(qid: str, n: int, c: int, index: int) -> dict:
    return {"prompt": [], "extra_info": {"question_id": qid, "n": n, "c": c, "index": index}}


STAGES = [CurriculumStage(name="short_hard", max_hops=3, max_pass=0.5),
          CurriculumStage(name="easy", min_pass=0.5),
          CurriculumStage(name="long", min_hops=4)]


def test_a_row_goes_to_the_first_stage_it_fits() -> None:
    assert stage_of(3, 8, 4, STAGES) == "short_hard"  # 0.5 fits both short_hard and easy: the first wins
    assert stage_of(2, 8, 6, STAGES) == "easy"
    assert stage_of(5, 8, 2, STAGES) == "long"
    assert stage_of(5, 8, 3, STAGES[:2]) is None


def test_split_reindexes_each_stage_and_counts_the_rest() -> None:
    rows = [_row("a", 8, 1, 0), _row("b", 8, 7, 1), _row("c", 8, 2, 2), _row("d", 8, 3, 3)]
    hops = {"a": 2, "b": 3, "c": 6, "d": 3}
    parts, unstaged = split_curriculum(rows, hops, STAGES[:2])
    assert {k: [r["extra_info"]["question_id"] for r in v] for k, v in parts.items()} == {
        "short_hard": ["a", "d"], "easy": ["b"]}
    assert [r["extra_info"]["index"] for r in parts["short_hard"]] == [0, 1]  # verl reads index from 0
    assert unstaged == 1  # c: 6 hops, c/n 0.25 fits no stage
    assert rows[3]["extra_info"]["index"] == 3  # the pool's own rows are untouched


def test_bad_stages_are_config_errors() -> None:
    with pytest.raises(ValueError, match="used twice"):
        RLConfig(curriculum=[{"name": "a"}, {"name": "a"}])
    with pytest.raises(ValueError, match="max_pass 0.2 is below min_pass 0.5"):
        RLConfig(curriculum=[{"name": "a", "min_pass": 0.5, "max_pass": 0.2}])


def test_the_teacher_band_is_split_into_the_named_files(rl_run, tmp_path) -> None:
    import json
    import shutil

    import pyarrow.dataset as ds

    from flows.config import load_config
    from flows.stages import FILTER
    from synth.engine.runner import run_stage
    from synth.engine.store import Store

    out = tmp_path / "run"
    shutil.copytree(rl_run, out, symlinks=True)
    cfg = load_config(None, ["rl.curriculum=[{name: one_miss, min_pass: 0.7}, {name: rest}]"])
    run_stage(FILTER, cfg, Store(out))
    rows = ds.dataset(out / "rl_pool").to_table().to_pylist()
    one_miss, rest = (ds.dataset(out / "rl_curriculum" / n).to_table().to_pylist() for n in ("one_miss", "rest"))
    assert len(one_miss) + len(rest) == len(rows) >= 2
    assert all(r["extra_info"]["c"] / r["extra_info"]["n"] >= 0.7 for r in one_miss)
    assert all(r["extra_info"]["c"] / r["extra_info"]["n"] < 0.7 for r in rest)
    rep = json.loads((out / "reports" / "filter.json").read_text())
    assert rep["curriculum"] == {"one_miss": len(one_miss), "rest": len(rest), "unstaged": 0}
