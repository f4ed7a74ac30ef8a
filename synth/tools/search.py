"""Local BM25 search over page-level documents: the engine behind the agent's tools.

**Engine: tantivy** (Rust, via ``tantivy-py``), chosen over bm25s and rank-bm25 for
speed (``bench/search.py`` measures it against rank-bm25) and because it fits a
5.9M-page corpus served to many concurrent rollouts:

* the index lives on disk and is memory-mapped, so opening it is instant and many
  processes share one page cache (bm25s loads its sparse matrix into each process);
* it stores the documents too (compressed), so ``open`` / ``find`` / snippets and
  id or title lookups need no side table;
* source masking is a ``MustNot`` clause inside the query, so top-k is still k,
  with no per-query mask vector over all 5.9M documents and no post-filtering;
* block-max WAND keeps a disjunctive query fast on long posting lists, and the
  build is multi-threaded and streams (bm25s builds in memory);
* a searcher is immutable and safe to share between threads, so one open index
  serves every concurrent rollout of a process.

Queries never go through tantivy's query parser: :func:`~synth.tools.analysis.query_terms`
turns any string into index terms with the index's own analyzer, so quotes,
colons, ``AND OR NOT`` and brackets are just characters and cannot raise.

**Rankings.**  A ranking turns a query into page ids, best first; :data:`RANKINGS` names the built-in ones:

* ``tool`` (what the agents' ``search`` uses): BM25 over the ``text`` field, the title written
  ``TITLE_WEIGHT`` times before the body (BM25F, :mod:`synth.tools.build`), so a title match helps
  without drowning a page whose text holds every query word; a query equal to a title
  (case-insensitively) gets a large bonus, so "exact title" finds its page first.
* ``body``: plain BM25 over the body alone, no title, no bonus and no stemming (the words as written,
  :func:`~synth.tools.analysis.raw_analyzer`), served from its own index, ``index_dir/body``, which the
  agents' tools never read (:mod:`synth.tools.build`).  The question checks use it as an adversary the tool's
  own ranking is not (:mod:`synth.questions.depth`): it finds a page by a rare inflected word
  ("centralized") that the stemmer makes common, and by its text where a title would outrank it.

Other rankings (a dense retriever, a hybrid) plug in through :class:`Ranking` and
:meth:`SearchIndex.register_ranking`; :class:`FusedRanking` combines several by reciprocal rank
fusion, :class:`ScoreFusion` several :class:`ScoredRanking` by their scores (:func:`fuse_scores`: z-scores,
Qdrant's distribution-based or Weaviate's min-max fusion; the agents' ``hybrid``); setting
:attr:`SearchIndex.default_ranking` to one makes it the ranking ``search`` serves.
:func:`synth.tools.rank.open_search` does so from ``tools.ranker`` for every caller of the agents' tools.

Ties are broken by page id, so results do not depend on how the index
happened to be segmented.  The snippet of a hit is its best paragraph by BM25
within the page's stored lead (its first ``SCAN_CHARS`` characters), trimmed to
``snippet_chars`` around the matches (see :mod:`synth.tools.snippet`), so a huge page
costs a search no more than a long one; ``open`` reads the rest of such a page from
``index_dir/long`` (see :mod:`synth.tools.build`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable, Protocol

import numpy as np
import orjson
import tantivy

from synth.corpus.titles import page_order
from synth.tools.build import BODY_DIR, FORMAT, LONG_DIR, META_FILE, PARA_SEP, build_index
from synth.tools.snippet import best_paragraph, match_spans
from synth.tools.analysis import (ANALYZER_NAME, RAW_ANALYZER_NAME, analyzer, clean_text, query_terms, raw_analyzer,
                                  snippet_window, title_key)
from synth.engine.store import MissingInput

EXACT_TITLE_BOOST = 10.0  # query == title: ranks above any partial match
RANKINGS = ("tool", "body")  # the built-in rankings (module docstring)
RRF_K = 60  # reciprocal rank fusion's constant (Cormack et al. 2009)
MAX_K = 1000
MAX_REMEMBERED_IDS = 1 << 21  # document addresses whose page id a searcher keeps (~200 MB at most)
MAX_FRAGMENT_CHARS = 1 << 30
_S = tantivy.Occur.Should


class IndexNotFound(MissingInput):
    """The index folder is missing or incomplete; the message says which command builds it."""


class Ranking(Protocol):
    """A way to rank pages for a query: the seam for dense and hybrid retrieval.

    ``top`` returns at most ``k`` page ids, best first, none of ``exclude`` (a set of page ids).  It is
    called from many threads at once, so it must only read shared state.  A dense ranking embeds the
    query and searches its own vector index; registered with :meth:`SearchIndex.register_ranking` it
    serves ``search`` (and the tools, under ``tools.ranker``: :func:`synth.tools.rank.open_search`) with the
    index's snippets.
    """

    def top(self, query: str, k: int, exclude: frozenset[str]) -> list[str]: ...


def reciprocal_rank_fusion(rankings: list[list[str]], k: int, weights: list[float] | None = None,
                           rrf_k: int = RRF_K) -> list[str]:
    """Fuse ranked lists of page ids: each page scores ``sum(w / (rrf_k + rank))`` over the lists that hold
    it (rank from 1); the top ``k``, ties by page id."""
    weights = weights or [1.0] * len(rankings)
    score: dict[str, float] = {}
    for w, ranked in zip(weights, rankings):
        for r, pid in enumerate(ranked, start=1):
            score[pid] = score.get(pid, 0.0) + w / (rrf_k + r)
    return [pid for pid, _ in sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


class FusedRanking:
    """Several rankings fused by :func:`reciprocal_rank_fusion`, each asked for ``depth`` results
    (BM25 with a dense retriever is the usual hybrid)."""

    def __init__(self, rankings: list[Ranking], weights: list[float] | None = None, depth: int = 100):
        if not rankings:
            raise ValueError("FusedRanking needs at least one ranking")
        self.rankings, self.weights, self.depth = list(rankings), weights, depth

    def top(self, query: str, k: int, exclude: frozenset[str]) -> list[str]:
        lists = [r.top(query, max(k, self.depth), exclude) for r in self.rankings]
        return reciprocal_rank_fusion(lists, k, self.weights)


FUSIONS = ("zscore", "dbsf", "minmax")  # the score fusions of fuse_scores


class ScoredRanking(Protocol):
    """A :class:`Ranking` that also gives its scores: ``scored`` returns ``(page id, score)`` best first, as
    ``top`` would rank them, and ``floor`` is the score of a page it does not return when its list is shorter than
    asked (BM25: 0, the page matches no word), or None (the list holds every page there is)."""

    floor: float | None

    def top(self, query: str, k: int, exclude: frozenset[str]) -> list[str]: ...

    def scored(self, query: str, k: int, exclude: frozenset[str]) -> list[tuple[str, float]]: ...


def fuse_scores(lists: list[list[tuple[str, float]]], k: int, weights: list[float] | None = None,
                method: str = "zscore", depth: int = 100, floors: list[float | None] | None = None,
                gates: list[tuple[float, float] | None] | None = None) -> list[str]:
    """Fuse scored lists (each ``[(page id, score)]``, best first, at most ``depth`` long) by their scores, each
    normalised per query against its own top ``depth``; the top ``k`` page ids of the weighted sum (ties below).

    A list shorter than ``depth`` whose ranking has a ``floor`` (``floors``, one per list; BM25's is 0) is read as
    padded with the floor up to ``depth``: the pages it leaves out scored that.  So a list that matches three pages
    of the corpus is three pages far above the rest, as it is, not three pages among themselves.  A page a list
    does not hold scores that list's floor (a short list) or its last score (a full list: at most that).

    ``method``: ``zscore`` (each score less the list's mean, over its standard deviation: a list whose top stands
    far above its rest, a confident one, speaks loudest, and a flat one barely moves the sum); ``dbsf`` (Qdrant's
    distribution-based fusion: ``(s - (mean - 3 sd)) / (6 sd)``, a page absent from a list 0 there); ``minmax``
    (Weaviate's relative score fusion: ``(s - min) / (max - min)``, absent 0).  A list whose scores are all
    equal (or empty) says nothing under ``zscore`` and ``dbsf``; under ``minmax`` its pages score 1.

    ``gates`` (one per list, or None): a list gated ``(lo, hi)`` speaks with its weight times
    ``clip((top - lo) / (hi - lo), 0, 1)``, ``top`` its best score: nothing when its best page is a poor match in
    absolute terms (a cosine similarity under ``lo``), fully from ``hi`` up.  A normalisation per query cannot see
    this: a dense list's top page stands as far above its rest for a query it cannot answer as for one it can.
    Pages the gated sum leaves tied (every page, when the BM25 list is empty and the dense one gated out) are
    ordered by the sum without the gates, then by page id: a list with no say still orders what the others do not.
    """
    if method not in FUSIONS:
        raise ValueError(f"unknown fusion {method!r}; known: {', '.join(FUSIONS)}")
    weights = list(weights) if weights is not None else [1.0] * len(lists)
    floors = list(floors) if floors is not None else [None] * len(lists)
    gates = list(gates) if gates is not None else [None] * len(lists)
    if not (len(weights) == len(floors) == len(gates) == len(lists)):
        raise ValueError(f"{len(lists)} lists but {len(weights)} weights, {len(floors)} floors, {len(gates)} gates")
    ids: dict[str, int] = {}
    for hits in lists:
        for pid, _ in hits[:depth]:
            ids.setdefault(pid, len(ids))
    if not ids or k <= 0:
        return []
    total = np.zeros(len(ids), dtype=np.float64)
    ungated = np.zeros(len(ids), dtype=np.float64)  # the tie-break: the sum as if no list were gated
    for w, floor, gate, hits in zip(weights, floors, gates, lists):
        hits = hits[:depth]
        say = 1.0
        if gate is not None and hits:
            lo, hi = gate
            say = min(1.0, max(0.0, (hits[0][1] - lo) / (hi - lo)))
        if not hits or not w:
            continue
        s = np.fromiter((x for _, x in hits), dtype=np.float64, count=len(hits))
        pad = floor is not None and len(s) < depth
        absent = float(floor) if pad else float(s[-1])
        padded = np.concatenate([s, np.full(depth - len(s), absent)]) if pad else s
        rows = np.fromiter((ids[pid] for pid, _ in hits), dtype=np.int64, count=len(hits))
        if method == "minmax":
            lo, hi = padded.min(), padded.max()
            norm, missing = ((s - lo) / (hi - lo) if hi > lo else np.ones_like(s)), 0.0
        else:
            mean, sd = padded.mean(), padded.std()
            if not sd > 0:
                continue
            if method == "zscore":
                norm, missing = (s - mean) / sd, (absent - mean) / sd
            else:
                norm, missing = (s - (mean - 3 * sd)) / (6 * sd), 0.0
        col = np.full(len(ids), missing)
        col[rows] = norm
        total += w * say * col
        ungated += w * col
    order = sorted(ids, key=lambda pid: (-total[ids[pid]], -ungated[ids[pid]], pid))
    return order[:k]


class ScoreFusion:
    """Scored rankings (:class:`ScoredRanking`) fused by their scores (:func:`fuse_scores`), each asked for
    ``depth`` results; the excluded pages are left out of every list before the fusion."""

    def __init__(self, rankings: list[ScoredRanking], weights: list[float] | None = None, method: str = "zscore",
                 depth: int = 100, gates: list[tuple[float, float] | None] | None = None):
        if not rankings:
            raise ValueError("ScoreFusion needs at least one ranking")
        if method not in FUSIONS:
            raise ValueError(f"unknown fusion {method!r}; known: {', '.join(FUSIONS)}")
        self.rankings, self.weights, self.method, self.depth = list(rankings), weights, method, depth
        self.gates = gates

    def top(self, query: str, k: int, exclude: frozenset[str] = frozenset()) -> list[str]:
        if k <= 0:
            return []
        lists = [r.scored(query, max(k, self.depth), exclude) for r in self.rankings]
        return fuse_scores(lists, k, self.weights, self.method, max(k, self.depth),
                           [getattr(r, "floor", None) for r in self.rankings], self.gates)


class _Searcher:
    """One tantivy index's searcher (the agents' index, or ``index_dir/body``): its top hits with ties
    broken by page id, excluded pages left out, and the page id of a document address.

    Open once and share between threads: it only reads the one searcher made at open time.
    """

    def __init__(self, index: tantivy.Index):
        self.index, self.schema, self.searcher = index, index.schema, index.searcher()
        self._ids: dict[tuple[int, int], str] = {}  # document address -> page id (a dict is safe across threads)

    def page_id(self, addr) -> str:
        """The page id of a document address, read once (addresses are fixed for the searcher's life)."""
        key = (addr.segment_ord, addr.doc)
        pid = self._ids.get(key)
        if pid is None:
            if len(self._ids) >= MAX_REMEMBERED_IDS:
                self._ids.clear()  # a bound on memory over a long run; the ids are read again as needed
            pid = self._ids[key] = self.searcher.doc(addr)["page_id"][0]
        return pid

    def ranked(self, query: tantivy.Query, k: int, exclude_page_ids: Iterable[str] = ()) -> list[tuple]:
        """The top ``k`` (score, address, page id) of ``query``, excluded pages left out, ties by page id.

        Masking: the excluded pages are resolved to their document addresses and the search
        asks for ``k + len(excluded)`` hits, so after dropping them exactly the top ``k`` of
        the remaining pages are left, the same result a ``MustNot`` clause would give, at
        half the cost (a ``MustNot`` turns block-max WAND off).
        """
        excluded = self.addresses(exclude_page_ids)
        want = k + len(excluded)

        def top(limit: int) -> list:
            hits = self.searcher.search(query, limit=limit, count=False).hits
            return [h for h in hits if (h[1].segment_ord, h[1].doc) not in excluded] if excluded else hits

        # One hit past k shows whether hits tie at the cut; then all the tied ones are
        # fetched and ordered by page id, so results do not depend on segment order.
        hits = top(want + 1)
        if len(hits) > k and hits[k][0] == hits[k - 1][0]:
            hits = top(want + 64)
            cut = hits[k - 1][0]
            hits = [h for h in hits if h[0] >= cut]
        else:
            hits = hits[:k]
        ranked = [(score, addr, self.page_id(addr)) for score, addr in hits]
        ranked.sort(key=lambda h: (-h[0], h[2]))
        return ranked[:k]

    def addresses(self, page_ids: Iterable[str]) -> set[tuple[int, int]]:
        """(segment, doc) of each indexed page in ``page_ids`` (a lone string is one id)."""
        if isinstance(page_ids, str):
            page_ids = [page_ids]
        out = set()
        for pid in page_ids:
            if isinstance(pid, str) and pid:
                q = tantivy.Query.term_query(self.schema, "page_id", pid, index_option="basic")
                out.update((a.segment_ord, a.doc) for _, a in self.searcher.search(q, 4, count=False).hits)
        return out


class _Lexical:
    """A built-in BM25 ranking of one field of one index (``text`` of the agents' index: the tool's, with
    the exact-title bonus; ``body`` of ``index_dir/body``)."""

    def __init__(self, source: _Searcher, field: str, exact_title: bool, raw: bool = False):
        self.source, self.field, self.exact_title, self.raw = source, field, exact_title, raw

    def query(self, query: str, terms: list[str]) -> tantivy.Query:
        """One flat disjunction of term queries.

        Kept flat (no nested boolean, no ``MustNot``) because only then does tantivy run
        block-max WAND over it, which halves the cost of a query on long posting lists.
        """
        schema, tq = self.source.schema, tantivy.Query.term_query
        clauses = [(_S, tq(schema, self.field, t, index_option="freq")) for t in terms]
        key = title_key(query) if self.exact_title else ""
        if key:
            clauses.append((_S, tantivy.Query.boost_query(
                tq(schema, "title_key", key, index_option="basic"), EXACT_TITLE_BOOST)))
        return tantivy.Query.boolean_query(clauses)

    def memo_key(self, query: str) -> tuple | None:
        """What this ranking's result for ``query`` depends on, as a value (None: the query has no terms):
        its bag of terms under this field's analysis (sorted: never set order) and, with the exact-title
        bonus, the query's title key.  Two queries with one key rank the same."""
        terms = query_terms(query, raw=self.raw) if isinstance(query, str) else []
        if not terms:
            return None
        return tuple(sorted(terms)), title_key(query) if self.exact_title else ""

    def ranked(self, query: str, k: int, exclude) -> list[tuple]:
        """(score, address, page id) of the top ``k``."""
        terms = query_terms(query, raw=self.raw) if isinstance(query, str) and k > 0 else []
        if not terms:
            return []
        # tantivy adds the clauses' scores in clause order, in float32: "a b" and "b a" can differ in the last
        # bit and break a tie the other way. Sorted, the ranking is a function of the bag of terms (memo_key).
        return self.source.ranked(self.query(query, sorted(terms)), min(int(k), MAX_K), exclude)

    floor = 0.0  # a page that matches no word of the query scores 0

    def top(self, query: str, k: int, exclude: frozenset[str] = frozenset()) -> list[str]:
        return [pid for _, _, pid in self.ranked(query, k, exclude)]

    def scored(self, query: str, k: int, exclude: frozenset[str] = frozenset()) -> list[tuple[str, float]]:
        """``(page id, BM25 score)`` of the top ``k``, as :meth:`top` ranks them (:class:`ScoredRanking`)."""
        return [(pid, float(score)) for score, _, pid in self.ranked(query, k, exclude)]


class SearchIndex:
    """A read-only, thread-safe handle on a built index.

    Open it once per process and share it between threads: every method only reads
    the one searcher made at open time.
    """

    def __init__(self, index: tantivy.Index, meta: dict, index_dir: Path, snippet_chars: int = 300):
        self._index = index
        self._main = _Searcher(index)
        self._schema, self._searcher = self._main.schema, self._main.searcher
        long_index = tantivy.Index.open(str(index_dir / LONG_DIR))
        self._long_schema, self._long = long_index.schema, long_index.searcher()  # bodies past the lead
        self.meta = meta
        self.index_dir = index_dir
        self.snippet_chars = snippet_chars
        self.num_docs: int = self._searcher.num_docs
        self._rankings: dict[str, Ranking] = {"tool": _Lexical(self._main, "text", True)}
        self.default_ranking = "tool"

    def register_ranking(self, name: str, ranking: Ranking) -> None:
        """Add a ranking (a dense retriever, a :class:`FusedRanking`) under ``name``; it may then be the
        ``default_ranking`` that :meth:`search` uses, or be asked for by name."""
        if not name or name in RANKINGS:
            raise ValueError(f"a ranking needs a new name, not {name!r} (built in: {', '.join(RANKINGS)})")
        self._rankings[name] = ranking

    def ranking(self, name: str) -> Ranking:
        """The ranking called ``name`` (``tool``, ``body`` or a registered one)."""
        try:
            return self._rankings[name]
        except KeyError:
            if name == "body" and self.meta.get("body") and (self.index_dir / BODY_DIR / "meta.json").is_file():
                # Opened on first use: the agents' tools never ask for it (two threads may both open it; one wins).
                body = tantivy.Index.open(str(self.index_dir / BODY_DIR))
                body.register_tokenizer(RAW_ANALYZER_NAME, raw_analyzer())
                return self._rankings.setdefault("body", _Lexical(_Searcher(body), "body", False, raw=True))
            if name == "body":
                raise ValueError(f"the index in {self.index_dir} was built without the body ranking's index "
                                 f"({BODY_DIR}/): rebuild it with build_index(..., body=True)") from None
            raise ValueError(f"unknown ranking {name!r}; known: {', '.join(sorted(self._rankings))}") from None

    @classmethod
    def open(cls, index_dir: str | Path, snippet_chars: int = 300) -> "SearchIndex":
        """Open the index built by :func:`build_index` in ``index_dir``.

        Raises :class:`IndexNotFound` (a :class:`~synth.engine.store.MissingInput`) when the folder
        holds no complete index of this format.
        """
        index_dir = Path(index_dir)
        meta_path = index_dir / META_FILE
        if not meta_path.is_file():
            out = index_dir.parent
            raise IndexNotFound(
                f"no search index in {index_dir}: run `hopforge index --out {out}` (or `hopforge run --out {out}`)"
            )
        meta = orjson.loads(meta_path.read_bytes())
        if meta.get("format") != FORMAT:
            raise IndexNotFound(
                f"the search index in {index_dir} has format {meta.get('format')}, this code reads format "
                f"{FORMAT}: rebuild it with `hopforge index --out {index_dir.parent} --force`"
            )
        index = tantivy.Index.open(str(index_dir))
        index.register_tokenizer(ANALYZER_NAME, analyzer())
        index.register_tokenizer(RAW_ANALYZER_NAME, raw_analyzer())
        return cls(index, meta, index_dir, snippet_chars)

    # ---- search ----------------------------------------------------------------------------
    def search(self, query: str, k: int, exclude_page_ids: Iterable[str] = (),
               snippet_chars: int | None = None, ranking: str | None = None) -> list[dict]:
        """The top ``k`` pages for a free-text query, as ``[{page_id, title, snippet}]`` (and the page's
        ``description`` when it has one, as Wikipedia's search shows it).

        Any string is a valid query (an empty one returns ``[]``).  Pages in
        ``exclude_page_ids`` are never returned, and ``k`` results still come back when
        the index has them.  ``ranking`` names the ranking (default: ``default_ranking``).
        """
        terms = query_terms(query) if isinstance(query, str) and k > 0 else []
        if not terms:
            return []
        ranker = self.ranking(ranking or self.default_ranking)
        if isinstance(ranker, _Lexical) and ranker.source is self._main:
            docs = [self._searcher.doc(addr).to_dict() for _, addr, _ in ranker.ranked(query, k, exclude_page_ids)]
        else:
            docs = [d for d in (self._lookup("page_id", pid) for pid in
                                ranker.top(query, min(int(k), MAX_K), self._excluded_ids(exclude_page_ids))) if d]
        chars = snippet_chars or self.snippet_chars
        # The matches a snippet highlights are the query's terms as the tool reads them, whatever ranked the page.
        snippets = tantivy.SnippetGenerator.create(self._searcher, self._rankings["tool"].query(query, terms),
                                                   self._schema, "text")
        snippets.set_max_num_chars(MAX_FRAGMENT_CHARS)  # every match; snippet_window picks the window
        idf = self._idf(terms)
        out = []
        for doc in docs:
            paragraphs = doc["lead"][0].decode("utf-8").split(PARA_SEP)  # the lead: bounded, whatever the page
            i = best_paragraph(paragraphs, idf)
            if i is None:  # the match is in the title only: show the lead paragraph, not a heading
                text = next((p for p in paragraphs if p and not p.startswith("#")), "")
                spans: list[tuple[int, int]] = []
            else:
                text = paragraphs[i]
                spans = match_spans(snippets, text)
            hit = {"page_id": doc["page_id"][0], "title": doc["title"][0], "snippet": snippet_window(text, spans, chars)}
            description = _meta(doc).get("description")
            if description:
                hit["description"] = description
            out.append(hit)
        return out

    def search_ids(self, query: str, k: int, exclude_page_ids: Iterable[str] = (),
                   ranking: str | None = None) -> list[str]:
        """The page ids :meth:`search` would return, without building snippets (cheaper)."""
        if not isinstance(query, str) or k <= 0:
            return []
        ranker = self.ranking(ranking or self.default_ranking)
        if isinstance(ranker, _Lexical):
            return ranker.top(query, k, exclude_page_ids)
        return ranker.top(query, min(int(k), MAX_K), self._excluded_ids(exclude_page_ids))

    @staticmethod
    def _excluded_ids(page_ids: Iterable[str]) -> frozenset[str]:
        if isinstance(page_ids, str):
            return frozenset([page_ids])
        return frozenset(p for p in page_ids if isinstance(p, str) and p)

    def _idf(self, terms: list[str]) -> dict[str, float]:
        """BM25 idf of each term over the pages' ``text`` (the weights of paragraph scoring)."""
        n = self.num_docs
        out = {}
        for t in terms:
            df = self._searcher.doc_freq("text", t)
            out[t] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        return out

    def rarity(self, word: str) -> float:
        """How rare ``word`` is: the largest BM25 idf of its terms over the page bodies (0 for no term)."""
        terms = query_terms(word) if isinstance(word, str) else []
        return max(self._idf(terms).values(), default=0.0)

    def has_title(self, text: str) -> bool:
        """Whether some page's title is ``text``, case and underscores aside (no document is read)."""
        key = title_key(text) if isinstance(text, str) else ""
        if not key:
            return False
        q = tantivy.Query.term_query(self._schema, "title_key", key, index_option="basic")
        return self._searcher.search(q, 1, count=True).count > 0

    def title_page_ids(self, text: str) -> list[str]:
        """The ids of the pages titled ``text``, case and underscores aside (the pages the ``tool`` ranking's
        exact-title bonus lifts), in :func:`~synth.corpus.titles.page_order`: the page a link to that title
        resolves to first."""
        key = title_key(text) if isinstance(text, str) else ""
        if not key:
            return []
        return sorted((d["page_id"][0] for d in self._lookup_all("title_key", key, limit=None)), key=page_order)

    # ---- lookup ----------------------------------------------------------------------------
    def get_page(self, page: str) -> dict | None:
        """The page with this id, else with this title, else None.

        A title matches exactly first; failing that, case-insensitively with underscores
        read as spaces.  A title several pages hold names the one with the smallest id
        (:func:`synth.corpus.titles.page_order`), the page a link to that title resolves to;
        the others are opened by id.  Returns ``{page_id, title, paragraphs, description,
        aliases, url, links}`` with the paragraphs as the agent reads them and the links as
        ``[anchor text, page id, title]`` lists, in page order.
        """
        if not isinstance(page, str) or not page.strip():
            return None
        page = clean_text(page)
        doc = self._lookup("page_id", page)
        if doc is None:
            docs = self._lookup_all("title_key", title_key(page), limit=None)
            exact = [d for d in docs if d["title"][0] == page]
            pool = exact or docs
            doc = min(pool, key=lambda d: page_order(d["page_id"][0])) if pool else None
        if doc is None:
            return None
        meta = _meta(doc)
        body = self._long_body(doc["page_id"][0]) if meta.get("long") else doc["lead"][0].decode("utf-8")
        return {"page_id": doc["page_id"][0], "title": doc["title"][0],
                "paragraphs": body.split(PARA_SEP), "description": meta.get("description"),
                "aliases": meta.get("aliases") or [], "url": meta.get("url"), "links": meta.get("links") or []}

    def _long_body(self, page_id: str) -> str:
        """The whole body of a page longer than its stored lead, from ``index_dir/long``."""
        q = tantivy.Query.term_query(self._long_schema, "page_id", page_id, index_option="basic")
        (hit,) = self._long.search(q, 1, count=False).hits
        return self._long.doc(hit[1])["body"][0].decode("utf-8")

    def _lookup(self, field: str, value: str) -> dict | None:
        docs = self._lookup_all(field, value, limit=1)
        return docs[0] if docs else None

    def _lookup_all(self, field: str, value: str, limit: int | None = 16) -> list[dict]:
        """The documents whose ``field`` is ``value``: at most ``limit``, or all of them (None)."""
        if not value:
            return []
        q = tantivy.Query.term_query(self._schema, field, value, index_option="basic")
        if limit is None:
            limit = max(self._searcher.search(q, 1, count=True).count, 1)
        return [self._searcher.doc(addr).to_dict() for _, addr in self._searcher.search(q, limit, count=False).hits]


def _meta(doc: dict) -> dict:
    """A stored document's ``meta`` (description, aliases, url, links), ``{}`` when it has none."""
    return orjson.loads(doc["meta"][0]) if doc.get("meta") else {}


__all__ = ["SearchIndex", "IndexNotFound", "Ranking", "ScoredRanking", "FusedRanking", "ScoreFusion", "FUSIONS",
           "RANKINGS", "reciprocal_rank_fusion", "fuse_scores",
           "build_index"]
