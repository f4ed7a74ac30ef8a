"""The dataset card's decontamination section: which benchmarks the data was kept apart from.

It lists every benchmark file of ``questions.decontaminate`` by format, file name and sha256 (the
exact bytes checked; never a local path, since the card is public), the questions read, and what
each level dropped, from the ``decontamination`` entry of ``reports/questions.json``
(:mod:`synth.decontam.tally`).  Without that entry the card says the questions were not checked
against benchmark files, so a reader never takes silence for a guarantee.
"""

from __future__ import annotations

from synth.decontam.check import LEVELS, REASONS
from synth.engine.reports import QuestionsReport
from synth.text.markdown import md_code


def decontam_section(questions_report: QuestionsReport | None) -> list[str]:
    """The card's lines (a heading, a table, a note on the levels) for the questions stage's report."""
    entry = QuestionsReport.of(questions_report).decontamination
    lines = ["## Decontamination", ""]
    if not entry or not entry.get("benchmarks"):
        return lines + ["The questions were not checked against benchmark files (`questions.decontaminate` was "
                        "empty); only the filter's n-gram check against `filters.decontaminate` ran, if any.", ""]
    levels = [LEVELS[r] for r in REASONS]
    lines += ["Walks and subgraphs that retrace a benchmark question were dropped before any question was written "
              "(**entity**: the answer is the benchmark's answer and another entity is among its pages; **path**: two "
              "consecutive entities are its supporting pages; titles resolved to the corpus's pages), and written "
              "questions sharing an n-gram with a benchmark question and its answer before any rollout (**text**). "
              "The data was decontaminated against these files:", "",
              "| benchmark | file | sha256 | questions | titles resolved | not resolved | "
              + " | ".join(f"dropped: {lv}" for lv in levels) + " |",
              "| --- | --- | --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in levels) + " |"]
    for b in entry["benchmarks"]:
        lines.append(f"| {md_code(b['benchmark'], table=True)} | {md_code(b['file'], table=True)} | "
                     f"{md_code(b['sha256'], table=True)} | {b['questions']:,} | "
                     f"{b['titles_resolved']:,} | {b['titles_unresolved']:,} | "
                     + " | ".join(f"{int(b['dropped'].get(lv, 0)):,}" for lv in levels) + " |")
    return lines + [""]


__all__ = ["decontam_section"]
