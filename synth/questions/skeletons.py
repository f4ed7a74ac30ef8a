"""How varied the questions' phrasing is: distinct sentence skeletons.

A sentence's *skeleton* is the sentence with everything that comes from the question's
material taken out, so only the writer's own phrasing is left:

1. the question is split into sentences (:func:`synth.text.question_text.sentences`)
   and each sentence into words and single punctuation marks, lower-cased;
2. every word that occurs in the material of the question's source -- the titles and
   descriptions of its entities and the paragraphs of its evidence -- becomes ``X``,
   unless it is an English function word (``STOP`` below: "the", "of", "which"...),
   which a writer's frame uses too;
3. a run of ``X`` s joined only by function words and punctuation (not a quote mark)
   becomes one ``X``, and an article right before an ``X`` goes with it ("a X" and
   "an X" are one shape).

Two sentences with the same skeleton are the same frame filled with different
material.  :func:`count_skeletons` counts the distinct skeletons over a set of
questions and the share of sentences the 20 most common ones cover.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

from synth.text.question_text import sentences

STOP = frozenset("""a an the of to in on at by for with from and or but as that this these those its it is are was
were be been which what who whom whose where when how than then there their they he she his her one""".split())
_TOKEN = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*|[^\w\s]|_+")
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_QUOTES = {'"', "\u201c", "\u201d"}


def vocabulary(texts: Iterable[str | None]) -> set[str]:
    """The lower-cased words of a source's material (titles, descriptions, evidence paragraphs)."""
    return {w.lower() for t in texts if t for w in _WORD.findall(t)}


def skeleton(sentence: str, vocab: set[str]) -> str:
    """The skeleton of one sentence (module docstring)."""
    out: list[str] = []
    for tok in _TOKEN.findall(sentence):
        low = tok.lower()
        if _WORD.fullmatch(tok) and low in vocab and low not in STOP:
            j = len(out)
            while j and out[j - 1] != "X" and out[j - 1] not in _QUOTES and (
                    out[j - 1] in STOP or not _WORD.fullmatch(out[j - 1])):
                j -= 1
            if j and out[j - 1] == "X":  # joins the previous X across function words and punctuation
                del out[j:]
                continue
            while out and out[-1] in ("a", "an", "the"):
                out.pop()
            out.append("X")
        else:
            out.append(low)
    return " ".join(out)


def count_skeletons(items: Iterable[tuple[str, set[str], list[str]]]) -> dict:
    """Distinct skeletons over ``(question, vocabulary, titles)`` triples, with sentence counts.

    Returns ``{"sentences": n, "skeletons": distinct, "top20_share": share}``.
    """
    counts: Counter[str] = Counter()
    for question, vocab, titles in items:
        for s in sentences(question, protect=titles):
            counts[skeleton(s, vocab)] += 1
    n = sum(counts.values())
    top = sum(c for _, c in counts.most_common(20))
    return {"sentences": n, "skeletons": len(counts), "top20_share": round(top / n, 3) if n else 0.0}


__all__ = ["vocabulary", "skeleton", "count_skeletons"]
