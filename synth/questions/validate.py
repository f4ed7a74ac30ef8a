"""Question validators that hold for any teacher: each failure is a named, counted drop reason.

They run on a parsed :class:`~synth.engine.records.Question` (after the schema, chain,
answer, leak and length checks of :func:`~synth.questions.sources.parse_question`), first
to last; the first one that fails names the reason.  A *hop's clue* is its ``sub_question``
plus, when the question has exactly one sentence per hop between its first and last
sentences (the layout the prompts ask for), that hop's sentence; the *final clue* is the
question's second-to-last sentence when it has three or more (in that layout, the last
hop's sentence, the last sentence asking for the answer).  Sentences are split by
:func:`synth.text.question_text.sentences`, words read by
:func:`~synth.text.question_text.content_words`.

``answer_description``
    The question, or its last hop's ``sub_question``, repeats the answer page's own
    description (the whole of it, or the part before its first ``;`` ``,`` or ``(``, two
    words or longer, compared after SQuAD normalisation).  The last clue must come from the
    evidence of the last hop, the paragraph that links to the answer.
``skippable_hop``
    An entity of the chain links straight to one two or more steps further along, in the
    order the question uses, in the corpus's link graph (walks and subgraphs alike); the
    hops between them can be skipped.
``ambiguous_hop``
    A hop's clue tells its bridge apart from nothing: it has no content word once the words
    of the titles already reached are set aside; or it also fits another page linked from
    the same article (for a hop that runs against its link, another page linking to the
    same article), the chain's own pages aside (:func:`synth.text.clues.rival_fits`).  A
    clue *covers* a page when it holds at least three quarters of the content words of the
    page's description, and at least two of them (one, for a one-word description), all its
    words counted: two pages with the same normalised description always fit a clue equally.
    It is ambiguous when such a page is covered at least as well as the bridge itself (Gas
    and Liquid are both "state of matter"), or covered where the bridge's description is not
    at all (a quote that holds "subregion of Oceania" points at the article's other link,
    Micronesia, too); or when everything the clue says is a word of the bridge's description
    and another page's description holds it all too (a coarse clue, "a country", where the
    article links to two countries).
``clue_shortcut``
    One search of the unmasked index for a hop's ``sub_question``, or for the final clue,
    returns the answer page in the top ``search_depth`` (``tools.search_max_k``) (the whole question is the
    stage's ``shortcut`` check).  The searches are the effective-depth searches' own: one
    memo serves both.
``enterable_hop``
    The question's effective depth (:mod:`synth.questions.depth`: the hops left from the
    latest page of the chain that one search for something the question says returns) is
    below ``questions.min_effective_depth`` of its hops.  The depth is measured for every
    question that reaches the checks, and recorded on the row (``effective_depth``,
    ``entry``) whether or not it is dropped.

``navigation``
    The question or a sub-question tells the solver to navigate (:data:`synth.text.question_text.NAVIGATION`:
    link, page, article, entry, trail, stop, open, follow): the benchmarks a student is judged on state
    facts between entities and never say where to click.

:data:`RULES` says each reason in words: the repair request quotes it to the teacher.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

from synth.engine.records import Question
from synth.questions.depth import SEARCHES, Depth, DepthMeter, required
from synth.text.clues import FIT, rival_fits
from synth.text.question_text import content_words, navigation, repeats_description, sentences
from synth.teacher.tasks import Source

RULES = {
    "navigation": "the question tells the solver to open a page or follow a link (it says link, page, article, "
                  "entry, trail, stop, open or follow). State facts that relate the entities instead, as a "
                  "benchmark question does: what the previous entity's text says about the next one.",
    "answer_leak": "the question names the answer, one of its names, or a number, year or symbol of it.",
    "wrong_answer": "the answer is not the title of the chain's last entity.",
    "hop_missing": "the hops do not bridge the chain's entities one by one, in order.",
    "length": "the question is too short or too long.",
    "answer_description": "the question repeats the answer's own description; give the last clue from the "
                          "evidence of the last hop (what the previous article says where it links to the answer).",
    "skippable_hop": "an entity of the chain links straight to a later one, so the hops between them can be "
                     "skipped; chain the entities so that each links only to the next.",
    "ambiguous_hop": "a hop's clue does not tell its entity apart from the other pages the same article links "
                     "to; give a clue from that hop's evidence that fits only its entity.",
    "clue_shortcut": "one search for a single clue (a sub-question, or the final clue alone) already finds the "
                     "answer page; choose clues that share fewer words with the answer's own page.",
    "enterable_hop": "one search for a hop's clue alone (its sub-question, a quoted span, or its sentence), with the "
                     "agents' search tool, a plain BM25 over page text, or its keywords alone, returns "
                     "a page of the chain, so a solver can enter the chain there and skip every hop before it. "
                     "Describe each entity by vague attributes (a kind of thing, a period, a role) that fit many "
                     "pages of the whole corpus but only one of the pages the previous entity links to, and "
                     "never quote page text: a verbatim quote is found by one search.",
}
_title_words = lru_cache(maxsize=1 << 14)(content_words)  # titles recur across a shard's chains


@dataclass(frozen=True)
class Failure:
    """Why a question fails: the drop reason, a detail for people, and the hop it concerns (0-based)."""

    reason: str
    detail: str
    hop: int | None = None


def repairable(src: Source, failure: Failure) -> bool:
    """Whether a rewrite can fix it: a walk's chain is fixed, so nothing removes its skippable hop."""
    return failure.reason in RULES and not (failure.reason == "skippable_hop" and src.kind == "walk")


