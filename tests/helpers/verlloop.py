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
