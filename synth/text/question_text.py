"""How a question's text is read: its sentences, the content words of a clue, and what names an answer.

Two parts of hopforge read question text and must read it the same way: the offline
oracle's question writer (:mod:`synth.teacher.oracle.writer`), which must not make the
mistakes, and the question validators (:mod:`synth.questions.validate`), which catch
them in any teacher's output.  So the rules live here, below both.

* :func:`sentences` splits after ``.``, ``!`` or ``?`` followed by a space and a capital,
  a digit or an opening quote; given titles are protected, so "St. Louis" stays whole.
* :func:`content_words` are the lower-cased words of a text, lightly stemmed ("states"
  -> "state"), without English function words (:data:`STOP`) and without the words a
  question uses to talk about the puzzle itself (:data:`PUZZLE`: "article", "page",
  "link", "blank"...), which say nothing about any one entity.
* :func:`answer_tokens` are the tokens that give an answer away without its full name
  (the ``answer_leak`` rule, beyond the names themselves): any token of its title or an
  alias that holds a digit (a year, a number); a token of two to four characters with a
  capital after the first (a symbol or acronym: "DNA", "NaCl"); a capitalised word of
  three letters or more after the first word of a multi-word title ("Monet" in "Claude
  Monet"); and, from its description, a parenthesised symbol ("Eu" in "... (Eu)") and
  any token holding a digit ("63", "1840").  Digit tokens match in any case, the others
  only with their case, always as whole tokens; a token inside the start entity's title,
  which the question must write, does not count.
* :func:`description_cores` are the forms of a description a question may not repeat
  for its answer: the whole description, and the part before its first ``;``, ``,`` or
  ``(`` -- each compared after SQuAD normalisation, and only when two words or longer.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

from synth.text.answers import names_of, normalize_answer

STOP = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her here
hers him his how i if in into is it its itself just me more most my no nor not now of off on once only or other
our out over own same she should so some such than that the their them then there these they this those through
to too under until up very was we were what when where which while who whom whose why will with would you your
one ones another it's
""".split())

# Words a question uses about the puzzle, not about an entity: they tell no page apart.
PUZZLE = frozenset("""
article articles page pages entry entries text texts wikipedia encyclopedia link links linked linking blank blanks
passage line lines phrase words word sentence wording chain hop hops step steps entity entities title titled named
name start starting begin begins beginning first next last final finally follow following followed open opened
reach reached reaching lead leads led point points pointing go goes take taking find found look search searching
says say reads read writes write written states stated notes noted mentions mention mentioned refers refer
contains contain includes include carries carry puts put fills fill filling missing gap stands stand behind
onward onwards along trail trip route stop stops current latest previous just end ends ending arrive arrives
land lands closes close completes complete identify expect cite cites whose own another some somewhere
afterwards back click conceals containing fragment hence hidden hides hyperlink jump landed likewise masked
meanwhile thence naming opens passing path phrases pull quoted quotes remarks saying see set sits starts thereafter
visited called hop hops gap onward among discuss discusses talk talks continue connection section
consider think take question concerns subject outset let us facts latter former associated connected ties
related moreover further turn
""".split())

# Words that tell a solver to navigate (open a page, follow a link) rather than state a fact: the benchmarks
# a student is judged on never use them, so no question may (the ``navigation`` validator).
NAVIGATION = re.compile(r"(?<![^\W_])(?:links?|linked|linking|hyperlinks?|pages?|webpages?|articles?|entry|entries|"
                        r"trails?|stops?|stopped|open|opens|opened|opening|follow|follows|followed|following|"
                        r"click|clicks|clicked)(?![^\W_])", re.I)


def navigation(text: str) -> str | None:
    """The first navigation word of ``text`` (:data:`NAVIGATION`), or None."""
    m = NAVIGATION.search(text or "")
    return m.group(0) if m else None

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_TOKEN = re.compile(r"[^\W_]+")
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'\u201c(\[]?[A-Z0-9])")
_SYMBOL = re.compile(r"\(([A-Z][A-Za-z]{0,2})\)")
_FUNCTION = frozenset("of the and in on at de del della di da la le les los las von van der du des y for to".split())


