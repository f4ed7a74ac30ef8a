"""The ``multi_search`` tool: several searches in one call, their hits merged (MultiSearch).

One call holds a list of queries; each runs as :mod:`synth.tools.agent.search` runs one, with the same
``k``, snippets and answer-page mask, and the hits come back as one list:

- a page found by several queries is listed once, at its best rank, with the snippet of the query that
  ranked it best;
- each hit names the queries that found it (``queries``, in the order the call gave them) and its best
  rank among them (``rank``, 1 = a query's top hit);
- the list is ordered by best rank, ties by the position of the query that ranked it best (a round-robin of the
  queries' result lists).

It is optional (``ToolSpec.optional``): a run offers it only when ``tools.extra_tools`` names it, so the
schemas of runs that do not, and the SFT rows they made, are unchanged.
"""

from __future__ import annotations

from typing import Iterable

from synth.tools.agent.search import run_search
from synth.tools.analysis import clean_text
from synth.tools.base import ToolError
from synth.tools.config import ToolsConfig
from synth.tools.spec import ToolSpec, function_schema, hits_shown
from synth.tools.search import SearchIndex

NAME = "multi_search"


def schema(cfg: ToolsConfig) -> dict:
    return function_schema(
        NAME,
        f"Run several searches of the local Wikipedia index at once (BM25 over whole pages), at most "
        f"{cfg.multi_search_max_queries} queries, and get their results merged: a JSON list of "
        "{page_id, title, snippet, rank, queries} (and the page's short description when it has one), each page "
        "once, best first; queries are the queries that found the page, rank its best rank among them (1 = a "
        f"query's top result). Each query returns k results (snippets of at most {cfg.snippet_chars} characters). "
        "Use keywords, not questions; give different angles on what you look for.",
        {
            "queries": {
                "type": "array",
                "items": {"type": "string"},
                "description": f"The keyword queries, 1 to {cfg.multi_search_max_queries} of them.",
                "minItems": 1,
                "maxItems": cfg.multi_search_max_queries,
            },
            "k": {
                "type": "integer",
                "description": f"How many results per query (default {cfg.search_k}, at most {cfg.search_max_k}).",
                "minimum": 1,
                "maximum": cfg.search_max_k,
            },
        },
        ["queries"],
    )


def run_multi_search(index: SearchIndex, cfg: ToolsConfig, queries: list[str], k: int | None = None,
                     exclude: Iterable[str] = ()) -> list[dict]:
    """The merged hits of ``queries`` (see the module docstring), never a page in ``exclude``.

    The same query given twice (after whitespace and case) runs once; ``queries`` must hold 1 to
    ``tools.multi_search_max_queries`` strings, else :class:`ToolError` tells the agent what to change."""
    queries = distinct_queries(queries, cfg.multi_search_max_queries)
    exclude = tuple(exclude)
    best: dict[str, dict] = {}
    order: dict[str, tuple[int, int]] = {}
    for qi, query in enumerate(queries):
        for rank, hit in enumerate(run_search(index, cfg, query, k, exclude), 1):
            pid = hit["page_id"]
            if pid not in best:
                best[pid] = {**hit, "rank": rank, "queries": [query]}
                order[pid] = (rank, qi)
                continue
            merged = best[pid]
            merged["queries"].append(query)
            if rank < merged["rank"]:  # the snippet of the query that ranked the page best
                best[pid] = {**hit, "rank": rank, "queries": merged["queries"]}
                order[pid] = (rank, qi)
    return [best[pid] for pid in sorted(best, key=lambda p: order[p])]


def distinct_queries(queries: object, max_queries: int) -> list[str]:
    """``queries`` checked (a list of 1 to ``max_queries`` non-empty strings) and with repeats dropped (the
    first of each, whitespace and case ignored); :class:`ToolError` names what is wrong."""
    if not isinstance(queries, list):
        raise ToolError(f"{NAME}: 'queries' must be a list of strings, e.g. [\"first query\", \"second query\"]; "
                        f"got {type(queries).__name__}")
    if not queries:
        raise ToolError(f"{NAME}: 'queries' is empty; give 1 to {max_queries} queries")
    if len(queries) > max_queries:
        raise ToolError(f"{NAME}: 'queries' holds {len(queries)} queries; at most {max_queries} are allowed in one "
                        "call (split them over several calls)")
    out, seen = [], set()
    for i, q in enumerate(queries):
        if not isinstance(q, str):
            raise ToolError(f"{NAME}: 'queries' must be a list of strings; item {i + 1} is {type(q).__name__}")
        q = clean_text(q).strip()
        if not q:
            raise ToolError(f"{NAME}: query {i + 1} of 'queries' is empty")
        key = " ".join(q.casefold().split())
        if key not in seen:
            seen.add(key)
            out.append(q)
    return out


SPEC = ToolSpec(name=NAME, schema=schema,
                run=lambda index, cfg, args, exclude: run_multi_search(index, cfg, args["queries"], args.get("k"),
                                                                       exclude),
                shown=hits_shown, text_arg="queries", masked=True, optional=True)

__all__ = ["NAME", "SPEC", "distinct_queries", "run_multi_search", "schema"]
