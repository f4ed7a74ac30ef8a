"""The agents' ranker (``tools.ranker``): the one place that opens the index the agents search.

:func:`open_search` opens the BM25 index (:class:`~synth.tools.search.SearchIndex`) and, under ``dense`` or
``hybrid``, registers a ranking by meaning over the ``embed`` stage's page vectors
(:class:`~synth.tools.dense.DenseIndex`) and makes it the ranking ``search`` serves.  Every caller of the agents'
tools opens its index here: the rollout stage, the student's eval and RL band, the benchmarks, ``hopforge tools
serve`` and ``hopforge tools search`` (so verl's tool, which calls the server, too).  The index's other users (the
question checks' adversaries, the long-context assembly) keep their own rankings.

* ``bm25``: the index's ``tool`` ranking, as before (title-weighted BM25, a query equal to a title first).
* ``dense`` (:class:`DenseRanking`): the query's vector against every page's (exact inner product); it finds a
  page by meaning, a paraphrase that shares no word with it.
* ``hybrid``: ``tool`` and ``dense`` fused by their scores (:class:`~synth.tools.search.ScoreFusion`,
  :func:`~synth.tools.search.fuse_scores`): each list :data:`HYBRID_DEPTH` deep, its scores standardised per
  query (z-scores over its top :data:`HYBRID_DEPTH`, a BM25 list that matches fewer pages read as padded with
  zeros), summed with the weights :data:`HYBRID_WEIGHTS` (BM25, dense), the dense list's weight scaled by how good
  its best page is in absolute terms (:data:`HYBRID_GATE`: none under a cosine similarity of 0.7, full from 0.8).
  A list whose top stands far above its rest (BM25 on a query of rare words) outvotes a flat one, and a dense
  list whose best page is only loosely similar stays out of the way.  Reciprocal rank fusion (k = 60, equal
  weights), the hybrid before, gave the weaker list as much say as the stronger and lay between its two halves
  on every query set of ``bench/retrieval.py``; the weights and the gate were chosen there (``--fusions``) on
  queries drawn from the calibration half of the demo's pages, and the figures it reports are of the other half.
  The gate reads cosine similarities of the packaged all-MiniLM-L6-v2: another ``tools.dense.model`` scores on
  another scale, and its gate would be chosen again.

What the agent sees is the same under every ranker: the index builds every hit's title, snippet (the best
paragraph for the query's words) and description, ``open`` / ``find`` read the index, and a query equal to a
page's title (case and underscores aside) returns that page first (:class:`TitleFirst`: plain fusion could put a
page both lists rank second above it).  Masking holds too: an excluded page (the question's answer page) is never
returned, and ``k`` results still come back (the dense ranking asks for ``k`` more per excluded page).

A dense or hybrid ranker costs a model call per new query (``tools.dense``; a query of ~12 tokens takes 13-15 ms
of CPU with the packaged all-MiniLM-L6-v2, :mod:`synth.tools.dense`), and the ``embed`` stage embeds every page.
The stages that search with these tools hash ``tools.ranker`` (in their ``tools`` section) and, when it is not
``bm25``, the model's identity (:func:`search_key`) and read the ``embed`` stage, so changing the ranker or the
model makes their traces again.  :func:`search_facts` is what the run's reports, manifest and card say of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from synth.engine.store import MissingInput
from synth.tools.config import ToolsConfig
from synth.tools.search import Ranking, ScoreFusion, SearchIndex

DENSE, HYBRID = "dense", "hybrid"  # the names the rankings are registered under (as tools.ranker's values)
HYBRID_DEPTH = 100  # results each list of the hybrid contributes to the fusion
HYBRID_FUSION = "zscore"  # how the hybrid fuses its lists (synth.tools.search.fuse_scores)
HYBRID_WEIGHTS = (0.25, 0.75)  # BM25's and the dense list's weights (bench/retrieval.py --fusions, calibration half)
HYBRID_GATE = (0.7, 0.8)  # the dense list's say: none under this top cosine similarity, full from this one


class DenseRanking:
    """A :class:`~synth.tools.search.Ranking` by meaning: the nearest page vectors to the query's.  Excluded pages
    are dropped after a search ``len(exclude)`` deeper, so ``k`` results remain (when the index holds them)."""

    floor = None  # its list holds every page up to the depth asked (ScoredRanking)

    def __init__(self, dense: Any):
        self.dense = dense  # a synth.tools.dense.DenseIndex

    def top(self, query: str, k: int, exclude: frozenset[str] = frozenset()) -> list[str]:
        if not isinstance(query, str) or not query.strip() or k <= 0:
            return []
        hits = self.dense.search_ids(query, int(k) + len(exclude))
        return [pid for pid in hits if pid not in exclude][:k]

    def scored(self, query: str, k: int, exclude: frozenset[str] = frozenset()) -> list[tuple[str, float]]:
        """``(page id, cosine similarity)`` of :meth:`top`'s pages (:class:`~synth.tools.search.ScoredRanking`)."""
        if not isinstance(query, str) or not query.strip() or k <= 0:
            return []
        (hits,) = self.dense.scored_many([query], int(k) + len(exclude))
        return [(pid, s) for pid, s in hits if pid not in exclude][:k]


