"""A small corpus for the search, tools and tool-server tests, made in code.

It holds what those tests need to tell right from wrong: titles that contain one
another ("Paris", "Paris Hilton", "Paris, Texas"), KILT markup, a long page to page
through, a page whose best passage is not its first, accented and CJK text, one
page with no text (dropped by the index), and twelve volcano pages so that a masked
search still has k results to return.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from synth.engine.records import PAGE_SCHEMA
from synth.engine.store import write_parquet_atomic


def _page(page_id: str, title: str, paragraphs: list[str], **kw) -> dict:
    return {"page_id": page_id, "title": title, "paragraphs": paragraphs, "description": kw.get("description"),
            "aliases": kw.get("aliases"), "wikidata_id": None, "categories": None, "url": kw.get("url"),
            "n_chars": sum(map(len, paragraphs))}


LONG_PARAGRAPHS = [
    f"Section::::Part {i}.\n" if i % 5 == 0 else
    f"Paragraph {i} of the long page talks about harbour number {i}, its ships and its lighthouse keeper.\n"
    for i in range(60)
]

PAGES = [
    _page("100", "Paris", ["Paris is the capital and most populous city of France.\n", "Section::::History.\n",
                           "The Parisii, a Celtic tribe, lived on the Seine from around 250 BC.\n",
                           "BULLET::::- Eiffel Tower\n", "BULLET::::- Louvre\n"],
          description="capital of France", aliases=["City of Light"],
          url="https://en.wikipedia.org/wiki/Paris"),
    _page("101", "Paris Hilton", ["Paris Hilton is an American media personality and businesswoman.\n",
                                  "She is a great-granddaughter of Conrad Hilton, the founder of Hilton Hotels.\n"]),
    _page("102", "Paris, Texas", ["Paris is a city in Lamar County, Texas, United States.\n",
                                  "It has a replica of the Eiffel Tower wearing a red cowboy hat.\n"]),
    _page("103", "Obsidian", ["Obsidian is a naturally occurring volcanic rock.\n",
                              "It forms when lava cools quickly with minimal crystal growth.\n",
                              "Section::::Uses.\n",
                              "Knappers shaped obsidian glass into blades sharper than surgical steel; "
                              "obsidian glass blades are still used by some surgeons today.\n",
                              "The word comes from a Roman named Obsius, who found a similar stone in Ethiopia.\n"]),
    _page("104", "Zürich", ["Zürich is the largest city in Switzerland.\n",
                            "Der Zürichsee liegt bei Zürich; 東京 ist weit entfernt.\n"]),
    _page("105", "Long harbour page", LONG_PARAGRAPHS),
    _page("106", "Blank page", ["", "   \n", "Section::::\n"]),
    _page("107", "Lighthouse keeper", ["A lighthouse keeper tends the light of a lighthouse.\n"]),
    _page("109", "Blue Fjord", ["Section::::Overview.\n", "A narrow inlet on a rocky coast.\n"]),
    _page("108", "Mount Quillar", ["Mount Quillar is a dormant stratovolcano in the Andes.\n",
                                   "Its last eruption, in 1612, buried the village of Tarnoch under ash.\n"]),
]
for i in range(12):
    PAGES.append(_page(str(200 + i), f"Volcano {i}", [f"Volcano {i} is an active volcano with a crater lake.\n",
                                                      f"The volcano erupted {i + 1} times in the last century.\n"]))


def pages_table() -> pa.Table:
    """The corpus as a ``corpus/pages`` table."""
    return pa.Table.from_pylist(PAGES, schema=PAGE_SCHEMA)


def write_pages(folder: Path, shards: int = 2) -> Path:
    """Write the corpus as ``shards`` Parquet files under ``folder``; returns ``folder``."""
    table = pages_table()
    step = -(-table.num_rows // shards)
    for i in range(shards):
        write_parquet_atomic(table.slice(i * step, step), Path(folder) / f"part-{i:05d}.parquet")
    return Path(folder)


def build_test_index(root: Path) -> Path:
    """Pages under ``root/pages`` and their index under ``root/index``; returns the index folder."""
    from synth.tools.search import build_index

    write_pages(root / "pages")
    build_index(root / "pages", root / "index", threads=1, heap_mb=32)
    return root / "index"


N_PAGES = len(PAGES)
N_EMPTY = 1  # "Blank page"
