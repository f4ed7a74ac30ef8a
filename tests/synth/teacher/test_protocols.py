"""Tool calls written as text (Hermes/Qwen, Llama 3, Mistral, ReAct) become the same traces as native ones.

Rollouts run the real loop and the real openai backend over HTTP against the local fake
server; a text-protocol model and its native twin must leave identical conversations.
"""

from __future__ import annotations

import json
import logging

import pytest

from flows.config import load_config
from helpers.openai_server import Reply, call, serve, text_tools_handler
from synth.engine.records import Question, Trace
from synth.rollout.loop import rollout_one
from synth.teacher import probe
from synth.teacher.client import Teacher
from synth.teacher.protocols import TEXT_PROTOCOLS, detect, parse_calls, to_text_messages
from synth.teacher.types import ToolsUnusable
from synth.tools.schema import tool_schemas
from synth.tools.toolbox import ToolCallInfo

TOOLS = tool_schemas()


class FakeTools:
    """search/open/find with canned results: the loop needs only schemas() and call()."""

    def schemas(self) -> list[dict]:
        return TOOLS

    def call(self, name, arguments):
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
        info = ToolCallInfo(name=name, arguments=args)
        if name == "search":
            info.searched_page_ids = [f"p-{args['query']}"]
            return json.dumps([{"page_id": f"p-{args['query']}", "title": args["query"], "snippet": "..."}]), info
        info.error = "unknown"
        return json.dumps({"error": "unknown"}), info


QUESTION = Question("q-1", "walk", "w-1", ["p-q1", "p-q2"], ["Q1", "Q2"], "Which page follows q1?", "done", [],
                    "p-q2", [], "m", "sha", 7, "sft")


def native_twin(turns: int = 3):
    """What text_tools_handler's model does, with the server parsing its calls (native tool calling)."""
    def handler(req: dict) -> Reply:
        turn = sum(1 for m in req["messages"] if m["role"] == "assistant") + 1
        if turn >= turns:
            return Reply(content="Found it. <answer>done</answer>")
        return Reply(content=f"Step {turn}: searching.", tool_calls=[call("search", {"query": f"q{turn}"},
                                                                          id=f"call_{turn}_0")])
    return handler


def rollout(srv, tmp_path, monkeypatch, protocol: str, **extra) -> Trace:
    monkeypatch.setenv("HOPFORGE_TEST_KEY", "sk-test-protocols")
    sets = [f"teacher.{k}={v}" for k, v in extra.items()]
    cfg = load_config(None, ["teacher.backend=openai", f"teacher.base_url={srv.base_url}", "teacher.model=m",
                             "teacher.api_key_env=HOPFORGE_TEST_KEY", "teacher.max_retries=0",
                             f"teacher.tool_protocol={protocol}", "rollout.max_turns=6", *sets])
    teacher = Teacher(cfg.teacher, tmp_path / f"{protocol}.sqlite")

    async def one(_):
        return await rollout_one(teacher, FakeTools(), QUESTION, 0, cfg)

    [trace] = teacher.map(one, [None])
    return trace


