"""What real servers answer besides a completion, against the local fake server: each reply is
read as text, or is a named failure that never enters the call cache, and nothing stalls.

Content as a list of parts, an error inside a 200, a stream, bytes that are not UTF-8, a body cut
mid-way, usage figures that are no token counts, an exhausted quota and a Retry-After of a day.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3

import orjson
import pytest

from helpers.openai_server import Raw, Reply, Status, serve, sse, tool_text
from synth.teacher.breaker import says_quota
from synth.teacher.cache import CallCache
from synth.teacher.client import Teacher, TeacherConfig, TeacherError, TeacherUnavailable
from synth.teacher.prompting import read_json
from synth.teacher.tasks import QUESTION

KEY_ENV = "HOPFORGE_TEST_REPLIES_KEY"
SEARCH = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object",
                                                                               "properties": {"query": {"type": "string"}}}}}]


class FakeTime:
    """Sleeps are recorded and advance the clock at once: a wait shows as a number, never as time."""

    def __init__(self):
        self.now, self.sleeps = 1000.0, []

    def clock(self) -> float:
        return self.now

    async def sleep(self, d: float) -> None:
        self.sleeps.append(d)
        self.now += d
        await asyncio.sleep(0)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-replies-9d2e")


def teacher(srv, tmp_path, ft: FakeTime | None = None, **kw) -> Teacher:
    cfg = dict(backend="openai", base_url=srv.base_url, model="m", api_key_env=KEY_ENV, max_retries=2,
               backoff_base_s=0.01, backoff_max_s=0.01, timeout_s=5.0, tool_protocol="native")
    ft = ft or FakeTime()
    return Teacher(TeacherConfig(**{**cfg, **kw}), tmp_path / "t.sqlite", sleep=ft.sleep, clock=ft.clock)


def completion(message: dict, usage: dict | None = None) -> dict:
    return {"id": "c", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}],
            "usage": usage or {"prompt_tokens": 5, "completion_tokens": 3}}


def parts(*texts: str) -> list[dict]:
    return [{"type": "text", "text": t} for t in texts]


def failure(t: Teacher, messages=None, tools=None) -> TeacherError:
    with pytest.raises(TeacherError) as e:
        t.chat_sync(messages or [{"role": "user", "content": "q"}], tools)
    return e.value


# ---- parse before you cache ------------------------------------------------------------------------------

def test_content_parts_are_read_as_text_in_the_questions_path(tmp_path):
    # prompting.py used to crash with AttributeError on the list, after it had been cached.
    with serve(handler=lambda req: completion({"content": parts('{"question": "Who', ' wrote it?", "answer": "Ada"}')})) \
            as srv:
        t = teacher(srv, tmp_path)
        resp = t.chat_sync([{"role": "user", "content": "write"}])
        assert resp.content == '{"question": "Who wrote it?", "answer": "Ada"}'
        assert read_json(resp.content)[0] == [{"question": "Who wrote it?", "answer": "Ada"}]
        assert QUESTION.format_output(resp).value["question"] == "Who wrote it?"
        again = teacher(srv, tmp_path).chat_sync([{"role": "user", "content": "write"}])
        assert again.cached and again.content == resp.content and srv.count == 1


def test_content_parts_are_read_as_text_in_the_rollout_path(tmp_path):
    # protocols.py used to raise TypeError on a list while reading hermes calls out of the content.
    call_text = tool_text("hermes", "search", {"query": "Ada"})
    content = [*parts("Searching.\n", call_text), {"type": "refusal", "refusal": "no"}]  # no text: skipped
    with serve(handler=lambda req: completion({"content": content})) as srv:
        resp = teacher(srv, tmp_path, tool_protocol="hermes").chat_sync([{"role": "user", "content": "find"}], SEARCH)
    assert [c["function"]["name"] for c in resp.tool_calls] == ["search"] and resp.content == "Searching."


@pytest.mark.parametrize("content, said", [({"text": "hi"}, "message.content is a dict"),
                                           (42, "message.content is a int"),
                                           (["hi"], "message.content[0] is not a content part"),
                                           ([{"type": "text", "text": 7}], "a text part without text")])
def test_any_other_content_is_a_named_bad_response_that_is_not_cached(tmp_path, content, said):
    with serve(handler=lambda req: completion({"content": content})) as srv:
        t = teacher(srv, tmp_path)
        e = failure(t)
        assert e.reason == "bad_response" and said in e.detail and srv.count == 3  # retried, then failed
        assert len(t.cache) == 0
        srv.handler = lambda req: completion({"content": "fixed"})  # the server is fixed: the rerun asks again
        assert teacher(srv, tmp_path).chat_sync([{"role": "user", "content": "q"}]).content == "fixed"
        assert srv.count == 4


def test_a_cache_entry_that_no_longer_parses_is_a_miss(tmp_path):
    with serve(handler=lambda req: completion({"content": "fresh"})) as srv:
        t = teacher(srv, tmp_path)
        msgs = [{"role": "user", "content": "q"}]
        key = t.key(msgs)
        t.cache.put(key, "m", {"message": {"role": "assistant", "content": parts("stale")}, "usage": {}})  # an old entry
        assert t.chat_sync(msgs).content == "fresh" and srv.count == 1
        again = teacher(srv, tmp_path).chat_sync(msgs)
        assert again.cached and again.content == "fresh" and srv.count == 1  # the good answer replaced it
        con = sqlite3.connect(tmp_path / "t.sqlite")
        con.execute("UPDATE calls SET response = ? WHERE key = ?", (b"{not json", key))
        con.commit()
        con.close()
        assert teacher(srv, tmp_path).chat_sync(msgs).content == "fresh" and srv.count == 2


# ---- usage figures ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("usage, said", [
    ({"prompt_tokens": -5, "completion_tokens": 3}, "usage.prompt_tokens is -5, out of range"),
    ({"prompt_tokens": 5, "completion_tokens": 2**64 + 1}, "usage.completion_tokens is 1.8446744073709552e+19, out of range"),
    ({"prompt_tokens": 5, "completion_tokens": 2**63}, "out of range"),
    ({"prompt_tokens": 5.5, "completion_tokens": 3}, "usage.prompt_tokens is 5.5, not a whole number"),
    ({"prompt_tokens": "5", "completion_tokens": 3}, "usage.prompt_tokens is '5', not a whole number"),
    ({"prompt_tokens": 5, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": -1}},
     "usage.prompt_tokens_details.cached_tokens is -1"),
])
def test_usage_figures_that_are_no_token_counts_are_named_and_never_counted(tmp_path, usage, said):
    # A figure over 2**64 used to crash the stage in the cache's write; a negative one entered reports and cost.
    body = json.dumps(completion({"content": "hi"}, usage)).encode()  # orjson cannot write 2**64
    with serve(handler=lambda req: Raw(body)) as srv:
        t = teacher(srv, tmp_path, max_retries=0)
        e = failure(t)
    assert e.reason == "bad_response" and said in e.detail
    s = t.stats.as_dict()
    assert s["prompt_tokens"] == 0 and s["completion_tokens"] == 0 and len(t.cache) == 0
    assert s["failures"] == {"bad_response": 1}


def test_good_usage_figures_are_kept(tmp_path):
    usage = {"prompt_tokens": 2**62, "completion_tokens": 0, "prompt_tokens_details": {"cached_tokens": 4}}
    with serve(handler=lambda req: completion({"content": "hi"}, usage)) as srv:
        resp = teacher(srv, tmp_path).chat_sync([{"role": "user", "content": "q"}])
    # The server's prefix-cache figure is kept too (it is billed at its own rate: test_billing.py).
    assert resp.usage == {"prompt_tokens": 2**62, "completion_tokens": 0, "server_cached_prompt_tokens": 4}


# ---- say what the server said -----------------------------------------------------------------------------

def test_an_error_inside_a_200_shows_the_servers_message(tmp_path):
    # It used to read "bad_response: KeyError: 'choices'".
    body = {"error": {"message": "The model is overloaded, try later", "type": "server_error"}}
    with serve(handler=lambda req: body) as srv:
        t = teacher(srv, tmp_path)
        e = failure(t)
        assert e.reason == "bad_response" and len(t.cache) == 0
        assert "the server answered HTTP 200 with an error: The model is overloaded, try later (server_error)" \
            in e.detail and "KeyError" not in e.detail
        srv.handler = lambda req: {"object": "error", "message": "vLLM says no", "code": 400}
        assert "with an error: vLLM says no (400)" in failure(t).detail


def test_an_http_errors_message_is_shown(tmp_path):
    with serve(handler=lambda req: Status(400, message="This model's maximum context length is 4096 tokens")) as srv:
        e = failure(teacher(srv, tmp_path))
    assert e.reason == "http_400" and e.detail.startswith("This model's maximum context length is 4096 tokens")


def test_a_stream_only_server_is_named_and_not_retried(tmp_path):
    chunk = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}}]}
    with serve(handler=lambda req: sse(chunk)) as srv:
        e = failure(teacher(srv, tmp_path))
        assert e.reason == "bad_response" and "the server answered with a stream (SSE" in e.detail
        assert "JSONDecodeError" not in e.detail and srv.count == 1  # the same request would stream again
        srv.handler = lambda req: Raw(b"data: " + orjson.dumps(chunk) + b"\n\n")  # SSE under a JSON content type
        assert "a stream (SSE" in failure(teacher(srv, tmp_path)).detail


def test_a_reply_that_is_not_utf8_is_named(tmp_path):
    with serve(handler=lambda req: Raw(b'{"choices": [{"message": {"content": "caf\xe9"}}]}')) as srv:
        e = failure(teacher(srv, tmp_path))
    assert e.reason == "bad_response" and "the answer is not UTF-8 text (byte 0xe9 at position 41 of 47)" in e.detail


def test_a_body_cut_mid_way_is_a_dropped_connection(tmp_path):
    body = orjson.dumps(completion({"content": "hi"}))
    with serve(handler=lambda req: Raw(body[:20], length=len(body))) as srv:
        e = failure(teacher(srv, tmp_path))
        assert e.reason == "connection" and srv.count == 3  # retried like any dropped connection
    assert "incomplete" in e.detail.lower() or "peer closed" in e.detail.lower()


def test_empty_and_non_json_bodies_are_named(tmp_path):
    with serve(handler=lambda req: Raw(b"")) as srv:
        assert "the answer of 0 bytes is empty" in failure(teacher(srv, tmp_path)).detail
        srv.handler = lambda req: Raw(b"<html>502 Bad Gateway</html>", content_type="text/html")
        assert "is not JSON" in (d := failure(teacher(srv, tmp_path)).detail) and "<html>502" in d


# ---- quota and long waits ---------------------------------------------------------------------------------

QUOTA = [
    Status(429, headers={"Retry-After": "86400"}, message="You exceeded your current quota, please check your plan "
           "and billing details.", error={"type": "insufficient_quota", "code": "insufficient_quota"}),
    Status(402, message="Insufficient credits. Add more using https://openrouter.ai/credits"),
    Status(400, message="Your credit balance is too low to access the Anthropic API."),
    Status(429, message="Quota exceeded for this project; enable billing to continue", error={"code": 429}),
    {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}},  # inside a 200
]


@pytest.mark.parametrize("answer", QUOTA, ids=["openai", "openrouter", "anthropic", "gemini", "in-a-200"])
def test_an_exhausted_quota_stops_the_stage_at_once_with_one_line(tmp_path, answer):
    ft = FakeTime()
    with serve(handler=lambda req: answer) as srv:
        t = teacher(srv, tmp_path, ft, max_retries=5, concurrency=1)

        async def one(i):
            return await t.chat([{"role": "user", "content": f"q{i}"}])

        with pytest.raises(TeacherUnavailable) as e:
            t.map(one, range(20))
        assert srv.count == 1  # the first answer stops it: no retry, no other item sent
    msg = str(e.value)
    assert "\n" not in msg and "no quota or credit left (quota: " in msg and "add credit" in msg
    assert ft.sleeps == [] and t.stats.as_dict()["failures"] == {"quota": 1}


def test_a_per_minute_quota_is_a_rate_limit_and_is_retried():
    assert not says_quota("Quota exceeded for quota metric 'Generate Content API requests per minute'")
    assert says_quota("insufficient_quota") and says_quota("Your credit balance is too low")


def test_a_retry_after_longer_than_max_wait_stops_the_stage_naming_the_wait(tmp_path):
    # It used to print "next in 86400.0s" and then wait a day with nothing on screen.
    ft = FakeTime()
    with serve(handler=lambda req: Status(429, headers={"Retry-After": "86400"}, message="slow down")) as srv:
        t = teacher(srv, tmp_path, ft, max_retries=5, concurrency=1)

        async def one(i):
            return await t.chat([{"role": "user", "content": f"q{i}"}])

        with pytest.raises(TeacherUnavailable) as e:
            t.map(one, range(20))
        assert srv.count == 1
    msg = str(e.value)
    assert "\n" not in msg and "the server asks to wait 86400 s (Retry-After), more than teacher.max_wait_s=600" in msg
    assert "teacher.max_wait_s to wait that long" in msg and ft.sleeps == []


def test_a_retry_after_within_max_wait_is_honoured(tmp_path):
    ft = FakeTime()
    with serve() as srv:
        srv.push(Status(503, headers={"Retry-After": "900"}))
        resp = teacher(srv, tmp_path, ft, max_wait_s=1000).chat_sync([{"role": "user", "content": "q"}])
    assert resp.content and max(ft.sleeps) >= 900


def test_quota_and_errors_inside_a_200_in_the_call_cache_are_never_written(tmp_path):
    with serve(handler=lambda req: QUOTA[0]) as srv:
        t = teacher(srv, tmp_path)
        with pytest.raises(TeacherUnavailable):
            t.chat_sync([{"role": "user", "content": "q"}])
    assert len(CallCache(tmp_path / "t.sqlite")) == 0
