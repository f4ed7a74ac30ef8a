"""``multi_search`` (MultiSearch's several queries in one call): off unless ``tools.extra_tools`` names it, and
then the same merged hits through the rollouts' toolbox, the HTTP tool server and verl's tool, with the answer
page masked as for ``search``, every page shown recorded for the trace and the grounding rule, and a call the
agent got wrong answered with an error it can read."""

from __future__ import annotations

import importlib.util
import json

import httpx
import pytest
from helpers.searchcorpus import build_test_index

from synth.engine.conversation import Conversation
from synth.tools.agent.multi_search import run_multi_search
from synth.tools.config import ToolsConfig
from synth.tools.grounding import Seen, grounding
from synth.tools.registry import tool_names
from synth.tools.schema import TOOL_SCHEMAS, tool_schemas
from synth.tools.search import SearchIndex
from synth.tools.server import start_server
from synth.tools.toolbox import Toolbox

ON = ToolsConfig(extra_tools=["multi_search"])
QUERIES = ["Paris", "Hilton hotels", "volcano"]


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    root = tmp_path_factory.mktemp("multi_search")
    build_test_index(root)
    return root


@pytest.fixture(scope="module")
def index(out) -> SearchIndex:
    return SearchIndex.open(out / "index")


def merged_by_hand(index: SearchIndex, queries: list[str], k: int, exclude: tuple[str, ...] = ()) -> list[dict]:
    """The merge, written out: each page once, the queries that found it in call order, its best rank, the snippet
    of that rank's (first) query; ordered by (best rank, that query's position)."""
    pages: dict[str, dict] = {}
    for qi, q in enumerate(queries):
        for rank, hit in enumerate(index.search(q, k, exclude_page_ids=exclude, snippet_chars=ON.snippet_chars), 1):
            got = pages.get(hit["page_id"])
            if got is None or rank < got["rank"]:
                found = got["queries"] if got else []
                pages[hit["page_id"]] = {**hit, "rank": rank, "queries": found, "_key": (rank, qi)}
            pages[hit["page_id"]]["queries"].append(q)
    ordered = sorted(pages.values(), key=lambda h: h["_key"])
    return [{k: v for k, v in h.items() if k != "_key"} for h in ordered]


def test_off_by_default_so_the_schemas_sft_rows_store_are_unchanged(index):
    assert tool_names() == ("search", "open", "find") and tool_schemas() == TOOL_SCHEMAS
    assert "multi_search" not in json.dumps(TOOL_SCHEMAS)
    obs, info = Toolbox(index, ToolsConfig()).call("multi_search", {"queries": ["Paris"]})
    assert info.is_error and "unknown tool 'multi_search'" in json.loads(obs)["error"]
    # on: after the built-ins, whose schemas stay as they were
    assert tool_names(ON) == ("search", "open", "find", "multi_search")
    assert tool_schemas(ON)[:3] == TOOL_SCHEMAS
    with pytest.raises(ValueError, match="optional tools are: multi_search"):
        tool_schemas(ToolsConfig(extra_tools=["no_such_tool"]))


def test_the_toolbox_merges_dedupes_and_marks_the_source_queries(index):
    box = Toolbox(index, ON)
    obs, info = box.call("multi_search", json.dumps({"queries": QUERIES, "k": 3}))
    hits = json.loads(obs)
    assert not info.is_error and hits == merged_by_hand(index, QUERIES, 3)
    ids = [h["page_id"] for h in hits]
    assert len(ids) == len(set(ids))  # each page once
    singles = [[h["page_id"] for h in index.search(q, 3)] for q in QUERIES]
    assert set(ids) == set().union(*singles) and len(ids) < sum(map(len, singles))  # some page found twice
    twice = next(h for h in hits if len(h["queries"]) > 1)
    assert twice["rank"] == min(s.index(twice["page_id"]) + 1 for s in singles if twice["page_id"] in s)
    assert twice["queries"] == [q for q, s in zip(QUERIES, singles) if twice["page_id"] in s]
    assert [(h["rank"]) for h in hits] == sorted(h["rank"] for h in hits)
    # the trace and the grounding rule get every page the call showed, in the order shown
    assert info.searched_page_ids == ids and info.opened_page_ids == []
    # a query given twice runs once; k defaults to search_k
    again, _ = box.call("multi_search", {"queries": ["Paris", "  paris ", "volcano"]})
    assert json.loads(again) == merged_by_hand(index, ["Paris", "volcano"], ON.search_k)