class TitleFirst:
    """Another ranking with the pages titled as the query (:meth:`SearchIndex.title_page_ids`) first, as the
    ``tool`` ranking's exact-title bonus puts them: so "exact title" finds its page under any ranker."""

    def __init__(self, index: SearchIndex, inner: Ranking):
        self.index, self.inner = index, inner

    def top(self, query: str, k: int, exclude: frozenset[str] = frozenset()) -> list[str]:
        if k <= 0:
            return []
        pinned = [pid for pid in self.index.title_page_ids(query) if pid not in exclude][:k]
        if len(pinned) == k:
            return pinned
        rest = self.inner.top(query, k - len(pinned), frozenset(exclude) | frozenset(pinned))
        return pinned + rest


def use_ranker(index: SearchIndex, tools: ToolsConfig, dense: Any = None) -> SearchIndex:
    """Make ``index`` search with ``tools.ranker``: for ``dense`` and ``hybrid``, register the ranking over
    ``dense`` (a :class:`~synth.tools.dense.DenseIndex`, required then) and make it the default; ``index``
    is returned."""
    ranker = tools.ranker
    if ranker == "bm25":
        index.default_ranking = "tool"
        return index
    if dense is None:
        raise ValueError(f"tools.ranker={ranker} needs the page vectors (a DenseIndex)")
    by_meaning = DenseRanking(dense)
    if ranker == DENSE:
        ranking: Ranking = TitleFirst(index, by_meaning)
    else:
        ranking = TitleFirst(index, ScoreFusion([index.ranking("tool"), by_meaning], list(HYBRID_WEIGHTS),
                                                HYBRID_FUSION, HYBRID_DEPTH, [None, HYBRID_GATE]))
    index.register_ranking(ranker, ranking)
    index.default_ranking = ranker
    return index


def open_search(where: Any, tools: ToolsConfig, embed_dir: str | Path | None = None) -> SearchIndex:
    """The agents' index under ``tools``: ``where`` is a :class:`~synth.engine.store.Store` (its ``index`` and
    ``embed``) or an index folder (``DIR/index``; its page vectors are ``embed_dir``, default ``DIR/embed``).

    Under ``dense`` and ``hybrid`` the page vectors must be the ones ``tools.dense.model`` makes: a missing
    model folder is a :class:`~synth.engine.config.ConfigError`; missing vectors a
    :class:`~synth.engine.store.MissingInput`, and vectors of another model or dimension an
    :class:`~synth.engine.errors.InputError`, each one line naming the command that makes them.
    """
    if hasattr(where, "path") and hasattr(where, "root"):
        index_dir, vectors, root = Path(where.path("index")), Path(where.path("embed")), Path(where.root)
    else:
        index_dir = Path(where)
        root = index_dir.parent
        vectors = Path(embed_dir) if embed_dir is not None else root / "embed"
    index = SearchIndex.open(index_dir, snippet_chars=tools.snippet_chars)
    if tools.ranker == "bm25":
        return use_ranker(index, tools)
    return use_ranker(index, tools, open_vectors(vectors, tools, root))