@pytest.mark.parametrize("protocol", TEXT_PROTOCOLS)
def test_text_tool_calls_make_the_same_trace_as_native_ones(protocol, tmp_path, monkeypatch):
    with serve(handler=native_twin()) as srv:
        native = rollout(srv, tmp_path, monkeypatch, "native")
    with serve(handler=text_tools_handler(protocol)) as srv:
        text = rollout(srv, tmp_path, monkeypatch, protocol)
        sent = [r.body for r in srv.requests]
    assert native.stop_reason == text.stop_reason == "answer" and text.n_tool_calls == native.n_tool_calls == 2
    assert (native.tool_protocol, text.tool_protocol) == ("native", protocol)
    assert text.messages == native.messages and text.tools == native.tools  # the very same conversation
    rows = Trace.to_table([native, text])  # and the same table schema
    assert rows.schema.equals(Trace.SCHEMA) and rows.column("tool_protocol").to_pylist() == ["native", protocol]
    # What the server saw: no `tools`, the schemas in the system prompt, results as user turns.
    assert all("tools" not in b for b in sent)
    last = sent[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "BM25" in last[0]["content"] and "Which page follows q1?" == last[1]["content"]
    assert "q1" in last[3]["content"] and "p-q1" in last[3]["content"]
    if protocol == "react":
        assert sent[0]["stop"] == ["\nObservation:"]


def test_think_blocks_stay_out_of_the_calls_and_the_answer(tmp_path, monkeypatch):
    with serve(handler=text_tools_handler("hermes", think=True)) as srv:
        t = rollout(srv, tmp_path, monkeypatch, "hermes")
    msgs = json.loads(t.messages)
    assistants = [m for m in msgs if m["role"] == "assistant"]
    assert t.stop_reason == "answer" and t.final_answer == "done" and t.n_tool_calls == 2
    assert all(m["reasoning_content"].startswith("The user wants facts") and "<think>" not in m["content"]
               for m in assistants)


def test_truncated_turn_is_its_own_stop_reason(tmp_path, monkeypatch):
    cut = Reply(content='Searching.\n<tool_call>\n{"name": "search", "argu', finish_reason="length")
    with serve(handler=lambda req: cut) as srv:
        t = rollout(srv, tmp_path, monkeypatch, "hermes")
    assert t.stop_reason == "truncated" and t.n_tool_calls == 0 and t.final_answer is None


def test_auto_uses_what_the_probe_found(tmp_path, monkeypatch):
    with serve(handler=text_tools_handler("mistral", renders_tools=True)) as srv:
        t = rollout(srv, tmp_path, monkeypatch, "auto")
        probes = [r for r in srv.requests if "get_weather" in json.dumps(r.body)]
    assert t.tool_protocol == "mistral" and t.stop_reason == "answer" and len(probes) == 1
    with serve(handler=native_twin()) as srv:
        assert rollout(srv, tmp_path, monkeypatch, "auto").tool_protocol == "native"


def test_auto_stops_on_a_server_that_ignores_tools(tmp_path, monkeypatch):
    with serve(handler=text_tools_handler("hermes")) as srv:  # drops `tools`: the model never sees them
        with pytest.raises(ToolsUnusable, match="ignores the tools.*--enable-auto-tool-choice.*teacher.tool_protocol"):
            rollout(srv, tmp_path, monkeypatch, "auto")
        assert srv.count == 1  # the probe; no rollout request was sent


def test_native_warns_when_calls_arrive_as_text(tmp_path, monkeypatch, caplog):
    with serve(handler=text_tools_handler("hermes", renders_tools=True)) as srv, \
            caplog.at_level(logging.WARNING, logger="hopforge"):
        t = rollout(srv, tmp_path, monkeypatch, "native")
    assert t.stop_reason == "no_answer" and t.n_tool_calls == 0
    [line] = [r.getMessage() for r in caplog.records if "as text" in r.getMessage()]
    assert "--tool-call-parser hermes" in line and "teacher.tool_protocol to hermes" in line


def test_each_format_parses_into_the_openai_shape():
    cases = {
        "hermes": 'Look.\n<tool_call>\n{"name": "search", "arguments": {"query": "Paris"}}\n</tool_call>',
        "llama3": '{"name": "search", "parameters": {"query": "Paris"}}',
        "mistral": '[TOOL_CALLS][{"name": "search", "arguments": {"query": "Paris"}}]',
        "react": 'Thought: I should search.\nAction: search\nAction Input: {"query": "Paris"}\nObservation: made up',
    }
    for protocol, text in cases.items():
        assert parse_calls(protocol, text, TOOLS)[1] == [("search", {"query": "Paris"})], protocol
        assert detect(text, TOOLS) == protocol
    more = [("llama3", '<|python_tag|>{"name": "search", "parameters": {"query": "Paris"}}<|eom_id|>'),
            ("llama3", '<|python_tag|>search.call(query="Paris")'), ("llama3", '[search(query="Paris")]'),
            ("mistral", '[TOOL_CALLS]search[ARGS]{"query": "Paris"}'), ("react", "Action: search\nAction Input: Paris")]
    for protocol, text in more:
        assert parse_calls(protocol, text, TOOLS) == ("", [("search", {"query": "Paris"})]), text
    assert parse_calls("react", cases["react"], TOOLS)[0] == "Thought: I should search."
    # Bad arguments reach the tool (which reports them); a block cut short is never guessed at.
    assert parse_calls("hermes", '<tool_call>{"name": "search", "arguments": "{oops"}</tool_call>', TOOLS)[1] == \
        [("search", "{oops")]
    cut = '<tool_call>\n{"name": "search", "arguments": {"query": "Par'
    assert parse_calls("hermes", cut, TOOLS) == (cut, [])
    assert detect("The answer is <answer>Paris</answer>.", TOOLS) is None


def test_conversation_is_rewritten_for_a_server_without_tools():
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q?"},
            {"role": "assistant", "content": "Two searches.", "reasoning_content": "hidden", "tool_calls": [
                call("search", {"query": "a"}, id="c1"), call("search", {"query": "b"}, id="c2")]},
            {"role": "tool", "tool_call_id": "c1", "name": "search", "content": "A"},
            {"role": "tool", "tool_call_id": "c2", "name": "search", "content": "B"}]
    out = to_text_messages("hermes", msgs, TOOLS)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]  # roles alternate (Gemma insists)
    assert out[0]["content"].startswith("Be brief.\n\n# Tools") and "<tools>" in out[0]["content"]
    assert out[2]["content"].count("<tool_call>") == 2 and "hidden" not in out[2]["content"]
    assert out[2]["reasoning_content"] == "hidden"  # an earlier turn's reasoning goes back in its field
    assert out[3]["content"] == "<tool_response>\nA\n</tool_response>\n\n<tool_response>\nB\n</tool_response>"
    assert "[TOOL_RESULTS]" in to_text_messages("mistral", msgs, TOOLS)[3]["content"]
    assert to_text_messages("react", msgs, TOOLS)[3]["content"] == "Observation: A\n\nObservation: B"


