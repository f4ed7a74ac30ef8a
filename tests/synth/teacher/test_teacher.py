"""The teacher client over real HTTP, against the scripted local server.

Timing is never asserted on the wall clock: backoff and rate limits are observed
through an injected sleep and clock, so the tests hold on a loaded 2-core machine.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from helpers.openai_server import Drop, Malformed, Reply, Stall, Status, call, serve
from flows.config import ConfigError
from synth.engine.config import _dump
from synth.teacher.client import Teacher, TeacherConfig, TeacherError, make_backend, register_backend
from synth.teacher.cache import CallCache
from synth.teacher.limits import RateLimiter

ROOT = Path(__file__).resolve().parents[3]
KEY_ENV = "HOPFORGE_TEST_TEACHER_KEY"
SECRET = "sk-hopforge-SECRET-7f3a9c51"


class FakeTime:
    """An injected clock and sleep: sleeps are recorded and advance the clock instantly."""

    def __init__(self, advance: bool = True):
        self.now, self.sleeps, self.advance = 1000.0, [], advance

    def clock(self) -> float:
        return self.now

    async def sleep(self, d: float) -> None:
        self.sleeps.append(d)
        if self.advance:
            self.now += d
        await asyncio.sleep(0)


class Top(random.Random):
    """Jitter pinned to the top of its range, so backoff ceilings become visible."""

    def uniform(self, a: float, b: float) -> float:
        return b


class Bottom(random.Random):
    def uniform(self, a: float, b: float) -> float:
        return a


@pytest.fixture(scope="module")
def srv():
    with serve() as s:
        yield s


@pytest.fixture(autouse=True)
def _key(monkeypatch, srv):
    monkeypatch.setenv(KEY_ENV, SECRET)
    srv.reset()
    srv.latency, srv.handler = 0.0, None


def make(srv, tmp_path=None, ft: FakeTime | None = None, rng=None, **kw) -> Teacher:
    # native: these tests watch the transport itself, without auto's one probe request first
    base = dict(backend="openai", base_url=srv.base_url, model="m", api_key_env=KEY_ENV, max_retries=3,
                backoff_base_s=1.0, backoff_max_s=5.0, timeout_s=5.0, tool_protocol="native")
    base.update(kw)
    ft = ft or FakeTime()
    return Teacher(TeacherConfig(**base), tmp_path / "teacher.sqlite" if tmp_path else None,
                   sleep=ft.sleep, clock=ft.clock, rng=rng or Top())


def msgs(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


# ---- retries and backoff ---------------------------------------------------------------------
def test_5xx_retried_with_capped_exponential_backoff(srv):
    ft = FakeTime()
    t = make(srv, ft=ft, max_retries=5)
    srv.push(Status(500), Status(502), Status(503), Status(500))
    r = t.chat_sync(msgs("hi"))
    assert json.loads(r.content)["echo"] == "hi"
    assert srv.count == 5
    assert ft.sleeps == [1.0, 2.0, 4.0, 5.0]  # base * 2**i, capped at backoff_max_s
    s = t.stats.as_dict()
    assert (s["requests"], s["retries"], s["completed"], s["failed"]) == (5, 4, 1, 0)
    assert s["attempt_errors"] == {"http_500": 2, "http_502": 1, "http_503": 1}


def test_jitter_is_full_and_private(srv):
    ft = FakeTime()
    t = make(srv, ft=ft, rng=random.Random(7), max_retries=4, backoff_base_s=1.0, backoff_max_s=100.0)
    srv.push(*[Status(500)] * 4)
    state = random.getstate()
    t.chat_sync(msgs("x"))
    assert random.getstate() == state  # jitter never touches the global generator
    assert all(0.0 <= d <= 2.0 ** i for i, d in enumerate(ft.sleeps)) and len(ft.sleeps) == 4
    assert len(set(ft.sleeps)) == 4  # jittered, not fixed


def test_retry_after_is_never_undercut(srv, monkeypatch):
    import synth.teacher.limits as limits

    ft = FakeTime()
    t = make(srv, ft=ft, rng=Bottom(), max_retries=5)  # jitter alone would retry at once
    now = 1_800_000_000.0  # the wall clock the HTTP date is read against, pinned
    monkeypatch.setattr(limits, "wall_clock", lambda: now)
    date = email.utils.formatdate(now + 30, usegmt=True)
    srv.push(Status(429, headers={"Retry-After": "7"}), Status(503, headers={"Retry-After": date}),
             Status(429, headers={"retry-after-ms": "1500"}))
    t.chat_sync(msgs("x"))
    assert srv.count == 4
    first, second, third = ft.sleeps
    assert first >= 7.0 and second >= 30.0 and third >= 1.5


def test_retry_after_pauses_every_request():
    ft = FakeTime(advance=False)
    lim = RateLimiter(rpm=None, tpm=None, clock=ft.clock)
    assert lim.reserve(1) == 0.0
    lim.pause_for(12.5)  # one call's 429 holds the others too: they would only collect 429s
    assert lim.reserve(1) == pytest.approx(12.5)
    ft.now += 20
    assert lim.reserve(1) == 0.0


@pytest.mark.parametrize("code", [400, 401, 404, 422])
def test_other_4xx_not_retried(srv, code):
    ft = FakeTime()
    t = make(srv, ft=ft)
    srv.push(Status(code))
    with pytest.raises(TeacherError) as e:
        t.chat_sync(msgs("x"))
    assert e.value.reason == f"http_{code}" and e.value.attempts == 1
    assert srv.count == 1 and ft.sleeps == []


@pytest.mark.parametrize("action,reason", [
    (Status(500), "http_500"), (Status(429), "http_429"), (Drop(), "connection"), (Malformed(), "bad_response"),
    ({"id": "x", "choices": []}, "bad_response"),
])
def test_reason_after_last_retry(srv, action, reason):
    t = make(srv, max_retries=2)
    srv.handler = lambda req: action
    with pytest.raises(TeacherError) as e:
        t.chat_sync(msgs("x"))
    assert (e.value.reason, e.value.attempts, srv.count) == (reason, 3, 3)
    s = t.stats.as_dict()
    assert s["failures"] == {reason: 1} and s["failed"] == 1 and s["retries"] == 2


def test_stall_times_out(srv):
    t = make(srv, max_retries=0, timeout_s=0.3)
    srv.push(Stall(30))
    with pytest.raises(TeacherError) as e:
        t.chat_sync(msgs("x"))
    assert e.value.reason == "timeout"


def test_failure_then_success_is_a_result_not_an_error(srv):
    t = make(srv, max_retries=1)
    srv.push(Drop())
    assert t.chat_sync(msgs("y")).content is not None
    assert t.stats.as_dict()["attempt_errors"] == {"connection": 1}


# ---- what the server receives and returns ----------------------------------------------------
def test_request_shape_and_response_fields(srv):
    t = make(srv, temperature=0.3, top_p=0.9, max_tokens=77, extra_body={"top_k": 20})
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    srv.push(Reply(tool_calls=[call("search", {"q": "Ada"})], reasoning_content="think first"))
    r = t.chat_sync(msgs("x"), tools, hint=object())
    body = srv.requests[0].body
    assert body["model"] == "m" and body["temperature"] == 0.3 and body["top_p"] == 0.9
    assert body["max_tokens"] == 77 and body["top_k"] == 20 and body["tools"] == tools
    assert "n" not in body and isinstance(body["seed"], int)
    assert r.message["tool_calls"][0]["function"] == {"name": "search", "arguments": '{"q": "Ada"}'}
    assert r.message["reasoning_content"] == "think first" and r.finish_reason == "tool_calls"
    assert r.usage["completion_tokens"] >= 1 and not r.cached


def test_object_arguments_are_normalised_to_json_strings(srv):
    t = make(srv)
    srv.push({"model": "m", "choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "function": {"name": "open", "arguments": {"doc": 3}}}]}, "finish_reason": "tool_calls"}]})
    tc = t.chat_sync(msgs("x")).tool_calls[0]
    assert tc == {"id": "c1", "type": "function", "function": {"name": "open", "arguments": '{"doc": 3}'}}


def test_samples_are_distinct_calls_with_distinct_seeds(srv, tmp_path):
    t = make(srv, tmp_path)
    for i in (0, 1, 0):
        t.chat_sync(msgs("same"), sample_index=i)
    assert srv.count == 2
    assert srv.requests[0].body["seed"] != srv.requests[1].body["seed"]
    assert t.stats.as_dict()["cache_hits"] == 1


# ---- the call cache --------------------------------------------------------------------------
def test_restart_never_repeats_a_completed_call(srv, tmp_path):
    srv.handler = lambda req: Drop() if "bad" in req["messages"][-1]["content"] else Reply(content="ok")
    prompts = [msgs(f"q{i}" + (" bad" if i % 5 == 0 else "")) for i in range(20)]

    def asker(t):
        async def ask(m):
            return await t.chat(m)
        return ask

    t1 = make(srv, tmp_path, max_retries=0)
    first = t1.map(asker(t1), prompts)
    assert sum(isinstance(x, TeacherError) for x in first) == 4 and srv.count == 20
    t1.close()

    srv.reset()
    srv.handler = None  # the server recovered: only the 4 failures are asked again
    t2 = make(srv, tmp_path, max_retries=0)
    second = t2.map(asker(t2), prompts)
    assert srv.count == 4 and all(not isinstance(x, TeacherError) for x in second)
    s = t2.stats.as_dict()
    assert (s["requests"], s["cache_hits"]) == (4, 16)
    assert s["cached_prompt_tokens"] > 0
    assert [x.message for x, y in zip(second, first) if not isinstance(y, TeacherError)] == \
        [y.message for y in first if not isinstance(y, TeacherError)]

    srv.reset()
    t3 = make(srv, tmp_path)
    assert all(r.cached for r in t3.map(asker(t3), prompts)) and srv.count == 0
    assert t3.stats.as_dict()["requests"] == 0


def test_cache_key_ignores_hint_url_and_operational_fields(srv, tmp_path):
    t = make(srv, tmp_path, concurrency=3, rpm=1000, timeout_s=9)
    k = t.key(msgs("a"))
    assert make(srv, tmp_path, concurrency=50).key(msgs("a")) == k
    assert make(srv, tmp_path, temperature=0.1).key(msgs("a")) != k
    assert make(srv, tmp_path, model="other").key(msgs("a")) != k
    assert t.key(msgs("a"), sample_index=1) != k
    t.chat_sync(msgs("a"), hint="one")
    t.chat_sync(msgs("a"), hint="two")
    assert srv.count == 1


def test_cache_threads_write_safely(tmp_path):
    cache = CallCache(tmp_path / "c.sqlite")

    def writer(w: int) -> None:
        for i in range(150):
            cache.put(f"k{w}-{i}", "m", {"message": {"role": "assistant", "content": f"{w}/{i}"}, "usage": {}})
            assert cache.get(f"k{w}-{i}")["message"]["content"] == f"{w}/{i}"

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(cache) == 8 * 150 and cache.integrity_ok()
    cache.close()


def test_cache_two_processes_write_safely(tmp_path):
    path = tmp_path / "c.sqlite"
    code = ("import sys; from synth.teacher.cache import CallCache\n"
            "c = CallCache(sys.argv[1]); w = int(sys.argv[2])\n"
            "for i in range(400):\n"
            "    k = f'k{(i + w * 200)}'\n"  # half the keys overlap between the two writers
            "    c.put(k, 'm', {'message': {'content': k}, 'usage': {}})\n"
            "    assert c.get(k)['message']['content'] == k\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), str(w)], cwd=ROOT) for w in (0, 1)]
    assert [p.wait(120) for p in procs] == [0, 0]
    cache = CallCache(path)
    assert len(cache) == 600 and cache.integrity_ok()
    assert cache.get("k599")["message"]["content"] == "k599"


# ---- flow control ----------------------------------------------------------------------------
def test_concurrency_limit_holds_across_threads(srv):
    srv.latency = 0.03
    t = make(srv, concurrency=4)

    async def ask(i):
        return await t.chat(msgs(f"q{i}"))

    out: list = []
    threads = [threading.Thread(target=lambda k=k: out.append(t.map(ask, range(k * 30, k * 30 + 30), limit=30)))
               for k in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert srv.count == 60 and all(not isinstance(x, TeacherError) for r in out for x in r)
    assert 2 <= srv.max_in_flight <= 4


def test_rate_limiter_never_exceeds_rpm_in_any_minute():
    ft = FakeTime(advance=False)
    lim = RateLimiter(rpm=600, tpm=None, clock=ft.clock)
    starts = []
    for step in range(3000):  # callers arriving every 10 ms, far above 10/s
        ft.now = 1000.0 + step * 0.01
        starts.append(ft.now + lim.reserve(1))
    starts.sort()
    j = 0
    for i, s in enumerate(starts):  # sliding 60 s window over the send times
        while starts[j] <= s - 60.0:
            j += 1
        assert i - j + 1 <= 600
    assert 599 <= sum(1 for s in starts if s < starts[0] + 60) <= 600  # and the budget is used


def test_token_limit_charges_estimated_tokens():
    ft = FakeTime(advance=False)
    lim = RateLimiter(rpm=None, tpm=6000, clock=ft.clock)  # 100 tokens/s
    delays = [lim.reserve(500) for _ in range(5)]
    assert delays[0] == 0.0
    gaps = [b - a for a, b in zip(delays, delays[1:])]
    assert all(g == pytest.approx(500 / ((6000 - 100 + 1) / 60)) for g in gaps[1:])


def test_teacher_waits_for_rpm(srv):
    ft = FakeTime(advance=False)
    t = make(srv, ft=ft, rpm=60)  # one a second, burst of one

    async def ask(i):
        return await t.chat(msgs(f"r{i}"))

    assert all(not isinstance(x, TeacherError) for x in t.map(ask, range(5)))
    assert sorted(ft.sleeps) == pytest.approx([1.0, 2.0, 3.0, 4.0])
    assert t.stats.as_dict()["rate_wait_s"] == pytest.approx(10.0)


# ---- map ---------------------------------------------------------------------------------------
class Count:
    def __init__(self):
        self.n = 0

    def update(self, n: int = 1) -> None:
        self.n += n


def test_map_keeps_order_and_accounts_for_every_item(srv):
    srv.latency = 0.002
    srv.handler = lambda req: Status(400) if req["messages"][-1]["content"].endswith("7") else \
        Reply(content=json.dumps({"echo": req["messages"][-1]["content"]}))
    t = make(srv, concurrency=8)

    async def ask(i):
        return json.loads((await t.chat(msgs(f"item {i}"))).content)["echo"]

    bar = Count()
    out = t.map(ask, range(60), progress=bar)
    ok = [x for x in out if not isinstance(x, TeacherError)]
    failed = [x for x in out if isinstance(x, TeacherError)]
    assert len(ok) + len(failed) == 60 == bar.n and len(failed) == 6
    assert all(out[i] == f"item {i}" for i in range(60) if i % 10 != 7)
    assert all(out[i].reason == "http_400" for i in range(7, 60, 10))
    assert t.stats.as_dict()["failures"] == {"http_400": 6}


def test_map_propagates_bugs(srv):
    t = make(srv)

    async def bad(i):
        if i == 3:
            raise ValueError("a bug, not a teacher failure")
        return await t.chat(msgs(str(i)))

    with pytest.raises(ValueError):
        t.map(bad, range(10))


def test_map_from_thread_and_from_running_loop(srv):
    t = make(srv)

    async def ask(i):
        return (await t.chat(msgs(f"z{i}"))).content

    box: list = []
    th = threading.Thread(target=lambda: box.append(t.map(ask, range(5))))
    th.start()
    th.join()

    async def inside():
        return t.map(ask, range(5, 10))

    assert len(box[0]) == 5 and len(asyncio.run(inside())) == 5


def test_stats_snapshot_and_cost(srv):
    t = make(srv, price_per_mtok={"prompt": 1.0, "completion": 2.0})
    t.chat_sync(msgs("one"))
    snap = t.stats.snapshot()
    srv.push(Reply(content="c", usage={"prompt_tokens": 1000, "completion_tokens": 500}))
    t.chat_sync(msgs("two"))
    d = t.stats.since(snap)
    assert (d["calls"], d["prompt_tokens"], d["completion_tokens"]) == (1, 1000, 500)
    assert d["cost_usd"] == pytest.approx(0.002)
    t.stats.reset()
    assert t.stats.as_dict()["calls"] == 0


# ---- secrets and configuration ---------------------------------------------------------------
def test_api_key_never_leaks(srv, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    srv.handler = lambda req: Status(401, message=f"invalid key {SECRET}")
    t = make(srv, tmp_path, max_retries=1)
    errors = []
    for action in (None, Malformed(SECRET.encode()), Status(500, message=SECRET)):
        srv.handler = (lambda req, a=action: a) if action else srv.handler
        try:
            t.chat_sync(msgs("leak?"))
        except TeacherError as e:
            errors.append(e)
    srv.handler = None
    t.chat_sync(msgs("fine"))
    assert len(errors) == 3 and "***" in str(errors[0])
    # No chained exception either: the client's error holds the request, which holds the header.
    assert all(e.__context__ is None and e.__cause__ is None for e in errors)
    texts = [caplog.text, json.dumps(t.stats.as_dict()), repr(t), repr(t.cfg), t.cfg.model_dump_json(),
             repr(t.backend)] + [str(e) for e in errors] + [repr(e) for e in errors]
    assert not [x for x in texts if SECRET in x]
    for f in tmp_path.glob("teacher.sqlite*"):
        assert SECRET.encode() not in f.read_bytes()
    # ...and it was sent, only as the bearer token.
    for r in srv.requests:
        assert r.headers["authorization"] == f"Bearer {SECRET}"
        assert SECRET not in json.dumps(r.body)
        assert not [k for k, v in r.headers.items() if SECRET in v and k != "authorization"]


def test_missing_key_fails_at_construction(monkeypatch, srv):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ConfigError, match=KEY_ENV):
        make(srv)


def test_unknown_backend_module_is_a_clear_error():
    register_backend("ghost", "synth.no_such_backend_module:make")
    cfg = TeacherConfig().model_copy(update={"backend": "ghost"})
    with pytest.raises(ConfigError, match="synth.no_such_backend_module"):
        make_backend(cfg)


def test_config_operational_fields_stay_out_of_content_keys():
    dumped = _dump(TeacherConfig(concurrency=3, rpm=5, base_url="http://h/v1", price_per_mtok={"prompt": 1,
                                                                                               "completion": 2}))
    assert {"model", "temperature", "top_p", "max_tokens", "extra_body", "backend"} <= set(dumped)
    assert not {"concurrency", "rpm", "tpm", "timeout_s", "max_retries", "backoff_base_s", "backoff_max_s",
                "price_per_mtok", "api_key_env", "base_url"} & set(dumped)
    with pytest.raises(ValueError, match="credentials"):
        TeacherConfig(base_url="http://user:pw@host/v1")


def test_gate_cancelled_waiter_does_not_leak_a_slot():
    from synth.teacher.limits import Gate

    async def go():
        gate = Gate(1)
        await gate.acquire()
        waiter = asyncio.ensure_future(gate.acquire())
        await asyncio.sleep(0)
        waiter.cancel()
        gate.release()  # hands the slot to the cancelled waiter, which must pass it back
        await asyncio.sleep(0)
        await asyncio.wait_for(gate.acquire(), 1)  # the slot is free again
        gate.release()
        return gate._free

    assert asyncio.run(go()) == 1


def test_cache_write_failure_keeps_the_answer(srv, tmp_path, monkeypatch):
    import sqlite3

    t = make(srv, tmp_path)

    def broken(*a, **k):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(t.cache, "put", broken)
    assert t.chat_sync(msgs("x")).content is not None
    assert t.stats.as_dict()["cache_errors"] == 1


def test_default_backend_is_the_offline_oracle(tmp_path):
    pytest.importorskip("synth.teacher.oracle")
    t = Teacher(TeacherConfig(), tmp_path / "t.sqlite")
    first = t.chat_sync(msgs("hello"))
    again = t.chat_sync(msgs("hello"))
    assert first.message["role"] == "assistant" and again.cached and again.message == first.message


def test_a_backend_is_handed_the_task_and_only_a_scripted_one_reads_the_hint():
    """The oracle's hint travels beside the call (current_hint), never through a backend's signature: a real
    backend sees the call's task (for its response_format), the facts behind the hint stay with the caller."""
    import inspect

    from synth.teacher.openai_compat import OpenAIBackend
    from synth.teacher.tasks import JUDGE, current_hint
    from synth.teacher.types import BaseChatModel, ChatModel, ChatResponse

    seen = []

    class Recording(BaseChatModel):
        async def prepare(self, tools, task=None):
            seen.append(("prepare", task))
            return ""

        async def chat(self, messages, tools=None, *, sample_index=0, task=None):
            seen.append(("chat", task, current_hint()))
            return ChatResponse({"role": "assistant", "content": '{"correct": true}'}, {"prompt_tokens": 1, "completion_tokens": 1})

    hint = JUDGE.hint(answer="A", aliases=(), prediction="A")
    t = Teacher(TeacherConfig(backend="oracle"), None, backend=Recording())
    t.chat_sync([{"role": "user", "content": "judge"}], hint=hint)
    assert seen == [("prepare", JUDGE), ("chat", JUDGE, hint)]
    assert current_hint() is None  # only inside the backend's call
    from synth.teacher.hf import HFChatModel
    from synth.teacher.oracle import OracleModel

    for backend in (ChatModel, BaseChatModel, OpenAIBackend, HFChatModel, OracleModel):
        for name in ("chat", "prepare"):
            if hasattr(backend, name):
                assert "hint" not in inspect.signature(getattr(backend, name)).parameters, (backend, name)
