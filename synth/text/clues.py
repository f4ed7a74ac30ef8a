"""Blurry clues: how a clue names an entity by vague attributes, and which pages a clue fits.

A *blurry clue* (DeepDive's blurry entities, WebSailor's obfuscation) describes a hop's
entity by a phrase of its short description with the distinctive words left out ("an
organic compound", not "the simplest aldehyde"), a year widened to its decade or century
("a 1990s film"), and optionally a word of the passage where the previous page links to it
(the relation that page states: "in a passage on anatomy").  One search for such a phrase
returns many pages; among the few the previous page links to, only one fits.

Everything here reads text only, so the oracle's writer (which builds clues from the
corpus), the oracle's agent (which checks the pages it opened) and the question validators
apply the same rules:

* :func:`phrases` lists the phrases a description allows, coarsest first ("a country", then
  "a landlocked country", then "a country in Europe").  A description is a head chunk
  ("Italian Renaissance painter") and qualifiers ("in Central Europe", "directed by Quentin
  Tarantino"); a phrase keeps the head noun, any of the head's other words, and at most one
  qualifier, a prepositional one, kept whole (only a name's leading words may go: "in Central
  Europe" widens to "in Europe").  Every phrase is a whole noun phrase: a clause ("that makes
  laws"), a participle ("lying in the Alps", "directed by") or a dangling word ("an organ
  central", "grain and") is never part of one.  Parentheses are left out.
* :func:`matches` says whether a page fits a phrase by its description: every content
  word of the phrase is a word of the description (light stems: "compounds" is
  "compound"), and a period ("1990s", "20th-century") holds a year of the description.
* :func:`covers` is the validators' ambiguity measure: the share of a page's description
  that a clue's words cover (0 under :data:`FIT`).
* :func:`sentence_with` finds the sentence of a page that shows a link's anchor: a
  relation word of a clue must stand in it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import Callable, Iterable

from synth.text.question_text import PUZZLE, STOP, content_words, sentences, stem

FIT = 0.75  # share of a description's content words a clue must hold to cover that page


@lru_cache(maxsize=1 << 16)
def word_classes(word: str) -> frozenset[str]:
    """The parts of speech an English word can have (``NOUN``, ``VERB``, ``ADJ``, ``ADV``...), from
    LemmInflect's lexicon; a word it does not know is a name (``PROPN``) when capitalised, and otherwise
    read by its ending (``-ly`` an adverb, ``-ing``/``-ed`` a verb form, anything else a noun)."""
    import lemminflect

    w = word.strip(",")
    found = lemminflect.getAllLemmas(w) or lemminflect.getAllLemmas(w.lower())
    if found:
        return frozenset(found)
    if w[:1].isupper():
        return frozenset({"PROPN", "NOUN"})
    low = w.lower()
    if low.endswith("ly") and len(low) > 4:
        return frozenset({"ADV"})
    if low.endswith(("ing", "ed")) and len(low) > 5:
        return frozenset({"VERB"})
    return frozenset({"NOUN"})


def can_be_noun(word: str) -> bool:
    """Whether ``word`` can end a noun phrase: a noun or a name (a hyphenated word by its last part)."""
    last = word.strip(",").rsplit("-", 1)[-1] or word
    return bool(word_classes(last) & {"NOUN", "PROPN"}) or bool(word_classes(word.strip(",")) & {"NOUN", "PROPN"})
_TOKEN = re.compile(r"[^\W_]+(?:['\u2019\-\u2013][^\W_]+)*|,")
_PARENS = re.compile(r"\s*\([^)]*\)")
_YEAR = re.compile(r"(?<![\w.])(1[0-9]\d\d|20[0-2]\d)(?![\w.])")
DECADE = re.compile(r"(?<![\w])(1[0-9]\d|20[0-2])0s(?![\w])")
CENTURY = re.compile(r"(?<![\w])(\d{1,2})(?:st|nd|rd|th)[- ]century(?![\w])", re.I)
# Words that open a qualifier: function words and prepositions, and participles ("directed by", "containing").
_PREPOSITIONS = STOP | set("""within between among amongst around across along near towards toward via per upon amid
beyond inside outside throughout without including like unlike versus against onto off behind beside besides beneath
underneath""".split())
_DETERMINERS = {"a", "an", "the", "its", "their", "his", "her", "this", "these", "those", "some", "any", "all"}
_ING_WITH_PREPOSITION = {"consisting", "belonging", "relating", "according", "leading", "dealing", "referring",
                         "pertaining", "resulting", "living", "located", "originating", "depending", "ranging",
                         "beginning", "starting", "ending", "lasting", "spanning", "flowing", "running", "existing",
                         "serving", "operating", "working", "playing", "competing", "located", "found", "focusing"}
# Words that are no kind of thing: a phrase never ends on them.
_NOT_NOUNS = set("""one two three four five six seven eight nine ten eleven twelve hundred thousand million billion first
second third several many various other such own""".split())
_OPENERS = _PREPOSITIONS | {"located", "based", "known", "born", "founded", "named", "made", "used", "set"}
MAX_MODIFIERS = 3  # head words besides the head noun considered for a phrase
MAX_QUALIFIER_WORDS = 3
MAX_QUALIFIERS = 2


@dataclass(frozen=True)
class Phrase:
    """One way to describe an entity: ``text`` ("Italian painter", no article) and its ``words``
    (:func:`~synth.text.question_text.content_words`, periods included as written)."""

    text: str
    words: frozenset[str]

    @property
    def size(self) -> int:
        """Content words in the phrase (how specific it is)."""
        return len(self.words)


def phrase_words(phrase: str) -> frozenset[str]:
    """A phrase's content words, each period one word as written ("1990s", "20th-century")."""
    words, _ = _parts(phrase)
    found = [m.group(0).lower().replace(" ", "-") for p in (DECADE, CENTURY) for m in p.finditer(phrase)]
    return words | frozenset(found)


