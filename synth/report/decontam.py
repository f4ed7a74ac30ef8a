"""The report's decontamination section: per benchmark file, what was read and what it kept out.

It reads the ``decontamination`` entry the questions stage leaves in ``reports/questions.json``
(:mod:`synth.decontam.tally`): each file's format, name and sha256, the questions read, the
titles resolved to corpus pages and those that were not (with examples), and the walks,
subgraphs and questions dropped at each level (entity, path: before a question was written;
text: before rollout), with a few examples each.  The explorer lists the same drops as questions
dropped by the questions stage, under their reasons, like any other.
"""

from __future__ import annotations

from typing import Any

from synth.decontam.check import LEVELS, REASONS
from synth.engine.reports import QuestionsReport
from synth.text.markdown import md_code, md_text, one_line


def _cell(text: Any, width: int = 90) -> str:
    """``text`` cut to ``width`` characters, as Markdown text (:func:`synth.text.markdown.md_text`)."""
    s = one_line(text if text is not None else "-")
    return md_text(s if len(s) <= width else s[: width - 1] + "…")


def _example(level: str, ex: dict) -> str:
    if level == "text":
        return f"question {_cell(ex.get('question'))} shares “{_cell(ex.get('ngram'), 60)}”"
    path = " → ".join(ex.get("titles") or [])
    return (f"{_cell(ex.get('kind', 'walk'))} {_cell(path, 70)} retraces {_cell(ex.get('benchmark_question'), 40)}: "
            f"{_cell(ex.get('question'), 70)} (answer {_cell(ex.get('answer'), 30)})")


def decontamination_section(md: list[str], questions_report: QuestionsReport | None) -> dict | None:
    """Append the section to ``md`` when the questions stage decontaminated; returns its entry (or None)."""
    entry = QuestionsReport.of(questions_report).decontamination
    if not entry:
        return None
    levels = [LEVELS[r] for r in REASONS]
    md += ["## Decontamination", "",
           "Benchmark questions kept out of the data. **entity** and **path** drops are walks and subgraphs that "
           "retrace a benchmark question (its answer and another of its pages; two consecutive supporting pages): "
           "no question was written for them. **text** drops are written questions that share an n-gram with a "
           "benchmark question and its answer: no rollout was spent on them.", "",
           "| benchmark | file | sha256 | questions | titles resolved | not resolved | "
           + " | ".join(levels) + " |", "| --- | --- | --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in levels)
           + " |"]
    for b in entry["benchmarks"]:
        md.append(f"| {_cell(b['benchmark'])} | {_cell(b['file'], 40)} | {md_code(b['sha256'][:12], table=True)} | "
                  f"{b['questions']:,} | "
                  f"{b['titles_resolved']:,} | {b['titles_unresolved']:,} | "
                  + " | ".join(f"{b['dropped'].get(lv, 0):,}" for lv in levels) + " |")
    md.append("")
    for b in entry["benchmarks"]:
        lines = [f"- {lv}: {_example(lv, ex)}" for lv in levels for ex in (b.get("examples") or {}).get(lv, [])]
        if b["unresolved_examples"]:
            shown = ", ".join(f"“{_cell(t, 50)}”" for t in b["unresolved_examples"])
            lines.append(f"- titles not resolved, e.g. {shown}")
        if lines:
            md += [f"**{_cell(b['benchmark'])}** ({_cell(b['file'], 40)}):", "", *lines, ""]
    return entry


__all__ = ["decontamination_section"]
