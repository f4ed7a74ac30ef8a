"""Which pages walks and subgraph expansion may visit.

Two rules, both from ``cfg.walk``:

* **hubs** — a page with more in-links than ``max_in_degree`` ("United States",
  "Water") links almost everything to almost everything, so a path through it
  carries no information and makes questions trivial;
* **titles** — a page whose title matches one of ``exclude_patterns`` (years,
  "List of ...", disambiguation pages) is an index, not an entity.

The result is a boolean mask over nodes plus the number of pages excluded by
each reason (a page that breaks both rules is counted once, under ``title``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from synth.graph.config import WalkConfig
from synth.graph.csr import CSRGraph


@dataclass(slots=True)
class NodeFilter:
    """``allowed[u]`` says whether node u may be visited; ``excluded`` counts the others by reason."""

    allowed: np.ndarray
    excluded: dict[str, int] = field(default_factory=dict)

    @property
    def num_allowed(self) -> int:
        """How many nodes may be visited."""
        return int(self.allowed.sum())


def title_mask(titles: pa.Array, patterns: list[str]) -> np.ndarray:
    """True where a title matches any of ``patterns`` (Python ``re.search`` semantics).

    Arrow's RE2 matcher runs over the whole column in C++; a pattern RE2 cannot
    compile (look-arounds, back-references) falls back to Python's ``re`` so every
    pattern the config accepts works.
    """
    hit = np.zeros(len(titles), dtype=np.bool_)
    titles = titles.fill_null("")
    for pattern in patterns:
        try:
            m = pc.match_substring_regex(titles, pattern=pattern)
            hit |= m.to_numpy(zero_copy_only=False).astype(np.bool_)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            rx = re.compile(pattern)
            hit |= np.fromiter((rx.search(t) is not None for t in titles.to_pylist()), np.bool_, len(titles))
    return hit


def node_filter(graph: CSRGraph, cfg: WalkConfig) -> NodeFilter:
    """The visit mask of ``graph`` under ``cfg.max_in_degree`` and ``cfg.exclude_patterns``."""
    excluded_title = title_mask(graph.titles, cfg.exclude_patterns) if cfg.exclude_patterns else \
        np.zeros(graph.num_nodes, np.bool_)
    hub = np.zeros(graph.num_nodes, np.bool_)
    if cfg.max_in_degree is not None:
        hub = graph.in_degree() > cfg.max_in_degree
    allowed = ~(excluded_title | hub)
    return NodeFilter(allowed, {"title": int(excluded_title.sum()), "hub": int((hub & ~excluded_title).sum())})
