"""Effective depth: how many of a question's hops a solver with a search tool must really walk.

A question chains ``k`` hops from a named start to its answer (its *nominal* depth).  A
solver need not start at the start: if one search for something the question says returns
a page of the chain, the solver can enter the chain there and skip every hop before it.
So, for any teacher's question, each of these is searched alone in the unmasked index
(the rollouts' index, without source masking), top ``k`` (``questions.config.search_depth``: as deep as
one call of the agents' ``search`` may go, ``tools.search_max_k``, unless ``questions.shortcut_k`` is higher):

* each hop's sub-question;
* each quoted span of a hop's sub-question and of its sentence (a verbatim quote is the
  easiest query a full-text index has);
* each hop's sentence of the question, when the question has one sentence per hop between
  its first and last (the layout the prompts ask for);
* the whole question.

Each of those is searched by every **adversary** of ``questions.adversaries`` (:data:`ADVERSARIES`, all by
default), so the guarantee does not rest on the agents' own tool alone:

* ``tool``: the agents' ``search`` (BM25F over title and body, the exact-title bonus);
* ``body``: a plain BM25 over the page bodies, no title and no boost (a different ranking: a page whose
  title holds no clue word but whose text holds them all comes first here);
* ``keywords``: the text's content words only, the question's frame words ("previous", "page", "link")
  and function words removed, searched with both rankings (what a solver types into any engine);
* ``dense``: a dense retriever (:class:`synth.tools.dense.DenseIndex`: the ``embed`` stage's page vectors, a
  sentence-transformers model for the query, exact inner product), which finds a page by meaning: a
  paraphrase that shares no word with its page is found here and by no lexical search.

A search that returns a page of the chain other than the start is an *entry point* at that
page.  That is wider than "the page the clue is read on, or the page it leads to": a
solver who recognises any later page of the chain among one search's results enters there
just the same.  The *effective depth* is the number of hops left from the latest entry
point: ``k - j`` for the latest chain page ``j`` any search of any adversary returns, and ``k`` when
none does.  :class:`Depth` records it with the entry point that set it (the adversary, the hop whose
clue was searched, how, the query, the page and its rank), which the ``enterable_hop`` validator names
in its drop reason and its repair request, and each adversary's own effective depth.

A query already made is answered from memory (a repaired question repeats most of its
clues, and the same bag of terms ranks the same).  Lexical searches are cheap (about 0.15 ms on the
demo's index, ``bench/questions.py``): pruning them by the terms the chain pages hold cost
more, in reading and analysing those pages, than the searches it saved.  A dense search costs more (the
query is embedded by a model: several milliseconds alone, a few in a batch), so :meth:`DepthMeter.measure`
hands every text of a question to :meth:`Adversaries.prefetch` first, which embeds those not yet searched
in one batch; a text's vector does not depend on its batch (:mod:`synth.tools.dense`), so neither does a
depth.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from synth.engine.records import Question
from synth.text.clues import keywords
from synth.text.question_text import sentences

LEXICAL = ("tool", "body", "keywords")  # the adversaries that search the index alone
ADVERSARIES = LEXICAL + ("dense",)  # questions.adversaries: the searches a clue must survive (docstring)

_QUOTE = re.compile(r'"([^"]{3,})"|\u201c([^\u201d]{3,})\u201d')


@dataclass(frozen=True)
class Entry:
    """Where one search lets a solver enter the chain."""

    hop: int | None  # 0-based hop whose text was searched; None for the whole question
    how: str  # "sub-question", "quote", "sentence" or "question"
    query: str  # what was searched (for ``keywords``, the content words)
    page: int  # index in the chain of the page it returns (1..k)
    title: str
    rank: int  # 1-based
    adversary: str = "tool"  # which search found it (ADVERSARIES)

    def describe(self, k: int) -> str:
        """The entry in words, for a drop reason, a repair request and the explorer."""
        what = "the whole question" if self.hop is None else f"hop {self.hop + 1}'s {self.how}"
        query = self.query if len(self.query) <= 160 else self.query[:157] + "..."
        return (f"{SEARCHES[self.adversary]}: one search for {what} ({query!r}) returns {self.title!r}, page "
                f"{self.page} of the chain, at rank {self.rank}: a solver can enter there and skip {self.page} of "
                f"{k} hops")


SEARCHES = {"tool": "the agents' search tool", "body": "a plain BM25 over page bodies (no title)",
            "keywords": "a keyword search (content words only)",
            "dense": "a dense retriever (nearest pages by meaning)"}


@dataclass(frozen=True)
class Depth:
    """A question's nominal and effective depth, and the entry point that set the latter (None: none)."""

    nominal: int
    effective: int
    entry: Entry | None
    by_adversary: dict[str, int] = field(default_factory=dict)  # each adversary's own effective depth


