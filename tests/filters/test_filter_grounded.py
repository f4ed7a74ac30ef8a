"""The grounded filter: every way a call can act on something not yet seen, and grounded traces that pass."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from filters.base import FilterContext, FilterRunner, build_chain
from filters.config import FiltersConfig
from filters.grounded import GroundedFilter, grounding, ungrounded_steps
from helpers.traces import call, make_trace

QUESTION = ('Start from the article on Alpha Station. Its text says "trains leave for the ___ every hour". '
            "Which page do you reach?")
SEARCH_ALPHA = [{"page_id": "p0", "title": "Alpha Station", "snippet": "Alpha Station is a railway station."}]
ALPHA = {"page_id": "p0", "title": "Alpha Station", "offset": 0, "next_offset": None, "total_chars": 80,
         "text": "Alpha Station\n\nAlpha Station is a railway station. Trains leave for the Bravo Harbours every hour."}
BRAVO = {"page_id": "p1", "title": "Bravo Harbour", "offset": 0, "next_offset": None, "total_chars": 60,
         "text": "Bravo Harbour\n\nBravo Harbour is a port on the Charlie coast."}


def trace(steps: list[tuple[str, dict, object]], question: str = QUESTION, thoughts: list[str] | None = None):
    """A trace whose tool calls got the given observations (JSON-encoded unless already text)."""
    t = make_trace(calls=[call(name, **args) for name, args, _ in steps], question=question, thoughts=thoughts,
                   answer="Bravo Harbour")
    msgs = json.loads(t.messages)
    tool_msgs = [m for m in msgs if m["role"] == "tool"]
    for m, (_, _, obs) in zip(tool_msgs, steps):
        m["content"] = obs if isinstance(obs, str) else json.dumps(obs)
    return replace(t, messages=json.dumps(msgs))


GOOD = [("search", {"query": "Alpha Station"}, SEARCH_ALPHA), ("open", {"page": "p0"}, ALPHA),
        ("open", {"page": "Bravo Harbour"}, BRAVO)]


def verdict(t, min_grounding: float = 0.8):
    return GroundedFilter(min_grounding)(t, FilterContext())


def test_a_trace_that_acts_on_what_it_read_passes() -> None:
    assert verdict(trace(GOOD)) is True
    assert ungrounded_steps(trace(GOOD), 0.8) == []
    steps = grounding(trace(GOOD).conversation, 0.8)
    assert [(s.index, s.name, s.grounded) for s in steps] == [(0, "search", True), (1, "open", True),
                                                              (2, "open", True)]


def test_grounded_forms_of_a_name() -> None:
    # By page id from a search result; by title in another case; by a singular of a plural in the text
    # (the index's stemmer makes them one term); by a /wiki/ URL; a find on a page read and a text read there.
    variants = [
        ("open", {"page": "p0"}, ALPHA),
        ("open", {"page": "ALPHA STATION"}, ALPHA),
        ("open", {"page": "Bravo Harbour"}, BRAVO),
        ("open", {"page": "https://en.wikipedia.org/wiki/Bravo_Harbour"}, BRAVO),
        ("find", {"page": "p1", "text": "Charlie coast"}, {"page_id": "p1", "title": "Bravo Harbour",
                                                          "text": "Charlie coast", "total": 1, "passages": []}),
        ("search", {"query": "the Charlie coast port"}, []),
    ]
    assert verdict(trace([GOOD[0], *variants])) is True


@pytest.mark.parametrize("steps, why", [
    # A search word nothing had shown (the gold path, or the teacher's memory).
    ([("search", {"query": "Alpha Station"}, SEARCH_ALPHA), ("search", {"query": "Delta City"}, [])],
     "call 2 (search) query 'Delta City': 0.00 of its terms seen (unseen: delta, citi)"),
    # A page opened by a title never shown.
    ([("search", {"query": "Alpha Station"}, SEARCH_ALPHA), ("open", {"page": "Charlie Harbour"}, BRAVO)],
     "call 2 (open) page 'Charlie Harbour' not seen"),
    # A page id never shown.
    ([("open", {"page": "p7"}, BRAVO)], "call 1 (open) page 'p7' not seen"),
    # A find on a page never shown, with a pattern never shown.
    ([("find", {"page": "Delta City", "text": "mayor"}, {"page_id": "p3", "title": "Delta City", "text": "mayor",
                                                        "total": 0, "passages": []})],
     "call 1 (find) text 'mayor': 0.00 of its terms seen (unseen: mayor); page 'Delta City' not seen"),
])
def test_each_way_of_being_ungrounded(steps, why) -> None:
    _, reason, detail = verdict(trace(steps))
    assert reason == "ungrounded" and detail.endswith(why)


def test_only_earlier_observations_count() -> None:
    # "Bravo" is shown by the second open; searching it before that is acting on what was not seen yet.
    early = [GOOD[0], ("search", {"query": "Bravo Harbour"}, []), ("open", {"page": "p0"}, ALPHA)]
    assert [s.index for s in ungrounded_steps(trace(early), 0.8)] == [1]
    later = [GOOD[0], ("open", {"page": "p0"}, ALPHA), ("search", {"query": "Bravo Harbour"}, [])]
    assert verdict(trace(later)) is True


def test_calls_of_one_turn_see_only_what_came_before_it() -> None:
    t = trace([GOOD[0], ("open", {"page": "p0"}, ALPHA)])
    msgs = json.loads(t.messages)
    # Merge the two calls into one assistant turn: the open's page id came from the search in the same turn.
    first, second = msgs[2], msgs[4]
    first["tool_calls"] += second["tool_calls"]
    merged = msgs[:3] + [msgs[3], msgs[5]] + msgs[6:]
    steps = grounding(replace(t, messages=json.dumps(merged)).conversation, 0.8)
    assert [(s.name, s.grounded) for s in steps] == [("search", True), ("open", False)]


def test_own_words_errors_and_echoes_ground_nothing() -> None:
    # The agent's own thought, the system prompt, an error that echoes its argument and a find that
    # echoes its pattern are not observations of the corpus.
    thought = trace([("search", {"query": "Delta City"}, [])], thoughts=["I recall the answer is Delta City."])
    assert ungrounded_steps(thought, 0.8)[0].why.startswith("query 'Delta City'")
    error = trace([("open", {"page": "Echo"}, {"error": "no page with id or title 'Echo'"}),
                   ("search", {"query": "Echo"}, [])])
    assert [s.index for s in ungrounded_steps(error, 0.8)] == [0, 1]
    echo = trace([GOOD[0], ("find", {"page": "p0", "text": "Station"},
                           {"page_id": "p0", "title": "Alpha Station", "text": "Foxtrot", "total": 0, "passages": []}),
                  ("search", {"query": "Foxtrot"}, [])])
    assert [s.index for s in ungrounded_steps(echo, 0.8)] == [2]
    system = trace([("search", {"query": "tools Wikipedia"}, [])])
    assert "Wikipedia" in json.loads(system.messages)[0]["content"]  # the system prompt names it; it does not count
    assert len(ungrounded_steps(system, 0.8)) == 1


def test_the_threshold_and_stop_words() -> None:
    # Four of the five content terms were seen (0.8); stop words ("the", "for") do not count.
    q = [("search", {"query": "the trains for Alpha Station every Zulu"}, [])]
    assert verdict(trace(q), 0.8) is True
    assert verdict(trace(q), 0.81)[1] == "ungrounded"
    assert verdict(trace([("search", {"query": "the for"}, [])]), 1.0) is True  # only stop words, all seen
    assert verdict(trace([("search", {"query": "of"}, [])]), 1.0)[1] == "ungrounded"  # one never shown
    assert verdict(trace([("search", {"query": "!!!"}, [])]), 1.0) is True  # no terms at all


def test_in_the_default_chain_with_its_threshold() -> None:
    cfg = FiltersConfig()
    assert "grounded" in cfg.chain and cfg.min_grounding == 0.8
    chain = build_chain(["grounded"], FiltersConfig(min_grounding=0.5))
    assert chain[0] == GroundedFilter(0.5)
    runner = FilterRunner(chain)
    bad = trace([("search", {"query": "Delta City"}, [])])
    kept = list(runner.run([trace(GOOD), bad], FilterContext()))
    assert [t is not bad for t in kept] == [True] and runner.dropped == {"ungrounded": 1}
