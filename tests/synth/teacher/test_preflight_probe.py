"""The preflight probes the teacher's endpoint with one tiny tool-call request and names the fix
when tools would not work: native tool calls, tool calls in text, or tools ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.preflight import check
from helpers.openai_server import Reply, Status, call, serve, text_tools_handler
from synth.teacher.client import probes_path
from synth.teacher.probe import Probes

CONFIG = str(Path(__file__).resolve().parents[3] / "configs" / "demo.yaml")
SECRET = "sk-preflight-SECRET-1234"
ENV = {"HOPFORGE_PF_KEY": SECRET}


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
        # Recorded in the run folder, where the run's stages start from it instead of asking again.
        assert Probes.recorded(probes_path(tmp_path), (srv.base_url, "m")).recall((srv.base_url, "m"), "tools").found == "native"


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
        assert Probes.recorded(probes_path(tmp_path), (srv.base_url, "m")).recall((srv.base_url, "m"), "tools").found == protocol


def test_the_probe_never_shows_the_key(tmp_path):
    with serve(handler=lambda req: Reply(content=f"my key is {SECRET}") if req.get("tools") else "hi") as srv:
        [p] = problems(srv, tmp_path)
    assert SECRET not in p and "***" in p
    recorded = probes_path(tmp_path)  # nothing is recorded for a probe that found a problem, and never the key
    assert not recorded.exists() or SECRET not in recorded.read_text()


def test_a_server_answering_with_an_error_is_not_one_that_ignores_tools(tmp_path):
    # An error inside a 200 used to read as "ignores the tools it is sent".
    error = {"error": {"message": "tool use is disabled for this deployment", "type": "invalid_request_error"}}
    with serve(handler=lambda req: error if req.get("tools") else Reply(content="hello")) as srv:
        [p] = problems(srv, tmp_path)
    assert "answers a chat request with an error, not a completion" in p and "ignores" not in p
    assert "tool use is disabled for this deployment (invalid_request_error)" in p


def test_a_stream_only_server_fails_the_preflight_naming_the_stream(tmp_path):
    from helpers.openai_server import sse

    with serve(handler=lambda req: sse({"choices": [{"delta": {"content": "hi"}}]}) if req.get("tools") else
               Reply(content="hello")) as srv:
        [p] = problems(srv, tmp_path, "auto")
    assert "the server answered with a stream (SSE" in p and "JSONDecodeError" not in p


def test_an_exhausted_quota_fails_the_preflight_in_one_line(tmp_path):
    quota = Status(429, message="You exceeded your current quota, please check your plan and billing details.",
                   error={"code": "insufficient_quota"})
    with serve(handler=lambda req: quota if req.get("tools") else Reply(content="hello")) as srv:
        [p] = problems(srv, tmp_path)
    assert "says the account has no quota or credit left" in p and "\n" not in p


@pytest.mark.parametrize("key, said", [(SECRET[:6] + "\r" + SECRET[6:], "contains a control character"),
                                       (SECRET[:6] + "é" + SECRET[6:], "contains a non-ASCII character")])
def test_a_key_with_a_control_or_non_ascii_character_is_named_not_blamed_on_the_server(tmp_path, key, said):
    with serve(handler=native) as srv:
        sets = ["teacher.backend=openai", f"teacher.base_url={srv.base_url}", "teacher.model=m",
                "teacher.api_key_env=HOPFORGE_PF_KEY"]
        [p] = check(CONFIG, sets, tmp_path, via="cli", env={"HOPFORGE_PF_KEY": key}, stages=["rollout"])
        assert srv.count == 0  # never sent
    assert p.startswith("the API key in HOPFORGE_PF_KEY (teacher.api_key_env) " + said)
    assert "nothing answers" not in p and SECRET[6:] not in p and SECRET[:6] not in p


def test_a_key_with_surrounding_whitespace_is_stripped(tmp_path):
    with serve(handler=native) as srv:
        sets = ["teacher.backend=openai", f"teacher.base_url={srv.base_url}", "teacher.model=m",
                "teacher.api_key_env=HOPFORGE_PF_KEY"]
        assert check(CONFIG, sets, tmp_path, via="cli", env={"HOPFORGE_PF_KEY": f" {SECRET}\r\n"},
                     stages=["rollout"]) == []
        assert {r.headers["authorization"] for r in srv.requests} == {f"Bearer {SECRET}"}


def test_a_stage_starts_from_the_preflight_s_probe_and_does_not_ask_again(tmp_path, monkeypatch):
    import asyncio

    from flows.config import load_config
    from synth.engine.stage import Stage, StageContext
    from synth.engine.store import Store
    from synth.teacher.client import open_teacher
    from synth.teacher.config import TeacherConfig

    with serve(handler=text_tools_handler("hermes", renders_tools=True)) as srv:
        assert problems(srv, tmp_path, "auto") == []
        asked = len([r for r in srv.requests if r.path.endswith("/chat/completions")])
        cfg = TeacherConfig(backend="openai", base_url=srv.base_url, model="m", api_key_env="HOPFORGE_PF_KEY",
                            tool_protocol="auto")
        ctx = StageContext(Stage(name="rollout", entry=lambda c: None, sections=("teacher",)), load_config(None),
                           Store(tmp_path), "k")
        monkeypatch.setenv("HOPFORGE_PF_KEY", SECRET)
        teacher = open_teacher(cfg, tmp_path, shared=ctx.shared)
        assert asyncio.run(teacher.backend.tool_support()).found == "hermes"
        assert len([r for r in srv.requests if r.path.endswith("/chat/completions")]) == asked  # no second probe
