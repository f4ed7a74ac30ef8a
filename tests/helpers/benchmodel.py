"""Benchmark fixtures over the demo corpus, and scripted models that answer them through the tools.

``tests/helpers/benchdemo/`` holds one small file per published format (HotpotQA, 2Wiki, MuSiQue, FRAMES,
BrowseComp, GAIA), written by hand in each one's released schema, whose titles and answers name pages of the
embedded demo corpus (and a few that it lacks: Steventon, Augsburg, "Anna Flaubert"), plus ``not_pages.jsonl``,
a benchmark none of whose answers is a page.

:func:`model_handler` is an OpenAI-compatible model for :func:`helpers.openai_server.serve`: for the question it
finds in the conversation it plays its script's tool calls one turn each (native ``tool_calls``), then answers
``<answer>...</answer>``.  :func:`judge_handler` is a judge behind the same server: it reads the predicted and
gold answers from the prompt and says ``correct`` for the predictions it is told to accept, or answers garbage.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from helpers.openai_server import Reply, call

BENCHDEMO = Path(__file__).resolve().parent / "benchdemo"
FILES = {"hotpotqa": "hotpot_dev_distractor_v1.json", "2wiki": "2wiki_dev.json",
         "musique": "musique_ans_v1.0_dev.jsonl", "frames": "frames_test.tsv",
         "browsecomp": "browse_comp_test_set_decrypted.csv", "gaia": "gaia_validation_metadata.jsonl"}


def spec(fmt: str) -> str:
    """``FORMAT:FILE`` of one fixture."""
    return f"{fmt}:{BENCHDEMO / FILES[fmt]}"


@dataclass(frozen=True)
class Play:
    """What the model does for one question: tool calls (name, arguments), one a turn, then its answer."""

    calls: tuple[tuple[str, dict], ...]
    answer: str


@dataclass
class ScriptedModel:
    """A scripted model: ``plays`` by a phrase of the question; ``seen`` counts the requests per phrase."""

    plays: dict[str, Play]
    seen: dict[str, int] = field(default_factory=dict)

    def play_for(self, text: str) -> tuple[str, Play]:
        for phrase, play in self.plays.items():
            if phrase in text:
                return phrase, play
        raise KeyError(f"no play for {text[:80]!r}")

    def handler(self) -> Callable[[dict], Reply]:
        def handle(req: dict) -> Reply:
            msgs = req["messages"]
            phrase, play = self.play_for(msgs[1]["content"])
            self.seen[phrase] = self.seen.get(phrase, 0) + 1
            turn = sum(1 for m in msgs if m["role"] == "assistant")
            if turn < len(play.calls):
                name, args = play.calls[turn]
                return Reply(content="", tool_calls=[call(name, args, id=f"c{turn}")])
            return Reply(content=f"I have it. <answer>{play.answer}</answer>")

        return handle


def model_handler(plays: dict[str, Play]) -> ScriptedModel:
    """A :class:`ScriptedModel` of ``plays`` (serve ``.handler()``)."""
    return ScriptedModel(plays)


_PRED = re.compile(r"^Predicted answer: (.*)$", re.M)
_GOLD = re.compile(r"^Gold answer: (.*)$", re.M)


def judge_handler(accept: set[str], garbage: bool = False, asked: list | None = None) -> Callable[[dict], Reply]:
    """A judge: ``{"correct": true}`` for a prediction in ``accept``, false otherwise; ``garbage`` answers prose.
    ``asked`` collects (gold, prediction) pairs."""

    def handle(req: dict) -> Reply:
        user = req["messages"][-1]["content"]
        pred, gold = _PRED.search(user).group(1), _GOLD.search(user).group(1)
        if asked is not None:
            asked.append((gold, pred))
        if garbage:
            return Reply(content="Well, it depends on how you look at it.")
        return Reply(content=json.dumps({"correct": pred in accept, "reason": "scripted"}))

    return handle


__all__ = ["BENCHDEMO", "FILES", "Play", "ScriptedModel", "judge_handler", "model_handler", "spec"]
