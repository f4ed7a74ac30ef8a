"""Config of the agent's tools (``tools:``): the search / open / find environment.

These fields shape what a rollout *sees* (window sizes, result counts, masking),
so they belong in the content key of the stages that roll out or format traces.
They do not shape the index itself: the index holds every page's text whatever
these values are, so the ``index`` stage's key leaves them out.  The index writer's
settings and the tool server's limits below are operational (they change how fast the
index is built, or what the server accepts from a client, never what a page holds).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from synth.engine.config import Section, operational


class ToolsConfig(Section):
    """The local search environment of teacher rollouts and the tool server (LiteResearcher-style)."""

    page_chars: int = Field(
        2000, ge=200, le=100_000,
        description="Characters per window of `open`: a page is read in windows of this size, cut on whitespace.",
    )
    search_k: int = Field(5, ge=1, le=100, description="Results a `search` call returns when the agent gives no k.")
    search_max_k: int = Field(
        10, ge=1, le=100, description="Largest k an agent may ask of `search`; a larger k is an error for the agent. "
        "It is also how deep the question validators search (unless `questions.shortcut_k` is set higher): a page "
        "an agent's one search can return is a page the checks have looked for."
    )
    snippet_chars: int = Field(
        300, ge=40, le=5000,
        description="Characters of a search result's snippet: the best-matching paragraph, trimmed around the match.",
    )
    mask_answer_page: bool = Field(
        True,
        description="Source masking: a rollout's search never returns its question's answer page "
        "(the page can still be opened by title once the agent has found its name).",
    )
    extra_tools: list[str] = Field(
        default_factory=list,
        description="Optional tools offered besides search, open and find, by name: `multi_search` (several "
        "queries in one call, their hits merged, each hit naming the queries that found it; MultiSearch). "
        "[] offers the built-ins alone, the tools whose schemas the SFT rows so far store.",
    )
    multi_search_max_queries: int = Field(
        5, ge=1, le=20,
        description="Most queries one `multi_search` call may hold; more is an error for the agent. Each query "
        "returns k results as a `search` would, so the question checks' search depth still covers it.",
    )
    find_max_passages: int = Field(
        5, ge=1, le=100, description="Most passages (paragraphs) one `find` call returns, in page order."
    )
    index_heap_mb: int = operational(
        "Memory budget of the index writer in MiB, split across its threads (at least 64 per thread is used); "
        "more means fewer, larger segments.",
        256, ge=16, le=16_384,
    )
    index_threads: int = operational(
        "Indexing threads of the index writer (0: one per core, at most 8).", 0, ge=0, le=64
    )
    index_memory_limit: str = operational(
        "DuckDB memory limit for sorting the links each page lists by page (spills to disk past it).", "2GB")
    max_request_bytes: int = operational(
        "The tool server answers 413 to a request whose URL or body is larger than this (a query, a page "
        "name and a find pattern need a few hundred bytes).", 65_536, ge=1024, le=64 << 20)
    request_timeout_s: float = operational(
        "The tool server closes a connection that has not sent a whole request (its headers and body) this "
        "many seconds after it opened or after its previous answer: a half-sent request holds no slot for "
        "longer.", 10.0, gt=0, le=3600)
    idle_timeout_s: float = operational(
        "The tool server closes a keep-alive connection that sends nothing for this many seconds after an "
        "answer (uvicorn's `timeout_keep_alive`).", 5.0, gt=0, le=3600)

    @model_validator(mode="after")
    def _k_within_max(self) -> "ToolsConfig":
        if self.search_k > self.search_max_k:
            raise ValueError(f"search_k ({self.search_k}) must not exceed search_max_k ({self.search_max_k})")
        return self


__all__ = ["ToolsConfig"]
