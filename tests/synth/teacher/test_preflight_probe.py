"""The preflight probes the teacher's endpoint with one tiny tool-call request and names the fix
when tools would not work: native tool calls, tool calls in text, or tools ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.preflight import check
from helpers.openai_server import Reply, Status, call, serve, text_tools_handler
from synth.teacher import probe

CONFIG = str(Path(__file__).resolve().parents[3] / "configs" / "demo.yaml")
SECRET = "sk-preflight-SECRET-1234"
ENV = {"HOPFORGE_PF_KEY": SECRET}


@pytest.fixture(autouse=True)
def _fresh_probes():
    probe.forget()
    yield
    probe.forget()


def problems(srv, tmp_path, protocol: str = "native") -> list[str]:
    sets = ["teacher.backend=openai", f"teacher.base_url={srv.base_url}", "teacher.model=m",
            "teacher.api_key_env=HOPFORGE_PF_KEY", f"teacher.tool_protocol={protocol}"]
    return check(CONFIG, sets, tmp_path, via="cli", env=ENV, stages=["rollout"])


def native(req: dict):
    if req.get("tools"):
        return Reply(tool_calls=[call("get_weather", {"city": "Paris"})])
    return Reply(content="hello")


def test_native_tool_calls_pass_and_are_recorded(tmp_path):
    with serve(handler=native) as srv:
        assert problems(srv, tmp_path) == []
        [sent] = [r.body for r in srv.requests if r.path.endswith("/chat/completions")]
        assert sent["tools"][0]["function"]["name"] == "get_weather" and len(sent["messages"]) == 1
        assert probe.recall((srv.base_url, "m"), "tools").found == "native"


def test_a_server_that_ignores_tools_fails_with_the_fix(tmp_path):
    with serve(handler=text_tools_handler("hermes")) as srv:  # HTTP 200, prose, no call: tools dropped
        [p] = problems(srv, tmp_path)
        assert "ignores the tools it is sent" in p and "--enable-auto-tool-choice --tool-call-parser hermes" in p
        assert "--set teacher.tool_protocol=react" in p and "llama.cpp: `--jinja`" in p
        [p] = problems(srv, tmp_path, "auto")  # auto has nothing to use either
        assert "ignores the tools" in p
        n = srv.count
        assert problems(srv, tmp_path, "hermes") == []  # a text protocol needs nothing of the server
        assert srv.count == n + 1  # GET /models only: no probe


def test_a_server_that_rejects_tools_fails_with_the_fix(tmp_path):
    def handler(req):
        if req.get("tools"):
            return Status(400, message='"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser')
        return Reply(content="hello")
    with serve(handler=handler) as srv:
        [p] = problems(srv, tmp_path)
    assert "rejects requests with tools (HTTP 400" in p and "teacher.tool_protocol" in p


@pytest.mark.parametrize("protocol, parser", [("hermes", "hermes"), ("llama3", "llama3_json"),
                                              ("mistral", "mistral"), ("react", None)])
def test_tool_calls_in_text_name_their_format(tmp_path, protocol, parser):
    with serve(handler=text_tools_handler(protocol, renders_tools=True)) as srv:
        [p] = problems(srv, tmp_path)
        assert f"returns tool calls as text ({protocol} format" in p
        assert f"--set teacher.tool_protocol={protocol}" in p
        assert (f"--tool-call-parser {parser}" in p) == (parser is not None)
        assert problems(srv, tmp_path, "auto") == []  # auto uses that format
        assert probe.recall((srv.base_url, "m"), "tools").found == protocol


def test_the_probe_never_shows_the_key(tmp_path):
    with serve(handler=lambda req: Reply(content=f"my key is {SECRET}") if req.get("tools") else "hi") as srv:
        [p] = problems(srv, tmp_path)
    assert SECRET not in p and "***" in p and SECRET not in repr(probe._FOUND)
