"""What the offline oracle agent reads in the question, and how it compares words.

Everything here works on text the agent was actually shown -- the question and its
tool observations -- never on the gold chain.  Words are compared as the index
compares them (:func:`synth.tools.text.analyze`: lowercase, ASCII folding, English
stemming, stop words dropped), with one loosening a reader would make too: two terms
of five letters or more that share their first five letters ("anatomy" and
"anatomical") count as the same word.

The question is read by the contract the question writer keeps: the first sentence
names the start entity by its exact title, then one sentence per hop gives that hop's
clue, in chain order, and the last sentence asks for the final entity.  Words that
recur in most of the question's sentences are the writer's template ("article",
"mentions"), not clues, and are ignored when matching.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from synth.tools.text import STOP_WORDS, analyze, query_terms

PREFIX = 5  # letters two long terms must share to count as one word (stems of one family)
# A word: letters or digits, with inner apostrophes, hyphens and periods ("O'Brien", "0-1", "U.S").
WORD = re.compile(r"[^\W_](?:[\w'’\-]*[^\W_])?")
# A sentence ends at . ! or ? followed by space and a capital, digit or quote; abbreviations do not end one.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"'”’)]?\s+(?=[\"'“‘(]?[A-Z0-9])")
_ABBREV = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "mt", "vs", "etc", "no", "inc", "ltd", "co", "e.g", "i.e",
           "u.s", "u.k", "ca", "c", "approx", "fig", "vol", "ft", "lt", "gen", "col", "prof", "rev"}
_STARTERS = {"then", "next", "now", "from", "after", "once", "continuing", "following", "moving", "further", "finally",
             "so", "this", "its", "what", "which", "where", "who", "name", "start", "begin", "open", "look", "go",
             "take", "read", "find", "your", "we", "set", "pull", "identify", "somewhere", "another", "some"}
FUNCTION_WORDS = frozenset(STOP_WORDS) | {"its", "was", "were", "has", "had", "have", "also", "which", "who", "whom",
                                 "from", "than", "he", "she", "his", "her", "him", "one", "other", "where", "when"}
# (the index's stop words and a few more: words that never start or end a page's name)


@lru_cache(maxsize=1 << 17)
def terms(text: str) -> frozenset[str]:
    """The distinct content terms of ``text`` under the index's analyzer (stop words dropped)."""
    return frozenset(query_terms(text, max_terms=1 << 20)) if text else frozenset()


@lru_cache(maxsize=1 << 17)
def term_seq(text: str) -> tuple[str, ...]:
    """Every term of ``text`` in order, stop words kept (for matching a name as a phrase)."""
    return tuple(analyze(text)) if text else ()


def matched(wanted: frozenset[str], seen: frozenset[str]) -> frozenset[str]:
    """The terms of ``wanted`` that ``seen`` contains, a shared five-letter prefix counting as a match."""
    exact = wanted & seen
    rest = [w for w in wanted - exact if len(w) >= PREFIX]
    if not rest:
        return exact
    prefixes = {s[:PREFIX] for s in seen if len(s) >= PREFIX}
    return exact | {w for w in rest if w[:PREFIX] in prefixes}


def contains_name(text: str, name: str) -> bool:
    """Whether ``name`` occurs in ``text`` as a whole phrase, compared term by term."""
    n = term_seq(name)
    if not n:
        return False
    hay = " " + " ".join(term_seq(text)) + " "
    return " " + " ".join(n) + " " in hay


def split_sentences(text: str) -> list[str]:
    """``text`` cut into sentences; a cut inside quotes or after an abbreviation or an initial is undone."""
    parts = [p for p in _BOUNDARY.split(text.strip()) if p]
    out: list[str] = []
    for p in parts:
        if out:
            prev = out[-1]
            last = prev.rstrip("\"'”’)").rstrip(".!?").rsplit(None, 1)[-1] if prev.strip() else ""
            quotes_open = (prev.count('"') % 2 == 1) or prev.count("“") > prev.count("”")
            word = WORD.search(p)
            first = word.group().lower() if word else ""
            # "J. R. R. Tolkien" goes on after an initial; "Mary I. In turn, ..." or "Mary I. Afterwards,
            # the page says "..."" starts a new sentence (a clue, by the contract, quotes its passage).
            starts = first in FUNCTION_WORDS | _STARTERS or '"' in p or "“" in p
            initial = len(last) == 1 and last.isupper() and not starts
            if quotes_open or last.lower() in _ABBREV or initial:
                out[-1] = prev + " " + p
                continue
        out.append(p)
    return [s.strip() for s in out if s.strip()]


