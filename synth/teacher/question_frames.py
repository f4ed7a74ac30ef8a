"""The offline oracle's phrasing: sentence frames for the opener, every hop, and the closer.

Each sentence is assembled from independent parts (a lead-in, a way to refer to the
current article, a verb, a tail, an optional type hint), so the questions use thousands
of sentence shapes rather than a handful: a student trained on them learns to read
clues, not a template.  Every word a frame adds that is not a function word belongs to
:data:`synth.teacher.question_text.PUZZLE`, so the validators never mistake a frame's words for
a clue about an entity (a test checks this).

The text contract the oracle agent reads: the first sentence holds the start entity's
exact title, then one sentence per hop, in chain order, each quoting that hop's clue,
and the last sentence asks for the final entity.  Nothing here adds ``.``, ``!`` or
``?`` inside a sentence, so :func:`synth.teacher.question_text.sentences` splits them back.
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
# The frames a searched sentence can use (every hop's, the last one's included) are made of words that few
# pages hold, so that a search for that sentence is a search for its clue (see ``clue_shortcut``).
LEADS = ["", "Next, ", "Then ", "Onward: ", "Again, ", "Likewise, ", "Here, ", "Thence, ", "Afterwards, ",
         "Thereafter, ", "Hence ", "Next up, ", "Hop on: ", "Onwards, "]
REFS = ["that article", "the page you landed on", "this page", "the latest article", "the article", "that entry",
        "the entry you visited", "this article", "the latest page", "that page", "this entry", "the page"]
VERBS = ["says", "reads", "quotes the passage", "has the fragment", "puts it as", "phrases it as", "mentions",
         "remarks", "notes", "goes", "has the sentence", "says, in passing,"]
TAILS = ["", ", where the blank is a link", "; click the link in the blank", "; the blank is a hyperlink",
         "; jump to the page behind the blank", "; the gap hides a link", ", with the linked words masked",
         "; the missing words are a link", "; the blank conceals the next page", "; hop to the blank's page",
         ", and the blank is your next stop", "; the hidden link is the next hop"]
INVERTED = ['in {ref}, the passage "{c}" has a blank{tail}', 'the blank in "{c}", in {ref}, is a link{tail}',
            'in {ref} you will see "{c}"{tail}', 'the fragment "{c}" sits in {ref}{tail}',
            'quoted from {ref}: "{c}"{tail}']
INVERTED_TAILS = ["; click it", " to jump on", "", "; its link is next", "; hop onward", "; the blank is the next stop"]
HINTS = [", and the blank is {d}", "; the page behind it is {d}", " (the linked page is {d})", ", naming {d}",
         "; expect {d}"]
BACKWARD = ['the next page is one whose article says "{c}"', 'look for the article that mentions it with "{c}"',
            'find the page that links back to it, saying "{c}"', 'another article refers to it: "{c}"',
            'search for the article containing "{c}"', 'the next stop is a page with the line "{c}"',
            'some article cites it as "{c}"', "the next entity's own article reads \"{c}\""]
BACKWARD_TAILS = ["", "; that page is the next stop", "; go to that page", ", and that article is the next step",
                  "; open it"]
CLOSERS = ["what is the title of the page you reach last?", "which article does this final link lead to?",
           "name the entity at the end of the trail.", "what page do you land on at the end?",
           "which entity does the last blank stand for?", "what is the final article called?",
           "where does the chain end?", "which page closes the chain?", "what is the name of the last entity?",
           "which article is the last stop?", "name the page the final link opens.", "what do you reach at the end?",
           "which Wikipedia article completes the chain?", "identify the final page of this chain.",
           "what entity ends this path?"]
CLOSER_LEADS = ["", "So, ", "Finally, ", "In the end, ", "At last, "]
# Sub-questions are the clue alone, in few and rare frame words, so that a search for one is a search for its clue.
SUB_FORWARD = ['Fill the blank in "{c}"?', 'The blank in "{c}" is?', 'Fill the gap in "{c}"?',
               'The gap in "{c}" hides?']
SUB_HINTED = ['Fill the blank in "{c}", {d}?', 'The blank in "{c}", {d}, is?']
SUB_BACKWARD = ['Whose article says "{c}"?', 'Whose page reads "{c}"?']


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def opener(title: str, rnd: random.Random) -> str:
    """The first sentence: names the start entity by its exact title."""
    return rnd.choice(OPENERS).format(t=title)


def hop_sentence(clue: str, backward: bool, hint: str | None, rnd: random.Random) -> str:
    """One hop's sentence, quoting its clue; ``hint`` (a type phrase such as "a river") is optional."""
    lead = rnd.choice(LEADS)
    if backward:
        body = rnd.choice(BACKWARD).format(c=clue) + rnd.choice(BACKWARD_TAILS)
    elif rnd.random() < 0.25:
        body = rnd.choice(INVERTED).format(ref=rnd.choice(REFS), c=clue, tail=rnd.choice(INVERTED_TAILS))
    else:
        body = f'{rnd.choice(REFS)} {rnd.choice(VERBS)} "{clue}"{rnd.choice(TAILS)}'
    if hint:
        body += rnd.choice(HINTS).format(d=hint)
    return _cap(lead + body) + "."


def closer(rnd: random.Random) -> str:
    """The last sentence: asks for the final entity."""
    lead = rnd.choice(CLOSER_LEADS)
    return _cap(lead + rnd.choice(CLOSERS))


def sub_question(clue: str, backward: bool, hint: str | None, rnd: random.Random) -> str:
    """The hop's own question: the clue alone, without naming any entity of the chain."""
    if backward:
        return rnd.choice(SUB_BACKWARD).format(c=clue)
    if hint:
        return rnd.choice(SUB_HINTED).format(c=clue, d=hint)
    return rnd.choice(SUB_FORWARD).format(c=clue)


def frame_words() -> str:
    """Every frame's text with its slots removed (what the PUZZLE-words test reads)."""
    parts = OPENERS + LEADS + REFS + VERBS + TAILS + INVERTED + INVERTED_TAILS + HINTS + BACKWARD + BACKWARD_TAILS
    parts += CLOSERS + CLOSER_LEADS + SUB_FORWARD + SUB_HINTED + SUB_BACKWARD
    return " ".join(p.replace("{t}", " ").replace("{c}", " ").replace("{d}", " ").replace("{ref}", " ")
                    .replace("{tail}", " ") for p in parts)


__all__ = ["opener", "hop_sentence", "closer", "sub_question", "frame_words"]
