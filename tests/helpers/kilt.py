"""Tiny KILT knowledge sources, written by code, in both layouts.

* :func:`page` / :func:`anchor` build records in the KILT JSON Lines layout
  (``_id``, ``text`` with the title first, anchors with exact character offsets);
* :func:`write_kilt_jsonl` writes them (plain, ``.gz`` or ``.bz2``), with raw lines
  (bad JSON, blank lines...) mixed in where a test wants them;
* :func:`to_hf` converts a record to the Hugging Face ``facebook/kilt_wikipedia``
  layout exactly as that dataset's builder did; :func:`write_hf_parquet` and
  :func:`write_hf_jsonl` write it;
* :func:`rules_corpus` is a small corpus with one anchor per link rule, and
  :data:`RULES_LINKS` / :data:`RULES_DROPS` what ingesting it must give.
"""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

HF_SCHEMA = pa.schema([
    ("kilt_id", pa.string()), ("wikipedia_id", pa.string()), ("wikipedia_title", pa.string()),
    ("text", pa.struct([("paragraph", pa.list_(pa.string()))])),
    ("anchors", pa.struct([("paragraph_id", pa.list_(pa.int32())), ("start", pa.list_(pa.int32())),
                           ("end", pa.list_(pa.int32())), ("text", pa.list_(pa.string())),
                           ("href", pa.list_(pa.string())), ("wikipedia_title", pa.list_(pa.string())),
                           ("wikipedia_id", pa.list_(pa.string()))])),
    ("categories", pa.string()),
    ("wikidata_info", pa.struct([("description", pa.string()), ("enwikiquote_title", pa.string()),
                                 ("wikidata_id", pa.string()), ("wikidata_label", pa.string()),
                                 ("wikipedia_title", pa.string()),
                                 ("aliases", pa.struct([("alias", pa.list_(pa.string()))]))])),
    ("history", pa.struct([("pageid", pa.int32()), ("parentid", pa.int32()), ("revid", pa.int32()),
                           ("pre_dump", pa.bool_()), ("timestamp", pa.string()), ("url", pa.string())])),
])


def anchor(text: list[str], p: int, surface: str, href: str, wid: str | None, occurrence: int = 0) -> dict:
    """A KILT anchor for the ``occurrence``-th ``surface`` in ``text[p]`` (offsets computed)."""
    start = -1
    for _ in range(occurrence + 1):
        start = text[p].index(surface, start + 1)
    return {"text": surface, "href": href, "paragraph_id": p, "start": start, "end": start + len(surface),
            "wikipedia_title": None, "wikipedia_id": wid}


def page(pid: str, title: str, paragraphs: list[str], anchors: list[tuple] = (), **extra: Any) -> dict:
    """A KILT record: ``text = [title + "\\n", *paragraphs]``; anchors are ``(p, surface, href, wid)`` tuples."""
    text = [title + "\n", *paragraphs]
    rec = {"_id": pid, "wikipedia_id": pid, "wikipedia_title": title, "text": text,
           "anchors": [anchor(text, *a) for a in anchors], "categories": f"Category of {title}"}
    rec.update(extra)
    return rec


def kilt_lines(items: Iterable[dict | str | bytes]) -> bytes:
    """JSON Lines bytes: dicts are dumped, str/bytes are written as the raw line."""
    out = []
    for it in items:
        if isinstance(it, dict):
            out.append(json.dumps(it, ensure_ascii=False).encode())
        else:
            out.append(it.encode() if isinstance(it, str) else it)
    return b"\n".join(out) + b"\n"


def write_kilt_jsonl(path: Path, items: Iterable[dict | str | bytes]) -> Path:
    """Write KILT JSON Lines to ``path``; ``.gz`` / ``.bz2`` suffixes compress."""
    data = kilt_lines(items)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        data = gzip.compress(data)
    elif path.suffix == ".bz2":
        data = bz2.compress(data)
    path.write_bytes(data)
    return path


