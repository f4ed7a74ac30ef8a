"""Text analysis shared by the index, the tools and the snippets (as a search engine means it: the analyzer,
the markup rendering and the snippet windows; :mod:`synth.text` is about the language of questions and answers).

* **One analyzer** (:func:`analyzer`) tokenizes the index and every query of the agents' tool:
  tantivy's simple tokenizer (split on non-alphanumeric characters), long-token
  removal, lowercase, ASCII folding ("Zürich" matches "zurich") and the English
  Snowball stemmer.  The ``body`` ranking (a question checks' adversary) reads words as they are
  written (:func:`raw_analyzer`: the same without the stemmer), so "centralized" is the rare word it
  is, not the common stem "central".  Building the query terms in Python with the *same* analyzer
  is what lets :mod:`synth.tools.search` skip tantivy's query parser: an LLM's query
  is a bag of words, so quotes, colons, ``AND``/``NOT`` or unbalanced brackets
  cannot make it raise.
* **KILT markup** is rendered as Markdown (:func:`render_paragraph`):
  ``Section::::History.`` becomes ``## History`` and ``BULLET::::- x`` becomes
  ``- x``, so the agent reads Markdown (as LiteResearcher's browse tool returns)
  and the marker words never enter the index.
* **Snippet windows** (:func:`snippet_window`) trim a paragraph to a character
  budget around its matches, cutting on whitespace.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache

import tantivy

ANALYZER_NAME = "hopforge_en"
RAW_ANALYZER_NAME = "hopforge_raw"  # the same words, unstemmed
# Tokens longer than this are base64, URLs or chemistry; they bloat the term dictionary.
MAX_TOKEN_CHARS = 40
# Lucene's English stop set.  Stop words stay *in the index* (so "The Who" or "It" can
# still be found) but are dropped from a query that has other terms: they add nothing
# to a BM25 ranking and their posting lists are the longest to walk.
STOP_WORDS = (
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with"
).split()

_SECTION = "Section::::"
_BULLET = "BULLET::::"


def analyzer() -> tantivy.TextAnalyzer:
    """A fresh instance of the index's text analyzer (register it on every opened index)."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(MAX_TOKEN_CHARS))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def raw_analyzer() -> tantivy.TextAnalyzer:
    """:func:`analyzer` without the stemmer: words as they are written, folded and lower-cased."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(MAX_TOKEN_CHARS))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .build()
    )


_local = threading.local()


def _query_analyzer(raw: bool = False) -> tantivy.TextAnalyzer:
    # One analyzer per thread: a tantivy analyzer keeps token-stream state, so it is not
    # shared between the threads of concurrent rollouts.
    name = "raw" if raw else "analyzer"
    a = getattr(_local, name, None)
    if a is None:
        a = raw_analyzer() if raw else analyzer()
        setattr(_local, name, a)
    return a


@lru_cache(maxsize=2)
def _stop_terms(raw: bool = False) -> frozenset[str]:
    a = _query_analyzer(raw)
    return frozenset(t for w in STOP_WORDS for t in a.analyze(w))


def clean_text(text: str) -> str:
    """``text`` with what UTF-8 cannot encode (lone surrogates, which ``json.loads`` accepts
    from ``"\\ud800"``) replaced by ``?``, so it can reach tantivy."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def analyze(text: str, raw: bool = False) -> list[str]:
    """The index terms of ``text``, in order (duplicates kept); ``raw``: unstemmed (:func:`raw_analyzer`)."""
    return _query_analyzer(raw).analyze(clean_text(text))


def query_terms(query: str, max_terms: int = 32, raw: bool = False) -> list[str]:
    """Distinct terms of a free-text query, in first-seen order.

    Stop words are dropped unless nothing else is left ("the who" -> ["who"], "the the" ->
    ["the"]).  At most ``max_terms`` are kept, so a pasted paragraph cannot make one
    query walk hundreds of posting lists.
    """
    seen: dict[str, None] = {}
    for t in analyze(query, raw):
        seen.setdefault(t, None)
    terms = list(seen)
    stop = _stop_terms(raw)
    content = [t for t in terms if t not in stop]
    return (content or terms)[:max_terms]


