"""``hopforge walk``: k-hop entity paths ``P = [v0..vk]`` over the link graph.

Rules (the knowledge-graph random walk): every step follows a link; a walk never
revisits a page; pages the node filter excludes (hubs, dates, lists) are never
visited, start included; with ``chordless`` a path may not hold a shortcut edge
``v_i -> v_j`` with ``j > i+1`` (else a question could skip the middle entities).
A walk that reaches a page with no valid next page is a dead end: that attempt is
counted and the slot restarts from a new start page, up to ``max_attempts`` times.

Walk slots are independent; a numba ``prange`` loop runs groups of them in parallel,
with memory prefetches to hide the latency of random graph reads (see
:func:`walk_kernel`).  Every random choice is a counter-based hash of (run seed,
"walks", slot, try, step, draw) (:mod:`synth.engine.seeding`), so a seed gives the same walks
whatever the thread count or batch size.  The next
page is exactly uniform among the valid neighbours: a few rejection draws over the
whole neighbour list (cheap when most are valid), then an exact count-and-pick scan,
which also proves a dead end really is one.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from synth.graph.evidence import lookup_evidence, to_structs
from synth.graph.csr import CSRGraph, _edge_in_row, open_graph, table_files
from synth.graph.nodefilter import node_filter
from synth.engine.stage import StageContext, StageResult
from synth.engine.records import Walk
from synth.engine.seeding import below, derive, stream_key

log = logging.getLogger("hopforge")

REJECTION_DRAWS = 8  # uniform draws before the exact scan; more only helps when most neighbours are invalid
WALKER_GROUP = 128  # walkers advanced in lockstep per task: enough prefetches in flight to hide DRAM latency


@njit(cache=True, inline="always")
def _valid(indptr, indices, allowed, path, step, c, chordless) -> bool:
    """Whether page ``c`` may become ``path[step]`` (``path[:step]`` is the walk so far)."""
    if not allowed[c]:
        return False
    for i in range(step):
        if path[i] == c:
            return False
    if chordless:
        # Only the current page path[step-1] may link to c; an earlier one would be a chord.
        for i in range(step - 1):
            if _edge_in_row(indptr, indices, path[i], c):
                return False
    return True


@njit(cache=True)
def _next(indptr, indices, allowed, path, step, key, chordless) -> np.int64:
    """A uniform valid successor of ``path[step-1]``, or -1 at a dead end."""
    cur = path[step - 1]
    lo = indptr[cur]
    deg = np.int64(indptr[cur + 1] - lo)
    if deg == 0:
        return -1
    for r in range(REJECTION_DRAWS):
        c = indices[lo + below(derive(key, r), deg)]
        if _valid(indptr, indices, allowed, path, step, c, chordless):
            return c
    count = 0
    for k in range(deg):
        if _valid(indptr, indices, allowed, path, step, indices[lo + k], chordless):
            count += 1
    if count == 0:
        return -1
    pick = below(derive(key, REJECTION_DRAWS), count)
    for k in range(deg):
        c = indices[lo + k]
        if _valid(indptr, indices, allowed, path, step, c, chordless):
            if pick == 0:
                return c
            pick -= 1
    return -1  # unreachable: count > pick


@intrinsic
def _prefetch(typingctx, arr, idx):
    """Hint the CPU to load ``arr[idx]`` into cache (LLVM ``llvm.prefetch``, read, high locality)."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


