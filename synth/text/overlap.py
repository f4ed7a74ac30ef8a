"""The n-gram overlap rule: does a text share ``n`` consecutive normalised words with a reference set?

Texts are normalised as answers are (:func:`synth.text.answers.normalize_answer`: lower
case, no punctuation, no articles) and split into words.  A text overlaps the set when it
shares an n-gram of ``n`` words with any reference text.  Texts shorter than n words count
as one n-gram, the whole text: a short text overlaps when it occurs, word for word, inside
a reference text, and a short reference text overlaps every text that contains it.

The rule has one home, here: the trace filter's last guard (:mod:`filters.decontaminate`)
and the questions stage's text level of decontamination (:mod:`synth.decontam`) both use it.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from synth.text.answers import normalize_answer


def words(text: str) -> list[str]:
    """Normalised words of ``text``."""
    return normalize_answer(text or "").split()


def ngrams(tokens: list[str], n: int) -> Iterator[tuple[str, ...]]:
    """Every contiguous n-gram of ``tokens`` (none when there are fewer than n)."""
    for i in range(len(tokens) - n + 1):
        yield tuple(tokens[i : i + n])


class EvalSet:
    """The n-grams of a set of reference texts (evaluation questions), for :meth:`match`."""

    def __init__(self, questions: Iterable[str], n: int):
        self.n = n
        self.size = 0
        self._grams: set[int] = set()  # hashes of n-word tuples (this process only)
        self._short: dict[int, set[int]] = {}  # length -> hashes of whole reference texts under n words
        parts = []
        for q in questions:
            toks = words(q)
            if not toks:
                continue
            self.size += 1
            parts.append(" ".join(toks))
            if len(toks) >= n:
                self._grams.update(hash(g) for g in ngrams(toks, n))
            else:
                self._short.setdefault(len(toks), set()).add(hash(tuple(toks)))
        # Newlines never occur inside normalised text, so a match cannot span two questions.
        self._joined = " \n ".join(f" {t} " for t in parts)

    def match(self, question: str) -> str | None:
        """The first shared n-gram (as text) of ``question`` with the reference set, or None."""
        toks = words(question)
        if not toks:
            return None
        if len(toks) < self.n:
            whole = " ".join(toks)
            if f" {whole} " in self._joined:
                return whole
        else:
            for g in ngrams(toks, self.n):
                if hash(g) in self._grams:
                    return " ".join(g)
        for length, hashes in self._short.items():
            if length <= len(toks):
                for g in ngrams(toks, length):
                    if hash(g) in hashes:
                        return " ".join(g)
        return None


__all__ = ["EvalSet", "ngrams", "words"]
