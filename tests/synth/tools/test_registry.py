"""A tool is one module and one registration: a toy tool registered at run time is served everywhere the
built-in tools are (the rollouts' toolbox, the grounding rule, the HTTP tool server, verl's tool), and
gone again when it is removed."""

from __future__ import annotations

import importlib.util
import json

import httpx
import pytest
from helpers.searchcorpus import build_test_index

from synth.engine.conversation import Conversation
from synth.tools.base import ToolError, resolve_page
from synth.tools.config import ToolsConfig
from synth.tools.grounding import grounding
from synth.tools.registry import ToolSpec, get_tool, register, registered, tool_names
from synth.tools.schema import TOOL_SCHEMAS, tool_schemas, tool_schemas_json
from synth.tools.search import SearchIndex
from synth.tools.server import start_server
from synth.tools.spec import PAGE_ARGUMENT, function_schema, page_shown
from synth.tools.toolbox import Toolbox


# ---- the toy tool: everything it is, in one place, as a tool's module would hold it ---------------------

def _schema(cfg: ToolsConfig) -> dict:
    return function_schema("count_words", f"How many words a page has (at most {cfg.page_chars} counted).",
                           {"page": PAGE_ARGUMENT, "min_len": {"type": "integer", "description": "Shortest word.",
                                                               "minimum": 1}}, ["page"])


def _run(index, cfg: ToolsConfig, args: dict, exclude: tuple[str, ...]) -> dict:
    page = resolve_page(index, args["page"])
    words = [w for p in page["paragraphs"] for w in p.split() if len(w) >= args.get("min_len", 1)]
    if not words:
        raise ToolError(f"page {page['page_id']!r} has no word of {args.get('min_len', 1)} letters or more")
    return {"page_id": page["page_id"], "title": page["title"], "words": min(len(words), cfg.page_chars)}


TOY = ToolSpec(name="count_words", schema=_schema, run=_run, shown=page_shown, page_arg="page")


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    root = tmp_path_factory.mktemp("registry")
    build_test_index(root)
    return root


@pytest.fixture(scope="module")
def index(out) -> SearchIndex:
    return SearchIndex.open(out / "index")


def _a_page(index: SearchIndex) -> dict:
    hit = index.search("volcano", 1)[0]
    return index.get_page(hit["page_id"])


def test_a_registered_tool_is_in_the_toolbox_and_the_grounding_rule(index):
    page = _a_page(index)
    with registered(TOY):
        assert tool_names() == ("search", "open", "find", "count_words")
        box = Toolbox(index, ToolsConfig())
        assert [s["function"]["name"] for s in box.schemas()] == list(tool_names())
        obs, info = box.call("count_words", {"page": page["title"], "min_len": 3})
        expected = sum(1 for p in page["paragraphs"] for w in p.split() if len(w) >= 3)
        assert json.loads(obs) == {"page_id": page["page_id"], "title": page["title"], "words": expected}
        assert info.opened_page_ids == [page["page_id"]] and not info.is_error
        # Its arguments are checked against its own schema, like a built-in's.
        bad, info = box.call("count_words", {"page": page["title"], "min_len": 0})
        assert info.is_error and "min_len" in json.loads(bad)["error"]
        # The grounding rule reads its page argument: a page the agent never saw is not grounded.
        conv = Conversation.from_openai([
            {"role": "user", "content": "What is the Zzyzx?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "count_words",
                                                             "arguments": json.dumps({"page": page["title"]})}}]}])
        steps = grounding(conv, 0.5)
        assert [(s.name, s.grounded) for s in steps] == [("count_words", False)]
    # Gone again: the built-ins' schemas (which SFT rows store) are what they were.
    assert tool_names() == ("search", "open", "find")
    assert tool_schemas() == TOOL_SCHEMAS
    assert "count_words" not in tool_schemas_json()
    box = Toolbox(index, ToolsConfig())
    assert "unknown tool 'count_words'" in json.loads(box.call("count_words", {"page": "x"})[0])["error"]


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="already registered"):
        register(get_tool("search"))
    with pytest.raises(ValueError, match="identifier"):
        ToolSpec(name="two words", schema=_schema, run=_run, shown=page_shown)


