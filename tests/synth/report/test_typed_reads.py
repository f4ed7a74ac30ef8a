"""No report, publish or flows module reads a stage's report through string keys: they read the typed reports of
:mod:`synth.engine.reports` (``reports.filter.chain``, not ``reports.get("filter").get("chain")``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCOPE = ("synth/report", "synth/publish", "flows")

# A fact of a stage report, by the key the stage writes it under.
REPORT_KEYS = ("input", "output", "dropped", "failed", "teacher", "chain", "reason_order", "band_by", "band_model",
               "bands_by_split", "bands_of_splits", "context", "reasoning", "match", "answers", "preference", "pass",
               "guidance", "sft_rows", "depth", "adversaries", "repairs", "decontamination", "repeats", "source",
               "links", "share_of_assistant_tokens", "traces_with_reasoning", "by_rejected", "pairs",
               "full_depth_share", "hops_caught", "max_answer_repeats", "without_correct_rollout", "judge", "baselines")
OLD_READS = [
    re.compile(r"""\breports\.get\(\s*["']"""),  # a stage's report by a literal name: use its attribute
    re.compile(r"""\breports\[\s*["']"""),
    re.compile(r"""\.get\(\s*["'](?:%s)["']""" % "|".join(map(re.escape, REPORT_KEYS))),
    re.compile(r"""\b(?:fr|filter_report|questions_report|rollout_report|ingest)\s*\[\s*["']"""),
    re.compile(r"""["'](?:%s)["']\s+in\s+(?:fr|filter_report|r|q|report)\b""" % "|".join(map(re.escape, REPORT_KEYS))),
]
# Reads that look alike but are not of a stage report: the manifest's entries, a row of a table (rl_pool's
# extra_info, a source record), a funnel step.
ALLOWED = [re.compile(r"""stages\.get\(|manifest\.get\(|\(e or \{\}\)\.get\("""),
           re.compile(r"""\bi\.get\("band_model"\)|\(src or \{\}\)\.get\("links"\)|\bstep\.get\("dropped"\)""")]


def old_reads(text: str) -> list[str]:
    """The lines of ``text`` that read a report through string keys."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        if any(a.search(code) for a in ALLOWED):
            continue
        if any(p.search(code) for p in OLD_READS):
            out.append(f"{i}: {line.strip()}")
    return out


def test_no_report_is_read_through_string_keys() -> None:
    found = {}
    for top in SCOPE:
        for p in sorted((ROOT / top).rglob("*.py")):
            if lines := old_reads(p.read_text()):
                found[str(p.relative_to(ROOT))] = lines
    assert found == {}


def test_the_guard_catches_the_old_reads() -> None:
    # The reads this guard replaced, as they were written: each must be caught.
    old = [
        'pooled = set((reports.get("filter") or {}).get("bands_of_splits") or [])',
        'ctx, r = fr.get("context") or {}, fr.get("reasoning") or {}',
        'rows.append(("traces", f"{int(r.get(\'output\', 0)):,}"))',
        'usage = TeacherUsage.from_report((reports.get(name) or {}).get("teacher"))',
        'repeats = (reports.get("walks") or {}).get("repeats")',
        'who = " and ".join(w for w, on in (("LLM judge", "judge" in fr),) if on)',
        'for name in adv["names"]:',
    ]
    caught = [line for line in old if old_reads(line)]
    assert caught == old[:-1]  # a subscript of a nested fact is not in the patterns; the attribute is the fix there
    assert old_reads('entry = (stages.get("ingest") or {}).get("extra")') == []
    assert old_reads("pooled = set(reports.filter.bands_of_splits if reports.filter else [])") == []
