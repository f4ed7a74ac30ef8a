"""Where the oracle agent may go next: the pages it could open and the searches it could make.

:class:`Leads` is the half of :class:`synth.teacher.oracle_agent_memory.Memory` that
proposes; the other half takes in what came back.  Every lead comes from the question
or an observation, best first:

1. the name standing in the blank of the quoted passage, found in the current page
   (the question's contract quotes the page that links to the next entity); when a
   blank ends the quote its extent is open, and a reading that a search result shows
   to be a title comes first;
2. when no quote is found word for word, a few names framed by the clue's words in
   the sentences that share most of them;
3. search results that the current page mentions, or -- for a quote without a blank,
   which is a passage of the page sought -- whose snippet holds the quote.

Searches, in the persona's order: a name that failed to open (its page may carry a
qualifier), the quote's words, the best-matching passage's words (or the writer's type
hint for a quote without a blank), the current page's title with the quote's first words.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from synth.teacher.oracle_agent_pages import fill_blank, mentions, names_in, singulars
from synth.teacher.oracle_agent_reading import contains_name, matched, term_seq, terms, words_of
from synth.tools.text import title_key

MAX_SEARCHES = 3  # searches per hop before the agent settles or gives up
MAX_OPENS = 4  # candidate pages opened (or tried) per hop
FLOOR = 0.15  # least score of a candidate worth opening
_CAPS = re.compile(r"(?:[A-Z][\w'’\-]*)(?:\s+(?:(?:of|the|de|and|von|van|la|le|du)\s+)*[A-Z0-9][\w'’\-]*)*")


@dataclass(frozen=True, slots=True)
class Persona:
    """How one sample behaves."""

    p_wrong: float  # open the runner-up candidate instead of the best
    p_search: float  # search before opening a name read in a page
    p_find: float  # locate a name with `find` before opening it
    p_ids: float  # open by page id (when one was shown) rather than by title
    strict: float  # share of the next clue's words a page must match to be accepted
    query_order: tuple[int, ...]  # preference among the query wordings of a hop
    give_up_turn: int | None  # answer "unknown" from this turn on


@dataclass(slots=True)
class Cand:
    """A page the agent could open next: a title it was shown, or a name read in a passage."""

    name: str
    page_id: str | None
    score: float
    passage: str
    source: str  # "page" (read in the current page) or "result" (a search result)


class Leads:
    """Proposals from a memory's state (a mixin of :class:`~synth.teacher.oracle_agent_memory.Memory`)."""

    def start_candidates(self) -> list[tuple[str, str]]:
        """Search results whose title the first sentence contains, longest title first."""
        seen = [(pid, t) for pid, (t, _) in self.results[0].items()
                if pid not in self.tried[0] and contains_name(self.q.opening, t)]
        return sorted(seen, key=lambda pt: -len(term_seq(pt[1])))

    def next_start_query(self) -> str | None:
        """The first sentence, then its longest capitalised name, as searches not yet made."""
        caps = sorted(_CAPS.findall(self.q.opening), key=len, reverse=True)
        options = [self.q.opening] + caps[:1]
        return next((q for q in options if q not in self.queries[0]), None) if len(self.queries[0]) < 2 else None

    def start_guess(self) -> str | None:
        """The longest capitalised name of the first sentence, if not tried yet."""
        caps = sorted(_CAPS.findall(self.q.opening), key=len, reverse=True)
        return next((c for c in caps if title_key(c) not in self.tried[0]), None)

    def should_read_on(self, h: int) -> bool:
        """The current page has more text and nothing read so far matches the clue."""
        view = self.pages[self.chain[-1]]
        if view.next_offset is None or ("open", json.dumps({"offset": view.next_offset, "page": view.page_id},
                                                           sort_keys=True)) in self.calls:
            return False
        clue = self.q.clues[h - 1]
        if clue.elsewhere:
            return False  # the quote is in the page sought: reading more of this one will not show it
        return not any(matched(clue.terms, terms(s)) for s in view.sentences())

    def candidates(self, h: int) -> list[Cand]:
        """Pages to open for hop ``h``, best first (the module docstring's three kinds of lead)."""
        key = (h, len(self.chain), self.version)
        if key not in self._cands:
            self._cands = {key: self._candidates(h)}  # the state changes with every step: keep the latest only
        return self._cands[key]

    def _candidates(self, h: int) -> list[Cand]:
        view, clue = self.pages[self.chain[-1]], self.q.clues[h - 1]
        n = max(1, len(clue.terms))
        # Never the same open twice: a name that failed stays failed; a page read before is recalled (settle).
        done = self.tried[h] | self.dead | set(self.chain) | {title_key(self.pages[p].title) for p in self.chain}
        out: dict[str, Cand] = {}

        def add(c: Cand) -> None:
            """Keep ``c`` unless it was tried or is on the chain; of two leads to one page, the better."""
            key = title_key(c.name)
            if key and key not in done and c.page_id not in done and (key not in out or out[key].score < c.score):
                out[key] = c

        # 1. The name standing in the blank of the quoted passage, found in the current page; a reading a
        # search result confirms as a title (a blank at the quote's end leaves its length open) comes first.
        readings: dict[str, float] = {}
        if clue.blank:
            for para in view.paragraphs():
                for name, q in fill_blank(para, clue.left, clue.right):
                    for form in dict.fromkeys([name, *singulars(name)]):
                        readings.setdefault(title_key(form), q)
                        add(Cand(form, self.ids.get(title_key(form)), 2.0 + q - 0.01 * (form != name), para, "page"))
        # 2. When the quote is not in the page word for word: the names framed by the clue's words in
        # the sentences that share most of them (the three likeliest; guessing further only fails).
        sents = view.sentences()
        scores = [len(matched(clue.terms, terms(s))) / n for s in sents]
        top = max(scores, default=0.0)
        framed = clue.blank and any(fill_blank(p, clue.left, clue.right) for p in view.paragraphs())
        if not out and not framed and not clue.elsewhere and top >= 0.5:
            guesses = [Cand(name, self.ids.get(title_key(name)), sc + 0.3 * frame, s, "page")
                       for s, sc in zip(sents, scores) if sc >= top * 0.8
                       for name, frame in names_in(s, clue.terms, terms(view.title))]
            for c in sorted(guesses, key=lambda c: -c.score)[:3]:
                add(c)
        # 3. Search results the page mentions, or whose snippet holds the clue's words; first of all a
        # result whose title is a name that failed to open, plus a qualifier in brackets.
        failed = {title_key(n) for n in self.failed[h]}
        for pid, (title, snippet) in self.results[h].items():
            bare = title_key(re.sub(r"\s*\([^)]*\)$", "", title))
            if bare in failed:
                add(Cand(title, pid, 2.9, snippet, "result"))
            elif title_key(title) in readings:
                add(Cand(title, pid, 2.2 + readings[title_key(title)], snippet, "result"))
            where = [sc for s, sc in zip(sents, scores) if mentions(s, title)]
            desc = len(matched(clue.terms, terms(snippet + " " + title))) / n
            # The name in a blank is written in the current page; a quote without one is in the page sought,
            # whose snippet then holds it (as one phrase, best), and whose lead may fit the writer's type hint.
            if where or not clue.blank and desc >= 0.5:
                phrase = 0.5 * (not clue.blank and contains_name(snippet, clue.quote))
                hint = 0.3 * len(matched(clue.hint, terms(snippet + " " + title))) / max(1, len(clue.hint))
                score = max(where, default=0.0) + desc + phrase + hint + 0.3 * bool(where) + 0.2
                add(Cand(title, pid, score, snippet, "result"))
        return sorted(out.values(), key=lambda c: -c.score)

    def next_hop_query(self, h: int) -> str | None:
        """A search for hop ``h`` not made yet: first a name that failed to open as a title (its page
        may carry a qualifier, "Kingdom (taxonomy)"), then, in the persona's order, the quote's words,
        the words of the page's best-matching sentence, or the page's title with the quote's first words."""
        clue, view = self.q.clues[h - 1], self.pages[self.chain[-1]]
        words = [w for w in words_of(clue.quote) if matched(terms(w), clue.terms)]
        best = max(view.sentences(), key=lambda s: len(matched(clue.terms, terms(s))), default="")
        fit = len(matched(clue.terms, terms(best))) / max(1, len(clue.terms))
        passage = [w for w in words_of(best) if terms(w)][:12] if fit >= 0.5 else []
        if clue.elsewhere:
            # The quote is in the page sought, not in this one; the writer's type hint may narrow it down.
            hint = [w for w in words_of(clue.text) if terms(w) and terms(w) <= clue.hint]
            passage = words + hint[:6] if hint else []
        options = [" ".join(dict.fromkeys(words)), " ".join(dict.fromkeys(passage)),
                   f"{view.title} {' '.join(words[:4])}".strip()]
        for q in self.failed[h] + [options[i] for i in self.me.query_order]:
            if q and not any(q in made for made in self.queries.values()):  # never the same search twice
                return q
        return None

    def exhausted(self, h: int) -> bool:
        """Nothing left to do at hop ``h``: no candidate to open, no search to make, no text to read."""
        if h == 0:
            return not self.start_candidates() and self.next_start_query() is None and self.start_guess() is None
        if self.should_read_on(h):
            return False
        cands = self.candidates(h)
        if self.attempts[h] < MAX_OPENS and cands and cands[0].score >= FLOOR:
            return False
        return len(self.queries[h]) >= MAX_SEARCHES or self.next_hop_query(h) is None


__all__ = ["Cand", "FLOOR", "Leads", "MAX_OPENS", "MAX_SEARCHES", "Persona"]
