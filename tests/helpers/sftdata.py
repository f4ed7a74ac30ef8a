"""Small SFT fixtures made in code: a pages table, the demo tokenizer trained on it, and an
``sft`` table of realistic tool-calling rows (``helpers.sftrows``), laid out as a hopforge DIR."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from synth.engine.records import PAGE_SCHEMA

# A 2-layer Qwen2 small enough that a dozen steps take seconds on two shared cores.
TEST_INIT = ('{"model_type": "qwen2", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, '
             '"num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 4096, '
             '"tie_word_embeddings": true}')


def pages(n: int = 300) -> list[dict]:
    """``n`` real Wikipedia summaries from the demo corpus package."""
    from helpers.sftrows import demo_pages

    return demo_pages(n)


def pages_table(rows: list[dict]) -> pa.Table:
    """Page dicts (title, paragraphs) as a ``PAGE_SCHEMA`` table."""
    return pa.Table.from_pylist([{"page_id": str(p.get("page_id", i)), "title": p["title"],
                                  "paragraphs": p["paragraphs"], "description": None, "aliases": None,
                                  "wikidata_id": None, "categories": None, "url": None,
                                  "n_chars": sum(map(len, p["paragraphs"]))} for i, p in enumerate(rows)],
                                schema=PAGE_SCHEMA)


def make_dir(root: Path, n_rows: int = 24, seed: int = 3, extra_rows: list[dict] | None = None,
             n_pages: int = 300, **row_kw) -> Path:
    """A hopforge DIR with ``tokenizer`` (demo BPE) and ``sft`` (realistic rows, plus ``extra_rows``)."""
    from helpers.sftrows import make_rows, write_sft_table
    from synth.tokenizer.tokens import train_demo_tokenizer

    ps = pages(n_pages)
    root.mkdir(parents=True, exist_ok=True)
    train_demo_tokenizer(pages_table(ps), root / "tokenizer")
    row_kw.setdefault("max_hops", 2)
    row_kw.setdefault("page_chars", 500)
    rows = make_rows(ps, n_rows, seed=seed, **row_kw) + list(extra_rows or [])
    write_sft_table(rows, root / "sft")
    return root
