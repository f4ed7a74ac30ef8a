"""Snippets: the best-matching paragraph of a hit, and where the query matches in it.

A search result shows one passage of its page, not the page's first characters:
the paragraph that scores highest under BM25 computed *within the page*
(paragraphs as documents, idf from the whole index), so an agent sees why the
page matched.

Cost is what matters here: a snippet is built for every hit of every query, and
running the analyzer over whole pages costs more than the search itself (KILT
pages reach hundreds of kilobytes).  So only the words that can match are
analyzed: a stem is a prefix of its surface forms up to its last letter or so
("countri" <- "country"), so each term's stem-minus-one-letter is looked up with
``str.find`` (C speed) in the lower-cased, ASCII-folded paragraph, and only the
words that start with it are stemmed (with a cache) and compared with the term.
The highlights inside the chosen paragraph come from tantivy's own analyzer
(:func:`match_spans`).

A page is scored for its snippet on its first :data:`SCAN_CHARS` characters only, the
*lead* the index stores with each page (:mod:`synth.tools.build`): the paragraphs that
start there, the last one cut at the bound.  Without the bound one 5 MB page made every
search that returned it some 70-150 times slower; with it a hit costs at most that much
text, whatever the page's size (``bench/snippets.py``).  A match past the bound does not
show in the snippet: the lead paragraph does, as for a match in the title only.  Ranking
still sees the whole page, and ``open`` and ``find`` read all of it.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import tantivy

from synth.tools.analysis import analyze

K1, B = 1.2, 0.75  # the usual BM25 parameters (tantivy ranks pages with the same)
SCAN_CHARS = 100_000  # characters of a page a snippet is chosen from (above the 99th percentile of KILT pages)
_WORD_TAIL = re.compile(r"[^\W_]*")
_STEM_CACHE_MAX = 200_000  # words whose stem is remembered (bounded: a long-running server sees endless words)


def _probe(term: str) -> str:
    return term[:-1] if len(term) > 3 else term


def _fold(text: str) -> str:
    """Lower-cased text with accents removed (the index folds them: "zürich" -> "zurich")."""
    low = text.lower()
    if low.isascii():
        return low
    return unicodedata.normalize("NFKD", low).encode("ascii", "ignore").decode("ascii")


@lru_cache(maxsize=_STEM_CACHE_MAX)
def _stem(word: str) -> str | None:
    """The index term of one word (None when the analyzer makes more or fewer than one): a pure function,
    memoised."""
    toks = analyze(word)
    return toks[0] if len(toks) == 1 else None


def _term_freq(text: str, term: str, probe: str) -> int:
    """Occurrences in ``text`` (folded, lower-case) of whole words whose stem is ``term``."""
    n, pos = 0, text.find(probe)
    while pos >= 0:
        end = _WORD_TAIL.match(text, pos).end()
        if (pos == 0 or not text[pos - 1].isalnum()) and _stem(text[pos:end]) == term:
            n += 1
        pos = text.find(probe, max(end, pos + 1))
    return n


def best_paragraph(paragraphs: list[str], idf: dict[str, float]) -> int | None:
    """Index of the paragraph with the highest BM25 score for the query terms ``idf``
    (term -> idf), or None when no paragraph contains any of them."""
    if not idf:
        return None
    nonempty = [(i, p) for i, p in enumerate(paragraphs) if p]
    if not nonempty:
        return None
    probes = [(t, _probe(t), w) for t, w in idf.items()]
    avg = sum(len(p) for _, p in nonempty) / len(nonempty)
    best, best_score = None, 0.0
    for i, p in nonempty:
        folded = _fold(p)
        norm = K1 * (1 - B + B * len(p) / avg)
        score = 0.0
        for term, probe, w in probes:
            if term.isascii():
                tf = _term_freq(folded, term, probe)
            else:  # scripts without ASCII forms (CJK) have no spaces to find words by
                tf = p.lower().count(term)
            if tf:
                score += w * tf * (K1 + 1) / (tf + norm)
        if score > best_score:
            best, best_score = i, score
    return best


def match_spans(generator: tantivy.SnippetGenerator, text: str) -> list[tuple[int, int]]:
    """Character spans of the query's matches in ``text``, as tantivy's analyzer finds them.

    ``generator`` (made for the index's ``text`` field) must allow fragments longer than any paragraph
    (``set_max_num_chars``), so its one fragment is the whole text and every match is highlighted.
    """
    snippet = generator.snippet_from_doc(tantivy.Document(text=text))
    base = snippet.fragment_range().start
    spans = [(base + h.start, base + h.end) for h in snippet.highlighted()]
    if not spans or text.isascii():
        return spans
    # tantivy reports UTF-8 byte offsets; Python slices by code point.
    raw = text.encode("utf-8")
    return [(len(raw[:a].decode("utf-8", "ignore")), len(raw[:b].decode("utf-8", "ignore"))) for a, b in spans]


__all__ = ["SCAN_CHARS", "best_paragraph", "match_spans"]
