"""verl's ToolAgentLoop as far as one tool call goes (``_call_tool``), for the verl tool tests; the fixtures those
tests and the agent-loop tests share (a tool server over the run's index, the index, the student's tokenizer), which a
test module takes with ``from helpers.verlloop import server, index, tools_url, tokenizer``; and the leaf keys of
verl's own trainer config, which an option file of ``configs/rl`` may set."""

from __future__ import annotations

import asyncio
import json
import types

import pytest


@pytest.fixture(scope="module")
def server(rl_run):
    """hopforge's tool server over the run's index."""
    from synth.tools.config import ToolsConfig
    from synth.tools.server import start_server

    with start_server(rl_run / "index", ToolsConfig()) as running:
        yield running


@pytest.fixture(scope="module")
def index(rl_run):
    from synth.tools.search import SearchIndex

    return SearchIndex.open(rl_run / "index")


@pytest.fixture
def tools_url(server, monkeypatch) -> str:
    """configs/rl/tools.yaml reads the server's address from HOPFORGE_TOOLS_URL."""
    monkeypatch.setenv("HOPFORGE_TOOLS_URL", server.url)
    return server.url


@pytest.fixture(scope="module")
def tokenizer(student_path):
    from verl.utils import hf_tokenizer

    return hf_tokenizer(str(student_path))


def leaf_keys(d: dict, prefix: str = "") -> set[str]:
    """The dotted keys of the leaves of a nested dict (an empty dict is a leaf)."""
    out: set[str] = set()
    for k, v in d.items():
        out |= leaf_keys(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {prefix + k}
    return out


def verl_trainer_keys() -> set[str]:
    """The leaf keys of verl's own ``ppo_trainer`` config: what an option file may set without a typo being
    silently merged in."""
    from pathlib import Path

    import verl
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        return leaf_keys(OmegaConf.to_container(compose(config_name="ppo_trainer"), resolve=False))


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