@dataclass(frozen=True)
class Clue:
    """One hop's sentence of the question.

    ``quote`` is the part in double quotes when there is one (``quoted``: the passage the clue
    is drawn from), else the whole sentence; ``left`` and ``right`` are the quote's words either
    side of a blank (a run of underscores), when it has one; ``terms`` are its content terms.
    """

    text: str
    quote: str
    left: str | None
    right: str | None
    terms: frozenset[str]
    quoted: bool = True
    hint: frozenset[str] = frozenset()  # terms outside the quote (a type hint, when the writer gave one)

    @property
    def blank(self) -> bool:
        """Whether the quote blanks out a name (the clue frames the next entity's name)."""
        return self.left is not None

    @property
    def elsewhere(self) -> bool:
        """A quote without a blank: a passage of the page sought (it names the current entity), not of
        the current page."""
        return self.quoted and not self.blank


_QUOTE = re.compile(r'"([^"]+)"|“([^”]+)”')
_BLANK = re.compile(r"_{2,}")


def read_clue(sentence: str, template: frozenset[str] = frozenset()) -> Clue:
    """A hop sentence read as a :class:`Clue`; without quotes the template words are left out of its terms."""
    m = _QUOTE.search(sentence)
    quote = (m.group(1) or m.group(2)) if m else sentence
    left = right = None
    parts = _BLANK.split(quote, maxsplit=1)
    if len(parts) == 2:
        left, right = parts[0].strip(), parts[1].strip()
    words = _BLANK.sub(" ", quote)
    found = terms(words) if m else (terms(words) - template) or terms(words)
    outside = sentence[:m.start()] + " " + sentence[m.end():] if m else ""
    return Clue(sentence, quote, left, right, found, m is not None, terms(outside) - template - found)


@dataclass(frozen=True)
class QuestionView:
    """The question as the contract lays it out: opening sentence, one clue per hop, closing sentence."""

    text: str
    opening: str
    clues: tuple[Clue, ...]
    closing: str

    @classmethod
    def parse(cls, text: str) -> "QuestionView":
        """Read a question; with fewer than three sentences every sentence after the first is a clue."""
        sents = split_sentences(text) or [text]
        middle = sents[1:-1] if len(sents) >= 3 else sents[1:]
        closing = sents[-1] if len(sents) >= 3 else ""
        # Template words: those in more than half of the sentences (with at least three to compare).
        counts: dict[str, int] = {}
        for s in sents:
            for t in terms(s):
                counts[t] = counts.get(t, 0) + 1
        template = frozenset(t for t, n in counts.items() if len(sents) >= 3 and n * 2 > len(sents))
        return cls(text, sents[0], tuple(read_clue(s, template) for s in middle), closing)


def words_of(text: str) -> list[str]:
    """The words of ``text`` to put in a query: split on spaces, punctuation trimmed, and only those whose
    index terms are terms of ``text`` itself -- so a query built from them asks only for what was read
    (a word of a script the index tokenizes differently is left out)."""
    have = set(term_seq(text))
    out = []
    for raw in text.split():
        w = raw.strip(".,;:!?\"'()[]{}“”‘’«»…")
        seq = term_seq(w)
        if seq and set(seq) <= have:
            out.append(w)
    return out


def excerpt(text: str, around: frozenset[str], words: int = 18) -> str:
    """At most ``words`` words of ``text``, centred on the first word whose terms are in ``around``."""
    toks = text.split()
    if len(toks) <= words:
        return text.strip()
    hit = next((i for i, w in enumerate(toks) if matched(frozenset(term_seq(w)), around)), 0)
    start = max(0, min(hit - words // 3, len(toks) - words))
    body = " ".join(toks[start:start + words])
    return ("…" if start > 0 else "") + body + ("…" if start + words < len(toks) else "")


__all__ = ["Clue", "FUNCTION_WORDS", "QuestionView", "WORD", "contains_name", "excerpt", "matched", "read_clue",
           "split_sentences", "term_seq", "terms", "words_of"]