@njit(parallel=True, cache=True)
def walk_kernel(indptr, indices, allowed, starts, key, slot0, skip, hops, max_attempts, chordless,
                paths, attempts, steps) -> None:
    """Walk slots ``slot0 .. slot0+len(skip)-1`` (skipping rows where ``skip`` is set).

    Row s of ``paths`` receives the walk of slot ``slot0+s`` or stays -1 when every
    attempt hit a dead end; ``attempts[s]`` counts the tries, ``steps[s]`` the hops
    taken (failed tries included).

    A step costs two dependent cache misses (``indptr[cur]``, then ``indices[...]``),
    so one walker at a time leaves the CPU waiting on memory.  Each ``prange`` task
    therefore advances a group of walkers in lockstep, in three passes per step:
    prefetch every walker's row pointer, then draw each first candidate and prefetch
    it, then resolve (accept the candidate, or fall back to :func:`_next`, which
    repeats that same first draw).  A walker's choices depend only on its own
    counters, so the group size changes the speed, never the walks.
    """
    n = skip.shape[0]
    nstarts = starts.shape[0]
    for gi in prange((n + WALKER_GROUP - 1) // WALKER_GROUP):
        lo = gi * WALKER_GROUP
        m = min(lo + WALKER_GROUP, n) - lo
        stp = np.zeros(m, np.int64)  # index of the page to choose next; 0: the try has not started
        tries = np.zeros(m, np.int64)
        cand = np.empty(m, np.int64)
        step_key = np.empty(m, np.uint64)
        live = np.empty(m, np.int64)
        nlive = 0
        for j in range(m):
            if not skip[lo + j]:
                live[nlive] = j
                nlive += 1
        while nlive > 0:
            for q in range(nlive):
                j = live[q]
                s = lo + j
                if stp[j] == 0:
                    attempts[s] = tries[j] + 1
                    paths[s, 0] = starts[below(derive(derive(derive(key, slot0 + s), tries[j]), 0), nstarts)]
                    stp[j] = 1
                _prefetch(indptr, paths[s, stp[j] - 1])
            for q in range(nlive):
                j = live[q]
                s = lo + j
                cur = paths[s, stp[j] - 1]
                a = indptr[cur]
                deg = np.int64(indptr[cur + 1] - a)
                step_key[j] = derive(derive(derive(key, slot0 + s), tries[j]), stp[j])
                cand[j] = -1
                if deg > 0:
                    cand[j] = a + below(derive(step_key[j], 0), deg)
                    _prefetch(indices, cand[j])
            w = 0
            for q in range(nlive):
                j = live[q]
                s = lo + j
                path = paths[s]
                c = -1
                if cand[j] >= 0:
                    c = indices[cand[j]]
                    if not _valid(indptr, indices, allowed, path, stp[j], c, chordless):
                        c = _next(indptr, indices, allowed, path, stp[j], step_key[j], chordless)
                if c < 0:  # dead end: restart this slot from a new start page, if tries are left
                    path[:] = -1
                    stp[j] = 0
                    tries[j] += 1
                    keep = tries[j] < max_attempts
                else:
                    path[stp[j]] = c
                    steps[s] += 1
                    stp[j] += 1
                    keep = stp[j] <= hops
                if keep:
                    live[w] = j
                    w += 1
            nlive = w


@dataclass(slots=True)
class WalkBatch:
    """Kernel output for a range of slots: node paths (-1 rows failed), tries and hops taken per slot."""

    slot0: int
    paths: np.ndarray
    attempts: np.ndarray
    steps: np.ndarray
    seconds: float

    @property
    def ok(self) -> np.ndarray:
        """Which slots produced a walk."""
        return self.paths[:, 0] >= 0


def start_nodes(graph: CSRGraph, allowed: np.ndarray) -> np.ndarray:
    """Pages a walk may start from: allowed and with at least one out-link (int32, ascending)."""
    return np.flatnonzero(allowed & (graph.out_degree() > 0)).astype(np.int32)


def sample_walks(graph: CSRGraph, allowed: np.ndarray, hops: int, slot0: int, count: int, seed: int,
                 max_attempts: int = 4, chordless: bool = True, skip: np.ndarray | None = None,
                 starts: np.ndarray | None = None) -> WalkBatch:
    """Run the walk kernel for slots ``slot0 .. slot0+count-1`` under run seed ``seed``.

    The result for a slot depends only on (graph, allowed, hops, seed, slot, max_attempts,
    chordless), never on ``slot0``/``count`` or the thread count.
    """
    if starts is None:
        starts = start_nodes(graph, allowed)
    paths = np.full((count, hops + 1), -1, dtype=np.int32)
    attempts = np.zeros(count, dtype=np.int32)
    steps = np.zeros(count, dtype=np.int64)
    skip = np.zeros(count, dtype=np.bool_) if skip is None else np.ascontiguousarray(skip, dtype=np.bool_)
    t0 = time.perf_counter()
    if starts.size:
        walk_kernel(graph.indptr, graph.indices, np.ascontiguousarray(allowed, dtype=np.bool_), starts,
                    stream_key(seed, "walks"), np.int64(slot0), skip, np.int64(hops), np.int64(max_attempts),
                    bool(chordless), paths, attempts, steps)
    return WalkBatch(slot0, paths, attempts, steps, time.perf_counter() - t0)


def warm_up(graph: CSRGraph | None = None, allowed: np.ndarray | None = None, chordless: bool = True) -> float:
    """Compile (or load from numba's cache) the walk kernel; returns the seconds it took.

    numba specialises on array types (a memory-mapped read-only graph is not the same
    type as an in-memory one), so pass the graph that will be walked.
    """
    t0 = time.perf_counter()
    if graph is None:
        graph = CSRGraph.from_edges(3, [0, 1], [1, 2])
    if allowed is None:
        allowed = np.ones(graph.num_nodes, np.bool_)
    sample_walks(graph, allowed, 2, 0, 1, 0, chordless=chordless)
    return time.perf_counter() - t0


# ---- the stage ---------------------------------------------------------------------------

KERNEL_CHUNK = 1 << 16  # slots per kernel call: bounds the progress-bar latency, not the result
EVIDENCE_CHUNK = 50_000  # walks per evidence query and output shard: bounds paragraph text held in memory


def walk_id(page_ids: list[str]) -> str:
    """Content address of a path: the first 16 hex digits of sha1 over its page ids."""
    return hashlib.sha1("\x1f".join(page_ids).encode()).hexdigest()[:16]


def paths_valid(graph: CSRGraph, allowed: np.ndarray, paths: np.ndarray, chordless: bool) -> np.ndarray:
    """For each row of a 2-D node-path array, whether it obeys every walk rule on ``graph``.

    Vectorised (one binary-search pass per rule), so checking 100k old walks for
    ``walk.incremental`` costs well under a second.  A -1 node means "not in the graph".
    """
    paths = np.asarray(paths, dtype=np.int64)
    if paths.ndim != 2 or paths.shape[0] == 0:
        return np.zeros(paths.shape[0] if paths.ndim == 2 else 0, dtype=np.bool_)
    n, k = paths.shape
    ok = (paths >= 0).all(axis=1)
    safe = np.where(paths >= 0, paths, 0)
    ok &= allowed[safe].all(axis=1)
    srt = np.sort(safe, axis=1)
    ok &= (srt[:, 1:] != srt[:, :-1]).all(axis=1)  # no revisits
    ok &= graph.has_edges(safe[:, :-1].ravel(), safe[:, 1:].ravel()).reshape(n, k - 1).all(axis=1)
    if chordless and k > 2:
        i, j = np.triu_indices(k, k=2)
        ok &= ~graph.has_edges(safe[:, i].ravel(), safe[:, j].ravel()).reshape(n, i.size).any(axis=1)
    return ok


def path_is_valid(graph: CSRGraph, allowed: np.ndarray, path, chordless: bool) -> bool:
    """Whether one node path obeys every walk rule on ``graph``."""
    return bool(paths_valid(graph, allowed, np.asarray(path, dtype=np.int64)[None, :], chordless)[0])


def _reusable(ctx: StageContext, graph: CSRGraph, allowed: np.ndarray, paths: np.ndarray) -> tuple[int, int]:
    """For ``walk.incremental``: copy the still-valid walks of the published table into ``paths``.

    Returns (kept, stale).  A walk is kept in its own slot when every page, link and
    rule still holds on the new graph; the slots of the others are walked afresh.
    """
    cfg = ctx.cfg.walk
    if not ctx.store.exists("walks"):
        return 0, 0
    # A walks table written before the column was named `slot` calls it `start_index`.
    slot = "slot" if "slot" in ctx.store.dataset("walks").schema.names else "start_index"
    old = ctx.store.read("walks", columns=["path", slot])
    lengths = pc.list_value_length(old.column("path")).to_numpy()
    slots = old.column(slot).to_numpy()
    fits = (lengths == cfg.hops + 1) & (slots < paths.shape[0])
    old = old.filter(pa.array(fits))
    slots = slots[fits]
    flat = pc.list_flatten(old.column("path").combine_chunks()) if old.num_rows else pa.array([], pa.string())
    nodes = graph.nodes_of(flat).reshape(old.num_rows, cfg.hops + 1)
    good = paths_valid(graph, allowed, nodes, cfg.chordless)
    good &= ~_repeated(slots)
    paths[slots[good]] = nodes[good]
    kept = int(good.sum())
    return kept, int(len(lengths) - kept)


def _repeated(values: np.ndarray) -> np.ndarray:
    """True for every value that already occurred earlier in ``values``."""
    _, first = np.unique(values, return_index=True)
    dup = np.ones(values.shape[0], dtype=np.bool_)
    dup[first] = False
    return dup


@njit(cache=True)
def _cap_repeats(paths: np.ndarray, fixed: np.ndarray, n_nodes: int, max_answer: int, max_bridge: int) -> np.ndarray:
    """Per path, in order: 0 kept, 1 its answer page already ended ``max_answer`` kept paths, 2 one of its
    bridge pages was already inside ``max_bridge`` kept paths (a cap below 1 means no cap).  ``fixed``
    paths (kept by an incremental run) are always kept and counted first."""
    answer = np.zeros(n_nodes, np.int32)
    bridge = np.zeros(n_nodes, np.int32)
    out = np.zeros(paths.shape[0], np.int8)
    k = paths.shape[1] - 1
    for i in range(paths.shape[0]):
        if fixed[i]:
            answer[paths[i, k]] += 1
            for j in range(1, k):
                bridge[paths[i, j]] += 1
    for i in range(paths.shape[0]):
        if fixed[i]:
            continue
        if max_answer > 0 and answer[paths[i, k]] >= max_answer:
            out[i] = 1
            continue
        over = False
        if max_bridge > 0:
            for j in range(1, k):
                if bridge[paths[i, j]] >= max_bridge:
                    over = True
                    break
        if over:
            out[i] = 2
            continue
        answer[paths[i, k]] += 1
        for j in range(1, k):
            bridge[paths[i, j]] += 1
    return out


def repeat_histogram(nodes: np.ndarray) -> dict[str, int]:
    """``{times: pages}``: how many pages occur that many times in ``nodes``."""
    if nodes.size == 0:
        return {}
    _, counts = np.unique(nodes, return_counts=True)
    times, pages = np.unique(counts, return_counts=True)
    return {str(int(t)): int(p) for t, p in zip(times, pages)}


def _write(ctx: StageContext, graph: CSRGraph, paths: np.ndarray, slots: np.ndarray) -> int:
    """Look up the evidence of every hop and write the walks; returns how many evidence anchors failed to verify."""
    pages, links = table_files(ctx.store, "corpus/pages"), table_files(ctx.store, "corpus/links")
    writer = ctx.writer("walks", Walk.SCHEMA, rows_per_shard=EVIDENCE_CHUNK)
    hops = paths.shape[1] - 1
    unverified = 0
    for lo in range(0, len(slots), EVIDENCE_CHUNK):
        p = paths[lo:lo + EVIDENCE_CHUNK]
        ids = graph.page_ids.take(pa.array(p.ravel()))
        titles = graph.titles.take(pa.array(p.ravel()))
        ev = lookup_evidence(pages, links, graph.page_ids.take(pa.array(p[:, :-1].ravel())),
                             graph.page_ids.take(pa.array(p[:, 1:].ravel())),
                             memory_limit=ctx.cfg.graph.memory_limit, tmp=ctx.staging / "_tmp")
        unverified += int(pc.sum(pc.invert(ev.column("verified"))).as_py() or 0)
        n = p.shape[0]
        offsets = pa.array(np.arange(n + 1, dtype=np.int32) * (hops + 1))
        flat = ids.to_pylist()
        writer.write(pa.table({
            "walk_id": pa.array([walk_id(flat[i * (hops + 1):(i + 1) * (hops + 1)]) for i in range(n)], pa.string()),
            "path": pa.ListArray.from_arrays(offsets, ids),
            "titles": pa.ListArray.from_arrays(offsets, titles),
            "hops": pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32) * hops), to_structs(ev)),
            "slot": pa.array(slots[lo:lo + EVIDENCE_CHUNK], pa.int64()),
        }))
    writer.close()
    return unverified


