"""Clue-aware walks: a walk is re-routed around a hop that has no clue, never dropped whole for it.

A random walk of ``k`` hops rarely has a clue for every hop: a hop can be clued only where the next
page can be told apart from the current page's other links by something no search finds
(:mod:`synth.teacher.oracle.clues`).  Before any teacher writes a walk's question, :class:`Router`
walks the same path with that measure: it keeps each hop of the walk that has a clue, and where one
has none it takes another link of the same page that has one and leads on, until the whole question can
be written (:func:`synth.teacher.oracle.writer.chain_question`, as the oracle writes it) (a depth-first search over
the link graph, seeded per walk, within ``budget`` clue checks), so the question keeps the walk's
length and as much of its path as can be clued.  At the last hop, pages that are named entities
(people, places, organisations, works, events: :func:`synth.text.parse.named_in` and
:func:`~synth.text.parse.named_title`) come before concepts, since the benchmarks a student is judged on
answer with named entities (as the report counts them: spaCy's label of the title in the page's lead,
:func:`synth.text.parse.entity_type`); a concept ends a walk only when no named page can.  A hub (more pages link
to it than ``walk.max_in_degree``) ends no routed walk, so routing does not funnel walks into one hub
answer that a student would learn to guess.  Every choice depends on the walk and the corpus alone, never on
the other walks of its shard, so the questions do not depend on ``questions.shard_size`` or the workers.

Every teacher then gets the routed walk: the real ones as the oracle, so a paid call is spent only on
a path whose every hop can be clued.  A new hop's evidence is the paragraph of the current page that
names the next one.  The walk keeps its id, so its question id, split and cache entries stay stable.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from synth.engine.records import Evidence
from synth.engine.seeding import derive_seed
from synth.teacher.oracle.clues import ClueMaker, HopContext
from synth.teacher.oracle.writer import NoClue, chain_question
from synth.teacher.tasks import Source
from synth.text.parse import entity_type, is_named, named_in, named_title
from synth.text.question_text import giveaways

WIDTH = 8  # links tried per page before the search backs up


@dataclass
class RouteStats:
    """What routing did to a shard's walks: kept as walked, re-routed (hops changed), not routable."""

    walked: int = 0
    rerouted: int = 0
    hops_changed: int = 0
    unroutable: int = 0
    clue_checks: int = 0
    named_answers: int = 0
    by_hop: dict[str, int] = field(default_factory=dict)  # 1-based hop -> walks re-routed from there

    def as_dict(self) -> dict:
        return {"walked": self.walked, "rerouted": self.rerouted, "hops_changed": self.hops_changed,
                "unroutable": self.unroutable, "clue_checks": self.clue_checks, "named_answers": self.named_answers,
                "rerouted_from_hop": dict(sorted(self.by_hop.items(), key=lambda kv: int(kv[0])))}