_COPULA = re.compile(r"\s(?:is|was|are|were)\s+(?:(?:a|an|the|one of the|any)\s+)?", re.I)
# A lead's predicate ends at a relative clause, a bracket or a dash, and at a comma where a noun phrase
# ends (:func:`_cut_at_comma`).
_CUT = re.compile(r"\s(?:which|that|who|whom|whose|where|when|while|but)\s|[;:(]|\s[\u2013\u2014-]\s")
_SUBORDINATE = re.compile(r"\b(?:that|which|who|whom|whose|where|when|while|if|because)\b", re.I)


def _cut_at_comma(text: str) -> str:
    """``text`` up to the first comma that ends a noun phrase: after a noun ("in Central Europe, lying in the
    Alps" ends at Europe), or before a conjunction that the comma follows ("cereal grain and, in its
    domesticated form, ..." ends at grain); a comma between adjectives ("a long, vigorous walk") goes on."""
    for m in re.finditer(",", text):
        before = text[:m.start()].rstrip().split()
        if not before:
            return ""
        if before[-1].lower() in ("and", "or", "but"):
            return " ".join(before[:-1])
        if before[-1][:1].isupper() or "ADJ" not in word_classes(before[-1]):
            return " ".join(before)
    return text
_TRAILING = re.compile(r"(?:\s+(?:and|or|but|as|of|in|on|at|to|for|with|by|from|the|a|an))+$", re.I)
MAX_LEAD_WORDS = 30


def definition(description: str | None, paragraphs: Iterable[str] = ()) -> str:
    """What a page says it is: its short description, then (after ``;``) the predicate of its first
    sentence ("Formaldehyde is a pungent colorless gas ..." gives "pungent colorless gas ...").  Both
    are what a reader sees on opening the page, so a clue drawn from either can be checked there."""
    parts = [description.strip()] if description and description.strip() else []
    lead = next((p for p in paragraphs if p and p.strip() and not p.lstrip().startswith("#")), "")
    first = sentences(lead.strip())[0] if lead.strip() else ""
    m = _COPULA.search(first)
    if m and _SUBORDINATE.search(first[:m.start()]):
        m = None  # "... knowledge that is produced by ...": a copula of a clause, not of the subject
    if m:
        pred = _TRAILING.sub("", _cut_at_comma(_CUT.split(first[m.end():], maxsplit=1)[0].strip().rstrip(".")))
        words = pred.split()
        if words and len(words) <= MAX_LEAD_WORDS:  # a longer one is a clause, not a definition
            parts.append(" ".join(words))
    return "; ".join(parts)


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``11th``, ``21st``..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def periods(year: int) -> list[str]:
    """The periods a year widens to: its decade ("1990s") and its century ("20th-century")."""
    return [f"{year // 10 * 10}s", f"{ordinal((year - 1) // 100 + 1)}-century"]


