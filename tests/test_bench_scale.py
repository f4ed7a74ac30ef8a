"""``bench/scale.py``: the walk counts it parses, the disk check before it writes, and a tiny run of every step."""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _scale():
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "bench" / "scale.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


scale = _scale()


def test_walk_counts_are_distinct_positive_and_ordered() -> None:
    assert scale.parse_walks("100000,1000000") == [100_000, 1_000_000]
    assert scale.parse_walks("1_000") == [1000]
    for bad in ("", "0", "5,5", "-3"):
        with pytest.raises(ValueError):
            scale.parse_walks(bad)


def test_the_largest_fit_leaves_the_free_space_it_must() -> None:
    per_file, per_raw = 2_000.0, 6_000.0
    gib = scale.GIB
    fit = scale.largest_fit(40 * gib, 15 * gib, per_file, per_raw)
    assert fit > 0 and fit % 10_000 == 0
    assert scale.disk_needed(fit, per_file, per_raw) <= 25 * gib < scale.disk_needed(fit + 10_000, per_file, per_raw)
    assert scale.largest_fit(10 * gib, 15 * gib, per_file, per_raw) == 0


def _args(tmp_path: Path, pages: int, fit: bool) -> argparse.Namespace:
    return argparse.Namespace(pages=pages, anchors=18, seed=0, gzip=False, fit=fit, min_free_gib=15.0,
                              source=None, work=tmp_path)


def test_a_run_that_does_not_fit_is_refused_or_shrunk(tmp_path: Path, monkeypatch) -> None:
    free = 16 * scale.GIB  # 1 GiB above what must stay free: room for ~100k pages
    monkeypatch.setattr(scale.shutil, "disk_usage", lambda _: shutil._ntuple_diskusage(free * 4, free * 3, free))
    with pytest.raises(SystemExit, match="do not fit"):
        scale.plan_pages(_args(tmp_path, 5_903_530, fit=False), tmp_path)
    fit = scale.plan_pages(_args(tmp_path, 5_903_530, fit=True), tmp_path)
    assert 0 < fit < 5_903_530
    assert scale.plan_pages(_args(tmp_path, fit, fit=False), tmp_path) == fit
    assert not list(tmp_path.iterdir())  # the estimate's sample is written elsewhere and removed


@pytest.mark.slow
def test_a_tiny_run_measures_every_step_and_cleans_up(tmp_path: Path, capsys) -> None:
    result = scale.main(["--pages", "2000", "--walks", "100,300", "--subgraphs", "10", "--gzip",
                         "--work", str(tmp_path / "w")])
    assert list(result["steps"]) == ["ingest", "graph", "walk 100", "expand", "walk 300", "index"]
    for step in result["steps"].values():
        assert step["peak_rss_gib"] > 0 and step["disk_peak_gib"] >= step["disk_gib"] >= 0
    assert result["steps"]["ingest"]["disk_gib"] > 0 and result["index_gib"] > 0
    assert 0 < result["source_gib"] < result["source_raw_gib"]  # gzip
    assert result["extrapolated_full_dump"]["source_gib"] > 0
    assert "walk 300" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["logs"]  # source and output removed
