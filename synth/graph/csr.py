"""The link graph as compressed sparse rows (CSR), built from ``corpus/links`` with DuckDB.

Node ``i`` is the i-th page in byte order of ``page_id``; neighbour lists are sorted,
so ``has_edge`` is a binary search.  Four arrays hold the whole graph::

    indptr  (n+1)  int32, or int64 past 2**31-1 edges   out-links of u: indices[indptr[u]:indptr[u+1]]
    indices (m)    int32
    rindptr (n+1)  as indptr                              in-links of v:  rindices[rindptr[v]:rindptr[v+1]]
    rindices(m)    int32

That is 8 bytes per edge plus 8-16 bytes per node; networkx needs ~300 bytes per
edge, so it is only ever used for small subgraphs (:meth:`CSRGraph.to_networkx`).
The stage writes the arrays as ``.npy`` files (read back with ``mmap_mode="r"``, so
loading is instant and pages are shared between processes) plus ``nodes.parquet``
(page_id, title in node order) and ``meta.json``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from numba import njit

from synth.engine.stage import StageContext, StageResult
from synth.engine.progress import print_table
from synth.engine.store import MissingInput, Store, atomic_write_json

ARRAYS = ("indptr", "indices", "rindptr", "rindices")
FORMAT_VERSION = 1


# ---- kernels -----------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _edge_in_row(indptr, indices, u, v) -> bool:
    """Binary search for ``v`` in the sorted neighbour list of ``u``."""
    lo = indptr[u]
    hi = indptr[u + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        x = indices[mid]
        if x < v:
            lo = mid + 1
        elif x > v:
            hi = mid
        else:
            return True
    return False


@njit(cache=True, nogil=True)
def _has_edges(indptr, indices, us, vs, out) -> None:
    for i in range(us.shape[0]):
        out[i] = _edge_in_row(indptr, indices, us[i], vs[i])


@njit(cache=True, nogil=True)
def _scatter_reverse(indptr, indices, rindptr, rindices) -> None:
    """Fill the reverse CSR.  Sources are visited in increasing order, so each in-list comes out sorted."""
    n = indptr.shape[0] - 1
    pos = rindptr[:-1].copy()
    for u in range(n):
        for k in range(indptr[u], indptr[u + 1]):
            v = indices[k]
            rindices[pos[v]] = u
            pos[v] += 1


@njit(cache=True, nogil=True)
def _rows_strictly_sorted(indptr, indices) -> bool:
    n = indptr.shape[0] - 1
    for u in range(n):
        for k in range(indptr[u] + 1, indptr[u + 1]):
            if indices[k - 1] >= indices[k]:
                return False
    return True


def _ptr_dtype(num_edges: int) -> np.dtype:
    """int32 offsets while they fit (halves the per-node cost), int64 beyond."""
    return np.dtype(np.int32) if num_edges < np.iinfo(np.int32).max else np.dtype(np.int64)


def reverse_csr(indptr: np.ndarray, indices: np.ndarray,
                rindices: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The in-link CSR of a forward CSR: a counting sort, O(n + m) time and no edge-sized temporaries.

    ``rindices`` may be a preallocated (e.g. memory-mapped) int32 array of length m.
    """
    n = indptr.shape[0] - 1
    counts = np.bincount(indices, minlength=n) if indices.size else np.zeros(n, np.int64)
    rindptr = np.zeros(n + 1, dtype=indptr.dtype)
    np.cumsum(counts, out=rindptr[1:])
    if rindices is None:
        rindices = np.empty(indices.shape[0], dtype=np.int32)
    _scatter_reverse(indptr, indices, rindptr, rindices)
    return rindptr, rindices


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a``, ascending.

    Sort-and-compare, because ``np.unique`` in numpy 2.4 hashes integers first and is
    over 100x slower on tens of millions of edge keys.
    """
    s = np.sort(a)
    if s.size == 0:
        return s
    first = np.empty(s.size, dtype=np.bool_)
    first[0] = True
    np.not_equal(s[1:], s[:-1], out=first[1:])
    return s[first]


def csr_from_edges(num_nodes: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """A forward CSR of the distinct non-loop edges among ``(src, dst)``; also returns the number removed.

    In-memory (two int64 keys per edge); for tests, benchmarks and small graphs.  The
    stage builds large graphs through DuckDB instead (:func:`build_graph`).
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= num_nodes):
        raise ValueError(f"edge endpoint outside [0, {num_nodes})")
    keep = src != dst
    keys = sorted_unique((src[keep] << 32) | dst[keep])
    removed = int(src.size - keys.size)
    u = (keys >> 32).astype(np.int64)
    indices = (keys & 0xFFFFFFFF).astype(np.int32)
    indptr = np.zeros(num_nodes + 1, dtype=_ptr_dtype(keys.size))
    np.cumsum(np.bincount(u, minlength=num_nodes), out=indptr[1:])
    return indptr, indices, removed


