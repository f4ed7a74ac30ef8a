"""Config of question synthesis (``questions:``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from typing import Literal

from synth.decontam.formats import FORMATS
from synth.engine.config import Section, operational


class SplitFractions(BaseModel):
    """Shares of questions per split; each question's split is a stable hash of its id."""

    model_config = ConfigDict(extra="forbid")

    sft: float = Field(0.7, ge=0, le=1, description="Questions whose kept traces become SFT rows (and longctx).")
    rl: float = Field(0.2, ge=0, le=1, description="Questions for the RL pool (`rl_pool`).")
    eval: float = Field(0.1, ge=0, le=1, description="Held-out questions the student is evaluated on; never trained on.")

    @model_validator(mode="after")
    def _sum_to_one(self) -> "SplitFractions":
        if abs(self.sft + self.rl + self.eval - 1.0) > 1e-9:
            raise ValueError(f"sft + rl + eval must be 1 (got {self.sft + self.rl + self.eval:g})")
        return self


class BenchmarkFile(BaseModel):
    """One benchmark file to decontaminate against, in the layout its authors publish."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, description="The file (a relative path is looked for in the current directory, "
                      "then in the project root). Its bytes, not its name, key the questions stage.")
    format: Literal[FORMATS] = Field(description="How to read it: hotpotqa, 2wiki, musique, frames, browsecomp, "
                                     "gaia, or jsonl (`question`, `answer`, optional `titles`). See the README.")


class QuestionsConfig(Section):
    from_walks: bool = Field(True, description="Write one question per walk (through every entity of the path).")
    from_subgraphs: bool = Field(True, description="Also write one question per expanded subgraph, when `subgraphs` exists.")
    min_subgraph_hops: int = Field(3, ge=1, description="A subgraph question must chain at least this many links.")
    route: bool = Field(True, description="Clue-aware walks: before a teacher writes a walk's question, re-route each hop "
                        "that has no clue through another link of the same page that has one and leads on (the oracle's "
                        "clue checks are the measure), and end on a named entity where one can be clued; a walk with no "
                        "such route is written as walked (needs the `index`).")
    facts_only: bool = Field(False, description="The oracle states every hop as a fact its previous entity's text "
                             "states (a relation a parser reads: \"flows through\", \"was founded by\"). Off (the default), a "
                             "hop whose every stated relation one search finds takes a generic one (\"is associated "
                             "with\"): a stated fact quotes the previous entity's text, which a search finds.")
    route_budget: int = Field(48, ge=1, le=10000, description="Clue checks one walk's routing may spend before it gives up.")
    min_words: int = Field(8, ge=1, description="Shorter questions are dropped (`length`).")
    max_words: int = Field(220, ge=1, description="Longer questions are dropped (`length`); also told to the teacher.")
    obfuscate: bool = Field(False, description="Rewrite pass that blurs entity names into descriptions (WebSailor/ASearcher).")
    check_closed_book: bool = Field(False, description="Drop a question the teacher answers without tools (`too_easy`).")
    check_solvable: bool = Field(False, description="Drop a question the teacher fails with the gold pages in context (`unsolvable`).")
    shard_size: int = operational("Sources per shard (a unit of work for a flow task, and of resume).", 256, ge=1)
    check_shortcut: bool = Field(True, description="Shortcut checks (need the `index`): drop a question when one "
                                 "search for its text (`shortcut`), for one of its sub-questions or for its final clue "
                                 "alone (`clue_shortcut`) returns the answer page in the top `shortcut_k`.")
    shortcut_k: int | None = Field(
        None, ge=1, le=100, description="Depth of the shortcut searches and of the effective-depth searches: a page "
        "in the top `shortcut_k` of one search is found by it.  Unset (the default): `tools.search_max_k`, the most "
        "results one search of the agents' tool returns; set, it may not be below that, since a solver who asks "
        "for more results than the checks looked at would see pages they never checked.")
    adversaries: list[Literal["tool", "body", "keywords", "dense"]] = Field(
        default_factory=lambda: ["tool", "body", "keywords"], min_length=1,
        description="The searches a clue must survive, for the effective depth and the oracle's clue checks: `tool` "
        "(the agents' search), `body` (a plain BM25 over page text, no title), `keywords` (a text's content words "
        "alone, with both rankings), `dense` (a dense retriever over the `embed` stage's page vectors, "
        "`tools.dense`: it finds a page by meaning, a paraphrase with no word of its page). The three lexical "
        "ones by default; `dense` costs a model call a clue candidate (on 2 cores it makes the demo's questions "
        "stage several times slower), so add it where a GPU or the time is there. A question needs every hop "
        "against each one listed.")
    min_effective_depth: float = Field(
        1.0, ge=0, le=1, description="Least effective depth a question keeps, as a share of its hops (`enterable_hop`): "
        "the hops left from the latest page of the chain that one search for a clue, a quote, a hop's sentence or the "
        "whole question returns (needs the `index`). 1.0: every hop is needed; 0: measured and recorded, never dropped.")
    repair: bool = Field(True, description="Give a question that fails a validator one repair request naming the "
                         "reason; it is dropped only if the rewrite fails too.")
    splits: SplitFractions = Field(default_factory=SplitFractions, description="Each question's split "
                                   "(sft / rl / eval), decided once when it is written and carried by every table.")
    share_sft_rl: bool = Field(False, description="Let `rl_pool` take sft questions as well as rl ones (by default "
                               "RL never optimises on answers the warm-start policy was just trained to give).")
    decontaminate: list[BenchmarkFile] = Field(
        default_factory=list,
        description="Benchmarks to keep out of the data, before the teacher is paid: a walk or subgraph whose "
        "consecutive entities are supporting pages of one benchmark question (`contaminated_path`), or whose answer "
        "entity is a benchmark answer with another of its entities among that question's pages "
        "(`contaminated_entity`), gets no question; a written question sharing a `filters.ngram`-gram with a "
        "benchmark question (or, with its answer, with a benchmark question and its answer) is dropped before "
        "rollout (`contaminated_text`). Empty: nothing is checked.")


def search_depth(questions: "QuestionsConfig", tools) -> int:
    """How deep the validators and the oracle's clue checks search: ``questions.shortcut_k``, or, unset, the
    most results one call of the agents' ``search`` returns (``tools.search_max_k``)."""
    return questions.shortcut_k or tools.search_max_k