def _span(word: str) -> tuple[int, int] | None:
    """The years a period word covers, or None for any other word."""
    m = DECADE.fullmatch(word)
    if m:
        start = int(m.group(1)) * 10
        return start, start + 9
    m = CENTURY.fullmatch(word)
    if m:
        c = int(m.group(1))
        return (c - 1) * 100 + 1, c * 100
    return None


def _years(text: str) -> list[tuple[int, int]]:
    """Every year, decade and century written in ``text``, as year ranges."""
    out = [(int(y), int(y)) for y in _YEAR.findall(text)]
    out += [_span(m.group(0)) for m in DECADE.finditer(text)]
    out += [_span(m.group(0).replace(" ", "-")) for m in CENTURY.finditer(text)]
    return [r for r in out if r]


@lru_cache(maxsize=1 << 16)
def _parts(phrase: str) -> tuple[frozenset[str], tuple[tuple[int, int], ...]]:
    """A phrase's content words (periods aside) and its periods as year ranges."""
    spans = []
    rest = phrase
    for pattern in (DECADE, CENTURY):
        for m in pattern.finditer(phrase):
            spans.append(_span(m.group(0).replace(" ", "-")))
        rest = pattern.sub(" ", rest)
    return frozenset(content_words(rest)), tuple(s for s in spans if s)


@lru_cache(maxsize=1 << 16)
def matches(phrase: str, description: str | None) -> bool:
    """Whether a page whose short description is ``description`` fits the clue ``phrase``.

    Every content word of the phrase must be a word of the description, and every period of
    it must hold a year, decade or century the description writes ("1994 film" fits "a 1990s
    film" and "a 20th-century film").  A page without a description fits nothing.
    """
    if not description:
        return False
    words, spans = _parts(phrase)
    if not words and not spans:
        return False
    if not words <= content_words(description):
        return False
    years = _years(description)
    return all(any(a <= lo and hi <= b for lo, hi in years) for a, b in spans)


def covers(clue_words: set[str], description: str | set[str]) -> float:
    """How well a clue covers a page by its description (or the description's content words): the
    share of those words it holds, or 0 when that is under :data:`FIT` or fewer than two (one, for a
    one-word description)."""
    d = content_words(description) if isinstance(description, str) else description
    if not d:
        return 0.0
    hit = len(d & clue_words)
    share = hit / len(d)
    return share if hit >= min(2, len(d)) and share >= FIT else 0.0


def _opens(toks: list[str], i: int) -> bool:
    """Whether ``toks[i]`` opens a qualifier: a function word or preposition, a participle that another
    word follows ("directed by", "containing amine"), or an adverb before such a participle ("mainly used")."""
    w = toks[i].lower()
    if w in _PREPOSITIONS:
        return True
    classes = word_classes(toks[i])
    if i > 0 and classes and classes <= {"VERB", "ADV"}:
        return True  # "found in vinegar", "lying in the Alps", "mainly used": never part of a noun phrase
    if i + 1 >= len(toks) or toks[i + 1] == ",":
        return False  # the last word of a chunk is its noun
    nxt = toks[i + 1].lower()
    if len(w) > 4 and w.endswith("ly") and (nxt in _OPENERS - _PREPOSITIONS or len(nxt) > 4 and nxt.endswith(("ed", "ing"))):
        return True  # "mainly used": an adverb before a participle ("assembly that ...": a noun)
    if w in _OPENERS or len(w) > 4 and w.endswith("ed") and nxt in _PREPOSITIONS:
        return True  # "directed by", "located in"; but "guided weapon" is a modifier and its noun
    # "containing amine", "involving the study", "consisting of": a participle; "building in a city": a noun.
    return len(w) > 5 and w.endswith("ing") and (nxt not in _PREPOSITIONS or nxt in _DETERMINERS
                                                  or w in _ING_WITH_PREPOSITION)