def test_a_registered_tool_is_served_by_the_tool_server(out, index):
    page = _a_page(index)
    with registered(TOY), start_server(out / "index", ToolsConfig()) as server, \
            httpx.Client(base_url=server.url, timeout=10) as client:
        box = Toolbox(index, ToolsConfig())
        assert [s["function"]["name"] for s in client.get("/tools").json()] == list(tool_names())
        want = json.loads(box.call("count_words", {"page": page["page_id"], "min_len": 4})[0])
        assert client.post("/count_words", json={"page": page["page_id"], "min_len": 4}).json() == want
        # a query string's integer argument is parsed by the tool's own schema
        assert client.get("/count_words", params={"page": page["page_id"], "min_len": "4"}).json() == want
        refused = client.post("/count_words", json={"page": page["page_id"], "exclude": ["x"]})
        assert refused.status_code == 400 and "unknown argument(s) exclude" in refused.json()["error"]
        assert client.post("/count_words", json={"page": "No such page"}).status_code == 404


@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="verl is not installed (the `rl` extra)")
def test_a_registered_tool_is_a_verl_tool(out, index):
    from helpers.verlloop import call_tool, tool_loop

    from synth.tools.verl_tool import HopforgeTool

    page = _a_page(index)
    with registered(TOY), start_server(out / "index", ToolsConfig()) as server:
        tool = HopforgeTool({"type": "native", "name": "count_words", "url": server.url})
        assert tool.tool_schema.model_dump() == _schema(ToolsConfig())
        box = Toolbox(index, ToolsConfig())
        got = call_tool(tool_loop([tool]), "count_words", {"page": page["title"]}, {})
        assert got == box.call("count_words", {"page": page["title"]})[0]
    with pytest.raises(ValueError, match="config.name must be one of search, open, find"):
        HopforgeTool({"type": "native", "name": "count_words", "url": server.url, "verify_server": False})


def test_a_registered_tool_is_counted_in_the_trace(index):
    """The rollout counts calls per registered tool (``Trace.tool_counts``), a new tool included."""
    import asyncio

    from helpers.traces import make_question
    from synth.rollout.loop import RolloutSettings, rollout_one
    from synth.teacher.client import Teacher
    from synth.teacher.config import TeacherConfig
    from synth.teacher.types import BaseChatModel, ChatResponse

    page = _a_page(index)

    class TwoTurns(BaseChatModel):
        name = "two-turns"

        async def chat(self, messages, tools=None, *, sample_index=0, task=None):
            if not any(m["role"] == "tool" for m in messages):
                call = {"id": "c1", "type": "function",
                        "function": {"name": "count_words", "arguments": json.dumps({"page": page["title"]})}}
                return ChatResponse(message={"role": "assistant", "content": "", "tool_calls": [call]},
                                    usage={"prompt_tokens": 10, "completion_tokens": 5}, finish_reason="tool_calls")
            return ChatResponse(message={"role": "assistant", "content": "<answer>x</answer>"},
                                usage={"prompt_tokens": 20, "completion_tokens": 5}, finish_reason="stop")

    settings = RolloutSettings(max_turns=4, max_tokens=100_000, compress_observations=False, keep_observations=2,
                               seed=0, min_grounding=0.5)
    with registered(TOY):
        teacher = Teacher(TeacherConfig(backend="oracle"), None, backend=TwoTurns())
        trace = asyncio.run(rollout_one(teacher, Toolbox(index, ToolsConfig()), make_question(), 0, settings))
    assert [(c.name, c.calls) for c in trace.tool_counts] == [("search", 0), ("open", 0), ("find", 0), ("count_words", 1)]
    assert trace.calls_of("count_words") == 1 and trace.calls_of("search") == 0 and trace.n_tool_calls == 1