def test_the_answer_page_is_masked_from_every_query(index):
    top = index.search("Paris", 1)[0]["page_id"]
    masked = Toolbox(index, ON, mask_page_ids=[top])
    hits = json.loads(masked.call("multi_search", {"queries": QUERIES, "k": 3})[0])
    assert top not in [h["page_id"] for h in hits]
    assert hits == merged_by_hand(index, QUERIES, 3, exclude=(top,))
    # as for search: the single search masks the same page
    assert top not in [h["page_id"] for h in json.loads(masked.call("search", {"query": "Paris", "k": 3})[0])]


@pytest.mark.parametrize("args, needle", [
    ({"queries": []}, "'queries' is empty"),
    ({"queries": ["a b"] * 2 + ["c", "d", "e", "f"]}, "holds 6 items; at most 5"),
    ({"queries": ["Paris", 3]}, "item 2 of 'queries' must be a string"),
    ({"queries": "Paris"}, "'queries' must be a list of strings"),
    ({"queries": ["Paris", "   "]}, "item 2 of 'queries' is empty"),
    ({"query": "Paris"}, "unknown argument(s) query"),
    ({}, "missing argument 'queries'"),
])
def test_a_bad_call_gives_the_agent_a_clear_error(index, args, needle):
    obs, info = Toolbox(index, ON).call("multi_search", args)
    assert info.is_error and needle in json.loads(obs)["error"] and info.searched_page_ids == []


def test_the_cap_is_the_configs(index):
    cfg = ToolsConfig(extra_tools=["multi_search"], multi_search_max_queries=2)
    schema = next(s for s in tool_schemas(cfg) if s["function"]["name"] == "multi_search")
    assert schema["function"]["parameters"]["properties"]["queries"]["maxItems"] == 2
    obs, info = Toolbox(index, cfg).call("multi_search", {"queries": QUERIES})
    assert info.is_error and "at most 2" in json.loads(obs)["error"]
    with pytest.raises(Exception, match="at most 2"):
        run_multi_search(index, cfg, QUERIES)


def test_grounding_reads_every_query_and_every_page_shown_but_not_the_echoed_queries(index):
    box = Toolbox(index, ON)
    obs, info = box.call("multi_search", {"queries": ["Paris", "Hilton hotels"]})
    shown = info.searched_page_ids[-1]

    def conv(second: dict) -> Conversation:
        first = {"queries": ["Paris", "Hilton hotels"]}
        msgs = [{"role": "user", "content": "Which Paris founded Hilton hotels?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "1", "type": "function",
                     "function": {"name": "multi_search", "arguments": json.dumps(first)}}]},
                {"role": "tool", "tool_call_id": "1", "content": obs},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "2", "type": "function", "function": second}]}]
        return Conversation.from_openai(msgs)

    steps = grounding(conv({"name": "open", "arguments": json.dumps({"page": shown})}), 0.5)
    assert [(s.name, s.grounded) for s in steps] == [("multi_search", True), ("open", True)]
    # one query of words never seen is enough to make the call ungrounded
    bad = grounding(conv({"name": "multi_search", "arguments": json.dumps({"queries": ["Paris", "zebra quokka"]})}),
                    0.5)
    assert not bad[1].grounded and "zebra" in bad[1].why
    # the hits' echo of the queries is the agent's own words: it grounds nothing, the hits' text does
    seen = Seen()
    seen.add_observation(json.dumps([{"page_id": "9", "title": "Alpha", "snippet": "a harbour", "rank": 1,
                                      "queries": ["zebra quokka"]}]))
    assert seen.share("zebra quokka")[0] == 0.0 and seen.share("harbour")[0] == 1.0 and "9" in seen.ids


def test_the_tool_server_serves_it_only_when_the_config_does(out, index):
    top = index.search("Paris", 1)[0]["page_id"]
    with start_server(out / "index", ON) as server, httpx.Client(base_url=server.url, timeout=10) as client:
        box = Toolbox(index, ON)
        assert [s["function"]["name"] for s in client.get("/tools").json()] == list(tool_names(ON))
        want = json.loads(box.call("multi_search", {"queries": QUERIES, "k": 3})[0])
        assert client.post("/multi_search", json={"queries": QUERIES, "k": 3}).json() == want
        # a query string repeats the field, as for exclude
        assert client.get("/multi_search", params=[("queries", q) for q in QUERIES] + [("k", "3")]).json() == want
        masked = Toolbox(index, ON, mask_page_ids=[top]).call("multi_search", {"queries": QUERIES, "k": 3})[0]
        got = client.post("/multi_search", json={"queries": QUERIES, "k": 3, "exclude": [top]})
        assert got.json() == json.loads(masked) and top not in [h["page_id"] for h in got.json()]
        bad = client.post("/multi_search", json={"queries": []})
        assert bad.status_code == 400 and "'queries' is empty" in bad.json()["error"]
    with start_server(out / "index", ToolsConfig()) as server, httpx.Client(base_url=server.url, timeout=10) as c:
        assert c.post("/multi_search", json={"queries": ["Paris"]}).status_code == 404