# ---- the graph ---------------------------------------------------------------------------

class CSRGraph:
    """A directed graph in CSR form with in-link lists; node ids are ``0..num_nodes-1``.

    Build one with :meth:`from_edges` (in memory) or load the stage output with
    :meth:`load`.  ``page_ids`` / ``titles`` (Arrow string arrays in node order) are
    optional for in-memory graphs and read lazily from ``nodes.parquet`` otherwise.
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, rindptr: np.ndarray, rindices: np.ndarray,
                 page_ids: pa.Array | None = None, titles: pa.Array | None = None, path: Path | None = None):
        if indptr.shape != rindptr.shape or indices.shape != rindices.shape:
            raise ValueError("forward and reverse CSR do not have the same shape")
        self.indptr, self.indices, self.rindptr, self.rindices = indptr, indices, rindptr, rindices
        self.path = path
        self._page_ids, self._titles = page_ids, titles
        self._index: dict[str, int] | None = None

    # ---- construction ----
    @classmethod
    def from_edges(cls, num_nodes: int, src, dst, page_ids=None, titles=None) -> "CSRGraph":
        """An in-memory graph of the distinct edges ``src[i] -> dst[i]`` (self-loops dropped)."""
        indptr, indices, _ = csr_from_edges(num_nodes, src, dst)
        rindptr, rindices = reverse_csr(indptr, indices)
        pid = pa.array([str(x) for x in page_ids] if page_ids is not None else [str(i) for i in range(num_nodes)],
                       pa.string())
        tit = pa.array(list(titles), pa.string()) if titles is not None else pid
        return cls(indptr, indices, rindptr, rindices, pid, tit)

    @classmethod
    def load(cls, path: str | Path) -> "CSRGraph":
        """Open a saved graph; the arrays are memory-mapped read-only, node names read on first use."""
        path = Path(path)
        meta_path = path / "meta.json"
        if not meta_path.exists():
            raise FileNotFoundError(f"no graph in {path} (missing meta.json; run `hopforge graph` first)")
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"graph in {path} has format {meta.get('format')}, expected {FORMAT_VERSION}; rebuild it")
        arrays = [np.load(path / f"{name}.npy", mmap_mode="r") for name in ARRAYS]
        g = cls(*arrays, path=path)
        if g.num_nodes != meta["nodes"] or g.num_edges != meta["edges"]:
            raise ValueError(f"graph in {path} is inconsistent with its meta.json")
        return g

    def save(self, path: str | Path) -> None:
        """Write the arrays, ``nodes.parquet`` and ``meta.json`` into folder ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        for name in ARRAYS:
            np.save(path / f"{name}.npy", np.ascontiguousarray(getattr(self, name)))
        pq.write_table(pa.table({"page_id": self.page_ids, "title": self.titles}), path / "nodes.parquet")
        atomic_write_json(path / "meta.json",
                          {"format": FORMAT_VERSION, "nodes": self.num_nodes, "edges": self.num_edges})

    # ---- names ----
    def _read_nodes(self) -> None:
        if self.path is None:
            raise ValueError("this graph has no node names")
        t = pq.read_table(self.path / "nodes.parquet", columns=["page_id", "title"])
        self._page_ids = t.column("page_id").combine_chunks()
        self._titles = t.column("title").combine_chunks()

    @property
    def page_ids(self) -> pa.Array:
        """Page id of every node, in node order."""
        if self._page_ids is None:
            self._read_nodes()
        return self._page_ids

    @property
    def titles(self) -> pa.Array:
        """Title of every node, in node order."""
        if self._titles is None:
            self._read_nodes()
        return self._titles

    def node_of(self, page_id: str) -> int:
        """The node of ``page_id``; raises ``KeyError`` if the page is not in the graph.

        Builds a dict on first use (~100 bytes a page); for many ids use :meth:`nodes_of`.
        """
        if self._index is None:
            self._index = {p: i for i, p in enumerate(self.page_ids.to_pylist())}
        return self._index[page_id]

    def nodes_of(self, page_ids) -> np.ndarray:
        """Vectorised :meth:`node_of`: an int64 array with -1 for unknown pages."""
        idx = pc.index_in(pa.array(page_ids, pa.string()), value_set=self.page_ids)
        return idx.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)

    # ---- structure ----
    @property
    def num_nodes(self) -> int:
        """Number of nodes (pages)."""
        return int(self.indptr.shape[0] - 1)

    @property
    def num_edges(self) -> int:
        """Number of distinct directed edges."""
        return int(self.indices.shape[0])

    def out_degree(self, u: int | None = None):
        """Out-degree of node ``u``, or of every node as an array when ``u`` is None."""
        if u is None:
            return np.diff(self.indptr)
        return int(self.indptr[u + 1] - self.indptr[u])

    def in_degree(self, v: int | None = None):
        """In-degree of node ``v``, or of every node as an array when ``v`` is None."""
        if v is None:
            return np.diff(self.rindptr)
        return int(self.rindptr[v + 1] - self.rindptr[v])

    def neighbors(self, u: int) -> np.ndarray:
        """Sorted out-neighbours of ``u`` (a view, not a copy)."""
        return self.indices[self.indptr[u]:self.indptr[u + 1]]

    def predecessors(self, v: int) -> np.ndarray:
        """Sorted in-neighbours of ``v`` (a view)."""
        return self.rindices[self.rindptr[v]:self.rindptr[v + 1]]

    def has_edge(self, u: int, v: int) -> bool:
        """Whether ``u -> v`` is an edge (binary search in the sorted row)."""
        return bool(_edge_in_row(self.indptr, self.indices, np.int64(u), np.int64(v)))

    def has_edges(self, us, vs) -> np.ndarray:
        """Vectorised :meth:`has_edge` over pairs ``(us[i], vs[i])``."""
        us = np.ascontiguousarray(us, dtype=np.int64)
        vs = np.ascontiguousarray(vs, dtype=np.int64)
        out = np.empty(us.shape[0], dtype=np.bool_)
        _has_edges(self.indptr, self.indices, us, vs, out)
        return out

    @property
    def nbytes(self) -> int:
        """Bytes held by the four CSR arrays."""
        return int(sum(getattr(self, a).nbytes for a in ARRAYS))

    def stats(self) -> dict:
        """Size, degree percentiles (p50/p90/p99/max, out and in) and bytes per edge."""
        out: dict = {"nodes": self.num_nodes, "edges": self.num_edges}
        for name, deg in (("out", self.out_degree()), ("in", self.in_degree())):
            if deg.size:
                p50, p90, p99 = np.percentile(deg, [50, 90, 99])
                out.update({f"{name}_p50": float(p50), f"{name}_p90": float(p90), f"{name}_p99": float(p99),
                            f"{name}_max": int(deg.max())})
            out[f"{name}_zero"] = int((deg == 0).sum())
        out["bytes"] = self.nbytes
        out["bytes_per_edge"] = round(self.nbytes / max(self.num_edges, 1), 3)
        return out

    def to_networkx(self, nodes) -> "nx.DiGraph":  # noqa: F821
        """The subgraph induced by ``nodes`` as a networkx ``DiGraph`` (node keys are node ids).

        Only for small node sets: the cost is the sum of their out-degrees.  Nodes carry
        ``page_id`` and ``title`` attributes when the graph has names.
        """
        import networkx as nx

        nodes = np.unique(np.asarray(nodes, dtype=np.int64))
        g = nx.DiGraph()
        named = self._page_ids is not None or self.path is not None
        for u in nodes.tolist():
            g.add_node(u, **({"page_id": self.page_ids[u].as_py(), "title": self.titles[u].as_py()} if named else {}))
        for u in nodes.tolist():
            nb = self.neighbors(u)
            hit = nb[np.isin(nb, nodes, assume_unique=True)]
            g.add_edges_from((u, int(v)) for v in hit)
        return g