def rebuild_command(tools: ToolsConfig, root: str | Path) -> str:
    """The command that embeds the pages for ``tools`` into ``root/embed``: with the ``tools.dense`` settings that
    shape the vectors (model, text, document prompt) where they are not the defaults, so that it makes the very
    vectors ``tools`` asks for."""
    import shlex

    from synth.tools.config import DenseConfig

    default = DenseConfig()
    shaping = [f"tools.dense.{name}={getattr(tools.dense, name)}" for name in ("model", "text", "document_prompt")
               if getattr(tools.dense, name) != getattr(default, name) and getattr(tools.dense, name) is not None]
    return shlex.join(["hopforge", "embed", "--out", str(root), "--set", f"tools.ranker={tools.ranker}",
                       *(a for s in shaping for a in ("--set", s))])


def open_vectors(folder: str | Path, tools: ToolsConfig, root: str | Path | None = None):
    """The :class:`~synth.tools.dense.DenseIndex` of the page vectors in ``folder`` (``DIR/embed``), checked against
    ``tools.dense`` (see :func:`open_search`)."""
    from synth.tools.dense import META_FILE, DenseIndex, Embedder

    folder = Path(folder)
    rebuild = rebuild_command(tools, root if root is not None else folder.parent)
    embedder = Embedder.from_config(tools.dense)  # a missing model folder: ConfigError, one line
    try:
        meta = json.loads((folder / META_FILE).read_text())
    except (FileNotFoundError, ValueError):
        meta = None
    if meta is not None and not meta.get("pages"):
        # The embed stage commits an empty folder when no reader needs vectors (a run under tools.ranker=bm25).
        raise MissingInput(f"{folder} holds no page vectors (the embed stage ran when no reader needed them), but "
                           f"tools.ranker={tools.ranker} searches them: run `{rebuild}`")
    return DenseIndex.open(folder, embedder, tools.dense.query_max_tokens, rebuild=rebuild)


def search_facts(tools: ToolsConfig) -> dict:
    """What the run records of the agents' search: ``{"ranker"}`` and, for ``dense`` / ``hybrid``, the embedding
    model's name and its identity (``name@sha``: a hash of its files, :func:`synth.tools.dense.model_identity`), and
    its ``query_prompt`` and ``document_prompt`` when either is not empty (:func:`synth.tools.dense.resolve_prompts`);
    for ``hybrid``, how it fuses: ``fusion``, ``weights`` (BM25, dense), ``dense_gate`` and ``depth``."""
    if tools.ranker == "bm25":
        return {"ranker": "bm25"}
    from synth.tools.dense import model_identity, resolve_prompts

    identity = model_identity(tools.dense.model)
    name, _, sha = identity.rpartition("@")
    out = {"ranker": tools.ranker, "model": name, "model_sha": sha, "identity": identity}
    prompts = resolve_prompts(tools.dense.model, tools.dense.query_prompt, tools.dense.document_prompt)
    if any(prompts):  # the texts put before a query and a page (none for the packaged model: nothing recorded)
        out["query_prompt"], out["document_prompt"] = prompts
    if tools.ranker == HYBRID:
        out.update(fusion=HYBRID_FUSION, weights=list(HYBRID_WEIGHTS), dense_gate=list(HYBRID_GATE),
                   depth=HYBRID_DEPTH)
    return out


def search_key(cfg: Any, store: Any = None) -> str:
    """Stage ``key_extra`` of the stages that search with the agents' tools: ``ranker=bm25``, or the ranker and
    the dense model's identity (its files, which ``tools.dense.model``, a path, does not name), and for the
    hybrid its fusion (a new fusion ranks otherwise, so its traces are made again)."""
    facts = search_facts(cfg.tools)
    key = f"ranker={facts['ranker']}" + (f" model={facts['identity']}" if "identity" in facts else "")
    if "fusion" in facts:
        key += (f" fusion={facts['fusion']} weights={','.join(map(str, facts['weights']))} "
                f"gate={','.join(map(str, facts['dense_gate']))} depth={facts['depth']}")
    return key


__all__ = ["DENSE", "HYBRID", "HYBRID_DEPTH", "HYBRID_FUSION", "HYBRID_GATE", "HYBRID_WEIGHTS", "DenseRanking",
           "TitleFirst", "open_search", "open_vectors", "rebuild_command", "search_facts", "search_key", "use_ranker"]