class Router:
    """Routes walks through one shard's corpus view (module docstring)."""

    def __init__(self, corpus, budget: int = 48, maker: ClueMaker | None = None, max_in_degree: int | None = 150):
        self.corpus, self.budget, self.max_in_degree = corpus, budget, max_in_degree
        self._in_degree: dict[str, int] = {}
        self.maker = maker or ClueMaker(corpus)
        # Each hop tried is checked against every adversary the questions name, the dense one too where it is
        # listed (its searches only of a clue the lexical ones all miss), so the search routes around the hops a
        # dense retriever enters rather than finding a chain that the writer's check of the whole chain then
        # refuses (demo with `dense` listed: 64 questions kept, against 19 when the hops skipped it).
        self.hop_maker = ClueMaker(corpus)
        self.stats = RouteStats()
        self._entities: dict[str, dict] = {}
        self._named: dict[tuple[str, str], bool] = {}
        self._named_page: dict[str, bool] = {}
        self._ends_named: dict[str, bool] = {}

    def entity(self, page_id: str) -> dict:
        """``{page_id, title, description, aliases}`` of a page, as a source carries it."""
        e = self._entities.get(page_id)
        if e is None:
            page = self.corpus.page(page_id) or {}
            e = self._entities[page_id] = {"page_id": page_id, "title": self.corpus.title(page_id),
                                           "description": self.corpus.description(page_id) or None,
                                           "aliases": list(page.get("aliases") or [])}
        return e

    def in_degree(self, page_id: str) -> int:
        """How many pages link to ``page_id`` (the link graph's in-degree; 0 when the view has no graph)."""
        if page_id not in self._in_degree:
            graph = getattr(self.corpus.links, "_graph", None)
            node = int(graph.nodes_of([page_id])[0]) if graph is not None else -1
            self._in_degree[page_id] = len(graph.predecessors(node)) if node >= 0 else 0
        return self._in_degree[page_id]

    def named(self, here: str, there: str) -> bool:
        """Whether page ``there`` is a named entity, as ``here``'s text writes it or by its title."""
        key = (here, there)
        if key not in self._named:
            title = self.corpus.title(there)
            text, anchor = self._anchor(here, there)
            self._named[key] = (named_title(title) or named_in(text, anchor or title)) and self.named_page(there)
        return self._named[key]

    def named_page(self, page_id: str) -> bool:
        """Whether the report counts ``page_id`` a named entity as an answer: spaCy's label of its title in its
        lead (:func:`synth.text.parse.entity_type`, what ``style`` reads), so the router prefers what is counted."""
        if page_id not in self._named_page:
            page = self.corpus.page(page_id) or {}
            lead = ((page.get("paragraphs") or [""])[0] or "")[:400]
            self._named_page[page_id] = is_named(entity_type(self.corpus.title(page_id), lead))
        return self._named_page[page_id]

    def may_end(self, page_id: str) -> bool:
        """Whether a routed walk may end on ``page_id``: it is no hub (no more in-links than ``max_in_degree``)."""
        return self.max_in_degree is None or self.in_degree(page_id) <= self.max_in_degree

    def ends_named(self, page_id: str) -> bool:
        """Whether ``page_id`` links to a named entity that may end a routed walk (not a hub)."""
        if page_id not in self._ends_named:
            self.corpus.links.extend([page_id])
            self._ends_named[page_id] = any(self.named(page_id, m) for m in self.corpus.neighbours(page_id, False)
                                            if self.may_end(m))
        return self._ends_named[page_id]

    def _anchor(self, here: str, there: str) -> tuple[str, str | None]:
        page = self.corpus.page(here) or {}
        anchor = next((a for a, dst, *_ in page.get("links") or [] if dst == there), None)
        return "\n".join(p for p in page.get("paragraphs") or [] if p), anchor

    def evidence(self, here: str, there: str) -> Evidence:
        """The hop's evidence: the first paragraph of ``here`` that names ``there``."""
        page = self.corpus.page(here) or {}
        _, anchor = self._anchor(here, there)
        anchor = anchor or self.corpus.title(there)
        paras = page.get("paragraphs") or []
        at = next((i for i, p in enumerate(paras) if anchor.lower() in (p or "").lower()), 0)
        return Evidence(here, there, at + 1, paras[at] if paras else "", anchor)

    def route(self, src: Source, exclude: frozenset[str] = frozenset(), named_only: bool = False) -> Source | None:
        """The walk routed so that every hop can be clued (itself when it already can), or None.  ``exclude``:
        pages it may not end on (answers that already answer ``walk.max_answer_repeats`` questions);
        ``named_only``: a route that ends on a named entity or none."""
        walk = [e["page_id"] for e in src.entities]
        for e in src.entities:
            self._entities.setdefault(e["page_id"], e)
        k = len(walk) - 1
        free = self.corpus.free(k) if hasattr(self.corpus, "free") else 0
        rnd = random.Random(derive_seed(src.seed, "route", src.source_id))
        left = [self.budget]
        links = self.corpus.links

        def clueable(path: list[str], n: str) -> bool:
            left[0] -= 1
            self.stats.clue_checks += 1
            chain = [self.entity(p) for p in path + [n]]
            h = HopContext(chain, len(path) - 1, [giveaways(chain[-1])], src.seed, free=free)
            return self.hop_maker.choose(h)[0] is not None

        def dfs(path: list[str], named_only: bool) -> list[str] | None:
            i = len(path) - 1
            if i == k:  # the whole question too: every hop with all the later names it must not give away
                self.stats.clue_checks += 1
                try:
                    chain_question([self.entity(p) for p in path], derive_seed(src.seed, "oracle-question", 0),
                                   self.corpus, maker=self.maker)
                except NoClue:
                    return None
                return path
            on_walk = path == walk[:i + 1]
            nbrs = sorted(self.corpus.neighbours(path[-1], False))
            rnd.shuffle(nbrs)
            if on_walk and walk[i + 1] in nbrs:  # the walk's own next page first
                nbrs.remove(walk[i + 1])
                nbrs.insert(0, walk[i + 1])
            last = i == k - 1
            if named_only and i == k - 2:  # a penultimate page with no named page to end on cannot finish this pass:
                # it costs no clue check
                nbrs = [n for n in nbrs if self.ends_named(n)]
            if last:  # named entities end a walk before concepts do; a hub (more than max_in_degree pages link
                # to it, as walk.max_in_degree keeps walks off hubs) ends none: it is decided page by page, so the
                # route of a walk depends on nothing else the shard holds
                nbrs = [n for n in nbrs if n not in exclude and self.may_end(n)]
                nbrs.sort(key=lambda n: not self.named(path[-1], n))
                if named_only:
                    nbrs = [n for n in nbrs if self.named(path[-1], n)]
            tried = 0
            for n in nbrs:
                if left[0] <= 0 or tried >= WIDTH * (2 if last else 1):
                    return None
                if n in path or any(links.links(p, n) for p in path[:-1]):
                    continue  # a revisit, or a hop that an earlier page skips
                if not last:
                    links.extend([n])
                    if not self.corpus.neighbours(n, False):
                        continue  # leads nowhere
                tried += 1
                if clueable(path, n):
                    found = dfs(path + [n], named_only)
                    if found is not None:
                        return found
            return None

        links.extend(walk)
        # First a route that ends on a named entity, within the budget; then, with what is left, any route.
        path = dfs([walk[0]], True)
        if path is None and not named_only:
            left[0] = max(left[0], self.budget // 2)
            path = dfs([walk[0]], False)
        if path is None:
            self.stats.unroutable += 1
            return None
        changed = [i for i in range(1, len(path)) if path[i] != walk[i]]
        if self.named(path[-2], path[-1]):
            self.stats.named_answers += 1
        if not changed:
            self.stats.walked += 1
            return src
        self.stats.rerouted += 1
        self.stats.hops_changed += len(changed)
        first = str(changed[0])
        self.stats.by_hop[first] = self.stats.by_hop.get(first, 0) + 1
        hops = [src.links[i] if i + 1 < changed[0] else self.evidence(path[i], path[i + 1]) for i in range(k)]
        return Source(src.kind, src.source_id, [self.entity(p) for p in path], hops, src.seed)


__all__ = ["Router", "RouteStats", "WIDTH"]