@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="verl is not installed (the `rl` extra)")
def test_verl_runs_it_through_the_tool_server_with_the_rows_mask(out, index):
    from helpers.verlloop import call_tool, tool_loop

    from synth.tools.verl_tool import HopforgeTool

    top = index.search("Paris", 1)[0]["page_id"]
    tools = {"extra_tools": ["multi_search"]}
    with start_server(out / "index", ON) as server:
        tool = HopforgeTool({"type": "native", "name": "multi_search", "url": server.url, "tools": tools,
                             "require_exclude": True})
        loop = tool_loop([tool])
        kwargs = {"multi_search": {"create_kwargs": {"exclude": [top]}}}
        got = call_tool(loop, "multi_search", {"queries": QUERIES, "k": 3}, kwargs)
        masked = Toolbox(index, ON, mask_page_ids=[top])
        assert got == masked.call("multi_search", {"queries": QUERIES, "k": 3})[0]
        assert top not in got
        # the model's own exclude is an unknown argument: it cannot unmask the page
        sneaky = call_tool(loop, "multi_search", {"queries": QUERIES, "exclude": []}, kwargs)
        assert "unknown argument(s) exclude" in json.loads(sneaky)["error"]
        bad = call_tool(loop, "multi_search", {"queries": ["a"] * 9}, kwargs)
        assert "at most 5" in json.loads(bad)["error"]
        # a row without the tool's mask is refused rather than searched unmasked
        refused = call_tool(loop, "multi_search", {"queries": QUERIES}, {})
        assert "exclude" in refused and top not in refused
    with pytest.raises(ValueError, match="tools.extra_tools"):
        HopforgeTool({"type": "native", "name": "multi_search", "url": server.url, "verify_server": False})


@pytest.mark.parametrize("cfg", [ToolsConfig(), ON], ids=["default", "extra_tools"])
def test_a_rollout_is_offered_it_and_counts_it_only_when_the_config_names_it(index, cfg):
    """The rollout's tools are the toolbox's config: the teacher is sent multi_search's schema, and the trace
    counts its calls, only under ``tools.extra_tools``; without it a call is an error the agent reads."""
    import asyncio

    from helpers.traces import make_question
    from synth.rollout.loop import RolloutSettings, rollout_one
    from synth.teacher.client import Teacher
    from synth.teacher.config import TeacherConfig
    from synth.teacher.types import BaseChatModel, ChatResponse

    offered: list[list[str]] = []

    class TwoTurns(BaseChatModel):
        name = "two-turns"

        async def chat(self, messages, tools=None, *, sample_index=0, task=None):
            offered.append([t["function"]["name"] for t in tools or []])
            if not any(m["role"] == "tool" for m in messages):
                call = {"id": "c1", "type": "function",
                        "function": {"name": "multi_search", "arguments": json.dumps({"queries": QUERIES})}}
                return ChatResponse(message={"role": "assistant", "content": "", "tool_calls": [call]},
                                    usage={"prompt_tokens": 10, "completion_tokens": 5}, finish_reason="tool_calls")
            return ChatResponse(message={"role": "assistant", "content": "<answer>x</answer>"},
                                usage={"prompt_tokens": 20, "completion_tokens": 5}, finish_reason="stop")

    settings = RolloutSettings(max_turns=4, max_tokens=100_000, compress_observations=False, keep_observations=2,
                               seed=0, min_grounding=0.5)
    teacher = Teacher(TeacherConfig(backend="oracle"), None, backend=TwoTurns())
    trace = asyncio.run(rollout_one(teacher, Toolbox(index, cfg), make_question(), 0, settings))
    assert offered[0] == list(tool_names(cfg))
    if cfg.extra_tools:
        assert [(c.name, c.calls) for c in trace.tool_counts][-1] == ("multi_search", 1)
        assert trace.searched_page_ids == [h["page_id"] for h in merged_by_hand(index, QUERIES, cfg.search_k)]
    else:
        assert [c.name for c in trace.tool_counts] == ["search", "open", "find"] and trace.n_tool_calls == 1
        assert trace.searched_page_ids == []
