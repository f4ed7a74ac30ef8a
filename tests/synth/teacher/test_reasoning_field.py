"""Where a server puts its reasoning, found once, and the field earlier turns' reasoning goes back under."""

from __future__ import annotations

import logging

import pytest

from helpers.openai_server import call, serve
from synth.teacher import probe
from synth.teacher.client import Teacher
from synth.teacher.config import TeacherConfig
from synth.teacher.types import THINK, normalise_message, outgoing_reasoning, reasoning_field_of

KEY_ENV = "HOPFORGE_TEST_REASONING_KEY"


def reply(req: dict, field: str, text: str = "I think so.", content: str = "Done.", **extra) -> dict:
    msg = {"role": "assistant", "content": content, **extra}
    if field == THINK:
        msg["content"] = f"<think>{text}</think>{content}"
    elif field:
        msg[field] = text
    return {"model": req.get("model"), "choices": [{"message": msg, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2}}


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    yield


def teacher(url: str, cache=None, **kw) -> Teacher:
    base = dict(backend="openai", base_url=url, model="m", api_key_env=KEY_ENV, max_retries=0, timeout_s=5.0,
                tool_protocol="native")
    return Teacher(TeacherConfig(**{**base, **kw}), cache)


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content", THINK])
def test_each_field_is_read_and_written_back_the_same_way(field) -> None:
    raw = reply({}, field, text="plan A")["choices"][0]["message"]
    assert reasoning_field_of(raw) == field
    msg = normalise_message(raw)
    assert msg["reasoning_content"] == "plan A" and msg["content"] == "Done."
    out = outgoing_reasoning([{"role": "user", "content": "q"}, msg], field)
    if field == THINK:
        assert out[1] == {"role": "assistant", "content": "<think>\nplan A\n</think>\n\nDone."}
    else:
        assert out[1] == {"role": "assistant", "content": "Done.", field: "plan A"}
    assert reasoning_field_of({"content": "no thoughts"}) is None


def test_the_preflight_probe_finds_the_field_before_any_call() -> None:
    def handler(req):
        if req.get("tools"):  # the tool probe
            return reply(req, "reasoning", tool_calls=[call("get_weather", {"city": "Paris"})], content=None)
        return reply(req, None)

    with serve(handler=handler) as srv:
        t = teacher(srv.base_url, tool_protocol="auto")
        import asyncio

        found = asyncio.run(t.backend.tool_support())
        assert found.found == "native"
        assert t.backend.reasoning_field == "reasoning"


def test_a_cached_reply_teaches_the_field_a_later_request_uses(tmp_path) -> None:
    with serve(handler=lambda req: reply(req, "reasoning", text=f"turn {len(req['messages'])}")) as srv:
        first = [{"role": "user", "content": "q"}]
        r = teacher(srv.base_url, tmp_path / "c.sqlite").chat_sync(first)
        assert r.message["reasoning_content"] == "turn 1" and r.reasoning_field == "reasoning"
        # A new teacher (another stage or process): nothing known but the call cache.
        t = teacher(srv.base_url, tmp_path / "c.sqlite")
        again = t.chat_sync(first)
        assert again.cached and t.backend.reasoning_field == "reasoning"
        sent = srv.count
        t.chat_sync(first + [again.message, {"role": "user", "content": "go on"}])
        assert srv.count == sent + 1
        back = srv.requests[-1].body["messages"][1]
        assert back["reasoning"] == "turn 1" and "reasoning_content" not in back


def test_a_server_s_own_field_is_warned_of_then_read_when_configured(caplog) -> None:
    with serve(handler=lambda req: reply(req, "thinking", text="my own field")) as srv:
        with caplog.at_level(logging.WARNING, logger="hopforge"):
            t = teacher(srv.base_url)
            r = t.chat_sync([{"role": "user", "content": "q"}])
            t.chat_sync([{"role": "user", "content": "q2"}])
        assert "reasoning_content" not in r.message  # not read...
        warned = [rec.getMessage() for rec in caplog.records if "`thinking`" in rec.getMessage()]
        assert len(warned) == 1 and "teacher.reasoning_field to thinking" in warned[0]  # ...but said, once
        t = teacher(srv.base_url, reasoning_field="thinking")
        r = t.chat_sync([{"role": "user", "content": "q3"}])
        assert r.message["reasoning_content"] == "my own field" and r.reasoning_field == "thinking"
        t.chat_sync([{"role": "user", "content": "q3"}, r.message, {"role": "user", "content": "more"}])
        back = srv.requests[-1].body["messages"][1]
        assert back["thinking"] == "my own field" and "reasoning_content" not in back


def test_a_bad_reasoning_field_is_a_config_error() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="reasoning_field"):
        TeacherConfig(backend="openai", base_url="http://x/v1", model="m", reasoning_field="not a name")
