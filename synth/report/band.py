"""The report's RL difficulty band: counted by split and by the model that measured it, beside the table.

A band figure is only honest next to the table it describes.  ``rl_pool`` holds the questions of the pool's
splits (``rl``, plus ``sft`` with ``questions.share_sft_rl``) that the measuring model answered 1 <= c <= n-1
times; a count over every split (sft questions sampled adaptively, eval questions once) is another number.
So the band is read from the stage that measured it -- the filter for the teacher, ``rl_band`` for the
student -- split by split, and printed beside the rows of ``rl_pool`` counted from the table itself, per
split and per ``extra_info.band_model``: for the model that wrote the pool and a split it draws from, the
band column and the rows column are the same number.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Callable

from filters.rlconfig import STUDENT, TEACHER
from synth.engine.reports import BandedReport, RunReports
from synth.text.markdown import md_code, md_text

# The stages that measure a band, and whose rollouts they count (the prefix of extra_info.band_model).
BAND_STAGES = {"filter": TEACHER, "rl_band": STUDENT}
BAND_ORDER = ("all_wrong", "rl_pool", "all_right")


def table_rows(root: Path) -> dict[tuple[str, str], int]:
    """Rows of ``DIR/rl_pool`` by ``(measurer, split)``, counted from the table ({} when there is none); the
    measurer is the part of ``extra_info.band_model`` before the colon (``teacher``, ``student``), so rows whose
    model names differ (several teachers) are all counted for the stage that measured them."""
    path = root / "rl_pool"
    if not path.exists():
        return {}
    import pyarrow.dataset as ds

    info = ds.dataset(path, format="parquet").to_table(columns=["extra_info"])["extra_info"].to_pylist()
    return dict(Counter(((i.get("band_model") or "unknown").partition(":")[0], i["split"]) for i in info))


def pool_writer(root: Path) -> str | None:
    """The stage whose output ``DIR/rl_pool`` is now (its link points into ``.stages/<stage>/``), or None."""
    import os

    link = root / "rl_pool"
    if not link.is_symlink() or not link.exists():
        return None
    parts = Path(os.readlink(link)).parts
    return parts[1] if len(parts) > 2 and parts[0] == ".stages" else None


def band_rows(reports: RunReports, root: Path) -> list[dict[str, Any]]:
    """One row per (measuring stage, split): the band counts, and the ``rl_pool`` rows of that model and split.

    ``in_pool`` says whether the stage wrote the ``rl_pool`` the folder holds now and the split is one its
    pool draws from; then ``band`` and ``rows`` are the same number.
    """
    reports = RunReports.of(reports)
    rows_by = table_rows(root)
    writer = pool_writer(root)
    out = []
    for stage in BAND_STAGES:
        r = reports.get(stage)
        if not isinstance(r, BandedReport) or not r.bands_by_split:
            continue
        model = r.band_model or "unknown"
        writes = stage == writer
        for split, bands in r.bands_by_split.items():
            out.append({"stage": stage, "model": model, "split": split, **{b: int(getattr(bands, b)) for b in BAND_ORDER},
                        "in_pool": writes and split in r.bands_of_splits,
                        "rows": rows_by.get((BAND_STAGES[stage], split), 0)})
    return out


def band_section(md: list[str], reports: RunReports, root: Path, summary: dict[str, Any], plots: Any,
                 out: Path, fig: Callable[[str, str], None]) -> list[str]:
    """Append the band section (a table and a figure of the same numbers); returns what was skipped."""
    rows = band_rows(reports, root)
    if not rows:
        return ["RL difficulty band (no band in reports/filter.json or reports/rl_band.json)"]
    md += ["## RL difficulty band", "",
           "Questions by correct rollouts c of n, counted by the stage that measured them (the filter: the teacher's "
           "rollouts; `rl_band`: the student's, under `rl.band_by: student`), split by split. `rl_pool` holds the "
           "band (1 <= c <= n-1) of the splits it draws from, measured by the model `rl.band_by` names; its last "
           "column counts the table's own rows of that model and split.", "",
           "| measured by | split | all wrong (c = 0) | band (1 <= c <= n-1) | all right (c = n) | rows in rl_pool |",
           "| --- | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        md.append(f"| {md_code(r['model'], table=True)} ({r['stage']}) | {md_text(r['split'])}"
                  f"{'' if r['in_pool'] else ' (not pooled)'} | "
                  f"{r['all_wrong']:,} | {r['rl_pool']:,} | {r['all_right']:,} | {r['rows']:,} |")
    md.append("")
    reports = RunReports.of(reports)
    if (f := reports.filter) is not None and f.short_of_n:
        short = ", ".join(f"{n:,} {md_text(sp)}" for sp, n in f.short_of_n.items())
        md += [f"Left out of the teacher's band for fewer than {f.band_n} samples (`short_of_n`, so no row's c/n is "
               f"counted over fewer): {short}.", ""]
        summary["short_of_n"] = dict(f.short_of_n)
    for stage in BAND_STAGES:
        r = reports.get(stage)
        if stage == "filter" and isinstance(r, BandedReport) and r.band_by == STUDENT:
            md += ["`rl.band_by` is `student`: the filter measured the teacher's band but wrote no `rl_pool`; the "
                   "`rl_band` stage after `sft` writes it from the student's rollouts (its figures are those of its "
                   "last run, `reports/rl_band.json`).", ""]
    plots.bands(rows, out / "bands.png")
    fig("bands.png", "The table above as bars: questions in each band by measuring model and split (bars of the "
                     "pooled splits are solid, the others pale); the band bars of the pooled splits are the rows of "
                     "rl_pool.")
    summary["bands"] = rows
    return []


__all__ = ["BAND_ORDER", "BAND_STAGES", "band_rows", "band_section", "table_rows"]
