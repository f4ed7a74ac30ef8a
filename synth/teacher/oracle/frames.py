"""The oracle's phrasing: sentence frames for the opener, every hop, the closer and the sub-questions.

A hop's sentence says where the next page is, seen from the current one, and what it is:
"From there, that article links to an organic compound, in a passage on anatomy."  The
clue is a blurry phrase (:mod:`synth.text.clues`), never a quote of page text.  Each
sentence is assembled from independent parts (a lead-in, a way to refer to the current
page, a verb, an optional relation, a tail), so the questions use thousands of sentence
shapes rather than a handful, and a student trained on them learns to read clues, not a
template.  Every word a frame adds that is not a function word belongs to
:data:`synth.text.question_text.PUZZLE`, so the validators never mistake a frame's words
for a clue about an entity (a test checks this).

The text contract the oracle agent reads (:mod:`synth.teacher.oracle.reading`): the first
sentence holds the start entity's exact title; then one sentence per hop, in chain order,
each saying that the current page links to the next one; the last sentence asks for the
final entity.  A relation word follows one of :data:`RELATIONS`' connectors, at the end of
the clue.  Nothing here adds ``.``,
``!`` or ``?`` inside a sentence, so :func:`synth.text.question_text.sentences` splits
them back.
"""

from __future__ import annotations

import random

OPENERS = [
    "Start from the Wikipedia article on {t}.", "Begin with the article about {t}.", "Open the article on {t}.",
    "Your starting point is the page titled {t}.", "The trail starts at the article {t}.",
    "First, look up the entry for {t}.", "Take the article on {t} as the first stop.",
    "Go to the Wikipedia page for {t}.", "The chain opens with the article on {t}.",
    "Read the encyclopedia entry on {t} first.", "Find the page named {t}.", "We begin at the article {t}.",
    "Pull up the article about {t} to start.", "The first page to open is {t}.", "Set out from the article on {t}.",
    "Start at the entry titled {t}.", "Look up {t} on Wikipedia.", "Your first page is the one on {t}.",
    "Open the Wikipedia entry {t}.", "The search begins with the page on {t}.",
]
# Frame words are function words or puzzle words that few pages hold, so that a search for a hop's
# sentence is a search for its clue (the effective-depth searches, synth.questions.depth).
LEADS = ["", "", "Next, ", "Then ", "From there, ", "After that, ", "Now ", "Onward: ", "Further on, ",
         "Thence, ", "Afterwards, ", "Hence ", "Next up, ", "Thereafter, ", "Once there, ", "At that point, ",
         "From that point, "]
REFS = ["that article", "this page", "the page you reach", "that entry", "the article you land on", "this entry",
        "the latest page", "that page", "the current article", "this article", "the page you landed on",
        "the entry you reached", "the article you are on", "the page now open", "the current entry",
        "the latest article", "the article just reached"]
VERBS = ["links to", "mentions", "refers to", "names", "points to", "cites", "leads to", "has a link to",
         "contains a link to", "includes a link to"]
FORWARD = ["{ref} {verb} {clue}", "among the pages {ref} links to is {clue}", "one of the links on {ref} leads to {clue}",
           "follow the link from {ref} to {clue}", "from {ref}, go on to {clue}",
           "{ref} has a link that leads to {clue}", "somewhere in {ref} there is a link to {clue}",
           "look among the links of {ref} for {clue}", "{ref} mentions, among other pages, {clue}",
           "find the link in {ref} that leads to {clue}"]
# A relation word closes the clue, after one of these connectors.
RELATIONS = [" in a passage on {w}", ", where it discusses {w}", " in connection with {w}", ", in its section on {w}",
             " when it talks about {w}"]
CONNECTORS = tuple(r.split("{w}")[0].lstrip(", ") for r in RELATIONS)
TAILS = ["", "", "", "; go there next", "; open it", "; that is the next stop", ", the next stop",
         "; continue from there", "; that page is next", "; that is where the trail goes", "; read it next",
         ", which is next", "; the trail continues there"]
CLOSERS = ["what is the title of the page you reach last?", "which article does this final link lead to?",
           "name the entity at the end of the trail.", "what page do you land on at the end?",
           "what is the final article called?", "where does the chain end?", "which page closes the chain?",
           "what is the name of the last entity?", "which article is the last stop?",
           "name the page the final link opens.", "what do you reach at the end?",
           "which Wikipedia article completes the chain?", "identify the final page of this chain.",
           "what entity ends this path?"]
CLOSER_LEADS = ["", "So, ", "Finally, ", "In the end, ", "At last, "]
# Sub-questions are the clue alone, in few and rare frame words, so that a search for one is a search for its clue.
SUB_FORWARD = ["Which {p} does the previous page link to{r}?", "What {p} is linked from the previous article{r}?",
               "Which {p} does that article mention{r}?", "What {p} does the page refer to{r}?"]


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def opener(title: str, rnd: random.Random) -> str:
    """The first sentence: names the start entity by its exact title."""
    return rnd.choice(OPENERS).format(t=title)


def relation(word: str | None, rnd: random.Random) -> str:
    """The relation part of a clue (``""`` without a relation word)."""
    return rnd.choice(RELATIONS).format(w=word) if word else ""


def hop_sentence(clue: str, rel: str, rnd: random.Random, short: bool = False) -> str:
    """One hop's sentence: ``clue`` is the phrase with its article ("an organic compound"), ``rel``
    what :func:`relation` gave; ``short`` takes the shortest frame."""
    lead, ref, tail, forward, verb = rnd.choice(LEADS), rnd.choice(REFS), rnd.choice(TAILS), rnd.choice(FORWARD), \
        rnd.choice(VERBS)
    if short:
        lead, ref, tail, forward, verb = "", "it", "", FORWARD[0], VERBS[0]
    return _cap(lead + forward.format(ref=ref, verb=verb, clue=clue) + rel + tail) + "."


def closer(rnd: random.Random) -> str:
    """The last sentence: asks for the final entity."""
    return _cap(rnd.choice(CLOSER_LEADS) + rnd.choice(CLOSERS))


def sub_question(phrase: str, rel: str, rnd: random.Random) -> str:
    """The hop's own question: the clue alone (``phrase`` without its article), naming no entity."""
    return rnd.choice(SUB_FORWARD).format(p=phrase, r=rel.replace(",", ""))


def frame_words() -> str:
    """Every frame's text with its slots removed (what the PUZZLE-words test reads)."""
    parts = OPENERS + LEADS + REFS + VERBS + FORWARD + RELATIONS + TAILS + CLOSERS + CLOSER_LEADS + SUB_FORWARD
    out = " ".join(parts)
    for slot in ("{t}", "{ref}", "{verb}", "{clue}", "{w}", "{p}", "{r}"):
        out = out.replace(slot, " ")
    return out


__all__ = ["CONNECTORS", "opener", "relation", "hop_sentence", "closer", "sub_question",
           "frame_words"]
