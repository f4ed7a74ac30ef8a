"""verl's ToolAgentLoop as far as one tool call goes (``_call_tool``), for the verl tool tests."""

from __future__ import annotations

import asyncio
import json
import types


def tool_loop(tools: list):
    """A ToolAgentLoop holding ``tools``, built without its trainer (only ``_call_tool`` is used)."""
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

    loop = ToolAgentLoop.__new__(ToolAgentLoop)
    loop.tools = {t.name: t for t in tools}
    loop.max_tool_response_length = 16384
    loop.tool_response_truncate_side = "middle"
    return loop


def call_tool(loop, name: str, args: dict, tools_kwargs: dict) -> str:
    """What verl puts in the conversation for one call of tool ``name`` with ``args``."""
    from verl.experimental.agent_loop.tool_parser import FunctionCall

    call = FunctionCall(name=name, arguments=json.dumps(args))
    response, _, _ = asyncio.run(loop._call_tool(call, tools_kwargs, types.SimpleNamespace()))
    return response.text


def response_ids(tokenizer, row: dict, answer: str, *, content: str = "Let me search.",
                 call: dict | None = None) -> list[int]:
    """A rollout's response tokens for an ``rl_pool`` row under the student's template: one assistant turn
    saying ``content`` with one tool call (a search by default), its observation, then ``answer``."""
    call = call or {"name": "search", "arguments": {"query": "x"}}
    turns = [{"role": "assistant", "content": content,
              "tool_calls": [{"id": "c0", "type": "function", "function": call}]},
             {"role": "tool", "tool_call_id": "c0", "content": json.dumps([{"page_id": "1", "title": "X",
                                                                             "snippet": "..."}])},
             {"role": "assistant", "content": f"Found it. <answer>{answer}</answer>"}]
    tools = json.loads(row["tools"])
    prompt = tokenizer.apply_chat_template(row["prompt"], tools=tools, add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template(row["prompt"] + turns, tools=tools, tokenize=False)
    assert full.startswith(prompt)
    return tokenizer(full[len(prompt):], add_special_tokens=False)["input_ids"]
