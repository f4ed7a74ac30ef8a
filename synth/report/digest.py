"""The report folder as two runs' reports are compared (:mod:`synth.engine.sameness`).

Every figure, the explorer's page and its data are compared by their bytes, but for two things a report
holds that are not its data:

* ``index.md``'s teacher-cost section (:data:`~synth.report.stage.TEACHER_COST`): what the run paid the
  teacher and what its call cache answered, a run fact (a rerun from the call cache pays for nothing);
* the name of the run's folder, which titles ``index.md``, the explorer's page and its data (``meta.run``):
  like a path inside the run folder, it says where the run lies, not what it made.  The report stage's
  figures count the explorer's bytes, name included, so that figure is left out of them too
  (:func:`report_figures`).
"""

from __future__ import annotations

import hashlib
import html
from pathlib import Path

from synth.engine.sameness import Digest
from synth.report.explorer import js_json
from synth.report.stage import TEACHER_COST

NAMED = ("index.md", "index.html", "explorer/index-data.js")  # the files that name the run's folder


def markdown_without_run_facts(text: str) -> str:
    """``index.md`` without its teacher-cost section (up to the next ``## `` heading)."""
    kept, skipping = [], False
    for line in text.splitlines():
        if line.startswith("## "):
            skipping = line.strip() == TEACHER_COST
        if not skipping:
            kept.append(line)
    return "\n".join(kept)


def _unnamed(text: str, rel: str, name: str) -> str:
    """``text`` of the report file ``rel`` with the folder's ``name`` where the report writes it replaced."""
    if not name:
        return text
    if rel == "index.md":
        return text.replace(f"# hopforge report: `{name}`", "# hopforge report: `DIR`", 1)
    if rel == "index.html":
        return text.replace(html.escape(f"hopforge explorer: {name}"), "hopforge explorer: DIR", 1)
    return text.replace('"meta":{"run":' + js_json(name) + ",", '"meta":{"run":"DIR",', 1)


def report_figures(report: dict) -> dict:
    """The report stage's report without the explorer's size in bytes, which counts the folder's name."""
    explorer = report.get("explorer")
    if isinstance(explorer, dict) and "bytes" in explorer:
        report = {**report, "explorer": {k: v for k, v in explorer.items() if k != "bytes"}}
    return report


def report_file_digest(path: Path, rel: str, name: str = "") -> Digest | None:
    """The digest of a report file that names the run's folder (``name``) or holds run facts, without them;
    None for every other file (compared by the default rule)."""
    if rel not in NAMED:
        return None
    text = _unnamed(Path(path).read_text(encoding="utf-8"), rel, name)
    if rel == "index.md":
        text = markdown_without_run_facts(text)
    return Digest("text", hashlib.sha256(text.encode("utf-8")).hexdigest()[:20])


__all__ = ["NAMED", "markdown_without_run_facts", "report_figures", "report_file_digest"]
