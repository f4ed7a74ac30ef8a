"""The entity and path levels: which walks and subgraphs retrace a benchmark question.

* **path** (``contaminated_path``): two consecutive entities of a walk (two ends of an edge of a
  subgraph) are both supporting pages of one benchmark question;
* **entity** (``contaminated_entity``): the source's answer entity *is* a benchmark answer (one of
  its normalised names, or its page, is the answer) and at least one other entity of the source
  is among that question's supporting or linked pages.  A walk's answer is its last entity; a
  subgraph's question may end at any node, so every node is tried.

A source that matches both is counted once, as ``path``.  The lookups are array work: every
source becomes flat probe arrays (:class:`Probe`) of dense page ids, keys are computed in numpy
and found in the index's sorted keys by binary search, so a million walks cost seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from synth.decontam.index import BenchIndex

ENTITY = "contaminated_entity"
PATH = "contaminated_path"
TEXT = "contaminated_text"
REASONS = (ENTITY, PATH, TEXT)
LEVELS = {ENTITY: "entity", PATH: "path", TEXT: "text"}  # a reason's level, as the report names it


@dataclass
class Probe:
    """What to look up, flat: page pairs (path level) and (answer, page) pairs (entity level), each
    row tagged with the index of the source it comes from."""

    pair_src: np.ndarray
    pair_a: np.ndarray
    pair_b: np.ndarray
    ent_src: np.ndarray
    ent_answer: np.ndarray
    ent_page: np.ndarray


def probe_paths(index: BenchIndex, paths: pa.ListArray | pa.ChunkedArray, last_answers: Sequence[Sequence[int]]
                ) -> Probe:
    """The probe of walks: ``paths`` (a list array of page ids per walk) and the benchmark answers of
    each walk's last entity (:meth:`BenchIndex.answers_of`; mostly empty)."""
    if isinstance(paths, pa.ChunkedArray):
        paths = paths.combine_chunks()
    dense = index.dense(pc.list_flatten(paths))
    parent = np.asarray(pc.list_parent_indices(paths).to_numpy(), np.int64)
    same = parent[:-1] == parent[1:]  # consecutive entries of one walk
    offsets = np.asarray(paths.offsets.to_numpy(), np.int64)
    w = np.repeat(np.arange(len(last_answers), dtype=np.int64), [len(a) for a in last_answers])
    aid = np.fromiter((a for ans in last_answers for a in ans), np.int64, count=len(w))
    start, stop = offsets[w], offsets[w + 1] - 1  # every entity of the walk but the answer itself
    n = np.maximum(stop - start, 0)
    rows = np.repeat(np.arange(len(w)), n)
    pos = np.repeat(start, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
    return Probe(parent[:-1][same], dense[:-1][same], dense[1:][same], w[rows], aid[rows], dense[pos])


def probe_sources(index: BenchIndex, sources: Sequence) -> Probe:
    """The probe of question sources (walks and subgraphs, :class:`synth.teacher.tasks.Source`)."""
    pairs: list[tuple[int, str, str]] = []
    ents: list[tuple[int, int, str]] = []
    answers: dict[str, list[int]] = {}  # page id -> answers, each page looked up once
    for i, src in enumerate(sources):
        ids = [e["page_id"] for e in src.entities]
        if src.kind == "walk":
            pairs += [(i, a, b) for a, b in zip(ids, ids[1:])]
            candidates = src.entities[-1:]
        else:
            pairs += [(i, ev.src_id, ev.dst_id) for ev in src.links]
            candidates = src.entities
        for e in candidates:
            pid = e["page_id"]
            if pid not in answers:
                answers[pid] = index.answers_of(pid, [e.get("title") or "", *(e.get("aliases") or [])])
            ents += [(i, a, other) for a in answers[pid] for other in ids if other != pid]
    ps, pa_, pb = zip(*pairs) if pairs else ((), (), ())
    es, ea, ep = zip(*ents) if ents else ((), (), ())
    return Probe(np.array(ps, np.int64), index.dense(list(pa_)), index.dense(list(pb)),
                 np.array(es, np.int64), np.array(ea, np.int64), index.dense(list(ep)))


def _first_hits(keys: np.ndarray, table: np.ndarray, owner: np.ndarray, src: np.ndarray,
                n: int) -> np.ndarray:
    """Per source, the owner of its first key found in ``table`` (-1: none)."""
    out = np.full(n, -1, np.int32)
    if not len(keys) or not len(table):
        return out
    pos = np.minimum(np.searchsorted(table, keys), len(table) - 1)
    hit = table[pos] == keys
    srcs, first = np.unique(src[hit], return_index=True)  # probe rows are in source order: first hit wins
    out[srcs] = owner[pos[hit]][first]
    return out


def match(index: BenchIndex, probe: Probe, n_sources: int) -> tuple[np.ndarray, np.ndarray]:
    """``(reason index into (None, PATH, ENTITY), benchmark question row)`` per source: 0 and -1 when clean."""
    a, b, m = probe.pair_a, probe.pair_b, index.m
    ok = (a >= 0) & (b >= 0) & (a != b)
    keys = np.minimum(a, b)[ok] * m + np.maximum(a, b)[ok]
    path = _first_hits(keys, index.pair_keys, index.pair_owner, probe.pair_src[ok], n_sources)
    ok = probe.ent_page >= 0
    keys = probe.ent_answer[ok] * m + probe.ent_page[ok]
    entity = _first_hits(keys, index.entity_keys, index.entity_owner, probe.ent_src[ok], n_sources)
    level = np.where(path >= 0, 1, np.where(entity >= 0, 2, 0)).astype(np.int8)
    return level, np.where(path >= 0, path, entity).astype(np.int32)


MATCH_REASONS = (None, PATH, ENTITY)  # match()'s level codes, as drop reasons


def contaminated(index: BenchIndex, sources: Sequence) -> dict[int, tuple[str, int]]:
    """Source index -> (drop reason, benchmark question row), for every source that retraces one."""
    level, owner = match(index, probe_sources(index, sources), len(sources))
    return {int(i): (MATCH_REASONS[level[i]], int(owner[i])) for i in np.flatnonzero(level)}


def describe(index: BenchIndex, row: int, titles: Iterable[str]) -> str:
    """A drop's detail: the path and the benchmark question it retraces."""
    q, bench = index.questions[row], index.benchmarks[index.owner_bench[row]]
    return (f"{' -> '.join(titles)} retraces {bench.format} {bench.file} question {q.qid}: "
            f"{q.question[:160]!r} (answer {q.answers[0] if q.answers else '-'!r})")


__all__ = ["ENTITY", "LEVELS", "MATCH_REASONS", "PATH", "Probe", "REASONS", "TEXT", "contaminated", "describe",
           "match", "probe_paths", "probe_sources"]
