"""Synthetic KILT knowledge sources, for benchmarks and scale tests.

:func:`write_synthetic_kilt` streams N pages of KILT JSON Lines in the real schema
(``_id``, ``wikipedia_id``, ``wikipedia_title``, ``text`` with the title first,
``anchors`` with character offsets that satisfy ``text[p][start:end] == anchor.text``,
``categories``, ``history``, ``wikidata_info``) to disk.  The mix of anchors mirrors
what the real dump holds: most carry the target's ``wikipedia_id``; some have a null
id and must be resolved from their ``href`` (percent-encoded, underscores, a
``#section``, a lower-case first letter); some are external ``http`` links, some point
to titles or ids that are not in the corpus, and a few link a page to itself.

Output is a pure function of the arguments: random numbers come from one
``numpy`` generator seeded with ``seed`` and drawn chunk by chunk, so memory stays
bounded (one chunk of pages) whatever N is.  1M pages x 30 anchors take about a
two to three minutes on one core (``orjson`` does the encoding).
"""

from __future__ import annotations

import gzip
from pathlib import Path
from urllib.parse import quote

import numpy as np
import orjson

_WORDS = (
    "river valley north south house church battle station school county island lake mountain "
    "district council railway bridge castle college museum theatre library harbour forest park "
    "abbey tower market street bay cape temple palace garden field village town city province "
    "empire kingdom republic army navy league party festival album song film novel series "
    "company bank club team stadium airport canal road engine ship aircraft opera symphony "
    "café Zürich São Łódź Ångström naïve façade"
).split()
_FILLER = (
    "was founded in the early years and later became known for its role in the region . "
    "it is located near the old border and has a population of several thousand people . "
    "the name derives from an older form used by local writers and appears in early records . "
    "during the following decades the area grew rapidly as new industries arrived . "
    "several notable buildings survive , including a library and a covered market . "
    "critics have described it as one of the most important works of its period . "
    "the first edition was published with illustrations by a well known artist ."
).split()

# Anchor kinds and their default shares (the rest resolve by id).
KINDS = ("by_id", "by_href", "external", "missing_title", "missing_id", "self")


def page_id(i: int) -> str:
    """The KILT id of synthetic page ``i`` (sparse, like real Wikipedia page ids)."""
    return str(1000 + 7 * i)


