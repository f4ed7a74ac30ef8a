"""The Prefect artifacts a synth run attaches: the funnel, the stages, the teacher's cost, the report.

The tables are built by pure functions (:func:`funnel_table`, :func:`stages_table`,
:func:`cost_table`, :func:`report_markdown`) from what the run left on disk and its stage
outcomes, so tests can check them without a server.

The report artifact shows the report's figures inline: Prefect's UI renders a markdown
artifact's images with an ``<img>`` whose source is the link as written, and a browser will
not load a ``file://`` path from a web page, so each PNG travels inside the markdown as a
``data:image/png;base64`` URI, downscaled and within a size budget (figures past it are named
by path).  Paths on the run's machine (the report, the explorer) are given as text.  Every string the
artifacts did not write themselves (paths, stage and reason names read from the reports, the config)
enters their Markdown through :mod:`synth.text.markdown`.

Nothing here reads the environment: the config appears only as it is stored (the API key's
variable *name*, ``api_key_env``; the endpoint as
:meth:`~synth.teacher.config.TeacherConfig.display_url`).
"""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import Any, Sequence

import yaml

from flows.config import Config
from synth.engine.reports import PassFacts, RunReports, read_reports
from synth.engine.runner import SUMMARY_COLUMNS, summary_rows
from synth.engine.stage import StageOutcome
from synth.report.headline import read_headline
from synth.report.stage import funnel_steps, teacher_totals
from synth.teacher.config import Price
from synth.teacher.stats import TeacherUsage
from synth.text.markdown import md_code, md_fence, md_text

FUNNEL_COLUMNS = ["step", "count", "unit", "dropped", "reasons"]
# "server-cached prompt tokens" are the part of "prompt tokens" the server served from its prefix cache;
# "cached ..." are answers of hopforge's call cache (not sent).  Rows whose status is "per kept SFT row"
# are the headline figures (synth.report.headline), by stage and split.
COST_COLUMNS = ["stage", "status", "split", "calls", "requests", "cache hits", "prompt tokens",
                "server-cached prompt tokens", "completion tokens", "cached prompt tokens",
                "cached completion tokens", "cost_usd", "cost_with_cache_usd"]
PER_KEPT = "per kept SFT row"
IMAGE_MAX_WIDTH = 760          # px: the width of Prefect's artifact pane, about
IMAGE_MAX_BYTES = 150_000      # one embedded PNG, before base64
IMAGES_MAX_BYTES = 1_200_000   # all embedded PNGs together, before base64
_FIGURE = re.compile(r"^!\[(?P<caption>.*)\]\((?P<name>[^)\s]+\.png)\)\s*$")


def funnel_table(out: str | Path) -> list[dict[str, Any]]:
    """The run's funnel, one row per step in stage order: questions drafted and accepted, traces, the traces
    left after each filter reason, the kept SFT rows (:func:`synth.report.stage.funnel_steps`)."""
    return [{"step": s["label"], "count": s["count"], "unit": s["unit"], "dropped": s["dropped"],
             "reasons": s["note"]} for s in funnel_steps(read_reports(Path(out)))]


def stages_table(outcomes: Sequence[StageOutcome]) -> list[dict[str, Any]]:
    """One row per stage: stage, status, input, output, dropped, teacher calls, seconds."""
    return [dict(zip(SUMMARY_COLUMNS, row)) for row in summary_rows(outcomes)]


def cost_table(out: str | Path, outcomes: Sequence[StageOutcome], price: Price | None = None) -> list[dict[str, Any]]:
    """One row per stage that used the teacher, from ``reports/<stage>.json`` ``teacher``, plus a total.

    A reused stage's tokens are those of the run that computed it (its status says so).  With
    ``price`` (``teacher.price_per_mtok`` now) the costs are computed from those tokens, so a price
    set after the teacher stages ran still prices them: ``cost_usd`` the tokens sent,
    ``cost_with_cache_usd`` with the tokens the call cache answered added; without it, the cost the
    stage recorded, if any.

    Then the headline figures (:func:`synth.report.headline.read_headline`), status ``per kept SFT
    row``: one row per stage and split, what the data took per kept row (call-cache hits included), so
    their ``prompt tokens`` are all the prompt tokens and their cost is under ``cost_with_cache_usd``.
    """
    rows = []
    reports = read_reports(Path(out))
    for o in outcomes:
        t = TeacherUsage.from_report(reports.teacher(o.name) or o.typed_report.teacher)
        if t is None:
            continue
        u = t.priced(price)
        rows.append({"stage": o.name, "status": "reused" if o.reused else "ran", "split": "all", "calls": t.calls,
                     "requests": t.requests, "cache hits": t.cache_hits, "prompt tokens": t.prompt_tokens,
                     "server-cached prompt tokens": t.server_cached_prompt_tokens,
                     "completion tokens": t.completion_tokens, "cached prompt tokens": t.cached_prompt_tokens,
                     "cached completion tokens": t.cached_completion_tokens,
                     "cost_usd": u.cost_usd, "cost_with_cache_usd": u.cost_with_cache_usd})
    if rows:
        total: dict[str, Any] = {c: sum(r[c] or 0 for r in rows) for c in COST_COLUMNS[3:]}
        for c in ("cost_usd", "cost_with_cache_usd"):
            total[c] = None if any(r[c] is None for r in rows) else round(total[c], 6)
        rows.append({"stage": "total", "status": "", "split": "all", **total})
    if rows and (headline := read_headline(out, price)) is not None:
        for cell in headline.cells:
            p = headline.per_kept(cell)
            rows.append({c: None for c in COST_COLUMNS} | {
                "stage": cell.stage, "status": PER_KEPT, "split": cell.split, "calls": _r(p["calls"]),
                "prompt tokens": _r(p["prompt_tokens"]), "server-cached prompt tokens":
                _r(p["server_cached_prompt_tokens"]), "completion tokens": _r(p["completion_tokens"]),
                "cost_with_cache_usd": _r(p["cost_usd"])})
    return rows


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def safe_config(cfg: Config) -> dict:
    """The config as a mapping fit to show: the key's variable name only, the endpoint without query."""
    data = cfg.model_dump(mode="json")
    if cfg.teacher.base_url is not None:
        data["teacher"]["base_url"] = cfg.teacher.display_url()
    return data


