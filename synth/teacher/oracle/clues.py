"""The oracle's clue for one hop: a blurry phrase that only the previous page resolves.

For the hop from entity ``a`` to entity ``b`` (``a`` links to ``b``) the writer tries the phrases ``b``'s
definition allows (:func:`synth.text.clues.phrases`: whole noun phrases, coarsest first: "a country",
"a landlocked country", "a country in Europe"...), each alone and then with a relation word (a word of
the sentence where ``a`` links to ``b`` that names a topic, a page title: "in a passage on the Alps"),
which counts as one word more.  It keeps the first candidate that is

* **clean**: it names no later entity of the chain, nor the answer's description, and holds a content
  word beyond the titles already reached;
* **locally unique**: among the pages ``a`` links to, the chain's visited pages aside, no other page fits
  it (:func:`synth.text.clues.matches` by definition, and the relation word in the sentence that links
  it), nor fits it as the ``ambiguous_hop`` validator measures (:func:`synth.text.clues.rival_fits`);
* **globally ambiguous**: no adversary of the question checks (``questions.adversaries``: the agents'
  tool, a plain BM25 over page text, bare keywords, a dense retriever) returns a page of the chain past the
  start in its top ``k`` of the unmasked index for the phrase (with its relation word and without), for the
  hop's sub-question, or for its sentence, so no search lets a solver enter the chain at this hop (the
  lexical searches are asked first, the dense one only of a candidate they all miss: :meth:`ClueMaker.found`).

So a clue is as coarse as local uniqueness allows: the writer widens rather than sharpens, and a hop
whose every phrase one search finds has no clue (the writer then drops the walk, or looks for another
chain through a subgraph).  A repair (``fix``) passes over the first candidate that qualifies and takes
the next.  Frames are drawn from a stream seeded by the question, the hop and the candidate, so a clue is
always worded the same way within its question.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache
from dataclasses import dataclass
from typing import Iterator

import inflect

from synth.engine.seeding import derive_seed
from synth.teacher.oracle.frames import hop_sentence, relation as relation_words, sub_question
from synth.teacher.tasks import CorpusView
from synth.text.clues import (ambiguous_with, definition, head_noun, keywords, matches, phrases, proper_case,
                              relation_holds, sentence_with)
from synth.text.parse import Relation, cut_short, is_noun_phrase, prefetch, relation
from synth.text.question_text import Giveaways, content_words, navigation, repeats_description

_ENGINE = inflect.engine()


def plural_head(phrase: str) -> bool:
    """Whether the phrase's head noun is plural ("organic compounds containing ..."): a page on a class."""
    w = head_noun(phrase).lower()
    return len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is", "ics", "ous"))


@lru_cache(maxsize=1 << 15)
def article(phrase: str) -> str:
    """``phrase`` with "a" or "an" ("an Italian painter", "an 18th-century poet", "a 1990s film"); a
    plural one as one of a class ("one of the organic compounds")."""
    if plural_head(phrase):
        return "one of the " + phrase
    if phrase.split(" ", 1)[0].lower() in ("something", "anything", "everything", "someone", "anyone"):
        return phrase  # "something that has mass and volume" takes no article
    digits = re.match(r"\d+", phrase)
    if digits:
        n = digits.group(0)
        vowel = n.startswith("8") or n[:2] in ("11", "18") and len(n) in (2, 4)
        return ("an " if vowel else "a ") + phrase
    return _ENGINE.a(phrase)


@dataclass(frozen=True)
class HopClue:
    """A hop's clue as the question writes it."""

    phrase: str  # the description phrase, without its article
    relation: str | None  # the relation's content word ("flows"), if the previous entity's sentence gave one
    sub_question: str
    sentence: str


@dataclass(frozen=True)
class HopContext:
    """What choosing one hop's clue depends on."""

    chain: list[dict]  # the chain's entities (page_id, title, description, aliases)
    i: int  # the hop: chain[i] links to chain[i + 1]
    later: list[Giveaways]  # the names and tokens of chain[i + 1:], never to be written
    seed: int
    short: bool = False  # the shortest frames (a repair of a question too long)
    free: int = 0  # chain pages 1..free may be entered by a search (questions.min_effective_depth allows it)

    @property
    def here(self) -> dict:
        return self.chain[self.i]

    @property
    def bridge(self) -> dict:
        return self.chain[self.i + 1]


