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

from synth.decontam.index import BenchIndex, coarse_key
from synth.text.answers import normalize_answer

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


def probe_paths(index: BenchIndex, paths: pa.ListArray | pa.ChunkedArray,
                answers: tuple[np.ndarray, np.ndarray]) -> Probe:
    """The probe of walks: ``paths`` (a list array of page ids per walk) and ``(walk, answer)`` pairs,
    the benchmark answers each walk's last entity is (:func:`last_answers`)."""
    if isinstance(paths, pa.ChunkedArray):
        paths = paths.combine_chunks()
    dense = index.dense(pc.list_flatten(paths))
    parent = np.asarray(pc.list_parent_indices(paths).to_numpy(), np.int64)
    same = parent[:-1] == parent[1:]  # consecutive entries of one walk
    offsets = np.asarray(paths.offsets.to_numpy(), np.int64)
    w, aid = (np.asarray(x, np.int64) for x in answers)
    start, stop = offsets[w], offsets[w + 1] - 1  # every entity of the walk but the answer itself
    n = np.maximum(stop - start, 0)
    rows = np.repeat(np.arange(len(w)), n)
    pos = np.repeat(start, n) + (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n))
    return Probe(parent[:-1][same], dense[:-1][same], dense[1:][same], w[rows], aid[rows], dense[pos])


def last_answers(index: BenchIndex, last_ids: pa.Array, names: pa.ListArray) -> tuple[np.ndarray, np.ndarray]:
    """The benchmark answers each walk's last entity is (:meth:`BenchIndex.answers_of`), in bulk:
    ``(walk, answer)`` pairs, sorted by walk.

    ``last_ids`` are the last pages, ``names`` their names (title and aliases).  Pages that are an
    answer's page are found in Arrow; of the names, only those whose :func:`coarse_key` is an answer's
    are normalised in Python, each distinct name once, so a million walks cost a fraction of a second."""
    keys, starts, flat_aids = index.answer_page_arrays()
    pos = index_of(last_ids, keys)
    w1 = np.flatnonzero(pos >= 0)
    n1 = starts[pos[w1] + 1] - starts[pos[w1]]
    first = np.repeat(starts[pos[w1]], n1) + (np.arange(n1.sum()) - np.repeat(np.cumsum(n1) - n1, n1))
    rows, aids = [np.repeat(w1, n1)], [flat_aids[first]]
    flat = pc.list_flatten(names)
    hit = pc.fill_null(pc.is_in(coarse_key(flat), value_set=index.coarse_answers()), False)
    if pc.any(hit).as_py():
        enc = pc.dictionary_encode(flat.filter(hit))
        ids = np.array([index.answer_ids.get(normalize_answer(x or ""), -1) for x in enc.dictionary.to_pylist()]
                       + [-1], np.int64)
        a2 = ids[np.asarray(pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False), np.int64)]
        p2 = np.asarray(pc.list_parent_indices(names).filter(hit).to_numpy(), np.int64)
        rows.append(p2[a2 >= 0])
        aids.append(a2[a2 >= 0])
    both = np.unique(np.concatenate(rows) * (len(index.answer_ids) + 1) + np.concatenate(aids))
    return both // (len(index.answer_ids) + 1), both % (len(index.answer_ids) + 1)


def index_of(values: pa.Array, keys: pa.Array) -> np.ndarray:
    """Position of each value in ``keys`` (-1: absent), in Arrow."""
    return np.asarray(pc.fill_null(pc.index_in(values, value_set=keys), -1).to_numpy(zero_copy_only=False), np.int64)


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
    """Source index -> (drop reason, benchmark question row), for every source that retraces one.

    Walks go through the bulk path (:func:`probe_paths`, :func:`last_answers`), subgraphs one by one."""
    out: dict[int, tuple[str, int]] = {}
    walks = [i for i, s in enumerate(sources) if s.kind == "walk"]
    others = [i for i, s in enumerate(sources) if s.kind != "walk"]
    if walks:
        ents = [sources[i].entities for i in walks]
        paths = pa.array([[e["page_id"] for e in es] for es in ents], pa.list_(pa.string()))
        last = pa.array([es[-1]["page_id"] for es in ents], pa.string())
        names = pa.array([[es[-1].get("title") or "", *(es[-1].get("aliases") or [])] for es in ents],
                         pa.list_(pa.string()))
        level, owner = match(index, probe_paths(index, paths, last_answers(index, last, names)), len(walks))
        out.update({walks[i]: (MATCH_REASONS[level[i]], int(owner[i])) for i in np.flatnonzero(level)})
    if others:
        level, owner = match(index, probe_sources(index, [sources[i] for i in others]), len(others))
        out.update({others[i]: (MATCH_REASONS[level[i]], int(owner[i])) for i in np.flatnonzero(level)})
    return dict(sorted(out.items()))


def describe(index: BenchIndex, row: int, titles: Iterable[str]) -> str:
    """A drop's detail: the path and the benchmark question it retraces."""
    q, bench = index.questions[row], index.benchmarks[index.owner_bench[row]]
    return (f"{' -> '.join(titles)} retraces {bench.format} {bench.file} question {q.qid}: "
            f"{q.question[:160]!r} (answer {q.answers[0] if q.answers else '-'!r})")


__all__ = ["ENTITY", "LEVELS", "MATCH_REASONS", "PATH", "Probe", "REASONS", "TEXT", "contaminated", "describe",
           "index_of", "last_answers", "match", "probe_paths", "probe_sources"]
