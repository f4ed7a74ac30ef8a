"""A run folder whose corpus holds near-miss pages: the gold answers of a few questions, and pages whose titles
a near-miss teacher answers with ("New York City" for New York, "Milky Way (disambiguation)" for Milky Way)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from synth.engine.records import LINK_SCHEMA, PAGE_SCHEMA, Trace
from synth.engine.store import Store

from .filterstore import make_store, publish
from .traces import make_question

# question id -> (answer page id, its title)
GOLDS = {"q-ny": ("p-ny", "New York"), "q-gw": ("p-gw", "George Washington"),
         "q-wc": ("p-wc", "1998 FIFA World Cup"), "q-rf": ("p-rf", "List of rivers of France"),
         "q-mw": ("p-mw", "Milky Way"), "q-ao": ("p-ao", "Arctic Ocean"), "q-zu": ("p-zu", "Zürich"),
         "q-ad": ("p-ad", "Albrecht Dürer"), "q-ab": ("p-ab", "Acid–base reaction")}
# question id -> the title of another page of the corpus a near-miss teacher gives as the answer
NEAR_MISS = {"q-ny": "New York City", "q-gw": "George Washington Carver", "q-wc": "1998 FIFA World Cup Final",
             "q-rf": "List of rivers of Germany", "q-mw": "Milky Way (disambiguation)", "q-ao": "Arctic Ocean (1757)"}
# question id -> the right page written in ASCII
FOLDED = {"q-zu": "Zurich", "q-ad": "Albrecht Durer", "q-ab": "Acid-base reaction"}
OTHERS = [*NEAR_MISS.values(), "Zürich (canton)", "York", "Oceanography"]


def page(pid: str, title: str, aliases: list[str] | None = None) -> dict:
    """A ``corpus/pages`` row."""
    return {"page_id": pid, "title": title, "paragraphs": [f"{title} is a page."], "description": None,
            "aliases": aliases, "wikidata_id": None, "categories": None, "url": None, "n_chars": 20}


def questions(aliases: dict[str, list[str]] | None = None, split: str = "sft") -> list:
    """One question per gold answer, a 1-hop chain from the page "Start"."""
    aliases = aliases or {}
    return [make_question(qid, path=["p-start", pid], titles=["Start", title], aliases=aliases.get(qid), split=split)
            for qid, (pid, title) in GOLDS.items()]


def answer_store(root: Path, *, aliases: dict[str, list[str]] | None = None, links: list[tuple] = (),
                 traces: list[Trace] = (), split: str = "sft", tokenizer: bool = False) -> Store:
    """The run folder: ``questions``, ``traces``, and ``corpus/pages`` + ``corpus/links`` as the ingest stage's
    (``links``: ``(src, dst, anchor text)``; New York's page has the alias "NYC")."""
    store = make_store(root, questions(aliases, split), list(traces), tokenizer=tokenizer)
    pages = [page("p-start", "Start")] + [page(pid, t, ["NYC"] if pid == "p-ny" else None)
                                          for pid, t in GOLDS.values()]
    pages += [page(f"o{i}", t) for i, t in enumerate(OTHERS)]
    link_rows = [{"src_id": s, "dst_id": d, "paragraph_id": 1, "start": 0, "end": len(a), "anchor_text": a}
                 for s, d, a in links]
    publish(store, "ingest", {"corpus/pages": pa.Table.from_pylist(pages, schema=PAGE_SCHEMA),
                              "corpus/links": pa.Table.from_pylist(link_rows, schema=LINK_SCHEMA)})
    return store


__all__ = ["FOLDED", "GOLDS", "NEAR_MISS", "OTHERS", "answer_store", "page", "questions"]