def searches(q: Question) -> list[tuple[int | None, str, str]]:
    """``(hop, how, text)`` of every search the module docstring lists, hops in order, the whole question last."""
    sents = sentences(q.question, protect=q.titles)
    aligned = len(sents) == len(q.hops) + 2
    out: list[tuple[int | None, str, str]] = []
    for i, h in enumerate(q.hops):
        out.append((i, "sub-question", h.sub_question))
        texts = [h.sub_question] + ([sents[i + 1]] if aligned else [])
        for t in texts:
            for m in _QUOTE.finditer(t):
                out.append((i, "quote", m.group(1) or m.group(2)))
        if aligned:
            out.append((i, "sentence", sents[i + 1]))
    out.append((None, "question", q.question))
    return out


class Adversaries:
    """The searches of ``questions.adversaries`` over one index, each top ``k`` asked once (module docstring).

    :meth:`found` is what the checks and the oracle's clue writer both ask: the pages each adversary
    returns for one text.  ``dense`` (a :class:`synth.tools.dense.DenseIndex`) is what the ``dense`` adversary
    searches; ``names`` unset means every adversary there is an index for (:data:`LEXICAL` without ``dense``).
    """

    def __init__(self, index, k: int = 5, names: tuple[str, ...] | list[str] | None = None, dense=None):
        names = (ADVERSARIES if dense is not None else LEXICAL) if names is None else names
        unknown = [n for n in names if n not in ADVERSARIES]
        if unknown or not names:
            raise ValueError(f"unknown adversaries {unknown} (known: {', '.join(ADVERSARIES)})" if unknown
                             else "at least one adversary is needed")
        if "dense" in names and dense is None:
            raise ValueError("the dense adversary needs the page vectors of the embed stage (a DenseIndex)")
        self.index, self.k, self.names = index, k, tuple(dict.fromkeys(names))
        self.dense = dense if "dense" in self.names else None
        self.searches = 0
        self.pruned = 0  # searches answered from memory (the same bag of terms ranks the same)
        self.dense_texts = 0  # texts searched by the dense adversary (each once; the index's memo may answer some)
        self.dense_cpu_seconds = 0.0  # CPU time of this thread in the dense index (embedding, mostly)
        self._hits: dict[tuple, list[str]] = {}

    def prefetch(self, texts) -> None:
        """Embed, in one batch, the texts the ``dense`` adversary is about to search and has not (a no-op
        without it): each then costs a lookup when :meth:`top` asks (module docstring)."""
        if self.dense is not None:
            todo = [t for t in dict.fromkeys(texts) if t.strip() and ("dense", t) not in self._hits]
            if todo:
                c0 = time.thread_time()
                for text, top in zip(todo, self.dense.search_many(todo, self.k)):
                    self._hits[("dense", text)] = top
                self.searches += len(todo)
                self.dense_texts += len(todo)
                self.dense_cpu_seconds += time.thread_time() - c0

    def top(self, text: str, ranking: str = "tool") -> list[str] | None:
        """The top ``k`` of one search with one ranking (None: the query has no terms)."""
        from synth.tools.analysis import query_terms

        if ranking == "dense":  # the text as written: a model reads it, no bag of terms
            if self.dense is None or not text.strip():
                return None
            key = ("dense", text)
            if key in self._hits:
                self.pruned += 1
            else:
                self.searches += 1
                c0 = time.thread_time()
                self._hits[key] = self.dense.search_ids(text, self.k)
                self.dense_texts += 1
                self.dense_cpu_seconds += time.thread_time() - c0
            return self._hits[key]
        # Texts the ranking cannot tell apart share one search: its own memo key (its field's terms, so
        # "branch" and "branches" are one stemmed query but two unstemmed ones), else the text itself.
        memo_key = getattr(self.index.ranking(ranking), "memo_key", None) if hasattr(self.index, "ranking") else None
        if memo_key is not None:
            found = memo_key(text)
        else:
            found = (text,) if query_terms(text) else None
        if found is None:
            return None
        key = (ranking, found)
        if key in self._hits:
            self.pruned += 1
        else:
            self.searches += 1
            self._hits[key] = self.index.search_ids(text, self.k, ranking=ranking)
        return self._hits[key]

    def found(self, text: str, dense: bool = True) -> list[tuple[str, str, list[str]]]:
        """``(adversary, query, top k)`` of every adversary's searches for ``text`` (without ``dense``: but the
        dense adversary's)."""
        out = []
        for name in self.names:
            if name == "dense" and not dense:
                continue
            if name == "keywords":
                kw = keywords(text)
                if kw and kw != text:
                    for ranking in ("tool", "body"):
                        out.append((name, kw, self.top(kw, ranking) or []))
            else:
                out.append((name, text, self.top(text, name) or []))
        return out

    def pages(self, text: str, dense: bool = True) -> list[str]:
        """Every page any adversary's search for ``text`` returns, each once, in the order found (without
        ``dense``: but the dense adversary's)."""
        return list(dict.fromkeys(p for _, _, top in self.found(text, dense) for p in top))


