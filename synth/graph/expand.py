"""``hopforge expand``: evidence subgraphs ``G_sub = Expand(G, v_seed, K)`` (OpenSeeker-v2).

From a seed page, grow a connected set of K = ``expand.budget`` pages: at every step
add one page drawn uniformly from the *frontier*, the allowed pages linked to or
from the set and not yet in it.  Links are followed in both directions, so the set
is weakly connected by construction.  The subgraph keeps every link among its pages
(the induced edges), each with its evidence, so a question written from it can need
several edges at once rather than one chain.

Pages the node filter excludes (hubs, dates, lists; the ``walk`` section's rules)
are never added.  A seed whose reachable allowed region has fewer than K pages is a
failed attempt; a slot retries with a new seed up to ``expand.max_attempts`` times,
then is dropped as ``too_small``.  Seeds and choices are counter-based draws of
(run seed, "expand", slot, attempt, step), so slots are reproducible one by one.
"""

from __future__ import annotations

import hashlib
import logging

import networkx as nx
import numpy as np
import pyarrow as pa

from synth.graph.evidence import lookup_evidence, to_structs
from synth.graph.csr import CSRGraph, open_graph, sorted_unique, table_files
from synth.graph.nodefilter import node_filter
from synth.engine.stage import StageContext, StageResult
from synth.engine.records import Subgraph
from synth.engine.seeding import draw_index, stream_key

log = logging.getLogger("hopforge")

EVIDENCE_CHUNK = 5_000  # subgraphs per evidence query and output shard


def seed_nodes(graph: CSRGraph, allowed: np.ndarray) -> np.ndarray:
    """Pages a subgraph may grow from: allowed and linked to or from at least one page."""
    return np.flatnonzero(allowed & ((graph.out_degree() + graph.in_degree()) > 0)).astype(np.int64)


def expand(graph: CSRGraph, allowed: np.ndarray, seed: int, budget: int, key, slot: int,
           attempt: int) -> np.ndarray | None:
    """``Expand(G, seed, K)`` for one attempt.

    Returns the K chosen nodes in order of addition (seed first), or None when the
    allowed region reachable from the seed holds fewer than K pages.
    """
    chosen = [seed]
    frontier = np.empty(0, dtype=np.int64)
    v = seed
    for step in range(1, budget):
        around = np.concatenate((graph.neighbors(v), graph.predecessors(v))).astype(np.int64)
        around = sorted_unique(around[allowed[around]])
        fresh = around[~np.isin(around, chosen) & ~np.isin(around, frontier)]
        frontier = np.concatenate((frontier, fresh))
        if frontier.size == 0:
            return None
        i = draw_index(key, frontier.size, slot, attempt, step)
        v = int(frontier[i])
        chosen.append(v)
        frontier = np.delete(frontier, i)
    return np.asarray(chosen, dtype=np.int64)


def expand_slot(graph: CSRGraph, allowed: np.ndarray, seeds: np.ndarray, budget: int, key, slot: int,
                max_attempts: int) -> tuple[np.ndarray | None, int]:
    """Try up to ``max_attempts`` seeds for ``slot``; returns (nodes or None, attempts used)."""
    for attempt in range(max_attempts):
        seed = int(seeds[draw_index(key, seeds.size, slot, attempt, 0)])
        nodes = expand(graph, allowed, seed, budget, key, slot, attempt)
        if nodes is not None:
            return nodes, attempt + 1
    return None, max_attempts


def induced_subgraph(graph: CSRGraph, nodes: np.ndarray) -> nx.DiGraph:
    """The networkx subgraph induced by ``nodes``; checks it has them all and is weakly connected."""
    sub = graph.to_networkx(nodes)
    if sub.number_of_nodes() != len(nodes) or not nx.is_weakly_connected(sub):
        raise AssertionError(f"expanded node set {nodes.tolist()} is not a connected subgraph")
    return sub


def subgraph_id(page_ids: list[str]) -> str:
    """Content address of a node set: 16 hex digits of sha1 over its sorted page ids."""
    return hashlib.sha1("\x1f".join(sorted(page_ids)).encode()).hexdigest()[:16]