def title_key(title: str) -> str:
    """The lookup key of a title: case-folded, underscores as spaces, whitespace collapsed.

    "Barack_Obama", "barack  obama" and "Barack Obama" share one key, so an agent that
    copies a title from a URL or changes its case still opens the page.
    """
    return " ".join(clean_text(title).replace("_", " ").split()).casefold()


def render_paragraph(text: str | None) -> str:
    """A KILT paragraph as Markdown, trailing newline removed (``""`` for None)."""
    if not text:
        return ""
    text = text.strip()
    if text.startswith(_SECTION):
        # "Section::::Career.:::Early years." -> "### Early years": one level per ':::' part.
        parts = [p.strip() for p in text[len(_SECTION):].split(":::") if p.strip()]
        if not parts:
            return ""
        heading = parts[-1][:-1] if parts[-1].endswith(".") else parts[-1]
        return "#" * min(1 + len(parts), 6) + " " + heading
    if text.startswith(_BULLET):
        item = text[len(_BULLET):].strip()
        return item if item.startswith(("-", "*")) else "- " + item
    return text


def page_text(title: str, paragraphs: list[str]) -> str:
    """The text ``open`` pages through: the title, then the non-empty paragraphs, blank lines between."""
    return "\n\n".join([title, *[p for p in paragraphs if p]])


_WS = re.compile(r"\s")


def snippet_window(text: str, spans: list[tuple[int, int]], chars: int) -> str:
    """At most ``chars`` characters of ``text`` around the match ``spans`` ((start, end), sorted).

    The window holds the run of matches that fits it with the most distinct matched words
    (the earliest such run on a tie): from the paragraph's start when the run fits there,
    else centred on it.  Its cut ends move inward to whitespace, and each cut end is marked
    with an ellipsis that counts towards ``chars``.
    """
    if len(text) <= chars:
        return text
    budget = chars - 2  # room for the two ellipses
    if spans:
        spans = _densest(text, spans, budget)
        lo, hi = spans[0][0], min(spans[-1][1], spans[0][0] + budget)
        # Start at the paragraph's start when the matches fit from there: a whole first
        # sentence reads better than one cut to centre the matches.
        start = 0 if hi <= budget else max(0, (lo + hi) // 2 - budget // 2)
    else:
        start = 0
    start = min(start, len(text) - budget)
    end = start + budget
    if start > 0 and not text[start - 1].isspace():
        # Move forward to the start of a word, but never past the first match.
        limit = min(start + 40, spans[0][0]) if spans and spans[0][0] >= start else start + 40
        m = _WS.search(text, start, limit)
        if m is not None:
            start = m.end()
    if end < len(text) and not text[end].isspace():
        # Move back to the end of a word, keeping the matches and at least half the window.
        last = max((e for _, e in spans if e <= end), default=start)
        for lower in (max(start + budget // 2, last), start + budget // 2):
            cut = max(text.rfind(" ", lower, end + 1), text.rfind("\n", lower, end + 1))
            if cut >= lower:
                end = cut
                break
    body = text[start:end].strip()
    return ("…" if start > 0 else "") + body + ("…" if end < len(text) else "")


def _densest(text: str, spans: list[tuple[int, int]], budget: int) -> list[tuple[int, int]]:
    """The consecutive spans that fit in ``budget`` characters with the most distinct words."""
    words = [text[a:b].casefold() for a, b in spans]
    best, best_n, j = (0, 1), 0, 0
    for i in range(len(spans)):
        j = max(j, i + 1)
        while j < len(spans) and spans[j][1] - spans[i][0] <= budget:
            j += 1
        n = len(set(words[i:j]))
        if n > best_n:
            best, best_n = (i, j), n
    return spans[best[0]:best[1]]


__all__ = [
    "ANALYZER_NAME",
    "STOP_WORDS",
    "analyzer",
    "analyze",
    "clean_text",
    "query_terms",
    "title_key",
    "render_paragraph",
    "page_text",
    "snippet_window",
]
