"""Config of the link graph, the walks and subgraph expansion (``graph:``, ``walk:``, ``expand:``)."""

from __future__ import annotations

from pydantic import Field, field_validator

from synth.engine.config import Section, operational


class GraphConfig(Section):
    memory_limit: str = operational("DuckDB memory limit for building the edge list (spills past it).", "2GB")


class WalkConfig(Section):
    hops: int = Field(8, ge=1, le=64, description="Hops per walk; a walk has hops+1 pages.")
    num_walks: int = Field(1000, ge=1, description="Number of walks to emit.")
    max_in_degree: int | None = Field(
        None, ge=1, description="Pages with more in-links than this (hubs) are never visited. None: no limit."
    )
    exclude_patterns: list[str] = Field(
        default_factory=lambda: [r"^\d{1,4}(s| BC| AD)?$", r"^List of ", r"^Lists of ", r"\(disambiguation\)$"],
        description="Regular expressions; pages whose title matches any are never visited (dates, lists).",
    )
    chordless: bool = Field(True, description="Reject paths with a shortcut edge v_i -> v_j, j > i+1.")
    max_attempts: int = Field(
        4, ge=1, le=1000, description="Attempts per walk slot: a dead end restarts the walk from a new start page."
    )
    max_answer_repeats: int | None = Field(
        3, ge=1, description="A page ends at most this many walks (is at most this many questions' answer); "
        "later walks, in slot order, that would end on it again are dropped (`answer_repeat`). None: no cap.")
    max_bridge_repeats: int | None = Field(
        5, ge=1, description="A page is an inner (bridge) entity of at most this many walks (`bridge_repeat`). "
        "None: no cap.")
    incremental: bool = Field(
        False, description="Keep existing walks whose pages and edges still exist; only add new ones."
    )

    @field_validator("exclude_patterns")
    @classmethod
    def _patterns_compile(cls, v: list[str]) -> list[str]:
        import re

        for p in v:
            try:
                re.compile(p)
            except re.error as e:  # pragma: no cover - message path tested via ConfigError
                raise ValueError(f"bad regular expression {p!r}: {e}") from e
        return v


def walk_slot_bytes(hops: int) -> int:
    """Bytes the walks stage holds per slot of ``walk.num_walks`` at its peak (``run_walks``), an upper bound: the
    slots' paths (``hops + 1`` int32 each), the walked ones' copies while twins are found (about six paths a slot
    in all) and a few int64 indexes and flags.  ``tests/synth/graph/test_walks.py`` measures it."""
    return 8 * 4 * (hops + 1) + 16


class ExpandConfig(Section):
    num_subgraphs: int = Field(100, ge=0, description="Number of subgraphs to expand (0 disables the stage).")
    budget: int = Field(12, ge=2, le=256, description="K: pages per subgraph (OpenSeeker-v2 graph expansion).")
    max_attempts: int = Field(4, ge=1, le=1000, description="Seeds tried per subgraph slot before giving up.")
