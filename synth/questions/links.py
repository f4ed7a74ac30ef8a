"""The link graph as the question validators see it: who links to whom, and what the neighbours are.

The validators ask two things of the corpus: whether page ``a`` links to page ``b``
(a skippable hop), and which other pages an article links to, or is linked from, with
their titles and descriptions (an ambiguous hop).  :class:`LinkView` answers both for
the pages of one shard's sources, loaded once: the CSR graph of the ``graph`` stage
(memory-mapped, so opening it costs nothing) and the title and description of every
neighbour of those pages.

The ``graph`` stage is an optional read of the questions stage: every pipeline has it
(walks need it), but a store made by hand for a test may not, and then the graph is
built in memory from ``corpus/links``, which is fine at that size.
"""

from __future__ import annotations

import re
from typing import Iterable

import numpy as np
import pyarrow.compute as pc

from synth.questions.depth import Adversaries, required
from synth.graph.csr import CSRGraph, open_graph
from synth.text.question_text import content_words


def load_graph(store) -> CSRGraph:
    """The ``graph`` stage's output, or, when the store has none, the graph of ``corpus/links`` in memory."""
    if store.exists("graph"):
        return open_graph(store)
    pages = store.dataset("corpus/pages", hint="ingest").to_table(columns=["page_id"]).column("page_id")
    links = store.dataset("corpus/links", hint="ingest").to_table(columns=["src_id", "dst_id"])
    ids = pc.unique(pages).sort()
    src, dst = (pc.index_in(links.column(c), value_set=ids).fill_null(-1).to_numpy(zero_copy_only=False)
                for c in ("src_id", "dst_id"))
    ok = (src >= 0) & (dst >= 0)  # a link to a page that is not in the corpus is no edge
    return CSRGraph.from_edges(len(ids), src[ok], dst[ok], page_ids=ids.to_pylist())


# Whatever is not inside a word, as synth.text.question_text reads words: an apostrophe only between letters.
_GAPS = re.compile(r"[^\w']+|_+|(?<![^\W_])'|'(?![^\W_])")


class LinkView:
    """Links among, and neighbours of, a set of pages; see the module docstring.

    :meth:`open` reads in bulk (one id conversion for every neighbour list, one table read
    for every page's title and description); what a check needs of one page is derived on
    first use and kept, so a check costs dictionary lookups.
    """

    def __init__(self, names: list[str], spans: dict[tuple[str, bool], tuple[int, int]], page_ids: list[str],
                 titles: list[str], descriptions: list[str]):
        self._names, self._spans = names, spans  # (page, backward) -> its neighbours' slice of names
        self._row = {p: i for i, p in enumerate(page_ids)}
        self._titles, self._descriptions = titles, descriptions
        self._out: dict[str, set[str]] = {}
        self._dwords: dict[str, set[str]] = {}
        self._dwords_text: dict[str, str] = {}
        self.lookups = 0
        self._store = self._graph = None  # set by open(): what extend() reads

    def extend(self, page_ids: Iterable[str]) -> None:
        """Add ``page_ids`` (and their out-neighbours) to a view made by :meth:`open`: a walk routed
        around a hop with no clue reaches pages its shard did not load."""
        new = sorted({p for p in page_ids if (p, False) not in self._spans})
        if not new or self._graph is None:
            return
        more = LinkView.open(self._store, self._graph, new)
        base = len(self._names)
        self._names.extend(more._names)
        for key, (a, b) in more._spans.items():
            self._spans[key] = (a + base, b + base)
        for pid, i in more._row.items():
            if pid not in self._row:
                self._row[pid] = len(self._titles)
                self._titles.append(more._titles[i])
                self._descriptions.append(more._descriptions[i])

    @classmethod
    def open(cls, store, graph: CSRGraph, page_ids: Iterable[str], backward_ids: Iterable[str] = ()) -> "LinkView":
        """A view of ``page_ids`` and their out-neighbours (and the in-neighbours of ``backward_ids``)."""
        back = set(backward_ids)
        ids = sorted(set(page_ids) | back)
        spans, parts, end = {}, [], 0
        for p, n in zip(ids, graph.nodes_of(ids).tolist()):
            if n < 0:
                continue
            for backward in (False, True) if p in back else (False,):
                part = np.asarray(graph.predecessors(n) if backward else graph.neighbors(n), dtype=np.int64)
                spans[(p, backward)] = (end, end + len(part))
                end += len(part)
                parts.append(part)
        flat = np.concatenate(parts) if parts else np.empty(0, np.int64)
        names = graph.page_ids.take(flat).to_pylist() if flat.size else []
        table = store.dataset("corpus/pages", hint="ingest").to_table(
            columns=["page_id", "title", "description"], filter=pc.field("page_id").isin(sorted(set(ids) | set(names))))
        view = cls(names, spans, table.column("page_id").to_pylist(), table.column("title").to_pylist(),
                   pc.fill_null(table.column("description"), "").to_pylist())
        view._store, view._graph = store, graph
        return view

    def _outs(self, page_id: str) -> set[str]:
        out = self._out.get(page_id)
        if out is None:
            out = self._out[page_id] = set(self.neighbours(page_id, False))
        return out

    def links(self, a: str, b: str) -> bool:
        """Whether page ``a`` links to page ``b`` (``a`` one of the pages the view was opened for)."""
        self.lookups += 1
        return b in self._outs(a)

    def skips(self, chain: list[str]) -> tuple[int, int] | None:
        """The first ``(i, j)``, ``j >= i + 2``, where ``chain[i]`` links straight to ``chain[j]``, or None."""
        for i, a in enumerate(chain):
            out = self._outs(a)
            for j in range(i + 2, len(chain)):
                self.lookups += 1
                if chain[j] in out:
                    return i, j
        return None

    def neighbours(self, page_id: str, backward: bool) -> list[str]:
        """The pages ``page_id`` links to (``backward``: the pages linking to it)."""
        self.lookups += 1
        a, b = self._spans.get((page_id, backward), (0, 0))
        return self._names[a:b]

    def title(self, page_id: str) -> str:
        """A page's title (its id when unknown)."""
        i = self._row.get(page_id)
        return page_id if i is None else self._titles[i]

    def description(self, page_id: str) -> str:
        """A page's description ("" when none)."""
        i = self._row.get(page_id)
        return "" if i is None else self._descriptions[i]

    def description_text(self, page_id: str) -> str:
        """The description lower-cased, every gap between words one space, a space in front: a clue
        word's stem can only be a word of it if ``" " + stem[:-1]`` is in this (the stemmer only cuts
        a word's end), so a cheap substring test rules most pages out."""
        text = self._dwords_text.get(page_id)
        if text is None:
            low = self.description(page_id).lower().replace("\u2019", "'")
            text = self._dwords_text[page_id] = " " + _GAPS.sub(" ", low)
        return text

    def description_words(self, page_id: str) -> set[str]:
        """The content words of a page's description, read once per page."""
        words = self._dwords.get(page_id)
        if words is None:
            words = self._dwords[page_id] = content_words(self.description(page_id))
        return words