class DepthMeter:
    """Measures :class:`Depth` against one index and its :class:`Adversaries` (``dense``: the dense one's vectors)."""

    def __init__(self, index, k: int = 5, adversaries: tuple[str, ...] | list[str] | None = None, dense=None):
        self.index, self.k = index, k
        self.adversaries = Adversaries(index, k, adversaries, dense)

    @property
    def searches(self) -> int:
        return self.adversaries.searches

    @property
    def pruned(self) -> int:
        return self.adversaries.pruned

    def top(self, text: str) -> list[str] | None:
        """The top ``k`` of the agents' tool for one text (the clue-shortcut check's search)."""
        return self.adversaries.top(text, "tool")

    def measure(self, q: Question) -> Depth:
        """The question's depth (module docstring): the shallowest over the adversaries."""
        k = len(q.hops)
        where = {pid: j for j, pid in enumerate(q.path) if j >= 1}
        best: dict[str, Entry] = {}
        todo = searches(q)
        self.adversaries.prefetch(text for _, _, text in todo)
        for hop, how, text in todo:
            for adversary, query, top in self.adversaries.found(text):
                for rank, pid in enumerate(top, start=1):
                    j = where.get(pid)
                    e = best.get(adversary)
                    if j is not None and (e is None or j > e.page):
                        best[adversary] = Entry(hop, how, query, j, q.titles[j], rank, adversary)
        by = {a: k - best[a].page if a in best else k for a in self.adversaries.names}
        # The entry that sets the depth: the latest page, the first adversary in order among equals.
        entry = max(best.values(), key=lambda e: (e.page, -self.adversaries.names.index(e.adversary)), default=None)
        return Depth(k, k - entry.page if entry else k, entry, by)


def required(nominal: int, fraction: float) -> int:
    """The least effective depth ``questions.min_effective_depth`` allows for a question of ``nominal`` hops."""
    import math

    return min(nominal, math.ceil(fraction * nominal - 1e-9))


def by_adversary(depths: list[Depth]) -> dict:
    """Per adversary: the questions it entered, the hops its entries skip in all, and its full-depth share."""
    out: dict[str, dict] = {}
    for d in depths:
        for name, eff in d.by_adversary.items():
            row = out.setdefault(name, {"questions": 0, "entered": 0, "hops_caught": 0})
            row["questions"] += 1
            row["entered"] += eff < d.nominal
            row["hops_caught"] += d.nominal - eff
    for row in out.values():
        row["full_depth_share"] = round(1 - row["entered"] / row["questions"], 4) if row["questions"] else None
    return dict(sorted(out.items(), key=lambda kv: ADVERSARIES.index(kv[0])))


def summary(depths: list[tuple[int, int]]) -> dict:
    """Distribution, means and ratio of ``(nominal, effective)`` pairs, for reports and the card."""
    n = len(depths)
    if not n:
        return {"questions": 0}
    nominal = sum(d[0] for d in depths)
    effective = sum(d[1] for d in depths)
    hist: dict[str, int] = {}
    for _, e in depths:
        hist[str(e)] = hist.get(str(e), 0) + 1
    return {"questions": n, "mean_nominal": round(nominal / n, 3), "mean_effective": round(effective / n, 3),
            "ratio": round(effective / nominal, 4) if nominal else None,
            "full_depth_share": round(sum(1 for a, b in depths if a == b) / n, 4),
            "effective": dict(sorted(hist.items(), key=lambda kv: int(kv[0]))),
            "nominal": {str(a): sum(1 for x, _ in depths if x == a) for a in sorted({x for x, _ in depths})}}


__all__ = ["LEXICAL", "ADVERSARIES", "SEARCHES", "Entry", "Depth", "Adversaries", "DepthMeter", "searches",
           "required", "summary", "by_adversary"]