def to_hf(rec: dict) -> dict:
    """``rec`` in the Hugging Face layout, as ``facebook/kilt_wikipedia``'s builder wrote it."""
    wd = dict(rec.get("wikidata_info") or {})
    hist = dict(rec.get("history") or {})
    keys = ("paragraph_id", "start", "end", "text", "href", "wikipedia_title", "wikipedia_id")
    return {
        "kilt_id": rec["_id"], "wikipedia_id": rec.get("wikipedia_id"), "wikipedia_title": rec["wikipedia_title"],
        "text": {"paragraph": rec["text"]},
        # the builder used anchor.get(k, "") : a missing key becomes "", an explicit null stays null
        "anchors": {k: [a.get(k, "") for a in rec.get("anchors", [])] for k in keys},
        "categories": rec.get("categories"),
        "wikidata_info": {**{k: "" if wd.get(k) is None else wd[k] for k in
                             ("description", "enwikiquote_title", "wikidata_id", "wikidata_label", "wikipedia_title")},
                          "aliases": {"alias": wd.get("aliases") or []}},
        "history": {"pre_dump": bool(hist.get("pre_dump", False)),
                    **{k: -1 if hist.get(k) is None else hist[k] for k in ("pageid", "parentid", "revid")},
                    **{k: "" if hist.get(k) is None else hist[k] for k in ("timestamp", "url")}},
    }


def write_hf_parquet(path: Path, records: list[dict], row_group_size: int | None = None) -> Path:
    """Write KILT records as HF-layout Parquet (the dataset's Arrow types)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([to_hf(r) for r in records], schema=HF_SCHEMA), path,
                   row_group_size=row_group_size)
    return path


def write_hf_jsonl(path: Path, records: list[dict]) -> Path:
    """Write KILT records as HF-layout JSON Lines (what ``Dataset.to_json`` gives)."""
    return write_kilt_jsonl(path, [to_hf(r) for r in records])


def rules_corpus() -> list[dict]:
    """Six pages whose anchors exercise every link rule once (see RULES_LINKS / RULES_DROPS)."""
    alpha_p = ["Alpha cites Beta, Gamma ray, Delta and Café society.\n",
               "Section::::History.\n",
               "BULLET::::- Delta again, Nowhere, the web, Alpha itself, and a broken one.\n"]
    return [
        page("1", "Alpha", alpha_p, [
            (1, "Beta", "Beta", "2"),                        # by id
            (1, "Gamma ray", "gamma_ray#Physics", None),     # null id: href -> "Gamma ray", first page wins
            (1, "Delta", "Delta", "999"),                    # id set but not a page: no title fallback
            (1, "Café society", "Caf%C3%A9_society", ""),    # empty id counts as null: percent-decoded href
            (3, "Delta", "Delta", ""),                       # empty id, plain href
            (3, "Nowhere", "Nowhere", None),                 # null id, title not in the corpus
            (3, "the web", "https://example.org/web", None), # external
            (3, "Alpha", "Alpha", "1"),                      # self link
            (0, "Alpha", "Beta", "2"),                       # paragraph 0 is the title: kept as 0
        ], history={"pageid": 1, "revid": 10, "url": "https://en.wikipedia.org/wiki?curid=1"},
            wikidata_info={"wikidata_id": "Q1", "description": "first letter", "aliases": ["A", "Alef"]}),
        page("2", "Beta", ["Beta follows Alpha.\n"], [(1, "Alpha", "Alpha", "1")]),
        page("3", "Gamma ray", ["Gamma ray is radiation.\n"]),
        page("4", "Delta", ["Delta is a letter.\n"], wikidata_info={"wikidata_id": "Q4"}),
        page("5", "Café society", ["Café society met in cafés.\n"]),
        page("6", "Gamma ray", ["A second page with the same title.\n"], [(1, "second", "Beta", "2")]),
    ]


def with_bad_anchor(records: list[dict]) -> list[dict]:
    """``records`` with one anchor of page "1" whose paragraph_id is just past its text (a bad_anchor)."""
    recs = json.loads(json.dumps(records))
    recs[0]["anchors"].append({"text": "x", "href": "Beta", "paragraph_id": len(recs[0]["text"]), "start": 0, "end": 1,
                               "wikipedia_title": "Beta", "wikipedia_id": "2"})
    return recs


# (src_id, dst_id, paragraph_id, anchor_text) in output order, for with_bad_anchor(rules_corpus()).
RULES_LINKS = [("1", "2", 1, "Beta"), ("1", "3", 1, "Gamma ray"), ("1", "5", 1, "Café society"),
               ("1", "4", 3, "Delta"), ("1", "2", 0, "Alpha"), ("2", "1", 1, "Alpha"), ("6", "2", 1, "second")]
RULES_DROPS = {"external": 1, "unresolved": 2, "self": 1, "bad_anchor": 1}
RULES_ANCHORS = 12