def test_probe_reading():
    def body(content=None, tool_calls=None, finish="stop"):
        return {"choices": [{"message": {"content": content, "tool_calls": tool_calls}, "finish_reason": finish}]}
    assert probe.read_tool_probe(body(tool_calls=[call("get_weather", {"city": "Paris"})])).found == "native"
    assert probe.read_tool_probe(body('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}'
                                      '</tool_call>')).found == "hermes"
    assert probe.read_tool_probe(body("It is sunny in Paris.")).found == "ignored"
    assert probe.read_tool_probe(body("<think>long", finish="length")).found == "truncated"
    assert probe.tools_problem("react", probe.Probe("ignored")) is None
    assert probe.tools_problem("auto", probe.Probe("llama3")) is None
    # A probe cut short learnt nothing: native may still work, but auto has nothing to choose.
    assert probe.tools_problem("native", probe.Probe("truncated")) is None
    assert "teacher.max_tokens" in probe.tools_problem("auto", probe.Probe("truncated"))[0]
    what, fix = probe.tools_problem("native", probe.Probe("llama3", "x"))
    assert "llama3_json" in what and fix == "llama3"


def test_native_warns_when_tools_are_silently_ignored(tmp_path, monkeypatch, caplog):
    from synth.teacher.probe import NativeWatch

    watch = NativeWatch()
    said = [watch.check({"content": "It is sunny."}, TOOLS) for _ in range(NativeWatch.SILENT_AFTER + 3)]
    assert [s for s in said if s] == [said[NativeWatch.SILENT_AFTER - 1]]  # once, after SILENT_AFTER replies
    assert "never called one" in said[NativeWatch.SILENT_AFTER - 1]
    working = NativeWatch()
    working.check({"tool_calls": [call("search", {"query": "x"})]}, TOOLS)
    assert not any(working.check({"content": "Done."}, TOOLS) for _ in range(20))  # calls work: answers are fine


def test_native_names_what_the_silent_replies_were():
    """Replies cut at max_tokens or empty are not a server ignoring tools: the warning counts each kind and says
    what to do for it, the most frequent first."""
    from synth.teacher.probe import NativeWatch

    watch = NativeWatch(max_tokens=256)
    replies = [({"content": "Let me see"}, "length")] * 5 + [({"content": ""}, "stop")] * 2 + \
        [({"content": "It is sunny."}, "stop")]
    said = [watch.check(msg, TOOLS, finish) for msg, finish in replies]
    assert said[:-1] == [None] * 7
    assert said[-1] == (
        "was sent tools 8 times and never called one: 5 were cut at teacher.max_tokens=256 before they ended "
        "(finish_reason `length`): a call would come at their end, so raise teacher.max_tokens (a thinking model "
        "spends many tokens first); 2 were empty (no text, no tool call): look at the server's log, its chat "
        "template and that it serves the model; 1 answered in text without a call: the server may be ignoring the "
        "tools. `hopforge check` probes it; teacher.tool_protocol auto, or a text protocol (hermes, llama3, mistral, "
        "react), works without the server's tool support")