def rival_fits(clue_words: set[str], own: set[str], other: set[str], known: set[str] = frozenset()) -> bool:
    """Whether a clue fits another page (content words of its description: ``other``) at least as well as
    its own (``own``): the ``ambiguous_hop`` rule.

    Two ways: the clue covers the other description (:func:`covers`) at least as well as its own; or every
    word the clue says (the ``known`` title words aside) is a word of its own description, and the other
    description holds every one of them -- "a country" fits every country a page links to.  A clue that
    also says something its own description does not (a relation word, a word of the page's text) is
    judged by coverage alone: a description cannot tell whether that word rules the other page out.
    """
    f = covers(clue_words, other)
    if f and f >= covers(clue_words, own):
        return True
    said = set(clue_words) - set(known)
    return bool(said) and said <= own and said <= other


def ambiguous_with(clue_words: set[str], own_description: str, others: Iterable[tuple[str, str]],
                   known: set[str] = frozenset()) -> tuple[str, str] | None:
    """The first other page ``(title, description)`` that a clue fits at least as well as its own page
    (:func:`rival_fits`): the ``ambiguous_hop`` rule, for one hop's clue words and the other pages the
    previous one links to.  None when the clue tells its page apart from them."""
    own = content_words(own_description)
    for title, description in others:
        if rival_fits(clue_words, own, content_words(description), known):
            return title, description
    return None


def _chunks(segment: str) -> tuple[list[str], list[tuple[list[str], list[str]]]]:
    """A description segment as its head chunk and its qualifiers ``(opening words, words)``."""
    toks = _TOKEN.findall(segment)
    head: list[str] = []
    quals: list[tuple[list[str], list[str]]] = []
    i = 0
    while i < len(toks):
        low = toks[i].lower()
        joins = low in ("and", "or", ",") and i + 1 < len(toks) and toks[i + 1].lower() not in _PREPOSITIONS
        if head and joins and not (low == "," and i + 2 < len(toks) and toks[i + 2].lower() in _PREPOSITIONS):
            # "rapid and fundamental change", "self-propelled, guided weapon": one modifier, kept or left out whole
            head[-1] += toks[i] if low == "," else " " + toks[i]
            i += 1
            continue
        if low == ",":
            break
        if head and _opens(toks, i) or low in _PREPOSITIONS:
            break
        head.append(toks[i])
        i += 1
    while i < len(toks):
        opening: list[str] = []
        if toks[i] == ",":
            opening.append(",")
            i += 1
        while i < len(toks) and toks[i] != "," and _opens(toks, i):
            opening.append(toks[i])
            i += 1
        words: list[str] = []
        while i < len(toks) and not (words and _opens(toks, i)) and toks[i].lower() not in _PREPOSITIONS:
            if toks[i] == ",":
                nxt = toks[i + 1].lower() if i + 1 < len(toks) else ""
                if not words or not nxt or nxt in _PREPOSITIONS:
                    break
                words[-1] += ","  # "of sweet-tasting, soluble carbohydrates": one modifier, kept or left out whole
                i += 1
                continue
            words.append(toks[i])
            i += 1
        if not words:
            break
        quals.append((opening, words))
    return head, quals


# An adjective that follows its noun and takes a complement: "organ central to the nervous system".
_COMPLEMENT = {"to", "for", "than", "with"}  # "central to", "responsible for"; never "capital of"
# Openings of a qualifier that a phrase may keep: prepositions (never a clause, a participle or an adverb).
_KEEPABLE = {"in", "of", "on", "at", "from", "with", "near", "within", "between", "among", "across", "along", "around",
             "for", "by", "off", "under", "over", "beyond", "inside", "outside", "throughout", "without", "into"}


