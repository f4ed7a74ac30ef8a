"""Tiny corpora for the graph, walk and expansion tests, made in code.

``make_corpus`` turns a list of page-id edges into ``corpus/pages`` and ``corpus/links``
tables in the ingest's schemas, with real paragraphs in which every anchor sits at
``paragraphs[paragraph_id - 1][start:end]``.  ``write_ingest`` commits them into a
:class:`~synth.engine.store.Store` as if the ingest stage had run, so later stages can be run
through :func:`synth.engine.stage.run_stage` without depending on the ingest code.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa

from synth.engine.records import LINK_SCHEMA, PAGE_SCHEMA
from synth.engine.store import Store, write_parquet_atomic


def title_of(page_id: str) -> str:
    """The default title of a test page."""
    return f"Page {page_id}"


def make_corpus(edges, pages=(), titles: dict | None = None, repeat: dict | None = None) -> tuple[pa.Table, pa.Table]:
    """Pages and links for directed ``edges`` (pairs of page ids).

    ``pages`` adds pages without out-links; ``titles`` overrides titles; ``repeat`` maps an
    edge to how many anchors it gets (the later ones in later paragraphs, so the first
    anchor is the one in the lowest paragraph).
    """
    titles = dict(titles or {})
    out = defaultdict(list)
    ids: list[str] = []
    for p in list(pages) + [x for e in edges for x in e]:
        if p not in out:
            out[p] = []
            ids.append(p)
    for s, d in edges:
        out[s].append(d)
    page_rows, link_rows = [], []
    for p in ids:
        paragraphs = [f"{titles.get(p, title_of(p))} is a test page."]
        for d in out[p]:
            for k in range((repeat or {}).get((p, d), 1)):
                anchor = titles.get(d, title_of(d))
                para = f"Section {len(paragraphs)}: it mentions {anchor} here ({k})."
                start = para.index(anchor)
                paragraphs.append(para)
                link_rows.append({"src_id": p, "dst_id": d, "paragraph_id": len(paragraphs), "start": start,
                                  "end": start + len(anchor), "anchor_text": anchor})
        page_rows.append({"page_id": p, "title": titles.get(p, title_of(p)), "paragraphs": paragraphs,
                          "description": None, "aliases": None, "wikidata_id": None, "categories": None,
                          "url": None, "n_chars": sum(map(len, paragraphs))})
    return pa.Table.from_pylist(page_rows, schema=PAGE_SCHEMA), pa.Table.from_pylist(link_rows, schema=LINK_SCHEMA)


def write_ingest(store: Store, pages: pa.Table, links: pa.Table, key: str = "fake-ingest", shards: int = 2) -> None:
    """Commit ``pages`` and ``links`` into ``store`` as the output of an ``ingest`` stage."""
    partial = store.partial_dir("ingest", key)
    for rel, table in (("corpus/pages", pages), ("corpus/links", links)):
        for i, part in enumerate(np.array_split(np.arange(table.num_rows), shards)):
            write_parquet_atomic(table.take(pa.array(part, pa.int64())), partial / rel / f"part-{i:05d}.parquet")
    report = {"stage": "ingest", "key": key, "input": pages.num_rows, "output": pages.num_rows, "dropped": {}}
    store.commit("ingest", key, ["corpus/pages", "corpus/links"], {"key": key}, report)


def random_edges(n: int, m: int, seed: int = 0, prefix: str = "p") -> list[tuple[str, str]]:
    """About ``m`` random directed edges (duplicates and self-loops included) over ``n`` pages."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    return [(f"{prefix}{a}", f"{prefix}{b}") for a, b in zip(src.tolist(), dst.tolist())]


def graph_store(root, edges, cfg, shuffle_links: bool = False, **corpus_kw) -> Store:
    """A store under ``root/out`` with the corpus of ``edges`` ingested and the ``graph`` stage run.

    ``shuffle_links`` writes the links in a random order (the graph must not depend on it).
    """
    import pyarrow as pa

    from synth.engine.runner import run_stage
    from flows.stages import GRAPH

    pages, links = make_corpus(edges, **corpus_kw)
    if shuffle_links:
        links = links.take(pa.array(np.random.default_rng(0).permutation(links.num_rows)))
    store = Store(root / "out")
    write_ingest(store, pages, links)
    run_stage(GRAPH, cfg, store, progress=False)
    return store
