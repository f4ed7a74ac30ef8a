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

A search that returns a page of the chain other than the start is an *entry point* at that
page.  That is wider than "the page the clue is read on, or the page it leads to": a
solver who recognises any later page of the chain among one search's results enters there
just the same.  The *effective depth* is the number of hops left from the latest entry
point: ``k - j`` for the latest chain page ``j`` any search returns, and ``k`` when none
does.  :class:`Depth` records it with the entry point that set it (the hop whose clue was
searched, how, the query, the page and its rank), which the ``enterable_hop`` validator
names in its drop reason and its repair request.

A query already made is answered from memory (a repaired question repeats most of its
clues, and the same bag of terms ranks the same).  Searches are cheap (about 0.15 ms on the
demo's index, ``bench/questions.py``): pruning them by the terms the chain pages hold cost
more, in reading and analysing those pages, than the searches it saved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from synth.engine.records import Question
from synth.text.question_text import sentences

_QUOTE = re.compile(r'"([^"]{3,})"|\u201c([^\u201d]{3,})\u201d')


@dataclass(frozen=True)
class Entry:
    """Where one search lets a solver enter the chain."""

    hop: int | None  # 0-based hop whose text was searched; None for the whole question
    how: str  # "sub-question", "quote", "sentence" or "question"
    query: str
    page: int  # index in the chain of the page it returns (1..k)
    title: str
    rank: int  # 1-based

    def describe(self, k: int) -> str:
        """The entry in words, for a drop reason, a repair request and the explorer."""
        what = "the whole question" if self.hop is None else f"hop {self.hop + 1}'s {self.how}"
        query = self.query if len(self.query) <= 160 else self.query[:157] + "..."
        return (f"one search for {what} ({query!r}) returns {self.title!r}, page {self.page} of the chain, at rank "
                f"{self.rank}: a solver can enter there and skip {self.page} of {k} hops")


@dataclass(frozen=True)
class Depth:
    """A question's nominal and effective depth, and the entry point that set the latter (None: none)."""

    nominal: int
    effective: int
    entry: Entry | None


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


class DepthMeter:
    """Measures :class:`Depth` against one index; keeps what the chain pages hold and what was searched."""

    def __init__(self, index, k: int = 5):
        self.index, self.k = index, k
        self.searches = 0
        self.pruned = 0  # searches answered from memory (the same bag of terms ranks the same)
        self._hits: dict[tuple, list[str]] = {}  # (terms, title key) -> top k

    def top(self, text: str) -> list[str] | None:
        """The top ``k`` of one search (None: the query has no terms)."""
        from synth.tools.analysis import query_terms, title_key

        terms = query_terms(text)
        if not terms:
            return None
        key = (frozenset(terms), title_key(text))  # the same bag of terms ranks the same
        if key in self._hits:
            self.pruned += 1
        else:
            self.searches += 1
            self._hits[key] = self.index.search_ids(text, self.k)
        return self._hits[key]

    def measure(self, q: Question) -> Depth:
        """The question's depth (module docstring)."""
        k = len(q.hops)
        where = {pid: j for j, pid in enumerate(q.path) if j >= 1}
        best: Entry | None = None
        for hop, how, text in searches(q):
            for rank, pid in enumerate(self.top(text) or [], start=1):
                j = where.get(pid)
                if j is not None and (best is None or j > best.page):
                    best = Entry(hop, how, text, j, q.titles[j], rank)
            if best is not None and best.page == k:
                break  # the answer itself: nothing is later
        return Depth(k, k - best.page if best else k, best)


def required(nominal: int, fraction: float) -> int:
    """The least effective depth ``questions.min_effective_depth`` allows for a question of ``nominal`` hops."""
    import math

    return min(nominal, math.ceil(fraction * nominal - 1e-9))


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


__all__ = ["Entry", "Depth", "DepthMeter", "searches", "required", "summary"]