def hop_clues(q: Question) -> tuple[list[str], str | None]:
    """Each hop's clue text and the final clue (module docstring)."""
    sents = sentences(q.question, protect=q.titles)
    aligned = len(sents) == len(q.hops) + 2
    clues = [h.sub_question + (" " + sents[i + 1] if aligned else "") for i, h in enumerate(q.hops)]
    return clues, (sents[-2] if len(sents) >= 3 else None)


class Validator:
    """The checks of the module docstring over one shard's questions, with what they cost."""

    def __init__(self, links, index=None, k: int = 5, min_depth: float = 0.0, shortcuts: bool = True,
                 adversaries: tuple[str, ...] | list[str] | None = None, dense=None):
        self.links, self.index, self.k = links, index, k
        self.min_depth, self.shortcuts = min_depth, shortcuts
        self.depth = DepthMeter(index, k, adversaries, dense) if index is not None else None
        self.depths: list[Depth] = []  # every question checked (repairs included)
        self.depth_of: dict[str, Depth] = {}  # the last measure of each question id
        self.seconds = 0.0  # wall time, and CPU time of the checking thread (steadier on shared cores)
        self.cpu_seconds = 0.0
        self.by_check: dict[str, float] = {}
        self.checked = 0

    def check(self, q: Question) -> Failure | None:
        """The first check ``q`` fails, or None."""
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            self.checked += 1
            clues, final = hop_clues(q)
            depth = self._timed("enterable_hop", self._depth, q)
            shortcuts = self.index is not None and self.shortcuts
            return (self._timed("answer_description", self._description, q)
                    or self._timed("skippable_hop", self._skippable, q)
                    or self._timed("ambiguous_hop", self._ambiguous, q, clues)
                    or (self._timed("clue_shortcut", self._shortcut, q, final) if shortcuts else None)
                    or self._enterable(q, depth)
                    or self._timed("navigation", self._navigation, q, clues))
        finally:
            self.seconds += time.perf_counter() - t0
            self.cpu_seconds += time.thread_time() - c0

    def _timed(self, name: str, fn, *args) -> Failure | None:
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.by_check[name] = self.by_check.get(name, 0.0) + time.perf_counter() - t0

    def stats(self) -> dict:
        """Questions checked, seconds spent (in all, loading included, and per check), searches sent and
        skipped, the texts the dense adversary searched and its CPU seconds (with one), and graph lookups."""
        depth = self.depth
        return {"checked": self.checked, "seconds": round(self.seconds, 4), "cpu_seconds": round(self.cpu_seconds, 4),
                **{f"seconds_{k}": round(v, 4) for k, v in self.by_check.items()},
                "searches": depth.searches if depth else 0, "searches_remembered": depth.pruned if depth else 0,
                **({"dense_texts": depth.adversaries.dense_texts,
                    "dense_cpu_seconds": round(depth.adversaries.dense_cpu_seconds, 4)}
                   if depth and depth.adversaries.dense is not None else {}),
                "graph_lookups": self.links.lookups}

    # ---- the checks, in order -------------------------------------------------------------
    def _depth(self, q: Question) -> Depth | None:
        """Measure and record the question's effective depth (None without an index)."""
        if self.depth is None:
            return None
        d = self.depth.measure(q)
        q.effective_depth = d.effective
        q.entry = d.entry.describe(d.nominal) if d.entry is not None else None
        q.entered_by = d.entry.adversary if d.entry is not None else None
        self.depths.append(d)
        self.depth_of[q.question_id] = d
        return d

    def _enterable(self, q: Question, d: Depth | None) -> Failure | None:
        if d is None or d.effective >= required(d.nominal, self.min_depth):
            return None
        e = d.entry
        # The hop to rewrite: the one whose clue was searched, or (for the whole question) the hop into the page found.
        hop = e.hop if e.hop is not None else e.page - 1
        return Failure("enterable_hop", f"effective depth {d.effective} of {d.nominal}: {e.describe(d.nominal)}", hop)

    def _navigation(self, q: Question, clues: list[str]) -> Failure | None:
        word = navigation(q.question) or next((w for h in q.hops if (w := navigation(h.sub_question))), None)
        if word is None:
            return None
        hop = next((i for i, c in enumerate(clues) if navigation(c)), None)
        return Failure("navigation", f"the question says {word!r}: it tells the solver to navigate instead of "
                                     "stating a fact", hop)

    def _description(self, q: Question) -> Failure | None:
        desc = self.links.description(q.answer_page_id)
        if not desc:
            return None
        for where, text in (("question", q.question), ("last sub-question", q.hops[-1].sub_question)):
            core = repeats_description(text, desc)
            if core is not None:
                return Failure("answer_description", f"the {where} repeats the answer's description {core!r}",
                               len(q.hops) - 1)
        return None

    def _skippable(self, q: Question) -> Failure | None:
        found = self.links.skips(q.path)
        if found is None:
            return None
        i, j = found
        return Failure("skippable_hop", f"{q.titles[i]!r} links straight to {q.titles[j]!r}", i)

    def _ambiguous(self, q: Question, clues: list[str]) -> Failure | None:
        known: set[str] = set()
        chain = set(q.path)
        for i, clue in enumerate(clues):
            here, bridge = q.path[i], q.path[i + 1]
            known |= _title_words(q.titles[i])  # the reader has reached these titles: their words tell nothing new
            words = content_words(clue)
            if not words - known:
                return Failure("ambiguous_hop", f"hop {i + 1}: the clue names nothing that tells "
                                                f"{q.titles[i + 1]!r} apart", i)
            backward = not self.links.links(here, bridge)
            own = self.links.description_words(bridge)
            # A page can fit only if its description holds some clue word, and a word begins with its
            # stem less the last letter ("citi" of "cities" and "city"): a substring test rules most out.
            probes = [" " + (w[:-1] if len(w) >= 3 else w) for w in words]
            for other in self.links.neighbours(here, backward):
                if other in chain:
                    continue
                text = self.links.description_text(other)
                if len(text) < 2 or not any(p in text for p in probes):
                    continue
                if rival_fits(words, own, self.links.description_words(other), known):
                    side = "linking to" if backward else "linked from"
                    return Failure("ambiguous_hop", f"hop {i + 1}: the clue also fits {self.links.title(other)!r} "
                                                    f"({self.links.description(other)!r}), also {side} "
                                                    f"{q.titles[i]!r}", i)
        return None

    def _shortcut(self, q: Question, final: str | None) -> Failure | None:
        k = len(q.hops) - 1
        queries = [(h.sub_question, i) for i, h in enumerate(q.hops)]
        if final:
            queries.append((final, k))
        for text, hop in queries:
            # The depth meter makes these searches too (a sub-question, a hop's sentence): one memo serves both.
            if q.answer_page_id in (self.depth.top(text) or []):
                what = "the final clue" if hop == k and text != q.hops[k].sub_question else f"hop {hop + 1}'s clue"
                return Failure("clue_shortcut", f"{what} {text!r} finds the answer page in the top {self.k}", hop)
        return None


__all__ = ["RULES", "SEARCHES", "FIT", "Failure", "Validator", "hop_clues", "repairable"]