def sentences(text: str, protect: Iterable[str] = ()) -> list[str]:
    """The sentences of ``text``; a phrase in ``protect`` (a title with a full stop) is never split."""
    masked = text
    keep: dict[str, str] = {}
    for i, phrase in enumerate(sorted({p for p in protect if p and "." in p}, key=lambda p: (-len(p), p))):
        token = f"\x00{i}\x00"
        if phrase in masked:
            keep[token] = phrase
            masked = masked.replace(phrase, token)
    out = [s.strip() for s in _SPLIT.split(masked.strip()) if s.strip()]
    for token, phrase in keep.items():
        out = [s.replace(token, phrase) for s in out]
    return out


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light English stem: possessive and plural endings off ("cities" -> "city", "states" -> "state")."""
    w = word.lower().replace("\u2019", "'")
    if w.endswith("'s"):
        w = w[:-2]
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def words(text: str) -> list[str]:
    """The words of ``text``, lower-cased, in order (apostrophes inside a word kept)."""
    return [w.lower() for w in _WORD.findall(text or "")]


def content_words(text: str, drop: Iterable[str] = ()) -> set[str]:
    """Stemmed content words of ``text``: no function word, no puzzle word, nothing in ``drop``
    (stemmed too; e.g. the words of titles the reader already knows)."""
    found = _content_words(text or "")
    if not drop:
        return set(found)
    dropped = {stem(w.lower()) for w in drop}
    return {s for s in found if s not in dropped}


@lru_cache(maxsize=1 << 16)
def _content_words(text: str) -> frozenset[str]:
    return frozenset(s for s in map(_content, _WORD.findall(text.lower())) if s)


@lru_cache(maxsize=1 << 16)
def _content(word: str) -> str | None:
    """The stem of a lower-cased word when it is a content word, else None."""
    s = stem(word)
    if word in STOP or s in STOP or word in PUZZLE or s in PUZZLE or len(s) < 2:
        return None
    return s


def answer_tokens(entity: dict, aliases: Iterable[str] = ()) -> list[tuple[str, bool]]:
    """``(token, case_sensitive)`` pairs that give ``entity`` away without its full name (module docstring)."""
    found: dict[str, bool] = {}
    for name in list(dict.fromkeys([*names_of(entity), *aliases])):
        toks = _TOKEN.findall(name)
        for i, t in enumerate(toks):
            if any(c.isdigit() for c in t):
                found[t.lower()] = False
            elif 2 <= len(t) <= 4 and t[0].isupper() and any(c.isupper() for c in t[1:]):
                found[t] = True
            elif i > 0 and len(toks) > 1 and len(t) >= 3 and t[0].isupper() and t.lower() not in _FUNCTION:
                found[t] = True
    desc = entity.get("description") or ""
    for sym in _SYMBOL.findall(desc):
        found.setdefault(sym, True)
    for t in _TOKEN.findall(desc):
        if any(c.isdigit() for c in t):
            found[t.lower()] = False
    return list(found.items())


def has_token(text: str, token: str, case_sensitive: bool) -> bool:
    """Whether ``token`` occurs in ``text`` as a whole token."""
    pattern = r"(?<![^\W_])" + re.escape(token) + r"(?![^\W_])"
    return re.search(pattern, text, 0 if case_sensitive else re.I) is not None


class Giveaways:
    """The names and distinctive tokens of one entity, compiled once to test many texts."""

    def __init__(self, entity: dict, aliases: Iterable[str] = ()):
        aliases = list(aliases)
        self.names = [n for n in dict.fromkeys([*names_of(entity), *aliases]) if normalize_answer(n)]
        self._norm = [f" {normalize_answer(n)} " for n in self.names]
        self.tokens = answer_tokens(entity, aliases)
        self._patterns = [(t, re.compile(r"(?<![^\W_])" + re.escape(t) + r"(?![^\W_])", 0 if cs else re.I))
                          for t, cs in self.tokens]
        # What `find` depends on, as a value: a memo keyed by it holds for any equal object (an object's id is
        # reused once it is collected, so an id would hand a later entity an earlier one's answers).
        self.key = (tuple(self.names), tuple(tuple(t) for t in self.tokens))

    def find(self, text: str, norm: str | None = None, named: Iterable[str] = ()) -> str | None:
        """The name or token that ``text`` gives away, or None (``norm``: ``normalize_answer(text)``, if known).

        Tokens inside a phrase of ``named`` (the start entity's title, which the question must
        write) do not count: the writer could not have left them out."""
        norm = f" {normalize_answer(text) if norm is None else norm} "
        name = next((n for n, k in zip(self.names, self._norm) if k in norm), None)
        if name is not None:
            return name
        for phrase in named:
            if phrase:
                text = text.replace(phrase, " ")
        return next((t for t, p in self._patterns if p.search(text)), None)


def giveaways(entity: dict, aliases: Iterable[str] = ()) -> Giveaways:
    """:class:`Giveaways` of an entity, compiled once per (title, description, names): the oracle's
    writer and the leak check meet the same pages again and again."""
    return _giveaways(entity["title"], entity.get("description") or "",
                      tuple(entity.get("aliases") or ()) + tuple(aliases))


@lru_cache(maxsize=1 << 14)
def _giveaways(title: str, description: str, aliases: tuple[str, ...]) -> Giveaways:
    return Giveaways({"title": title, "description": description, "aliases": list(aliases)})


def leaked(text: str, entity: dict, aliases: Iterable[str] = (), named: Iterable[str] = ()) -> str | None:
    """The name or distinctive token of ``entity`` that ``text`` gives away, or None (see :meth:`Giveaways.find`)."""
    return giveaways(entity, aliases).find(text, named=named)


@lru_cache(maxsize=1 << 14)
def description_cores(description: str | None) -> tuple[str, ...]:
    """The normalised forms of a description a question may not repeat for its answer (module docstring)."""
    d = (description or "").strip()
    if not d:
        return ()
    forms = [d, re.split(r"[;,(]", d, maxsplit=1)[0], re.sub(r"\([^)]*\)", " ", d)]
    cores = {normalize_answer(f) for f in forms}
    return tuple(sorted((c for c in cores if len(c.split()) >= 2), key=lambda c: (-len(c), c)))


def repeats_description(text: str, description: str | None, norm: str | None = None) -> str | None:
    """The core of ``description`` that ``text`` repeats, or None (``norm``: ``normalize_answer(text)``, if known)."""
    norm = f" {normalize_answer(text) if norm is None else norm} "
    return next((c for c in description_cores(description) if f" {c} " in norm), None)


__all__ = ["STOP", "PUZZLE", "NAVIGATION", "navigation", "sentences", "stem", "words", "content_words", "answer_tokens", "has_token", "Giveaways",
           "giveaways", "leaked", "description_cores", "repeats_description"]
