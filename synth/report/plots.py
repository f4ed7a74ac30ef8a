"""The report's figures (matplotlib, no GUI): each function writes one PNG and returns its path.

Figures are built on :class:`matplotlib.figure.Figure` directly, not ``pyplot``, so
nothing depends on a display or on global state (the Agg canvas renders them).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

DPI = 110


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


def funnel(stages: Sequence[tuple[str, int, int]], path: Path) -> Path:
    """Input and output of each stage, in pipeline order (log scale: units differ per stage)."""
    fig = Figure(figsize=(7, 0.6 * len(stages) + 1.5))
    ax = fig.subplots()
    names = [s for s, _, _ in stages][::-1]
    ins = [max(i, 0) for _, i, _ in stages][::-1]
    outs = [max(o, 0) for _, _, o in stages][::-1]
    y = range(len(names))
    ax.barh([v + 0.2 for v in y], ins, height=0.4, color="#c8d6e5", label="input")
    ax.barh([v - 0.2 for v in y], outs, height=0.4, color="#2e86de", label="output")
    for v, (i, o) in zip(y, zip(ins, outs)):
        ax.text(max(o, 1), v - 0.2, f" {o:,}", va="center", fontsize=8)
        ax.text(max(i, 1), v + 0.2, f" {i:,}", va="center", fontsize=8, color="#576574")
    ax.set_yticks(list(y), names)
    if any(ins) or any(outs):
        ax.set_xscale("log")
    ax.set_xlabel("records (log scale)")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Funnel: records in and out of each stage")
    return _save(fig, path)


def drops(reasons: Sequence[tuple[str, int]], path: Path) -> Path:
    """Dropped records by ``stage: reason``."""
    fig = Figure(figsize=(7, 0.32 * max(len(reasons), 1) + 1.5))
    ax = fig.subplots()
    labels = [r for r, _ in reasons][::-1]
    counts = [c for _, c in reasons][::-1]
    ax.barh(range(len(labels)), counts, color="#ee5253")
    for v, c in enumerate(counts):
        ax.text(c, v, f" {c:,}", va="center", fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel("records dropped")
    ax.set_title("Drops by stage and reason")
    if not reasons:
        ax.text(0.5, 0.5, "no drops", ha="center", va="center", transform=ax.transAxes)
    return _save(fig, path)


def histogram(values: Sequence[float], path: Path, title: str, xlabel: str, discrete: bool = False,
              extra: tuple[str, Sequence[float]] | None = None, label: str | None = None) -> Path:
    """A histogram (integer bins when ``discrete``); ``extra`` overlays a second labelled series."""
    fig = Figure(figsize=(6.5, 3.6))
    ax = fig.subplots()
    series = [(label, values)] + ([extra] if extra else [])
    allv = [v for _, vs in series for v in vs]
    if allv:
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
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    return _save(fig, path)


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
    a2.bar(list(x), cautious, color="#10ac84")
    a2.set_xticks(list(x), names, rotation=20, fontsize=8)
    a2.set_ylabel("turns")
    a2.set_title("Turns after full evidence, before answering")
    return _save(fig, path)


__all__ = ["calibration", "drops", "erf", "funnel", "histogram"]
