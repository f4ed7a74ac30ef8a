"""The ``search`` tool: BM25 over the local index, the answer page masked (LiteResearcher)."""

from __future__ import annotations

from typing import Iterable

from synth.tools.config import ToolsConfig
from synth.tools.spec import ToolSpec, function_schema, hits_shown
from synth.tools.search import SearchIndex


def schema(cfg: ToolsConfig) -> dict:
    return function_schema(
        "search",
        "Search a local Wikipedia index (BM25 over whole pages). Returns a JSON list of "
        f"{{page_id, title, snippet}} (and the page's short description when it has one), best first; the "
        f"snippet is the page's best-matching passage (at most {cfg.snippet_chars} characters). Use keywords, "
        "not a question.",
        {
            "query": {"type": "string", "description": "Keywords to search for."},
            "k": {
                "type": "integer",
                "description": f"How many results (default {cfg.search_k}, at most {cfg.search_max_k}).",
                "minimum": 1,
                "maximum": cfg.search_max_k,
            },
        },
        ["query"],
    )


def run_search(index: SearchIndex, cfg: ToolsConfig, query: str, k: int | None = None,
               exclude: Iterable[str] = ()) -> list[dict]:
    """``[{page_id, title, snippet}]`` for ``query``, never returning a page in ``exclude``."""
    return index.search(query, k or cfg.search_k, exclude_page_ids=exclude, snippet_chars=cfg.snippet_chars)


SPEC = ToolSpec(name="search", schema=schema,
                run=lambda index, cfg, args, exclude: run_search(index, cfg, args["query"], args.get("k"), exclude),
                shown=hits_shown, text_arg="query", masked=True, aliases={"q": "query"})

__all__ = ["SPEC", "run_search", "schema"]
