"""The report's figures (matplotlib, no GUI).

Each ``*_figure`` function builds a :class:`matplotlib.figure.Figure` from plain numbers and
returns it, so tests can read the drawn geometry (bar positions, marker lines); the plain
functions of the same name write it to a PNG and return the path.  Figures are built on
``Figure`` directly, not ``pyplot``, so nothing depends on a display or on global state.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

DPI = 110
QUESTION_COLOR, TRACE_COLOR, KEPT_COLOR, DROP_COLOR = "#8395a7", "#2e86de", "#10ac84", "#ee5253"


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


# ---- the funnel ------------------------------------------------------------------------------

def step_text(step: Mapping) -> str:
    """What a funnel bar's label says: its count with its unit, and what its step dropped (and why)."""
    out = f"{step['count']:,} {step['unit']}"
    dropped, note = step.get("dropped"), step.get("note") or ""
    if dropped is not None:
        out += f"  (-{dropped:,}{': ' + note if note and dropped else ''})"
    elif note:
        out += f"  ({note})"
    return out


def funnel_figure(steps: Sequence[Mapping]) -> Figure:
    """Questions, then traces, top to bottom in stage order, on one linear axis shared by both panels.

    A step is a mapping with ``label``, ``count``, ``unit``, ``kind`` (``questions``, ``traces``
    or ``kept``: a kept trace is one SFT row), and optionally ``dropped`` (what the step removed
    from the bar above it, same unit) and ``note`` (why).  Each panel counts one unit, and every
    bar is labelled with its count, its unit and what its step dropped.
    """
    groups = [(kind, [s for s in steps if (s["kind"] == "questions") == (kind == "questions")])
              for kind in ("questions", "traces")]
    groups = [(k, g) for k, g in groups if g]
    heights = [max(len(g), 1) for _, g in groups] or [1]
    fig = Figure(figsize=(9, 0.42 * sum(heights) + 1.6 + 0.5 * len(heights)))
    axes = fig.subplots(len(heights), 1, sharex=True, squeeze=False,
                        gridspec_kw={"height_ratios": heights})[:, 0]
    top = max((s["count"] for s in steps), default=0)
    for ax, (kind, group) in zip(axes, groups):
        y = list(range(len(group)))[::-1]  # first step on top
        colors = [KEPT_COLOR if s["kind"] == "kept" else (QUESTION_COLOR if kind == "questions" else TRACE_COLOR)
                  for s in group]
        ax.barh(y, [s["count"] for s in group], height=0.62, color=colors)
        for v, s in zip(y, group):
            ax.text(s["count"] + top * 0.01, v, step_text(s), va="center", fontsize=8)
        ax.set_yticks(y, [s["label"] for s in group], fontsize=8)
        ax.set_ylabel(kind, fontsize=9)
    if not groups:
        axes[0].text(0.5, 0.5, "no questions or traces yet", ha="center", va="center",
                     transform=axes[0].transAxes)
    axes[-1].set_xlim(0, max(top, 1) * 1.55)  # room for the labels
    axes[-1].set_xlabel("count (questions in the upper panel, traces in the lower; linear scale)")
    axes[0].set_title("Funnel: questions -> traces -> kept SFT rows")
    return fig


def funnel(steps: Sequence[Mapping], path: Path) -> Path:
    """Write :func:`funnel_figure`."""
    return _save(funnel_figure(steps), path)


# ---- drops, histograms -----------------------------------------------------------------------

