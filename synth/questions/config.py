"""Config of question synthesis (``questions:``)."""

from __future__ import annotations

from pydantic import Field

from synth.engine.config import Section, operational


class QuestionsConfig(Section):
    from_walks: bool = Field(True, description="Write one question per walk (through every entity of the path).")
    from_subgraphs: bool = Field(True, description="Also write one question per expanded subgraph, when `subgraphs` exists.")
    min_subgraph_hops: int = Field(3, ge=1, description="A subgraph question must chain at least this many links.")
    min_words: int = Field(8, ge=1, description="Shorter questions are dropped (`length`).")
    max_words: int = Field(220, ge=1, description="Longer questions are dropped (`length`); also told to the teacher.")
    obfuscate: bool = Field(False, description="Rewrite pass that blurs entity names into descriptions (WebSailor/ASearcher).")
    check_closed_book: bool = Field(False, description="Drop a question the teacher answers without tools (`too_easy`).")
    check_solvable: bool = Field(False, description="Drop a question the teacher fails with the gold pages in context (`unsolvable`).")
    shard_size: int = operational("Sources per shard (a unit of work for a flow task, and of resume).", 256, ge=1)
    check_shortcut: bool = Field(True, description="Drop a question when one search for its text returns the answer page in the top `shortcut_k` (`shortcut`).")
    shortcut_k: int = Field(5, ge=1, le=100, description="Depth of the shortcut search.")
