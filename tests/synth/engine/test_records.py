"""Typed records: nested fields come back as dataclasses, and a trace's conversation is parsed once, leniently."""

from __future__ import annotations

import json
from dataclasses import fields

from synth.engine.records import Evidence, Hop, Question, Subgraph, ToolCount, Trace, Walk
from synth.engine.conversation import Conversation, Message, ToolCall, parse_conversation
from synth.teacher.types import normalise_message

EV = Evidence("a", "b", 2, "It links to B.", "B")


def _roundtrip(cls, rec):
    rows = cls.to_table([rec]).to_pylist()
    return cls.from_row(rows[0])


def test_nested_fields_round_trip_through_arrow() -> None:
    w = Walk("w1", ["a", "b"], ["A", "B"], [EV], 0)
    assert _roundtrip(Walk, w) == w and isinstance(_roundtrip(Walk, w).hops[0], Evidence)
    s = Subgraph("s1", "a", ["a", "b"], ["A", "B"], [EV], 3)
    assert _roundtrip(Subgraph, s).edges == [EV]
    q = Question("q1", "walk", "w1", ["a", "b"], ["A", "B"], "Which?", "B", [], "b", [Hop("Which?", "B", "b")],
                 "m", "sha", 7, "rl")
    back = _roundtrip(Question, q)
    assert back == q and back.hops[0].bridge == "B"


def test_rows_written_before_a_rename_still_read() -> None:
    """A question table from before ``walk_id`` became ``source_id`` (and a walks table from before ``slot``)."""
    q = Question("q1", "walk", "w1", ["a", "b"], ["A", "B"], "Which?", "B", [], "b", [Hop("Which?", "B", "b")],
                 "m", "sha", 7, "rl")
    old = q.to_row()
    old["walk_id"] = old.pop("source_id")
    assert Question.from_row(old) == q
    w = Walk("w1", ["a", "b"], ["A", "B"], [EV], 4)
    old = w.to_row()
    old["start_index"] = old.pop("slot")
    assert Question.SCHEMA.names[2] == "source_id" and Walk.from_row(old).slot == 4


def test_nested_dataclasses_match_their_struct_types() -> None:
    for cls in (Walk, Subgraph, Question):
        for name, item in cls.NESTED.items():
            assert [f.name for f in fields(item)] == [f.name for f in cls.SCHEMA.field(name).type.value_type]


def test_tool_call_normalisation_is_the_teachers() -> None:
    raw = {"content": None, "tool_calls": [{"function": {"name": "open", "arguments": {"page": "Zürich"}}},
                                           {"id": "c9", "type": "function", "function": {"arguments": None}}]}
    msg = normalise_message(raw)
    assert msg["tool_calls"] == [
        {"id": "call_0", "type": "function", "function": {"name": "open", "arguments": '{"page": "Zürich"}'}},
        {"id": "c9", "type": "function", "function": {"name": "", "arguments": "{}"}}]
    tc = ToolCall.from_openai(raw["tool_calls"][0], 4, "call_3")
    assert tc.id == "call_3_4" and tc.args() == {"page": "Zürich"}
    assert ToolCall("x", "search", "[1]").args() is None and ToolCall("x", "search", "{bad").args() is None


def _conv(messages) -> Conversation:
    return Conversation.from_json(json.dumps(messages))


CALL = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"query": "x"}'}}
GOOD = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [CALL], "reasoning_content": "hm"},
        {"role": "tool", "tool_call_id": "c1", "name": "search", "content": "[]"},
        {"role": "assistant", "content": [{"type": "text", "text": "<answer>B</answer>"}]}]


def test_a_well_formed_conversation() -> None:
    c = _conv(GOOD)
    assert c.problem is None and c.problem_at is None and len(c.messages) == 5
    assert c.messages[2] == Message("assistant", "", (ToolCall("c1", "search", '{"query": "x"}'),),
                                    reasoning_content="hm")
    assert c.messages[3].tool_call_id == "c1" and c.messages[3].name == "search"
    assert c.messages[4].text == "<answer>B</answer>" and isinstance(c.messages[4].content, list)
    assert [(turn, tc.id) for turn, tc in c.tool_calls()] == [(1, "c1")]


def test_parsing_stops_at_the_first_structural_problem() -> None:
    assert Conversation.from_json("{nope").problem.startswith("messages are not JSON")
    assert _conv({"role": "user"}).problem == "messages are not a non-empty list" == _conv([]).problem
    c = _conv(GOOD[:2] + [7] + GOOD[3:])
    assert (c.problem, c.problem_at, len(c.messages)) == ("message 2 is not an object", 2, 2)
    assert _conv([{"role": None}]).problem == "message 0 has role None"
    # A malformed call keeps the message it is in, with the calls before it.
    bad = dict(GOOD[2], tool_calls=[CALL, dict(CALL, id="c2", function={"name": "open", "arguments": {"page": 1}})])
    c = _conv(GOOD[:2] + [bad])
    assert c.problem == "message 2: tool call 'c2': arguments are not a JSON string" and c.problem_at == 2
    assert [tc.id for tc in c.messages[2].tool_calls] == ["c1"]
    for call, why in [(5, "a tool call is not an object"), (dict(CALL, id=""), "a tool call has no id"),
                      (dict(CALL, function="f"), "tool call 'c1' has no function"),
                      (dict(CALL, function={"name": 3, "arguments": "{}"}), "tool call 'c1' names unknown tool 3")]:
        assert _conv(GOOD[:2] + [dict(GOOD[2], tool_calls=[call])]).problem == f"message 2: {why}"


def test_a_trace_parses_its_conversation_once() -> None:
    t = Trace("t", "q", 0, json.dumps(GOOD), "[]", "B", "answer", 2, 1, [ToolCount("search", 1)], 0, [], [], [], [],
              0, 0, 0.0, "m", None, "sft")
    assert t.conversation is t.conversation is parse_conversation(t.messages)
    assert Trace.from_row(t.to_row()) == t and "conversation" not in t.to_row()


def test_a_trace_written_before_tool_counts_reads_its_per_tool_columns() -> None:
    from helpers.traces import make_trace
    from synth.engine.records import Trace, tool_calls_of

    row = make_trace().to_row()
    counts = {c["name"]: c["calls"] for c in row.pop("tool_counts")}
    old = {**row, **{f"n_{name}": n for name, n in counts.items()}}  # the n_search/n_open/n_find columns
    back = Trace.from_row(old)
    assert {c.name: c.calls for c in back.tool_counts} == counts and sum(counts.values()) > 0
    row_counts = back.to_row()["tool_counts"]
    assert back.calls_of("search") == counts["search"] and tool_calls_of(row_counts, "open") == counts["open"]
    assert Trace.from_row(back.to_row()) == back and not any(k.startswith("n_search") for k in back.to_row())
    assert tool_calls_of(row_counts, "no such tool") == 0


def test_a_reject_is_a_record_with_the_rejects_tables_schema() -> None:
    import pyarrow as pa

    from synth.engine.records import REJECT_SCHEMA, Reject

    assert REJECT_SCHEMA == pa.schema([pa.field("record_id", pa.string(), nullable=False), pa.field("source_id", pa.string()),
                                       pa.field("reason", pa.string(), nullable=False), pa.field("detail", pa.string()),
                                       pa.field("raw", pa.string())])
    rows = [Reject("q1", "w1", "too_easy", "the closed-book answer was right", '{"question": "Q?"}'), Reject("q2", None, "duplicate")]
    back = [Reject.from_row(r) for r in Reject.to_table(rows).to_pylist()]
    assert back == rows and back[1].detail is None and back[1].raw is None