def _postpositive(head: list[str], quals: list[tuple[list[str], list[str]]]
                  ) -> tuple[list[str], list[tuple[list[str], list[str]]]]:
    """``head`` and ``quals`` with an adjective that ended the head and opens a complement ("organ central" +
    "to the nervous system") moved to the qualifier, so the head ends on its noun ("organ")."""
    if len(head) >= 2 and quals and "ADJ" in word_classes(head[-1]) and not head[-1][:1].isupper() \
            and quals[0][0] and quals[0][0][0].lower() in _COMPLEMENT:
        opening, words = quals[0]
        return head[:-1], [([head[-1], *opening], words), *quals[1:]]
    return head, quals


def _keepable(opening: list[str], words: list[str]) -> bool:
    """Whether a phrase may keep a qualifier: it opens with a preposition (and maybe a determiner), and ends
    on a word that can be a noun (not a participle: "located", "lying"; not a number word)."""
    if not opening or opening[0].lower() not in _KEEPABLE or opening[0] == ",":
        return False
    if any(o.lower() not in _KEEPABLE and o.lower() not in _DETERMINERS for o in opening[1:]):
        return False
    last = words[-1].lower().rstrip(",")
    return can_be_noun(words[-1]) and last not in _NOT_NOUNS and last not in STOP and last not in _DIRECTIONS


_RANKING = {"most", "least", "first", "second", "third", "fourth", "fifth", "last", "only", "main", "sole", "chief",
            "principal", "leading", "foremost"}


def superlative(word: str) -> bool:
    """Whether a modifier ranks its noun ("largest", "second-longest", "most", "main"): a phrase drops it,
    since it singles one page out and takes no "a"."""
    w = word.rstrip(",").lower()
    for part in (w, w.rsplit("-", 1)[-1]):
        part = part.removesuffix(" and").removesuffix(" or")
        if part in _RANKING:
            return True
        if part.endswith("est"):
            import lemminflect

            lemmas = lemminflect.getAllLemmas(part).get("ADJ", ())
            if lemmas and part not in lemmas:
                return True
    return False


_DIRECTIONS = set("""north south east west central eastern western northern southern northeast northwest southeast
southwest northeastern northwestern southeastern southwestern far near middle upper lower greater new old""".split())


def _narrowed(words: list[str]) -> list[tuple[str, ...]]:
    """A kept qualifier's words: whole, or with the leading words of a name left out ("Central Europe" ->
    "Europe", "Eastern Alps" -> "Alps", but never down to a direction alone: "Far East" is no "East"); a
    year widened to its periods; nothing else is dropped."""
    out = [tuple(words)]
    for cut in range(1, len(words)):
        rest = words[cut:]
        if all(w[:1].isupper() for w in words[cut - 1:]) and any(w.lower() not in _DIRECTIONS for w in rest) \
                and "PROPN" in word_classes(rest[-1]):  # "Alps", "Europe"; never "Black Sea" -> "Sea"
            out.append(tuple(rest))
    return [w for o in out for w in _widened(o) if w and w[-1] == words[-1]]


def _keep_sets(words: list[str], most: int, droppable: Callable[[str], bool] = lambda w: True
               ) -> list[tuple[str, ...]]:
    """The sub-sequences of ``words`` that keep the last one (a chunk's noun) and every word that is not
    ``droppable``, with at most ``most`` words before the noun considered."""
    *mods, noun = words
    mods = mods[-most:]
    fixed = [m for m in mods if not droppable(m)]
    free = [m for m in mods if droppable(m)]
    out = []
    for n in range(len(free), -1, -1):
        for c in combinations(free, n):
            kept = set(c) | set(fixed)
            out.append(tuple(m for m in mods if m in kept) + (noun,))
    return out


def _coordinated(kept: tuple[str, ...], head: list[str]) -> bool:
    """Whether every "X and" (or "X,") kept is followed by what followed it ("rapid and fundamental change",
    never "rapid and change"), and none ends the phrase; and whether every adverb kept still has the word it
    modifies after it ("highly venomous snake", never "highly snake" nor "generally means")."""
    for a, b in zip(kept, kept[1:]):
        if a.endswith((" and", " or", ",")) and head.index(b) != head.index(a) + 1:
            return False
    for a, b in zip(kept, kept[1:] + ("",)):
        if word_classes(a.strip(",")) == {"ADV"} and (not b or head.index(b) != head.index(a) + 1):
            return False
    return True