def run_walks(ctx: StageContext) -> StageResult:
    """The ``walks`` stage: ``walk.num_walks`` slots -> the ``walks`` table.

    Funnel: input = walk attempts (plus walks kept by ``incremental``); output = walks;
    dropped: ``dead_end`` (an attempt found no valid next page), ``no_start`` (no page
    may start a walk), ``duplicate_path`` (two slots walked the same path), ``answer_repeat``
    and ``bridge_repeat`` (the page caps ``walk.max_answer_repeats`` / ``max_bridge_repeats``).
    """
    cfg, seed = ctx.cfg.walk, ctx.cfg.seed
    graph = open_graph(ctx.store)
    nf = node_filter(graph, cfg)
    starts = start_nodes(graph, nf.allowed)
    paths = np.full((cfg.num_walks, cfg.hops + 1), -1, dtype=np.int32)
    reused, stale = _reusable(ctx, graph, nf.allowed, paths) if cfg.incremental else (0, 0)
    fixed = paths[:, 0] >= 0
    attempts = steps = 0
    # Compile (or load numba's cache) before the timed loop, so kernel_s is walking time only.
    kernel_s, compile_s = 0.0, warm_up(graph, nf.allowed, cfg.chordless)
    with ctx.bar("walking", total=cfg.num_walks, unit="slots") as bar:
        for slot0 in range(0, cfg.num_walks, KERNEL_CHUNK):
            n = min(KERNEL_CHUNK, cfg.num_walks - slot0)
            b = sample_walks(graph, nf.allowed, cfg.hops, slot0, n, seed, cfg.max_attempts, cfg.chordless,
                             skip=fixed[slot0:slot0 + n], starts=starts)
            new = ~fixed[slot0:slot0 + n]
            paths[slot0:slot0 + n][new] = b.paths[new]
            attempts += int(b.attempts.sum())
            steps += int(b.steps.sum())
            kernel_s += b.seconds
            bar.update(n)
    ok = paths[:, 0] >= 0
    new_ok = int((ok & ~fixed).sum())
    dropped = {"dead_end": attempts - new_ok, "no_start": 0 if starts.size else int((~fixed).sum())}
    # The first slot that walked a path keeps it: walk_id is content-addressed, so twins would collide.
    slots = np.flatnonzero(ok)
    _, first = np.unique(paths[slots], axis=0, return_index=True)
    keep = np.sort(slots[first]) if slots.size else slots
    dropped["duplicate_path"] = int(slots.size - keep.size)
    # Diversity: in slot order (so the result does not depend on threads or chunking), a page may be
    # the answer of, or a bridge in, only so many walks.
    capped = _cap_repeats(paths[keep], fixed[keep], graph.num_nodes, cfg.max_answer_repeats or 0,
                          cfg.max_bridge_repeats or 0)
    dropped["answer_repeat"] = int((capped == 1).sum())
    dropped["bridge_repeat"] = int((capped == 2).sum())
    keep = keep[capped == 0]
    unverified = _write(ctx, graph, paths[keep], keep)
    if unverified:
        log.warning("walks: %d hop(s) cite an anchor that is not at paragraph[start:end]; check the ingest", unverified)
    extra = {"walks": {"slots": cfg.num_walks, "attempts": attempts, "reused": reused, "stale": stale, "steps": steps,
                       "kernel_seconds": round(kernel_s, 3), "compile_seconds": round(compile_s, 3),
                       "steps_per_s": round(steps / max(kernel_s, 1e-9)),
                       "allowed_nodes": nf.num_allowed, "excluded_nodes": nf.excluded, "start_nodes": int(starts.size),
                       "evidence_unverified": unverified},
             "repeats": {"answer": repeat_histogram(paths[keep, -1]),
                         "bridge": repeat_histogram(paths[keep, 1:-1].ravel()),
                         "max_answer_repeats": cfg.max_answer_repeats, "max_bridge_repeats": cfg.max_bridge_repeats}}
    return StageResult(attempts + reused + dropped["no_start"], int(keep.size), dropped, extra=extra)
