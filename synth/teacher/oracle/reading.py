"""What the offline oracle agent reads in the question, and how it compares words.

Everything here works on text the agent was actually shown -- the question and its
tool observations -- never on the gold chain.  The question is read by the contract the
question writer keeps (:mod:`synth.teacher.oracle.frames`): the first sentence names the
start entity by its exact title, then one sentence per hop gives that hop's clue, in chain
order, and the last sentence asks for the final entity.  A clue is a blurry description of
the next page, checked against what a page says it is (:mod:`synth.text.clues`); words for
queries and for naming pages are compared as the index compares them
(:func:`synth.tools.analysis.analyze`: lowercase, ASCII folding, English stemming).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from synth.teacher.oracle.frames import GENERIC, LEADS, REFS
from synth.text.clues import head_noun, keywords, matches
from synth.text.question_text import PUZZLE, content_words
from synth.tools.analysis import STOP_WORDS, analyze, query_terms

PREFIX = 5  # letters two long terms must share to count as one word (stems of one family)
# A word: letters or digits, with inner apostrophes, hyphens and periods ("O'Brien", "0-1", "U.S").
WORD = re.compile(r"[^\W_](?:[\w'’\-]*[^\W_])?")
# A sentence ends at . ! or ? followed by space and a capital, digit or quote; abbreviations do not end one.
_BOUNDARY = re.compile(r"(?<=[.!?])[\"'”’)]?\s+(?=[\"'“‘(]?[A-Z0-9])")
_ABBREV = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "mt", "vs", "etc", "no", "inc", "ltd", "co", "e.g", "i.e",
           "u.s", "u.k", "ca", "c", "approx", "fig", "vol", "ft", "lt", "gen", "col", "prof", "rev"}
_STARTERS = {"then", "next", "now", "from", "after", "once", "continuing", "following", "moving", "further", "finally",
             "so", "this", "its", "what", "which", "where", "who", "name", "start", "begin", "open", "look", "go",
             "take", "read", "find", "your", "we", "set", "pull", "identify", "somewhere", "another", "some",
             "moreover", "and", "in", "it", "that", "the", "consider", "think", "our", "here", "let", "first", "at",
             "who", "identify", "further"}
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
    """One hop's sentence of the question, read by the writer's contract (:mod:`synth.teacher.oracle.frames`).

    ``kind`` is the part that says what the next page is ("that article links to an organic
    compound"): its content words, the frame's aside, are the clue's ``words``, which a page's
    definition must hold (:func:`synth.text.clues.matches`).  ``relation`` is the word after a
    relation connector ("in a passage on anatomy"), when there is one: it stands in the sentence
    where the current page links on.
    """

    text: str
    kind: str
    relation: str | None
    words: frozenset[str]

    @property
    def phrase(self) -> str:
        """The clue's words in the sentence's order, as a keyword query (periods kept as written)."""
        return keywords(self.kind)

    @property
    def described(self) -> str:
        """The clue's description as the sentence writes it, article included ("an organic compound")."""
        found = _ARTICLE.search(self.kind)
        return found.group(0).strip().rstrip(",") if found else self.phrase

    @property
    def head(self) -> str:
        """The clue's head noun ("compound" in "an organic compound found in ...")."""
        found = _ARTICLE.search(self.kind)
        return head_noun(found.group(1)) if found else (self.phrase.split() or [""])[-1]

    def fits(self, definition: str) -> bool:
        """Whether a page that says it is ``definition`` is what the clue describes."""
        return matches(self.kind, definition)

    def share(self, definition: str) -> float:
        """How much of the clue a definition holds (0..1), for ranking and for a hasty reader."""
        if not self.words:
            return 0.0
        return len(self.words & content_words(definition)) / len(self.words)


_ARTICLE = re.compile(r"\b(?:an?|one of the)\s+(.+?)(?=[;.]|$)")
_FIRST_ARTICLE = re.compile(r"(?i)\b(an?|one of the)\s+")
_FRAME_START = re.compile("^(?:" + "|".join(sorted({re.escape(l.strip(" ,")) for l in LEADS if l.strip()}, key=len,
                                                   reverse=True)) + r")\b,?\s*", re.I)
_REF = re.compile("^(?:" + "|".join(sorted({re.escape(r) for r in REFS}, key=len, reverse=True)) + r")\b\s*", re.I)
_GENERIC = {g.lower() for g in GENERIC}


def read_clue(sentence: str) -> Clue:
    """A hop sentence read as a :class:`Clue` (the contract of :mod:`synth.teacher.oracle.frames`): the
    description starts at the first article after the reference; the words between the reference and it are the relation,
    whose last content word is the word the previous entity's sentence holds (none for a generic one)."""
    body = sentence.split(";", 1)[0].strip().rstrip(".?!")
    rest = _REF.sub("", _FRAME_START.sub("", body), count=1)
    m = _FIRST_ARTICLE.search(rest)
    if m is None:
        return Clue(sentence, body, None, frozenset(content_words(body)))
    kind = rest[m.start(1):]
    head = rest[:m.start(1)].strip(" ,")
    relation = None
    if head.lower() not in _GENERIC:
        words = [w for w in re.findall(r"[^\W\d_]+", head) if content_words(w)]
        relation = words[-1] if words else None
    return Clue(sentence, kind, relation, frozenset(content_words(kind)))


def start_name(opening: str) -> str:
    """The start's title in the opening sentence: the span from its first to its last content word (the
    writer's frames around the title are function and puzzle words: "Start from the Wikipedia article on
    {title}.")."""
    toks = [(m.group(0), m.start(), m.end()) for m in WORD.finditer(opening)]
    content = [i for i, (w, _, _) in enumerate(toks) if content_words(w)]
    if not content:
        return opening.strip().rstrip(".")
    lo, hi = content[0], content[-1]

    def name_part(i: int) -> bool:
        # A capitalised function word or numeral belongs to the title ("Mary I", "The Hague"); the frame's
        # capitalised words are puzzle words ("Wikipedia").
        w = toks[i][0]
        return (w[:1].isupper() or w[:1].isdigit()) and w.lower() not in PUZZLE
    while lo > 1 and name_part(lo - 1):
        lo -= 1
    while hi + 1 < len(toks) and name_part(hi + 1):
        hi += 1
    return opening[toks[lo][1]:toks[hi][2]]


@dataclass(frozen=True)
class QuestionView:
    """The question as the contract lays it out: opening sentence, one clue per hop, closing sentence."""

    text: str
    opening: str
    clues: tuple[Clue, ...]
    closing: str

    @property
    def start(self) -> str:
        """The start's title, as the opening sentence gives it."""
        return start_name(self.opening)

    @classmethod
    def parse(cls, text: str) -> "QuestionView":
        """Read a question; with fewer than three sentences every sentence after the first is a clue."""
        sents = split_sentences(text) or [text]
        middle = sents[1:-1] if len(sents) >= 3 else sents[1:]
        closing = sents[-1] if len(sents) >= 3 else ""
        return cls(text, sents[0], tuple(read_clue(s) for s in middle), closing)


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


__all__ = ["start_name", "Clue", "FUNCTION_WORDS", "QuestionView", "WORD", "contains_name", "excerpt", "matched", "read_clue",
           "split_sentences", "term_seq", "terms", "words_of"]