def png_data_uri(path: Path, max_width: int = IMAGE_MAX_WIDTH) -> str:
    """``path`` as a ``data:image/png;base64`` URI, scaled down to ``max_width`` and palette-reduced."""
    raw = path.read_bytes()
    try:
        from PIL import Image

        with Image.open(io.BytesIO(raw)) as im:
            im = im.convert("RGB")
            if im.width > max_width:
                im = im.resize((max_width, round(im.height * max_width / im.width)), Image.LANCZOS)
            buf = io.BytesIO()
            im.quantize(colors=128).save(buf, format="PNG", optimize=True)
            raw = min(raw, buf.getvalue(), key=len)
    except Exception:  # noqa: BLE001 - a figure Pillow cannot read is embedded as written
        pass
    return "data:image/png;base64," + base64.b64encode(raw).decode("ascii")


def report_figures(report: Path) -> list[tuple[str, str]]:
    """``(file name, caption)`` of every figure ``index.md`` shows, in its order (else the PNGs by name)."""
    index = report / "index.md"
    found: list[tuple[str, str]] = []
    if index.exists():
        for line in index.read_text().splitlines():
            m = _FIGURE.match(line)
            if m and (report / m["name"]).is_file():
                found.append((m["name"], m["caption"]))
    return found or [(p.name, p.stem) for p in sorted(report.glob("*.png"))]


