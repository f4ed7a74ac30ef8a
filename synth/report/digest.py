"""The report folder as two runs' reports are compared (:mod:`synth.engine.sameness`).

Every figure, the explorer's page and its data are compared by their bytes.  ``index.md`` is compared
without its teacher-cost section (:data:`~synth.report.stage.TEACHER_COST`): that section says what the
run paid the teacher and what its call cache answered, a run fact (a rerun from the call cache pays for
nothing), while every other section is the data's.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from synth.engine.sameness import Digest
from synth.report.stage import TEACHER_COST


def markdown_without_run_facts(text: str) -> str:
    """``index.md`` without its teacher-cost section (up to the next ``## `` heading)."""
    kept, skipping = [], False
    for line in text.splitlines():
        if line.startswith("## "):
            skipping = line.strip() == TEACHER_COST
        if not skipping:
            kept.append(line)
    return "\n".join(kept)


def report_file_digest(path: Path, rel: str) -> Digest | None:
    """The digest of ``index.md`` without its run facts; None for every other file of the report (compared by
    the default rule)."""
    if rel != "index.md":
        return None
    text = markdown_without_run_facts(Path(path).read_text(encoding="utf-8"))
    return Digest("markdown", hashlib.sha256(text.encode("utf-8")).hexdigest()[:20])


__all__ = ["markdown_without_run_facts", "report_file_digest"]
