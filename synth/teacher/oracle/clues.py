"""The oracle's clue for one hop: a blurry phrase that only the previous page resolves.

For the hop from entity ``a`` to entity ``b`` (``a`` links to ``b``) the writer tries, in order, the phrases
``b``'s short description allows (:func:`synth.text.clues.phrases`, most specific first:
"an Italian Renaissance painter", "an Italian painter", "a painter"...), each alone or
with a relation word: a word of the sentence where ``a`` links to ``b`` that names a topic
(a page title: "in a passage on frescoes").  It keeps the first candidate that is

* **clean**: it names no later entity of the chain, nor the answer's description, and
  holds two content words beyond the titles already reached (the ``ambiguous_hop`` floor);
* **locally unique**: among the pages ``a`` links to, the chain's visited pages aside, no other
  page fits it
  (:func:`synth.text.clues.matches` by description, and the relation word in the sentence
  that links it), nor covers it as the ``ambiguous_hop`` validator measures;
* **globally ambiguous**: one search for the phrase (with its relation word and without, as
  written and as bare keywords), for the hop's sub-question, or for its sentence returns no page of the chain past the
  start in the top ``k`` of the unmasked index, so no search lets a solver enter the chain
  at this hop.

A repair (``fix``) passes over the first candidate that qualifies and takes the next.
Frames are drawn from a stream seeded by the question, the hop and the candidate, so a
clue is always worded the same way within its question.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Iterator

import inflect

from synth.engine.seeding import derive_seed
from synth.teacher.oracle.frames import hop_sentence, relation, sub_question
from synth.teacher.tasks import CorpusView
from synth.text.clues import (ambiguous_with, definition, head_noun, keywords, matches, phrases, proper_case,
                              relation_holds, sentence_with)
from synth.text.question_text import Giveaways, content_words, repeats_description

MAX_RELATIONS = 2  # relation words tried per phrase
_ENGINE = inflect.engine()


def plural_head(phrase: str) -> bool:
    """Whether the phrase's head noun is plural ("organic compounds containing ..."): a page on a class."""
    w = head_noun(phrase).lower()
    return len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is", "ics", "ous"))


def article(phrase: str) -> str:
    """``phrase`` with "a" or "an" ("an Italian painter", "an 18th-century poet", "a 1990s film"); a
    plural one as a page on a class ("a page on organic compounds")."""
    if plural_head(phrase):
        return "a page on " + phrase
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
    relation: str | None  # the relation word, if any
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
        self.searches = 0

    # ---- what the checks read ---------------------------------------------------------------
    def search(self, text: str) -> list[str]:
        """The top ``k`` of one unmasked search (memoised: repeated frames repeat queries)."""
        key = (text.lower(),)
        if key not in self._hits:
            self.searches += 1
            self._hits[key] = self.corpus.search_ids(text, self.corpus.k)
        return self._hits[key]

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
    def relations(self, h: HopContext, phrase_words: frozenset[str]) -> list[str]:
        """Words of the sentence where the current page links to the bridge that name a topic, nearest
        the link first (the solver reads that sentence where it stands)."""
        text, anchors = self._text(h.here["page_id"])
        anchor = anchors.get(h.bridge["page_id"])
        sentence = sentence_with(text, anchor) if anchor else ""
        if not sentence:
            return []
        at = sentence.lower().find(anchor.lower())
        own = content_words(h.here["title"]) | content_words(h.bridge["title"])
        found = []
        for m in re.finditer(r"[^\W\d_]{4,}", sentence):
            w = m.group(0)
            words = content_words(w)
            if not words or words & (phrase_words | own) or w.lower() in anchor.lower():
                continue
            if any(g.find(w) for g in h.later) or not self.corpus.is_title(w):
                continue
            found.append((abs(m.start() - at), proper_case(w, sentence)))
        out = []
        for _, w in sorted(found):
            if w.lower() not in {o.lower() for o in out}:
                out.append(w)
        return out[:MAX_RELATIONS]

    def candidates(self, h: HopContext) -> Iterator[tuple[str, str | None]]:
        """(phrase, relation word) pairs in the order they are tried (module docstring)."""
        rnd = random.Random(derive_seed(h.seed, "oracle-clue", h.i))
        text = self._text(h.bridge["page_id"])[0]
        for p in phrases(self.definition(h.bridge["page_id"], h.bridge.get("description")), rarity=self.corpus.rarity):
            rels = self.relations(h, p.words)
            first, _, rest = p.text.partition(" ")
            phrase = " ".join(x for x in (proper_case(first, text), rest) if x)
            options: list[str | None] = [None, *rels] if p.size >= 2 else list(rels)
            if rels and p.size >= 2 and rnd.random() < 0.7:
                options = [rels[0], None, *rels[1:]]  # a relation mostly: where the previous page links on
            for w in options:
                yield phrase, w

    # ---- the checks ---------------------------------------------------------------------------
    def compose(self, h: HopContext, phrase: str, rel_word: str | None) -> HopClue:
        """The candidate's sub-question and sentence, worded by its own seeded stream."""
        rnd = random.Random(derive_seed(h.seed, "oracle-frame", h.i, phrase, rel_word or ""))
        rel = relation(rel_word, rnd)
        return HopClue(phrase, rel_word, sub_question(phrase, rel, rnd),
                       hop_sentence(article(phrase), rel, rnd, short=h.short))

    def problem(self, h: HopContext, clue: HopClue) -> str | None:
        """Why ``clue`` cannot be this hop's clue, or None (the checks of the module docstring)."""
        chain, bridge, answer = h.chain, h.bridge, h.chain[-1]
        said = f"{clue.sub_question} {clue.sentence}"
        bare = clue.phrase + (f" {clue.relation}" if clue.relation else "")
        if any(g.find(bare) for g in h.later):
            return "names a later entity"
        if repeats_description(said, answer.get("description")):
            return "repeats the answer's description"
        known = content_words(" ".join(e["title"] for e in chain[:h.i + 1]))
        if len(content_words(said) - known) < 2:
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
        if ambiguous_with(content_words(said), bridge.get("description") or "", rivals) is not None:
            return "covers another page's description"
        entry = {e["page_id"] for e in chain[1:]}
        # The clue alone (with its relation word and without, as written and as keywords), its sub-question
        # and its sentence.
        alone = (bare, clue.phrase, keywords(bare), keywords(clue.phrase), clue.sub_question, clue.sentence)
        for text in dict.fromkeys(alone):
            found = [p for p in self.search(text) if p in entry]
            if found:
                return f"one search for {text!r} finds {self.corpus.title(found[0])!r}"
        return None

    def choose(self, h: HopContext, fix: bool = False) -> tuple[HopClue | None, list[str]]:
        """The hop's clue (the second that qualifies, with ``fix``), and why each candidate before it failed."""
        why: list[str] = []
        passed = 0
        for phrase, rel in self.candidates(h):
            clue = self.compose(h, phrase, rel)
            bad = self.problem(h, clue)
            if bad is None:
                passed += 1
                if passed > int(fix):
                    return clue, why
                bad = "passed over by the repair"
            why.append(f"{phrase!r}{f' + {rel!r}' if rel else ''}: {bad}")
        if fix and passed:  # nothing else qualifies: the repair keeps the one clue there is
            return self.choose(h, fix=False)
        return None, why


__all__ = ["HopClue", "HopContext", "ClueMaker", "article"]
