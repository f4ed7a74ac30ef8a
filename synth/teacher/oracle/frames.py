"""The oracle's phrasing: sentence frames for the opener, every hop, the closer and the sub-questions.

A hop's sentence states a fact about the entity reached so far, as that entity's own text states it,
with the next entity blurred to a description: "In turn, it flows through a country in Europe."  The
relation ("flows through") is what a parser reads in the sentence where the previous entity's text
names the next one (:func:`synth.text.parse.relation`); the clue is a blurry phrase
(:mod:`synth.text.clues`), never a quote of a whole passage.  No frame tells the solver to open a page
or follow a link: the question is about facts between entities, as the benchmarks ask them.  Each
sentence is assembled from independent parts (a lead-in, a way to refer to the entity reached, the
relation, the clue), so the questions vary, and a student trained on them learns to read clues, not a
template.  Every word a frame adds that is not a function word belongs to
:data:`synth.text.question_text.PUZZLE`, so the validators never mistake a frame's words for a clue
about an entity (a test checks this).

The text contract the oracle agent reads (:mod:`synth.teacher.oracle.reading`): the first
sentence holds the start entity's exact title; then one sentence per hop, in chain order,
each "{lead}{ref} {relation} {article} {phrase}."; the last sentence asks for the final entity.
The relation holds no "a", "an" or "one", so the description starts at the first of them after the reference.
Nothing here adds ``.``,
``!`` or ``?`` inside a sentence, so :func:`synth.text.question_text.sentences` splits
them back.
"""

from __future__ import annotations

import random

OPENERS = [
    "Consider {t}.", "Think of {t}.", "Take {t}.", "This question concerns {t}.", "We begin with {t}.",
    "Begin with {t}.", "The first entity here is {t}.", "Our subject is {t}.", "Think about {t}.",
    "Here is a chain of facts that begins with {t}.", "Start with {t}.", "The subject at the outset is {t}.",
    "Let us begin with {t}.", "First, consider {t}.", "The question begins with {t}.",
]
# A hop's sentence states a fact about the entity reached so far: "{ref} {relation} {clue}", the relation
# being what the previous entity's own text says ("flows through", "was founded by"), or, when its text
# relates the two by no verb or noun a parser finds, one of GENERIC.  Frame words are function words or
# puzzle words (synth.text.question_text.PUZZLE), so that a search for a hop's sentence is a search for
# its clue and its relation (the effective-depth searches, synth.questions.depth).
LEADS = ["", "", "", "In turn, ", "Moreover, ", "And ", "Further, ", "Next, ", "Then ", "After that, "]
REFS = ["it", "this one", "the latter", "that one", "it", "this entity", "that entity"]
GENERIC = ["is associated with", "is connected with", "has ties to", "is related to"]
CLOSERS = ["what is the name of the last one?", "what is it called?", "name it.", "who or what is it?",
           "what is the final one called?", "identify it by name.", "what is its name?",
           "which entity is this?", "name this last entity.", "what is the name of this final entity?"]
CLOSER_LEADS = ["", "So, ", "Finally, ", "In the end, ", "At last, "]
# Sub-questions are the clue and its relation alone, in few frame words, so that a search for one is a
# search for its clue.
SUB_FORWARD = ["What is the {p} that it {r}?", "Which {p} is it that it {r}?"]


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def opener(title: str, rnd: random.Random) -> str:
    """The first sentence: names the start entity by its exact title."""
    return rnd.choice(OPENERS).format(t=title)


def relation(words: str | None, rnd: random.Random) -> str:
    """The relation part of a hop's sentence: the relation ``words`` a parser read in the previous entity's
    sentence ("flows through"), or a generic one when there are none."""
    return words if words else rnd.choice(GENERIC)


def hop_sentence(clue: str, rel: str, rnd: random.Random, short: bool = False) -> str:
    """One hop's sentence: ``clue`` is the phrase with its article ("an organic compound"), ``rel``
    what :func:`relation` gave; ``short`` takes the shortest frame."""
    lead, ref = rnd.choice(LEADS), rnd.choice(REFS)
    if short:
        lead, ref = "", "it"
    return _cap(f"{lead}{ref} {rel} {clue}") + "."


def closer(rnd: random.Random) -> str:
    """The last sentence: asks for the final entity."""
    return _cap(rnd.choice(CLOSER_LEADS) + rnd.choice(CLOSERS))


def sub_question(phrase: str, rel: str, rnd: random.Random) -> str:
    """The hop's own question: the clue and its relation alone (``phrase`` without its article)."""
    return rnd.choice(SUB_FORWARD).format(p=phrase, r=rel)


def frame_words() -> str:
    """Every frame's text with its slots removed (what the PUZZLE-words test reads)."""
    parts = OPENERS + LEADS + REFS + GENERIC + CLOSERS + CLOSER_LEADS + SUB_FORWARD
    out = " ".join(parts)
    for slot in ("{t}", "{p}", "{r}"):
        out = out.replace(slot, " ")
    return out


__all__ = ["GENERIC", "REFS", "LEADS", "opener", "relation", "hop_sentence", "closer", "sub_question",
           "frame_words"]