def _write(ctx: StageContext, graph: CSRGraph, found: list[tuple[int, np.ndarray]]) -> int:
    """Write the subgraphs with the evidence of every induced edge; returns unverified anchors."""
    pages, links = table_files(ctx.store, "corpus/pages"), table_files(ctx.store, "corpus/links")
    writer = ctx.writer("subgraphs", Subgraph.SCHEMA, rows_per_shard=EVIDENCE_CHUNK)
    unverified = 0
    for lo in range(0, len(found), EVIDENCE_CHUNK):
        chunk = found[lo:lo + EVIDENCE_CHUNK]
        edges = [sorted(induced_subgraph(graph, nodes).edges()) for _, nodes in chunk]
        src = np.array([u for es in edges for u, _ in es], dtype=np.int64)
        dst = np.array([v for es in edges for _, v in es], dtype=np.int64)
        ev = lookup_evidence(pages, links, graph.page_ids.take(pa.array(src)), graph.page_ids.take(pa.array(dst)),
                             memory_limit=ctx.cfg.graph.memory_limit, tmp=ctx.staging / "_tmp")
        unverified += ev.num_rows - int(np.asarray(ev.column("verified")).sum())
        flat = np.concatenate([nodes for _, nodes in chunk])
        node_offsets = pa.array(np.concatenate([[0], np.cumsum([len(n) for _, n in chunk])]).astype(np.int32))
        edge_offsets = pa.array(np.concatenate([[0], np.cumsum([len(e) for e in edges])]).astype(np.int32))
        ids = graph.page_ids.take(pa.array(flat))
        writer.write(pa.table({
            "subgraph_id": pa.array([subgraph_id(x) for x in pa.ListArray.from_arrays(node_offsets, ids).to_pylist()],
                                    pa.string()),
            "seed_id": ids.take(node_offsets.slice(0, len(chunk))),
            "nodes": pa.ListArray.from_arrays(node_offsets, ids),
            "titles": pa.ListArray.from_arrays(node_offsets, graph.titles.take(pa.array(flat))),
            "edges": pa.ListArray.from_arrays(edge_offsets, to_structs(ev)),
            "slot": pa.array([slot for slot, _ in chunk], pa.int64()),
        }))
    writer.close()
    return unverified


def run_expand(ctx: StageContext) -> StageResult:
    """The ``expand`` stage: ``expand.num_subgraphs`` slots -> the ``subgraphs`` table.

    Funnel: input = slots; output = subgraphs; dropped: ``too_small`` (every seed's
    reachable allowed region had fewer than K pages), ``no_seed`` (no page may seed),
    ``duplicate_subgraph`` (two slots grew the same page set).
    """
    cfg = ctx.cfg.expand
    graph = open_graph(ctx.store)
    nf = node_filter(graph, ctx.cfg.walk)
    seeds = seed_nodes(graph, nf.allowed)
    key = stream_key(ctx.cfg.seed, "expand")
    found: list[tuple[int, np.ndarray]] = []
    seen: set[bytes] = set()
    dropped = {"too_small": 0, "no_seed": 0, "duplicate_subgraph": 0}
    attempts = 0
    with ctx.bar("expanding", total=cfg.num_subgraphs, unit="subgraphs") as bar:
        for slot in range(cfg.num_subgraphs):
            bar.update(1)
            if seeds.size == 0:
                dropped["no_seed"] += 1
                continue
            nodes, used = expand_slot(graph, nf.allowed, seeds, cfg.budget, key, slot, cfg.max_attempts)
            attempts += used
            if nodes is None:
                dropped["too_small"] += 1
                continue
            ident = np.sort(nodes).tobytes()
            if ident in seen:
                dropped["duplicate_subgraph"] += 1
                continue
            seen.add(ident)
            found.append((slot, nodes))
    unverified = _write(ctx, graph, found)
    if unverified:
        log.warning("expand: %d edge(s) cite an anchor that is not at paragraph[start:end]; check the ingest", unverified)
    extra = {"expand": {"slots": cfg.num_subgraphs, "attempts": attempts, "budget": cfg.budget,
                        "allowed_nodes": nf.num_allowed, "excluded_nodes": nf.excluded, "seed_nodes": int(seeds.size),
                        "evidence_unverified": unverified}}
    return StageResult(cfg.num_subgraphs, len(found), dropped, extra=extra,
                       idle="" if cfg.num_subgraphs else "expand.num_subgraphs is 0: no subgraph is asked for")