def drops(reasons: Sequence[tuple[str, int]], path: Path) -> Path:
    """Dropped records by ``stage: reason (unit)``."""
    fig = Figure(figsize=(7, 0.32 * max(len(reasons), 1) + 1.5))
    ax = fig.subplots()
    labels = [r for r, _ in reasons][::-1]
    counts = [c for _, c in reasons][::-1]
    ax.barh(range(len(labels)), counts, color=DROP_COLOR)
    for v, c in enumerate(counts):
        ax.text(c, v, f" {c:,}", va="center", fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlim(0, max(counts, default=0) * 1.12 + 1)
    ax.set_xlabel("dropped (each bar counts its stage's unit, in brackets)")
    ax.set_title("Drops by stage and reason")
    if not reasons:
        ax.text(0.5, 0.5, "no drops", ha="center", va="center", transform=ax.transAxes)
    return _save(fig, path)


def _hist(ax, values: Sequence[float], discrete: bool, extra: tuple[str, Sequence[float]] | None,
          label: str | None) -> None:
    series = [(label, values)] + ([extra] if extra else [])
    allv = [v for _, vs in series for v in vs]
    if not allv:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        return
    lo, hi = min(allv), max(allv)
    if discrete and hi - lo <= 80:
        bins = [x - 0.5 for x in range(int(lo), int(hi) + 2)]
    else:  # shared edges, so overlaid series are comparable
        nb = min(40, max(5, int(math.sqrt(len(allv))) + 1))
        lo, hi = (lo - 0.5, hi + 0.5) if hi == lo else (lo, hi)
        bins = [lo + (hi - lo) * i / nb for i in range(nb + 1)]
    for lab, vs in series:
        if vs:
            ax.hist(vs, bins=bins, alpha=0.75 if extra else 1.0, label=lab, edgecolor="white")
    if extra:
        ax.legend(fontsize=8)


def one_value(*series: Sequence[float]) -> float | None:
    """The value every point of ``series`` has, when they hold points and all of them the same value (a
    histogram of them would be one bar over an empty axis); None otherwise."""
    values = {v for s in series for v in s}
    return next(iter(values)) if len(values) == 1 else None


def histogram(values: Sequence[float], path: Path, title: str, xlabel: str, discrete: bool = False,
              extra: tuple[str, Sequence[float]] | None = None, label: str | None = None) -> Path:
    """A histogram (integer bins when ``discrete``); ``extra`` overlays a second labelled series."""
    fig = Figure(figsize=(6.5, 3.6))
    ax = fig.subplots()
    _hist(ax, values, discrete, extra, label)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if discrete:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return _save(fig, path)


# ---- pass@n ----------------------------------------------------------------------------------

def pass_at_n_figure(counts: Mapping[int, int], n: int) -> Figure:
    """Questions by correct rollouts c of n: one bar centred on each k/n, k = 0..n.

    Colours: k = 0 all wrong, 1 <= k <= n-1 the RL band (a group with a gradient), k = n all right.
    """
    fig = Figure(figsize=(6.5, 3.6))
    ax = fig.subplots()
    n = max(int(n), 1)
    ks = list(range(n + 1))
    xs = [k / n for k in ks]
    heights = [int(counts.get(k, 0)) for k in ks]
    colors = [DROP_COLOR if k == 0 else (KEPT_COLOR if k == n else "#ff9f43") for k in ks]
    ax.bar(xs, heights, width=0.6 / n, color=colors, align="center")
    for x, h in zip(xs, heights):
        ax.text(x, h, f"{h:,}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(xs, [f"{k}/{n}" for k in ks], fontsize=8)
    ax.set_xlim(-0.6 / n, 1 + 0.6 / n)
    ax.set_xlabel(f"c / n: correct rollouts of the n = {n} of a question")
    ax.set_ylabel("questions")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("Per-question success rate (red: all wrong, orange: RL band, green: all right)", fontsize=9)
    return fig


def pass_at_n(counts: Mapping[int, int], n: int, path: Path) -> Path:
    """Write :func:`pass_at_n_figure`."""
    return _save(pass_at_n_figure(counts, n), path)


def bands_figure(rows: Sequence[Mapping]) -> Figure:
    """Questions per band (all wrong, band, all right), one group of bars per measuring model and split.

    ``rows`` are :func:`synth.report.band.band_rows`: each bar is a count of its table, so the figure cannot say
    another number; the splits a pool does not draw from (``in_pool`` false) are drawn pale.
    """
    fig = Figure(figsize=(6.5, 3.6))
    ax = fig.subplots()
    names = [f"{r['model']}\n{r['split']}" for r in rows]
    colors = (DROP_COLOR, "#ff9f43", KEPT_COLOR)
    for j, (band, color) in enumerate(zip(("all_wrong", "rl_pool", "all_right"), colors)):
        xs = [i + (j - 1) * 0.27 for i in range(len(rows))]
        hs = [int(r[band]) for r in rows]
        alphas = [1.0 if r["in_pool"] else 0.35 for r in rows]
        for x, h, a in zip(xs, hs, alphas):
            ax.bar(x, h, width=0.25, color=color, alpha=a)
            ax.text(x, h, f"{h:,}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(list(range(len(rows))), names, fontsize=7)
    ax.set_ylabel("questions")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("Band by model and split (red: all wrong, orange: band = rl_pool rows, green: all right)", fontsize=8)
    return fig


def bands(rows: Sequence[Mapping], path: Path) -> Path:
    """Write :func:`bands_figure`."""
    return _save(bands_figure(rows), path)


# ---- tool calls ------------------------------------------------------------------------------

def tool_calls_figure(calls: Sequence[int], kept: Sequence[bool] | None, t_min: int | None,
                      t_max: int | None = None, low_step_in_chain: bool = True) -> Figure:
    """Tool calls per trace (integer bins), stacked kept / not kept when ``kept`` is known.

    A dashed line at ``t_min - 0.5`` separates the bins the low-step filter drops (fewer than
    T_min calls) from those it keeps; ``t_max + 0.5`` likewise, drawn when it falls near the data.
    """
    fig = Figure(figsize=(6.5, 3.8))
    ax = fig.subplots()
    calls = [int(c) for c in calls]
    if calls:
        lo, hi = min(calls), max(calls)
        if t_min is not None:
            lo = min(lo, t_min - 1)
        show_max = t_max is not None and t_max <= hi + max(3, (hi - lo) // 4)
        if show_max:
            hi = max(hi, t_max + 1)
        bins = [x - 0.5 for x in range(lo, hi + 2)]
        if kept is not None:
            k = [c for c, f in zip(calls, kept) if f]
            d = [c for c, f in zip(calls, kept) if not f]
            ax.hist([k, d], bins=bins, stacked=True, color=[KEPT_COLOR, "#c8d6e5"], edgecolor="white",
                    label=["kept (SFT rows)", "not kept"])
        else:
            ax.hist(calls, bins=bins, color=TRACE_COLOR, edgecolor="white", label="traces")
        ax.set_xlim(lo - 0.5, hi + 0.5)
        suffix = "" if low_step_in_chain else " (low_step not in the chain)"
        if t_min is not None:
            ax.axvline(t_min - 0.5, color="black", linestyle="--", linewidth=1.2, gid="t_min",
                       label=f"T_min = {t_min}: fewer calls dropped{suffix}")
        if show_max:
            ax.axvline(t_max + 0.5, color="#5f27cd", linestyle=":", linewidth=1.2, gid="t_max",
                       label=f"T_max = {t_max}: more calls dropped{suffix}")
        elif t_max is not None:
            ax.plot([], [], " ", label=f"T_max = {t_max} (beyond the axis)")
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.set_title("Tool calls per trace (the T of the low-step filter)")
    ax.set_xlabel("tool calls")
    ax.set_ylabel("traces")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


def tool_calls(calls: Sequence[int], kept: Sequence[bool] | None, t_min: int | None, t_max: int | None,
               path: Path, low_step_in_chain: bool = True) -> Path:
    """Write :func:`tool_calls_figure`."""
    return _save(tool_calls_figure(calls, kept, t_min, t_max, low_step_in_chain), path)


def tool_mix_figure(groups: Mapping[str, Mapping[str, float]], tools: Sequence[str] = ("search", "open", "find")) -> Figure:
    """Mean calls of each of ``tools`` per trace, and of calls that errored (``errors``), one bar group per outcome."""
    fig = Figure(figsize=(6.5, 3.6))
    ax = fig.subplots()
    labels = [*tools, "tool errors"]
    tools = [*tools, "errors"]
    names = list(groups)
    width = 0.8 / max(len(names), 1)
    palette = [KEPT_COLOR, DROP_COLOR, TRACE_COLOR, "#ff9f43"]
    for i, name in enumerate(names):
        xs = [t + (i - (len(names) - 1) / 2) * width for t in range(len(tools))]
        vals = [float(groups[name].get(t, 0.0)) for t in tools]
        ax.bar(xs, vals, width=width, label=name, color=palette[i % len(palette)])
        for x, v in zip(xs, vals):
            ax.text(x, v, f"{v:.1f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(tools)), labels)
    ax.set_ylabel("mean calls per trace")
    ax.set_title("Which tools the traces call")
    if names:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    return fig


def tool_mix(groups: Mapping[str, Mapping[str, float]], path: Path, tools: Sequence[str] = ("search", "open", "find")) -> Path:
    """Write :func:`tool_mix_figure`."""
    return _save(tool_mix_figure(groups, tools), path)


# ---- evidence --------------------------------------------------------------------------------

def erf(curves: dict[str, tuple[list[int], list[float]]], path: Path) -> Path:
    """ERF(t) per teacher model, as step curves."""
    fig = Figure(figsize=(6.5, 3.8))
    ax = fig.subplots()
    for name, (ts, vs) in sorted(curves.items()):
        ax.step(ts, vs, where="post", label=name)
    ax.set_ylim(0, 1.02)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("turn t")
    ax.set_ylabel("ERF(t): recovered by turn t")
    ax.set_title("Evidence recovery (all gold pages seen, or a correct answer)")
    if curves:
        ax.legend(fontsize=8)
    return _save(fig, path)


def calibration(cal: dict[str, dict], path: Path) -> Path:
    """Per teacher: over-confident answer rate, calibration error, and mean over-cautious turns."""
    fig = Figure(figsize=(8, 3.6))
    a1, a2 = fig.subplots(1, 2)
    names = sorted(cal)
    x = range(len(names))
    oc = [cal[n].get("over_confident_rate") or 0.0 for n in names]
    ce = [cal[n].get("ce") or 0.0 for n in names]
    cautious = [cal[n].get("over_cautious_mean_turns") or 0.0 for n in names]
    a1.bar([v - 0.2 for v in x], oc, width=0.4, label="answered before all evidence", color="#ff9f43")
    a1.bar([v + 0.2 for v in x], ce, width=0.4, label="calibration error CE", color="#5f27cd")
    a1.set_xticks(list(x), names, rotation=20, fontsize=8)
    a1.set_ylim(0, 1)
    a1.legend(fontsize=7)
    a1.set_title("Over-confidence and CE")
    a2.bar(list(x), cautious, color=KEPT_COLOR)
    a2.set_xticks(list(x), names, rotation=20, fontsize=8)
    a2.set_ylabel("turns")
    a2.set_title("Turns after full evidence, before answering")
    return _save(fig, path)


__all__ = ["bands", "bands_figure", "calibration", "drops", "erf", "funnel", "funnel_figure", "histogram", "one_value",
           "pass_at_n",
           "pass_at_n_figure", "step_text", "tool_calls", "tool_calls_figure", "tool_mix", "tool_mix_figure"]
