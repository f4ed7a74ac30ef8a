"""Small hand-made corpora for the question validator tests, built in code.

``build(root, pages, links, walks)`` writes ``corpus/pages`` (with titles, descriptions and
paragraphs), ``corpus/links`` (each anchor found in its source page's paragraphs) and,
optionally, ``walks`` (each hop's evidence the link's paragraph), committed as if the
ingest and walks stages had run.  No graph stage is committed: the validators then read
``corpus/links`` (the fallback of :func:`synth.questions.links.load_graph`).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from helpers.linkcorpus import write_ingest
from helpers.walkstore import commit_stage
from synth.engine.records import LINK_SCHEMA, PAGE_SCHEMA, Evidence, Walk
from synth.engine.store import Store


def _page(pid: str, title: str, description: str | None, paragraphs: list[str]) -> dict:
    return {"page_id": pid, "title": title, "paragraphs": paragraphs, "description": description,
            "aliases": None, "wikidata_id": None, "categories": None, "url": None,
            "n_chars": sum(map(len, paragraphs))}


def build(root, pages: dict[str, tuple[str, str | None, list[str]]], links: list[tuple[str, str, str]],
          walks: list[list[str]] = ()) -> Store:
    """A store of ``pages`` (id -> (title, description, paragraphs)) and ``links`` ((src, dst, anchor)):
    the anchor must occur in one of the source's paragraphs.  ``walks`` are paths of page ids."""
    store = Store(root)
    link_rows, evidence = [], {}
    for src, dst, anchor in links:
        paras = pages[src][2]
        k = next(i for i, p in enumerate(paras) if anchor in p)
        start = paras[k].index(anchor)
        link_rows.append({"src_id": src, "dst_id": dst, "paragraph_id": k + 1, "start": start,
                          "end": start + len(anchor), "anchor_text": anchor})
        evidence[(src, dst)] = Evidence(src, dst, k + 1, paras[k], anchor)
    table = pa.Table.from_pylist([_page(p, *v) for p, v in pages.items()], schema=PAGE_SCHEMA)
    write_ingest(store, table, pa.Table.from_pylist(link_rows, schema=LINK_SCHEMA))
    if walks:
        rows = [Walk(walk_id=f"w{i}", path=list(w), titles=[pages[p][0] for p in w],
                     hops=[evidence[(a, b)] for a, b in zip(w, w[1:])], slot=i) for i, w in enumerate(walks)]
        commit_stage(store, "walks", "walks", Walk.to_table(rows))
    return store


@pytest.fixture
def corpus():
    """The :func:`build` function."""
    return build