class ShardCorpus:
    """The :class:`~synth.teacher.tasks.CorpusView` of one shard for the oracle's writer: the shard's
    :class:`LinkView` for neighbours, titles and descriptions, and the search index for the pages
    as the tools show them and for searches."""

    def __init__(self, links: LinkView, index, k: int, adversaries=None, min_effective_depth: float = 1.0,
                 facts_only: bool = False):
        self.links, self.index, self.k = links, index, k
        self.facts_only = facts_only
        self.min_effective_depth = min_effective_depth
        # The validators' adversaries when given: one memo of searches serves the writer and the checks.
        self.adversaries = adversaries if adversaries is not None else Adversaries(index, k)
        self._pages: dict[str, dict | None] = {}
        self._rarity: dict[str, float] = {}
        self._titles: dict[str, bool] = {}

    def free(self, hops: int) -> int:
        """Chain pages after the start that one search may enter in a question of ``hops`` hops
        (``questions.min_effective_depth``: 0 when every hop is needed)."""
        return hops - required(hops, self.min_effective_depth)

    def neighbours(self, page_id: str, backward: bool) -> list[str]:
        return self.links.neighbours(page_id, backward)

    def title(self, page_id: str) -> str:
        return self.links.title(page_id)

    def description(self, page_id: str) -> str:
        return self.links.description(page_id)

    def page(self, page_id: str) -> dict | None:
        if page_id not in self._pages:
            self._pages[page_id] = self.index.get_page(page_id)
        return self._pages[page_id]

    def search_ids(self, text: str, k: int, dense: bool = True) -> list[str]:
        if k != self.k:
            return self.index.search_ids(text, k)
        return self.adversaries.pages(text, dense)

    def rarity(self, word: str) -> float:
        if word not in self._rarity:
            self._rarity[word] = self.index.rarity(word)
        return self._rarity[word]

    def is_title(self, text: str) -> bool:
        key = text.lower()
        if key not in self._titles:
            self._titles[key] = self.index.has_title(text)
        return self._titles[key]


__all__ = ["LinkView", "ShardCorpus", "load_graph"]
