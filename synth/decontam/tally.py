"""Drops per benchmark and level, with examples: the ``decontamination`` entry of ``reports/questions.json``.

A shard counts what it dropped (:class:`Tally`, plain data so a worker process can return it);
:func:`merge` adds the shards up in shard order (so the examples are the first drops in source
order, whatever ran where) and :func:`report` puts the counts beside each file's facts (questions
read, titles resolved and not, sha256).  The report, the explorer and the dataset card read it.
"""

from __future__ import annotations

from collections import Counter

from synth.decontam.check import LEVELS, REASONS

EXAMPLES = 3  # per benchmark and level


class Tally:
    """One shard's drops: per benchmark (its position in ``questions.decontaminate``) and level."""

    def __init__(self) -> None:
        self.dropped: dict[int, Counter[str]] = {}
        self.examples: dict[int, dict[str, list[dict]]] = {}

    def add(self, bench: int, reason: str, example: dict) -> None:
        """Count one drop of ``reason`` against benchmark ``bench``, keeping the first few as examples."""
        level = LEVELS[reason]
        self.dropped.setdefault(bench, Counter())[level] += 1
        kept = self.examples.setdefault(bench, {}).setdefault(level, [])
        if len(kept) < EXAMPLES:
            kept.append(example)

    def as_dict(self) -> dict:
        """JSON-ready: ``{bench: {"dropped": {level: n}, "examples": {level: [...]}}}`` (keys as strings)."""
        return {str(b): {"dropped": dict(c), "examples": self.examples.get(b, {})} for b, c in self.dropped.items()}


def merge(parts: list[dict]) -> dict:
    """The shards' :meth:`Tally.as_dict` added up, in the order given."""
    out: dict[str, dict] = {}
    for part in parts:
        for bench, d in (part or {}).items():
            slot = out.setdefault(bench, {"dropped": Counter(), "examples": {}})
            slot["dropped"].update(d["dropped"])
            for level, exs in d["examples"].items():
                kept = slot["examples"].setdefault(level, [])
                kept += exs[: EXAMPLES - len(kept)]
    return {b: {"dropped": dict(v["dropped"]), "examples": v["examples"]} for b, v in out.items()}


def report(files: list[dict], merged: dict) -> dict:
    """Each file's facts with its drops per level (every level listed, zeros included) and examples,
    and the drops per reason over all files (they equal the stage's ``dropped`` for these reasons)."""
    benches = []
    for i, facts in enumerate(files):
        got = merged.get(str(i), {})
        benches.append({**facts, "dropped": {LEVELS[r]: int((got.get("dropped") or {}).get(LEVELS[r], 0))
                                             for r in REASONS},
                        "examples": got.get("examples") or {}})
    totals = {r: sum(b["dropped"][LEVELS[r]] for b in benches) for r in REASONS}
    return {"benchmarks": benches, "dropped": totals}


__all__ = ["EXAMPLES", "Tally", "merge", "report"]
