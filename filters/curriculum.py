"""Curriculum stages of the RL pool (LiteResearcher's two stages): band rows split by hops and c/n.

LiteResearcher trains in stages, each on the questions its current policy finds neither trivial nor
hopeless.  hopforge cannot re-measure between RL stages (that is the trainer's loop), but it can hand
the trainer the pool already ordered: ``rl.curriculum`` lists stages, each a range of hops and of pass
rate c/n, and every ``rl_pool`` row goes to the *first* stage it fits (so stages never share a row).
Each stage is a table of its own, ``DIR/rl_curriculum/<name>``, in the ``rl_pool`` layout, with
``extra_info.index`` renumbered from 0 as verl expects.  Rows that fit no stage are counted as
``unstaged`` and are still in ``rl_pool``.
"""

from __future__ import annotations

from typing import Any, Iterable

UNSTAGED = "unstaged"


def stage_of(hops: int, n: int, c: int, stages: Iterable[Any]) -> str | None:
    """The name of the first stage whose bounds hold ``hops`` and ``c / n`` (None: none does)."""
    rate = c / n
    for s in stages:
        if hops < s.min_hops or (s.max_hops is not None and hops > s.max_hops):
            continue
        if s.min_pass <= rate <= s.max_pass:
            return s.name
    return None


def split_curriculum(rows: list[dict], hops: dict[str, int], stages: list[Any]) -> tuple[dict[str, list[dict]], int]:
    """``rl_pool`` rows -> ({stage name: its rows, reindexed}, rows in no stage).

    ``hops`` maps a question id to its number of hops.  Every stage is listed, empty or not, so its
    file exists and a trainer config naming it never points at nothing.
    """
    out: dict[str, list[dict]] = {s.name: [] for s in stages}
    unstaged = 0
    for row in rows:
        info = row["extra_info"]
        name = stage_of(hops[info["question_id"]], info["n"], info["c"], stages)
        if name is None:
            unstaged += 1
            continue
        out[name].append({**row, "extra_info": {**info, "index": len(out[name])}})
    return out, unstaged


def write_curriculum(ctx: Any, rows: list[dict], hops: dict[str, int], stages: list[Any], schema: Any) -> dict:
    """Write ``rl_curriculum/<name>`` for every configured stage; returns ``{name: rows, unstaged: n}``."""
    if not stages:
        return {}
    parts, unstaged = split_curriculum(rows, hops, stages)
    for name, stage_rows in parts.items():
        w = ctx.writer(f"rl_curriculum/{name}", schema)
        w.write(stage_rows)
        w.close()
    return {**{name: len(r) for name, r in parts.items()}, UNSTAGED: unstaged}


__all__ = ["UNSTAGED", "split_curriculum", "stage_of", "write_curriculum"]
