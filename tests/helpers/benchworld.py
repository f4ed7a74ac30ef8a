"""The pages the hand-written benchmark fixtures (``tests/helpers/benchmarks/``) name, as a tiny corpus.

The fixtures are written by hand in each benchmark's published schema; their titles name pages of
this world (page id -> title), and a few of their titles name no page (counted as not resolved).
``resolver()`` stands in for :func:`synth.decontam.index.corpus_resolver` over it.
"""

from __future__ import annotations

from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent / "benchmarks"

TITLES = ["Scott Derrickson", "Ed Wood", "Woodson, Arkansas", "Doctor Strange (2016 film)", "Benedict Cumberbatch",
          "Marvel Studios", "Polish-Russian War (film)", "Xawery Żuławski", "Małgorzata Braunek", "Argentina",
          "Lionel Messi", "FC Barcelona", "Camp Nou", "Rosario, Santa Fe", "President of the United States",
          "James Buchanan", "Harriet Lane", "Michael Giacchino", "Burbank, California", "Unrelated A", "Unrelated B"]
PAGES = {str(100 + i): t for i, t in enumerate(TITLES)}
ID = {t: p for p, t in PAGES.items()}


def resolver():
    """Title -> page id over the world, exactly (as the corpus resolver does over ``corpus/pages``)."""
    return lambda titles: {t: ID[t] for t in titles if t in ID}


def fixture(name: str) -> Path:
    """The path of one hand-written benchmark file."""
    return BENCHMARKS / name