def report_markdown(out: str | Path, cfg: Config | None = None, outcomes: Sequence[StageOutcome] = (),
                    budget: int = IMAGES_MAX_BYTES) -> str:
    """The run in one markdown page: headline numbers, the funnel, the cost, the report's figures inline.

    Figures are embedded as data URIs (:func:`png_data_uri`) until ``budget`` bytes of PNG are
    spent; the rest are listed by path.  The report (``DIR/report/index.md``) and the explorer
    (``DIR/report/index.html``, when it exists) are named by path: they live on the run's machine.
    """
    root = Path(out).absolute()
    report = root / "report"
    reports = read_reports(root)
    price = cfg.teacher.price_per_mtok if cfg is not None else None
    lines = [f"# hopforge run: {md_code(root)}", ""]
    index, explorer = report / "index.md", report / "index.html"
    if explorer.exists():
        lines += [f"Explorer (open it in a browser on the machine that holds the run): {md_code(explorer)}", ""]
    if index.exists():
        lines += [f"Report: {md_code(index)}", ""]
    else:
        lines += ["No report was written (the `report` stage did not run).", ""]
    lines += [f"Run summary: {md_code(root / 'reports' / 'run.json')}", ""]

    headline = read_headline(root, price)
    lines += _headline(reports, headline)
    steps = funnel_table(root)
    if steps:
        lines += ["## Funnel", "", "Stage order, top to bottom; each row counts its own unit, and `dropped` is what "
                  "the step removed from the row above.", "",
                  "| step | count | dropped | reasons |", "| --- | ---: | ---: | --- |"]
        lines += [f"| {md_text(s['step'])} | {s['count']:,} {md_text(s['unit'])} | "
                  f"{'-' if s['dropped'] is None else format(s['dropped'], ',')} | {md_text(s['reasons'] or '-')} |"
                  for s in steps]
        lines.append("")
    per = teacher_totals(reports, price)
    if per:
        status = {o.name: "reused" if o.reused else "ran" for o in outcomes}
        lines += ["## Teacher cost", "", _price_text(price), "",
                  "| stage | status | prompt tokens | server-cached prompt tokens | completion tokens | "
                  "call-cache prompt | call-cache completion | cost_usd | cost_with_cache_usd |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for stage, u in per.items():
            g = lambda k: int(u.get(k, 0))  # noqa: E731
            lines.append(f"| {md_text(stage)} | {status.get(stage, '')} | {g('prompt_tokens'):,} | "
                         f"{g('server_cached_prompt_tokens'):,} | {g('completion_tokens'):,} | "
                         f"{g('cached_prompt_tokens'):,} | {g('cached_completion_tokens'):,} | "
                         f"{_usd(u.get('cost_usd'))} | {_usd(u.get('cost_with_cache_usd'))} |")
        lines.append("")
    if headline is not None:
        lines += ["## Per kept SFT row", ""] + headline.markdown()

    if report.is_dir():
        lines += _figures(report, budget)
    if cfg is not None:
        lines += ["## Config", "", *md_fence(yaml.safe_dump(safe_config(cfg), sort_keys=False).rstrip(), "yaml"), ""]
    return "\n".join(lines)


def _headline(reports: RunReports, headline) -> list[str]:
    reports = RunReports.of(reports)
    q, r, f = reports.questions, reports.rollout, reports.filter
    rows = []
    if q:
        rows.append(("questions accepted", f"{int(q.output or 0):,} of {int(q.input or 0):,} drafted"))
    if r:
        rows.append(("traces", f"{int(r.output or 0):,}"))
    if f:
        rows.append(("kept SFT rows", f"{int(f.output or 0):,}"))
        p = f.pass_ or PassFacts()
        if p.pass_at_1 is not None:
            rows.append(("pass@1 / pass@n", f"{p.pass_at_1} / {p.pass_at_n}"))
    if headline is not None:
        each = headline.per_kept(headline.total)
        if each["calls"] is not None:
            rows.append(("teacher calls per kept SFT row", f"{each['calls']:,.2f}"))
            rows.append(("prompt / completion tokens per kept SFT row",
                         f"{each['prompt_tokens']:,.0f} / {each['completion_tokens']:,.0f}"))
        if headline.total.cost_usd is not None:
            per = f", {_usd(each['cost_usd'])} per kept SFT row" if each["cost_usd"] is not None else ""
            rows.append(("teacher cost (cache hits included)", f"{_usd(headline.total.cost_usd)}{per}"))
        else:
            rows.append(("teacher cost", "not priced: set teacher.price_per_mtok"))
    elif teacher_totals(reports):
        rows.append(("teacher cost", "not priced: set teacher.price_per_mtok"))
    if not rows:
        return []
    return ["| run | |", "| --- | --- |", *(f"| {k} | {v} |" for k, v in rows), ""]


def _price_text(price: Price | None) -> str:
    if price is None:
        return ("No `teacher.price_per_mtok` is set: costs are those the stages recorded, if any. Set it and rerun "
                "to price the recorded tokens (no teacher call is made again).")
    return (f"Priced now at `teacher.price_per_mtok` (USD: {price.describe()}) from the tokens each stage recorded; "
            "server-cached prompt tokens are the part of the prompt tokens the server served from its prefix cache; "
            "cost_with_cache_usd adds the calls hopforge's call cache answered.")


def _usd(v: Any) -> str:
    return "-" if v is None else f"${v:,.4f}"


def _figures(report: Path, budget: int) -> list[str]:
    lines = ["## Figures", ""]
    left: list[str] = []
    spent = 0
    for name, caption in report_figures(report):
        uri = png_data_uri(report / name)
        size = len(uri) * 3 // 4
        if size > IMAGE_MAX_BYTES or spent + size > budget:
            left.append(name)
            continue
        spent += size
        lines += [f"![{name}]({uri})", "", f"*{caption}*", ""]
    if left:
        lines += ["Not embedded (size budget): " + ", ".join(md_code(report / n) for n in left) + ".", ""]
    return lines


def attach(out: str | Path, cfg: Config, outcomes: Sequence[StageOutcome]) -> dict[str, Any]:
    """Create the four artifacts in the current flow run; returns their ids by name."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    root = Path(out).absolute()
    price = cfg.teacher.price_per_mtok
    ids = {
        "funnel": create_table_artifact(
            funnel_table(root), key="synth-funnel",
            description=f"The funnel of {md_code(root)} in stage order: questions drafted and accepted, traces, the traces "
                        "left after each filter reason (chain order), kept SFT rows; each row in its own unit."),
        "stages": create_table_artifact(
            stages_table(outcomes), key="synth-stages",
            description="Records into and out of each stage, each in its own unit (status: ran or reused)."),
        "cost": create_table_artifact(
            cost_table(root, outcomes, price), key="synth-cost",
            description="Teacher calls, requests, cache hits and tokens per stage (prompt tokens include the "
                        "server-cached ones, shown apart); cost_usd and cost_with_cache_usd priced at "
                        "teacher.price_per_mtok now, from the recorded tokens. A reused stage shows the run that "
                        "computed it. Rows with status 'per kept SFT row' are the headline figures by stage and "
                        "split (call-cache hits included; their cost under cost_with_cache_usd)."),
        "report": create_markdown_artifact(
            report_markdown(root, cfg, outcomes), key="synth-report",
            description="The run: headline numbers, funnel, cost and the report's figures."),
    }
    return ids
