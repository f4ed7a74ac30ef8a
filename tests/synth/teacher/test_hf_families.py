"""The hf backend reads a student's turn in its own family's format: what the shipped template trains the
student to write comes back as the same tool calls, and generation stops at the family's end of turn."""

from __future__ import annotations

import json

import pytest

from helpers.familytok import FAMILIES, family_tokenizer
from synth.teacher.hf import read_generated, stop_token_ids
from synth.tools.schema import tool_schemas

CALLS = [{"id": "call_1_0", "type": "function",
          "function": {"name": "search", "arguments": json.dumps({"query": "Seine river Paris"})}},
         {"id": "call_1_1", "type": "function", "function": {"name": "open", "arguments": json.dumps({"page_id": "12"})}}]


def _written(tok, assistant: dict) -> list[int]:
    """The ids the template has the model write for ``assistant`` (after the generation prompt), end of turn
    included: what a student trained on this template generates."""
    tools = tool_schemas()
    msgs = [{"role": "user", "content": "Which river runs through Paris?"}]
    prompt = tok.apply_chat_template(msgs, tools=tools, add_generation_prompt=True, tokenize=False)
    full = tok.apply_chat_template([*msgs, assistant], tools=tools, tokenize=False)
    assert full.startswith(prompt)
    eot = FAMILIES[family_of(tok)].eot
    turn = full[len(prompt):]
    turn = turn[:turn.index(eot) + len(eot)]
    return tok(turn, add_special_tokens=False)["input_ids"]


def family_of(tok) -> str:
    return tok.name_or_path


@pytest.fixture(params=sorted(FAMILIES))
def tok(request):
    t = family_tokenizer(request.param)
    t.name_or_path = request.param
    return t


def test_tool_calls_come_back_in_every_family(tok) -> None:
    ids = _written(tok, {"role": "assistant", "content": "I will search first.", "tool_calls": CALLS})
    stops = stop_token_ids(tok)
    assert ids[-1] in stops, "generation must stop at the family's end-of-turn token"
    msg, finish = read_generated(tok, ids, stops, tool_schemas(), n_assistant=1)
    assert finish == "tool_calls"
    got = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in msg["tool_calls"]]
    assert got == [("search", {"query": "Seine river Paris"}), ("open", {"page_id": "12"})]
    assert [c["id"] for c in msg["tool_calls"]] == ["call_1_0", "call_1_1"]
    for marker in ("[TOOL_CALLS]", "<|python_tag|>", "<tool_call>", FAMILIES[family_of(tok)].eot):
        assert marker not in (msg.get("content") or "")


def test_an_answer_is_content_and_a_cut_turn_is_length(tok) -> None:
    ids = _written(tok, {"role": "assistant", "content": "The Seine. <answer>Seine</answer>"})
    stops = stop_token_ids(tok)
    msg, finish = read_generated(tok, ids, stops, tool_schemas(), n_assistant=2)
    assert finish == "stop" and not msg.get("tool_calls")
    assert msg["content"] == "The Seine. <answer>Seine</answer>"
    msg, finish = read_generated(tok, ids[:-3], stops, tool_schemas(), n_assistant=2)
    assert finish == "length"