class ClueMaker:
    """Chooses hop clues against one corpus view; keeps what it has read of pages and searches."""

    def __init__(self, corpus: CorpusView):
        self.corpus = corpus
        self._hits: dict[tuple, list[str]] = {}
        self._defs: dict[str, str] = {}
        self._phrases: dict[str, list] = {}  # page id -> its definition's phrases
        self._relations: dict[tuple[str, str], Relation | None] = {}  # (page, linked page) -> what its text states
        self._prefetched: set[str] = set()
        self._given: dict[tuple, bool] = {}  # (giveaways' key, word) -> whether the word names the entity
        self.searches = 0
        # A hop whose text states no relation a parser reads gets a generic one ("is associated with") only
        # when this is off: with it on (the questions stage's default), every hop states a fact.
        self.facts_only = bool(getattr(corpus, "facts_only", False))
        # The dense adversary's searches (a model call each) are asked of every candidate unless this is off: a
        # router that only ranks the ways a walk could go leaves them to the writer's check of the whole chain.
        self.dense = True

    # ---- what the checks read ---------------------------------------------------------------
    def search(self, text: str, dense: bool = True) -> list[str]:
        """The top ``k`` of one unmasked search (memoised: repeated frames repeat queries); without ``dense``, the
        adversaries' that need no model."""
        key = (text.lower(), dense)
        if key not in self._hits:
            self.searches += 1
            self._hits[key] = self.corpus.search_ids(text, self.corpus.k, dense)
        return self._hits[key]

    def found(self, texts: list[str], entry: set[str]) -> tuple[str, str] | None:
        """A text of ``texts`` that one search finds a page of ``entry`` for, and that page (None: none).

        The searches that need no model go first, for every text in order; the dense adversary's only when
        they all miss, shortest text first, stopping at the first page found: a model reads each of its
        queries (several milliseconds, where a lexical search takes a tenth of one, and the longer the text
        the more), and most clues it finds, it finds by their shortest text.  On the demo's questions this
        embeds 2.5 times fewer texts than embedding every text in one batch, for the same verdicts."""
        for text in texts:
            hit = next((p for p in self.search(text, False) if p in entry), None)
            if hit is not None:
                return text, hit
        if not self.dense:
            return None
        for text in sorted(texts, key=len):
            hit = next((p for p in self.search(text) if p in entry), None)
            if hit is not None:
                return text, hit
        return None

    def _text(self, page_id: str) -> tuple[str, dict[str, str]]:
        """A page's text as ``open`` shows it and the anchor of each page it links to."""
        page = self.corpus.page(page_id) or {}
        anchors = {dst: anchor for anchor, dst, _ in page.get("links") or []}
        return "\n".join(p for p in page.get("paragraphs") or [] if p), anchors

    def definition(self, page_id: str, description: str | None = None) -> str:
        """What a page says it is (:func:`synth.text.clues.definition`): its description (the corpus view's
        unless given) and its lead."""
        if page_id not in self._defs:
            page = self.corpus.page(page_id) or {}
            desc = description if description is not None else self.corpus.description(page_id)
            self._defs[page_id] = definition(desc, page.get("paragraphs") or ())
        return self._defs[page_id]

    # ---- candidates ---------------------------------------------------------------------------
    def connector(self, h: HopContext) -> Relation | None:
        """What the current entity's text states between it and the bridge (:func:`synth.text.parse.relation`),
        unless it names a later entity or holds navigation language."""
        key = (h.here["page_id"], h.bridge["page_id"])
        if key not in self._relations:
            text, anchors = self._text(h.here["page_id"])
            if h.here["page_id"] not in self._prefetched:  # every sentence that names a link, in one batch
                self._prefetched.add(h.here["page_id"])
                prefetch(s for s in (sentence_with(text, a) for a in anchors.values()) if s)
            anchor = anchors.get(h.bridge["page_id"])
            sentence = sentence_with(text, anchor) if anchor else ""
            rel = relation(sentence, anchor) if anchor else None
            if rel is not None and navigation(rel.words):
                rel = None
            if rel is not None:
                # The word a reader takes from the relation (its last content word, synth.teacher.oracle.reading)
                # must stand in the sentence, or no reader can tell the link by it ("is contained by": "contains"
                # is a frame word, never a content word).
                said = [w for w in re.findall(r"[^\W\d_]+", rel.words) if content_words(w)]
                rel = Relation(rel.words, said[-1]) if said and relation_holds(sentence, said[-1]) else None
            self._relations[key] = rel
        rel = self._relations[key]
        if rel is not None and any(self._gives_away(g, w) for g in h.later for w in rel.words.split()):
            return None
        return rel

    def _gives_away(self, g, word: str) -> bool:
        key = (g.key, word)
        if key not in self._given:
            self._given[key] = g.find(word) is not None
        return self._given[key]

    def candidates(self, h: HopContext) -> Iterator[tuple[str, Relation | None]]:
        """(phrase, relation) pairs in the order they are tried: every phrase with the relation the current
        entity's text states (a fact), coarsest first, then, unless ``facts_only``, every phrase with a generic
        relation.  A phrase that a parser does not
        read as a whole noun phrase (:func:`synth.text.parse.is_noun_phrase`), that has lost its noun in the
        cutting (:func:`synth.text.parse.cut_short`), or that holds navigation language, is never tried."""
        text = self._text(h.bridge["page_id"])[0]
        pid = h.bridge["page_id"]
        if pid not in self._phrases:
            self._phrases[pid] = phrases(self.definition(pid, h.bridge.get("description")), rarity=self.corpus.rarity)
        conn = self.connector(h)
        defn = self.definition(pid, h.bridge.get("description"))
        usable = []
        for p in self._phrases[pid]:
            first, _, rest = p.text.partition(" ")
            phrase = " ".join(x for x in (proper_case(first, text), rest) if x)
            if not navigation(phrase) and not cut_short(phrase, defn):
                usable.append(phrase)
        if conn is not None:
            for phrase in usable:
                yield phrase, conn
        if not self.facts_only:
            for phrase in usable:
                yield phrase, None

    # ---- the checks ---------------------------------------------------------------------------
    def compose(self, h: HopContext, phrase: str, conn: Relation | None) -> HopClue:
        """The candidate's sub-question and sentence, worded by its own seeded stream."""
        rnd = random.Random(derive_seed(h.seed, "oracle-frame", h.i, phrase, conn.words if conn else ""))
        rel = relation_words(conn.words if conn else None, rnd)
        sub = sub_question(phrase, rel, rnd)
        return HopClue(phrase, conn.word if conn else None, sub, hop_sentence(article(phrase), rel, rnd, short=h.short))

    def problem(self, h: HopContext, clue: HopClue) -> str | None:
        """Why ``clue`` cannot be this hop's clue, or None (the checks of the module docstring)."""
        chain, bridge, answer = h.chain, h.bridge, h.chain[-1]
        said = f"{clue.sub_question} {clue.sentence}"
        if navigation(said):
            return "navigation language"
        bare = clue.phrase + (f" {clue.relation}" if clue.relation else "")
        if any(g.find(bare) for g in h.later):
            return "names a later entity"
        if repeats_description(said, answer.get("description")):
            return "repeats the answer's description"
        known = content_words(" ".join(e["title"] for e in chain[:h.i + 1]))
        if not content_words(said) - known:
            return "too few words"
        here = h.here["page_id"]
        visited = {e["page_id"] for e in chain[:h.i + 1]}
        others = [p for p in self.corpus.neighbours(here, False) if p not in visited and p != bridge["page_id"]]
        if clue.relation is not None:
            text, anchors = self._text(here)
            fits = [p for p in others if matches(clue.phrase, self.definition(p))
                    and p in anchors and relation_holds(sentence_with(text, anchors[p]), clue.relation)]
        else:
            fits = [p for p in others if matches(clue.phrase, self.definition(p))]
        if fits:
            return f"also fits {self.corpus.title(fits[0])!r}"
        chain_ids = {e["page_id"] for e in chain}
        rivals = [(self.corpus.title(p), self.corpus.description(p)) for p in others if p not in chain_ids]
        if ambiguous_with(content_words(said), bridge.get("description") or "", rivals, known) is not None:
            return "covers another page's description"
        entry = {e["page_id"] for e in chain[h.free + 1:]}
        # The clue alone (with its relation word and without, as written and as keywords), its sub-question
        # and its sentence.
        alone = (bare, clue.phrase, keywords(bare), keywords(clue.phrase), clue.sub_question, clue.sentence)
        found = self.found(list(dict.fromkeys(alone)), entry)
        if found is not None:
            return f"one search for {found[0]!r} finds {self.corpus.title(found[1])!r}"
        return None

    def choose(self, h: HopContext, fix: bool = False, skip: int = 0) -> tuple[HopClue | None, list[str]]:
        """The hop's clue, and why each candidate before it failed: the first that qualifies, after
        ``skip`` qualifying ones passed over (None when too few qualify); with ``fix`` (a repair), the
        next after those, or the last one that qualifies when no other does."""
        why: list[str] = []
        passed, last = 0, None
        for phrase, conn in self.candidates(h):
            clue = self.compose(h, phrase, conn)
            rel = conn.words if conn else None
            bad = self.problem(h, clue)
            if bad is None and not is_noun_phrase(article(phrase)):  # parsed last: the costliest check
                bad = "not a noun phrase"
            if bad is None:
                passed += 1
                last = clue
                if passed > skip + int(fix):
                    return clue, why
                bad = "passed over by the repair" if fix else "its question was found whole"
            why.append(f"{phrase!r}{f' + {rel!r}' if rel else ''}: {bad}")
        if fix and passed > skip:  # nothing else qualifies: the repair keeps the one clue there is
            return last, why
        return None, why


__all__ = ["HopClue", "HopContext", "ClueMaker", "article"]
