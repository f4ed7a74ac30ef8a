"""A store holding pages and hand-made walks, for the question and rollout tests.

``make_chain_store`` writes ``n`` disjoint chains of ``hops`` links.  Chain ``c`` has
pages ``c{c}-{i}`` titled ``"{name} {c}-{i}"`` with a description, and page ``i``'s
paragraph mentions page ``i+1`` by title, so every walk hop has real evidence.  The
ingest and walks stages are committed as if they had run.
"""

from __future__ import annotations

import pyarrow as pa

from synth.engine.records import LINK_SCHEMA, PAGE_SCHEMA, Evidence, Walk
from synth.engine.store import Store

from helpers.linkcorpus import write_ingest

NAMES = ["Alder", "Birch", "Cedar", "Dogwood", "Elm", "Fir", "Ginkgo", "Hazel", "Ironwood", "Juniper", "Kapok", "Larch"]
KINDS = ["river in Ruritania", "village on a hill", "painter of seascapes", "medieval castle", "mountain pass",
         "ferry company", "folk dance", "market town", "lighthouse keeper", "sailing ship"]


def commit_stage(store: Store, stage: str, rel: str, table: pa.Table, key: str | None = None) -> None:
    """Commit ``table`` as output ``rel`` of ``stage`` (no real run)."""
    key = key or f"fake-{stage}"
    from synth.engine.store import write_parquet_atomic

    write_parquet_atomic(table, store.partial_dir(stage, key) / rel / "part-00000.parquet")
    report = {"stage": stage, "key": key, "input": table.num_rows, "output": table.num_rows, "dropped": {}}
    store.commit(stage, key, [rel], {"key": key}, report)


def chain_title(c: int, i: int) -> str:
    return f"{NAMES[c % len(NAMES)]} {c}-{i}"


def make_chain_store(root, n: int = 4, hops: int = 3, extra_pages: int = 0) -> Store:
    """A store with ``n`` chains of ``hops`` links, committed ``ingest`` and ``walks`` stages."""
    store = Store(root)
    pages, links, walks = [], [], []
    for c in range(n):
        ids = [f"c{c}-{i}" for i in range(hops + 1)]
        evidence = []
        for i, pid in enumerate(ids):
            paras = [f"{chain_title(c, i)} is a {KINDS[(c + i) % len(KINDS)]} of note."]
            if i < hops:
                nxt = chain_title(c, i + 1)
                para = f"It is closely associated with {nxt}, which locals visit often."
                start = para.index(nxt)
                paras.append(para)
                links.append({"src_id": pid, "dst_id": ids[i + 1], "paragraph_id": 2, "start": start,
                              "end": start + len(nxt), "anchor_text": nxt})
                evidence.append(Evidence(pid, ids[i + 1], paragraph_id=2, paragraph=para, anchor_text=nxt))
            pages.append({"page_id": pid, "title": chain_title(c, i), "paragraphs": paras,
                          "description": f"{KINDS[(c + i) % len(KINDS)]}".capitalize(), "aliases": None,
                          "wikidata_id": None, "categories": None, "url": None, "n_chars": sum(map(len, paras))})
        walks.append(Walk(walk_id=f"w{c}", path=ids, titles=[chain_title(c, i) for i in range(hops + 1)],
                          hops=evidence, slot=c))
    for j in range(extra_pages):
        paras = [f"Filler page {j} talks about weather, trade and {NAMES[j % len(NAMES)]} trees in general."]
        pages.append({"page_id": f"x{j}", "title": f"Filler {j}", "paragraphs": paras, "description": None,
                      "aliases": None, "wikidata_id": None, "categories": None, "url": None,
                      "n_chars": len(paras[0])})
    write_ingest(store, pa.Table.from_pylist(pages, schema=PAGE_SCHEMA), pa.Table.from_pylist(links, schema=LINK_SCHEMA))
    commit_stage(store, "walks", "walks", Walk.to_table(walks))
    return store