def _proper_or_number(word: str) -> bool:
    """A qualifier's word that may be left out: a name ("Central" in "in Central Europe") or a year (it is
    widened instead); a common word inside a qualifier carries its sense ("vertebral" in "with a
    vertebral column")."""
    return word[:1].isupper() or bool(_YEAR.fullmatch(word))


def _widened(words: tuple[str, ...]) -> list[tuple[str, ...]]:
    """``words`` with each year widened to its periods or dropped, and any other number dropped (a
    solver would search for it); words without digits as they are."""
    out: list[tuple[str, ...]] = [()]
    for w in words:
        if _YEAR.fullmatch(w):
            out = [o + (p,) for o in out for p in periods(int(w))] + out
        elif not any(c.isdigit() for c in w):
            out = [o + (w,) for o in out]
    return out


_ARTICLE = re.compile(r"(?<![^\W_])(a|an|A|An) (?=([^\W_][\w'\-]*))")


def _fix_article(m: re.Match) -> str:
    """"a" or "an" as the word after it wants, once a dropped word left the wrong one ("a animal")."""
    vowel = m.group(2)[:1].lower() in "aeiou" and not m.group(2).lower().startswith(("uni", "use", "eu", "one"))
    word = "an" if vowel else "a"
    return (word.capitalize() if m.group(1)[0].isupper() else word) + " "


def phrases(description: str | None, rarity: Callable[[str], float] = lambda w: 0.0,
            limit: int = 24) -> list[Phrase]:
    """The phrases ``description`` allows (module docstring), coarsest first: fewest content words, and
    among equals the least rare words first (``rarity`` of a content word: larger is rarer); at most
    ``limit``.  A year is never written as it is (a solver would search for it): it is widened to its
    decade or century, or left out."""
    if not description:
        return []
    out: dict[str, Phrase] = {}
    for segment in _PARENS.sub(" ", description).split(";"):
        segment = _TRAILING.sub("", _cut_at_comma(segment.strip().rstrip(".")).strip())
        head, quals = _postpositive(*_chunks(segment))
        if len(head) > 1 and head[-1].lower() in _DIRECTIONS:
            # "marginal sea northeast of the Black Sea": the direction is an adverb and its qualifier says where
            # from, so the sea is the noun and nothing after it is kept.
            while len(head) > 1 and head[-1].lower() in _DIRECTIONS:
                head = head[:-1]
            quals = []
        if not head or head[-1].lower() in _DIRECTIONS:
            continue
        noun = head[-1]
        if any(c.isdigit() for c in noun) or noun.lower() in _NOT_NOUNS or noun.lower() in STOP \
                or noun.endswith((",", " and", " or")) or not can_be_noun(noun) or noun.lower() in _OPENERS:
            continue  # "Apollo 11": a name, not a kind of thing; "two": no thing at all
        # A superlative or an ordinal ("largest", "second-longest", "most") singles a page out and takes no "a":
        # it is always left out.
        kept_head: list[str] = []
        for w in head[:-1]:
            if superlative(w):
                if kept_head and kept_head[-1].endswith((" and", " or")):
                    kept_head[-1] = kept_head[-1].rsplit(" ", 1)[0]  # "capital and largest city": "capital city"
                continue
            kept_head.append(w)
        head = kept_head + head[-1:]
        heads = [h for kept in _keep_sets(head, MAX_MODIFIERS) if _coordinated(kept, head)
                 for h in _widened(kept) if h and h[-1] == noun]
        tails: list[list[str]] = [[]]
        # A qualifier that a coordination continues ("in Central" + "and South Asia") is not whole.
        coordinated = len(quals) > 1 and quals[1][0] and quals[1][0][0].lower() in ("and", "or")
        if quals and not coordinated and _keepable(*quals[0]) and not any(
                any(c.isdigit() for c in w) and not _YEAR.fullmatch(w) for w in quals[0][1]):
            opening, words = quals[0]
            # An "of" that follows completes the qualifier ("with a notion" + "of distance"): both or neither.
            complement: list[str] = []
            if len(quals) > 1 and quals[1][0] == ["of"] and _keepable(*quals[1]) and not (
                    len(quals) > 2 and quals[2][0] and quals[2][0][0].lower() in ("and", "or")):
                complement = quals[1][0] + quals[1][1]
            elif len(quals) > 1 and quals[1][0] and quals[1][0][0].lower() == "of":
                opening = []  # its complement cannot be kept whole: nor can it
            if opening:
                tails += [opening + list(o) + complement for o in _narrowed(words)]
        # "state of matter", "study of society": the head noun alone says too little ("a state"), so an
        # "of" qualifier is dropped only where a modifier of the head stays ("scientific study").
        bare_ok = not (quals and quals[0][0] and quals[0][0][0].lower() == "of")
        for h in heads:
            for t in tails:
                if not t and len(h) == 1 and not bare_ok:
                    continue
                text = _ARTICLE.sub(_fix_article, " ".join([*h, *t]).replace(" ,", ",")).rstrip(",")
                if any(w.lower() in PUZZLE for w in _TOKEN.findall(text)):
                    continue  # "a set", "a page on states": a frame's own word, which no reader takes for a clue
                out.setdefault(text.lower(), Phrase(text, phrase_words(text)))
    # math.fsum: a sum that does not depend on the order the words are added in (a frozenset's order varies
    # with the hash seed, and a last-bit difference would break ties differently).
    ranked = sorted(out.values(), key=lambda p: (p.size, math.fsum(sorted(rarity(w) for w in p.words)), p.text))
    return ranked[:limit]