def page_title(i: int) -> str:
    """The title of synthetic page ``i``: two capitalised words and a unique number."""
    a = _WORDS[i % len(_WORDS)]
    b = _WORDS[(i // len(_WORDS) * 7 + 3) % len(_WORDS)]
    return f"{a[:1].upper()}{a[1:]} {b} {i}"


def _href(title: str, variant: int) -> str:
    """An href for ``title`` in one of the shapes the dump uses."""
    if variant == 0:
        return quote(title)  # "Amber%20river%2012"
    if variant == 1:
        return quote(title.replace(" ", "_"), safe="_")
    if variant == 2:
        return quote(title) + "%23History"  # an encoded '#section'
    return quote(title[:1].lower() + title[1:].replace(" ", "_"), safe="_") + "#Notes"


def _sentence_pool(rng: np.random.Generator, n: int = 512) -> list[str]:
    words = np.array(_FILLER + _WORDS, dtype=object)
    out = []
    for _ in range(n):
        k = int(rng.integers(8, 24))
        s = " ".join(words[rng.integers(0, len(words), k)])
        out.append(s[:1].upper() + s[1:])
    return out


def write_synthetic_kilt(
    path: str | Path,
    n_pages: int,
    anchors_per_page: int = 30,
    seed: int = 0,
    shares: dict[str, float] | None = None,
    paragraphs_per_page: int = 6,
    chunk: int = 2000,
) -> dict[str, int]:
    """Write ``n_pages`` synthetic KILT pages to ``path`` (``.gz`` compresses); return counts.

    ``shares`` gives the fraction of anchors of each kind in :data:`KINDS` other than
    ``by_id`` (defaults: 8% by_href, 3% external, 2% missing_title, 1% missing_id,
    0.5% self).  The returned dict counts pages, anchors, bytes and anchors by kind.
    """
    share = {"by_href": 0.08, "external": 0.03, "missing_title": 0.02, "missing_id": 0.01, "self": 0.005}
    share.update(shares or {})
    kinds = [k for k in KINDS if k != "by_id"]
    cum = np.cumsum([share[k] for k in kinds])
    if cum[-1] >= 1:
        raise ValueError(f"anchor shares add up to {cum[-1]:.3f}; they must leave room for by_id anchors")
    rng = np.random.default_rng(seed)
    pool = _sentence_pool(rng)
    counts = {"pages": 0, "anchors": 0, **{k: 0 for k in KINDS}}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbytes = 0
    # A fast gzip level: the point is a compressed input, not a small one.
    with (gzip.open(path, "wb", compresslevel=3) if path.suffix == ".gz" else open(path, "wb")) as f:
        for lo in range(0, n_pages, chunk):
            hi = min(n_pages, lo + chunk)
            lines = [_page(i, rng, pool, n_pages, anchors_per_page, paragraphs_per_page, cum, kinds, counts)
                     for i in range(lo, hi)]
            data = b"\n".join(lines) + b"\n"
            nbytes += len(data)
            f.write(data)
    counts["pages"] = n_pages
    counts["bytes"] = nbytes
    return counts


def _page(i, rng, pool, n_pages, per_page, paras, cum, kinds, counts) -> bytes:
    title = page_title(i)
    n_anchors = int(rng.integers(per_page // 2, per_page + per_page // 2 + 1)) if per_page else 0
    # One vector draw per page keeps the generator fast: targets are skewed towards
    # low indices (a few hubs, a long tail), like real in-degree.
    targets = (rng.pareto(1.2, n_anchors) * n_pages / 50).astype(np.int64) % max(n_pages, 1)
    kind_idx = np.searchsorted(cum, rng.random(n_anchors), side="right")
    sent = rng.integers(0, len(pool), n_anchors + 2 * paras)
    variants = rng.integers(0, 4, n_anchors)
    where = np.sort(rng.integers(1, paras + 1, n_anchors))
    text = [title + "\n"]
    anchors = []
    a = 0
    for p in range(1, paras + 1):
        parts = [pool[sent[n_anchors + 2 * p - 2]]]
        pos = len(parts[0])
        while a < n_anchors and where[a] == p:
            kind = "by_id" if kind_idx[a] >= len(kinds) else kinds[kind_idx[a]]
            counts[kind] += 1
            t = int(targets[a])
            tgt_title, tgt_id, href = page_title(t), page_id(t), None
            if kind == "self":
                tgt_title, tgt_id = title, page_id(i)
            elif kind == "by_href":
                tgt_id = None
            elif kind == "external":
                tgt_title, tgt_id, href = f"www.example.org/{t}", None, f"https://www.example.org/{t}"
            elif kind == "missing_title":
                tgt_title, tgt_id = f"Lost {tgt_title}", None
            elif kind == "missing_id":
                tgt_id = str(10**9 + t)
            if href is None:
                href = _href(tgt_title, int(variants[a]))
            surface = tgt_title if variants[a] != 3 else tgt_title[:1].lower() + tgt_title[1:]
            start = pos + 1
            parts.append(" " + surface)
            pos = start + len(surface)
            anchors.append({"text": surface, "href": href, "paragraph_id": p, "start": start, "end": pos,
                            "wikipedia_title": tgt_title if tgt_id else None, "wikipedia_id": tgt_id})
            filler = " " + pool[sent[a]].lower()
            parts.append(filler)
            pos += len(filler)
            a += 1
        parts.append(" " + pool[sent[n_anchors + 2 * p - 1]].lower() + ".\n")
        text.append("".join(parts))
    counts["anchors"] += n_anchors
    rec = {
        "_id": page_id(i),
        "wikipedia_id": page_id(i),
        "wikipedia_title": title,
        "text": text,
        "anchors": anchors,
        "categories": "Synthetic pages,Category " + str(i % 97),
        "history": {"revid": 900000 + i, "timestamp": "2019-07-01T00:00:00Z", "parentid": 0, "pre_dump": True,
                    "pageid": int(page_id(i)), "url": f"https://en.wikipedia.org/w/index.php?title={quote(title)}&oldid={900000 + i}"},
    }
    if i % 3:
        rec["wikidata_info"] = {"wikidata_id": f"Q{i + 10}", "description": f"synthetic page number {i}",
                                **({"aliases": [title.lower(), f"P{i}"]} if i % 2 else {})}
    return orjson.dumps(rec)
