"""The report's band figures agree with the tables they describe.

``rl_run`` is a real run folder (the pipeline up to the filter on the demo corpus, most questions in the rl split,
sft questions sampled adaptively, eval questions once).  Every band number the filter, the report and its figures
give is checked against ``rl_pool`` itself.
"""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.dataset as ds

from synth.engine.store import Store
from synth.report import plots
from synth.report.band import band_rows, pool_writer
from synth.report.stage import build_report


def _pool(root):
    return ds.dataset(root / "rl_pool").to_table().to_pylist()


def test_the_filters_band_figures_are_its_tables(rl_run):
    rep = json.loads((rl_run / "reports" / "filter.json").read_text())
    pool = _pool(rl_run)
    # The band is counted over the questions the pool draws from, so its band count is the table's row count...
    assert rep["bands"]["rl_pool"] == rep["rl_pool_rows"] == len(pool) >= 2
    assert rep["bands_of_splits"] == ["rl"] and Counter(r["extra_info"]["split"] for r in pool) == {"rl": len(pool)}
    # ...and the other splits are counted apart, by split, never added to it.
    assert rep["bands_by_split"]["rl"] == rep["bands"]
    assert set(rep["bands_by_split"]) > {"rl"}
    # The model that measured the band is named, in the report and in every row.
    assert rep["band_by"] == "teacher" and rep["band_model"].startswith("teacher:")
    assert {r["extra_info"]["band_model"] for r in pool} == {rep["band_model"]}


def test_the_reports_band_table_and_figures_match_rl_pool(rl_run, tmp_path):
    root = rl_run
    pool = _pool(root)
    report = build_report(Store(root), tmp_path / "out", explorer=False)
    assert pool_writer(root) == "filter"
    rows = report.summary["bands"]
    pooled = [r for r in rows if r["in_pool"]]
    # Exactly one pooled row (the teacher, rl), whose band is the table's rows of that model and split.
    assert len(pooled) == 1 and pooled[0]["split"] == "rl" and pooled[0]["stage"] == "filter"
    assert pooled[0]["rl_pool"] == pooled[0]["rows"] == len(pool)
    assert all(r["rows"] == 0 for r in rows if not r["in_pool"])  # no other split or model has a row in the table
    index = (tmp_path / "out" / "index.md").read_text()
    p = pooled[0]
    assert (f"| `{p['model']}` (filter) | rl | {p['all_wrong']:,} | {p['rl_pool']:,} | {p['all_right']:,} | "
            f"{len(pool):,} |") in index
    assert "bands.png" in report.figures and (tmp_path / "out" / "bands.png").exists()
    # The per-question success figure shows the rl questions, so its band bars add up to the table too.
    counts = {int(n): {int(c): q for c, q in cs.items()} for n, cs in report.summary["pass_counts"].items()}
    band_bars = sum(q for n, cs in counts.items() for c, q in cs.items() if 1 <= c <= n - 1)
    assert band_bars == len(pool)
    # The report's split table counts the same rows.
    assert report.summary["splits"]["rl_pool"]["rl"] == len(pool)


def test_the_band_figure_draws_the_table_numbers():
    rows = [{"model": "teacher:m", "split": "rl", "all_wrong": 2, "rl_pool": 5, "all_right": 9, "in_pool": True,
             "rows": 5},
            {"model": "teacher:m", "split": "sft", "all_wrong": 1, "rl_pool": 3, "all_right": 40, "in_pool": False,
             "rows": 0}]
    ax = plots.bands_figure(rows).axes[0]
    heights = sorted(round(p.get_height()) for p in ax.patches)
    assert heights == sorted(r[b] for r in rows for b in ("all_wrong", "rl_pool", "all_right"))
    faded = [p for p in ax.patches if p.get_alpha() is not None and p.get_alpha() < 1]
    assert sorted(round(p.get_height()) for p in faded) == [1, 3, 40]


def test_no_band_is_read_from_a_report_without_one(tmp_path):
    assert band_rows({"filter": {"bands": {"rl_pool": 3}}}, tmp_path) == []


def test_questions_left_out_for_too_few_samples_are_named_beside_the_band(tmp_path):
    from synth.engine.reports import RunReports
    from synth.report.band import band_section

    counts = {"all_wrong": 1, "rl_pool": 2, "all_right": 3}
    filt = {"band_by": "teacher", "band_model": "teacher:m", "bands_by_split": {"rl": counts},
            "bands_of_splits": ["rl"], "band_n": 4, "short_of_n": {"rl": 2, "sft": 5}}
    drawn = []

    class Plots:
        def bands(self, rows, path):
            drawn.append(rows)

    for report, want in ((filt, True), ({**filt, "short_of_n": {}}, False)):
        md, summary = [], {}
        band_section(md, RunReports({"filter": report}), tmp_path, summary, Plots(), tmp_path, lambda *a: None)
        line = [x for x in md if "short_of_n" in x]
        assert bool(line) == want and ("short_of_n" in summary) == want
        if want:
            assert "fewer than 4 samples" in line[0] and "2 rl, 5 sft" in line[0]
            assert summary["short_of_n"] == {"rl": 2, "sft": 5}
    assert RunReports({"filter": filt}).filter.short_of_n == {"rl": 2, "sft": 5}