def keywords(text: str) -> str:
    """The words of ``text`` a keyword search would keep, in order, once each: its content words (periods
    included), without function words or the puzzle's own words ("final", "page")."""
    out = []
    for raw in text.split():
        w = raw.strip(".,;:!?\"'()")
        if w and (content_words(w) or DECADE.fullmatch(w) or CENTURY.fullmatch(w)):
            out.append(w)
    return " ".join(dict.fromkeys(out))


def head_noun(phrase: str) -> str:
    """The head noun of a phrase: the last word of its head chunk ("compounds" in "organic compounds
    containing amine")."""
    head, _ = _chunks(phrase)
    return head[-1] if head else ""


def sentence_with(text: str, anchor: str) -> str:
    """The first sentence of ``text`` that shows ``anchor`` as whole words (case ignored), or ``""``."""
    if not anchor.strip():
        return ""
    pattern = re.compile(r"(?<![^\W_])" + re.escape(anchor.strip()) + r"(?![^\W_])", re.I)
    for para in text.split("\n"):
        if pattern.search(para):
            return next((s for s in sentences(para) if pattern.search(s)), para)
    return ""


def relation_holds(sentence: str, word: str) -> bool:
    """Whether a relation word of a clue stands in the sentence where the previous page links on."""
    return stem(word.lower()) in content_words(sentence)


def proper_case(word: str, text: str) -> str:
    """``word`` lower-cased (a common word that opened a description: "Organic compound"), unless it
    is an acronym, has a capital inside, or ``text`` writes it capitalised inside a sentence, as a
    proper name or adjective ("Italian")."""
    low = word.lower()
    if word == low or word[1:] != word[1:].lower():
        return word
    if re.search(r"[a-z,;]\s+" + re.escape(word) + r"(?![^\W_])", text):
        return word
    return low


def words_of(texts: Iterable[str]) -> set[str]:
    """The content words of several texts."""
    out: set[str] = set()
    for t in texts:
        out |= content_words(t)
    return out


__all__ = ["FIT", "Phrase", "phrase_words", "definition", "DECADE", "CENTURY", "ordinal", "periods", "matches", "covers", "rival_fits", "ambiguous_with", "phrases",
           "keywords", "head_noun", "sentence_with", "relation_holds", "proper_case", "words_of"]