# ---- the stage ---------------------------------------------------------------------------

def table_files(store: Store, rel: str) -> list[str]:
    """The Parquet shards of ingest table ``rel``; raises ``MissingInput`` naming `hopforge ingest`."""
    return list(store.dataset(rel, hint="ingest").files)


def open_graph(store: Store) -> CSRGraph:
    """The graph stage's published output in ``store``, memory-mapped."""
    path = store.path("graph")
    if not (path / "meta.json").exists():
        raise MissingInput(f"graph not found in {store.root} (run `hopforge graph --out {store.root}` first)")
    return CSRGraph.load(path)


def _sql_str(x) -> str:
    """A SQL string literal (paths and limits are interpolated into SET / COPY, which take no parameters)."""
    return "'" + str(x).replace("'", "''") + "'"


def _int32_file(path: Path, n: int) -> np.ndarray:
    """An int32 ``.npy`` of length ``n`` mapped for writing, so edge arrays never need to fit in RAM."""
    if n == 0:
        return np.empty(0, dtype=np.int32)  # mmap cannot map zero bytes
    return np.lib.format.open_memmap(path, mode="w+", dtype=np.int32, shape=(n,))


def build_graph(page_files: list[str], link_files: list[str], out: Path, tmp: Path, memory_limit: str = "2GB",
                threads: int | None = None) -> tuple[CSRGraph, dict]:
    """Build the CSR graph from Parquet pages and links into folder ``out``; returns it and the link funnel.

    DuckDB joins page ids to node numbers, groups the links into distinct edges and sorts
    them, spilling to ``tmp`` past ``memory_limit``; the sorted edges stream straight into
    memory-mapped ``.npy`` files, so peak memory is about DuckDB's limit plus the two
    pointer arrays (``bench/scale.py`` measures it).
    """
    out.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(tmp / "graph.duckdb"))
    try:
        con.execute(f"SET memory_limit = {_sql_str(memory_limit)}")
        con.execute(f"SET temp_directory = {_sql_str(tmp / 'spill')}")
        con.execute("SET preserve_insertion_order = false")
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        # Byte order of page_id fixes the numbering; min(title) only matters for duplicate ids.
        con.execute("""CREATE TABLE nodes AS
            SELECT page_id, title, (row_number() OVER (ORDER BY page_id) - 1)::INTEGER AS node
            FROM (SELECT page_id, min(title) AS title FROM read_parquet(?) GROUP BY page_id)""", [page_files])
        num_nodes = con.execute("SELECT count(*) FROM nodes").fetchone()[0]
        con.execute(f"COPY (SELECT page_id, title FROM nodes ORDER BY node) TO {_sql_str(out / 'nodes.parquet')} "
                    "(FORMAT parquet, COMPRESSION zstd)")
        n_rows = con.execute("SELECT count(*) FROM read_parquet(?)", [link_files]).fetchone()[0]
        con.execute("""CREATE TABLE edges AS
            SELECT s.node AS u, d.node AS v, count(*) AS c
            FROM read_parquet(?) l JOIN nodes s ON l.src_id = s.page_id JOIN nodes d ON l.dst_id = d.page_id
            GROUP BY ALL""", [link_files])
        matched, loops, n_edges = con.execute(
            "SELECT coalesce(sum(c), 0), coalesce(sum(c) FILTER (WHERE u = v), 0), count(*) FILTER (WHERE u <> v)"
            " FROM edges").fetchone()
        ptr = _ptr_dtype(n_edges)
        indptr = np.zeros(num_nodes + 1, dtype=ptr)
        deg = con.execute("SELECT u, count(*) AS n FROM edges WHERE u <> v GROUP BY u").fetchnumpy()
        indptr[deg["u"].astype(np.int64) + 1] = deg["n"]
        np.cumsum(indptr, out=indptr)
        indices = _int32_file(out / "indices.npy", n_edges)
        reader = con.sql("SELECT v FROM edges WHERE u <> v ORDER BY u, v").to_arrow_reader(1 << 20)
        pos = 0
        for batch in reader:
            col = batch.column(0).to_numpy()
            indices[pos:pos + col.size] = col
            pos += col.size
        if pos != n_edges:
            raise RuntimeError(f"graph build streamed {pos} edges, expected {n_edges}")
    finally:
        con.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if not _rows_strictly_sorted(indptr, indices):
        raise RuntimeError("graph build: neighbour lists are not strictly sorted (DuckDB order not kept)")
    np.save(out / "indptr.npy", indptr)
    rindices = _int32_file(out / "rindices.npy", n_edges)
    rindptr, _ = reverse_csr(indptr, indices, rindices)
    np.save(out / "rindptr.npy", rindptr)
    for arr, name in ((indices, "indices"), (rindices, "rindices")):
        if isinstance(arr, np.memmap):
            arr.flush()
        else:  # an empty graph: nothing to map
            np.save(out / f"{name}.npy", arr)
    del indices, rindices
    atomic_write_json(out / "meta.json", {"format": FORMAT_VERSION, "nodes": int(num_nodes), "edges": int(n_edges)})
    funnel = {"input": int(n_rows), "output": int(n_edges),
              "dropped": {"duplicate_edge": int(matched - loops - n_edges), "self_loop": int(loops),
                          "unknown_page": int(n_rows - matched)}}
    return CSRGraph.load(out), funnel


def run_graph(ctx: StageContext) -> StageResult:
    """The ``graph`` stage: distinct links -> CSR arrays under ``graph/``, with degree stats.

    Funnel: input = link rows; output = distinct edges; dropped = duplicate links, self
    links, and links whose source or target is not a page.
    """
    g, funnel = build_graph(table_files(ctx.store, "corpus/pages"), table_files(ctx.store, "corpus/links"),
                            ctx.out("graph"), ctx.staging / "_tmp", memory_limit=ctx.cfg.graph.memory_limit)
    stats = g.stats()
    print_table("graph", ["stat", "value"], [[k, v] for k, v in stats.items()])
    return StageResult(funnel["input"], funnel["output"], funnel["dropped"], extra={"graph": stats})
