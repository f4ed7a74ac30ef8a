"""An endpoint that fails as a whole stops the stage; an item that fails is only dropped."""

from __future__ import annotations

import socket

import pytest

from helpers.openai_server import Status, serve
from synth.teacher.client import Breaker, Teacher, TeacherError, TeacherUnavailable, failure_kind
from synth.teacher.config import TeacherConfig

KEY_ENV = "HOPFORGE_TEST_KEY"


class NoSleep:
    def __init__(self):
        self.now = 0.0

    async def sleep(self, s: float) -> None:
        self.now += s

    def clock(self) -> float:
        return self.now


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def _teacher(base_url: str, **kw) -> Teacher:
    t = NoSleep()
    cfg = TeacherConfig(backend="openai", base_url=base_url, model="m", api_key_env=KEY_ENV, max_retries=2,
                        backoff_base_s=0.01, backoff_max_s=0.01, timeout_s=5.0, **kw)
    return Teacher(cfg, None, sleep=t.sleep, clock=t.clock)


def _ask_many(teacher: Teacher, n: int):
    async def one(i):
        return await teacher.chat([{"role": "user", "content": f"q{i}"}])

    return teacher.map(one, range(n))


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-secret")


def test_failure_kinds():
    assert [failure_kind(r) for r in ("http_401", "http_403", "http_404", "unreachable", "http_503", "timeout",
                                      "connection", "http_400", "http_429", "bad_response")] == \
        ["auth", "auth", "model", "unreachable", "server", "server", "server", None, None, None]


def test_wrong_key_stops_instead_of_dropping_every_item():
    with serve(handler=lambda req: Status(401, message="Incorrect API key provided")) as srv:
        teacher = _teacher(srv.base_url)
        with pytest.raises(TeacherUnavailable) as e:
            _ask_many(teacher, 50)
        msg = str(e.value)
        assert "\n" not in msg and srv.base_url.removesuffix("/v1") in msg and "'m'" in msg and f"${KEY_ENV}" in msg
        assert "sk-test-secret" not in msg
        assert srv.count < 50  # it stopped; the remaining items were never sent


def test_unknown_model_names_the_setting():
    with serve(handler=lambda req: Status(404, message="model 'm' does not exist")) as srv:
        with pytest.raises(TeacherUnavailable, match="teacher.model"):
            _ask_many(_teacher(srv.base_url), 20)


def test_dead_endpoint_stops_and_counts_no_requests():
    teacher = _teacher(f"http://127.0.0.1:{_free_port()}/v1")
    with pytest.raises(TeacherUnavailable, match="nothing answers at .*teacher.base_url"):
        _ask_many(teacher, 30)
    s = teacher.stats.as_dict()
    assert s["requests"] == 0 and s["attempt_errors"].get("unreachable", 0) >= 3


def test_item_failures_stay_drops():
    # A 400 for one bad request is that item's failure: the batch goes on.
    with serve(handler=lambda req: Status(400) if "bad" in req["messages"][-1]["content"] else
               '{"ok": 1}') as srv:
        teacher = _teacher(srv.base_url)

        async def one(text):
            return await teacher.chat([{"role": "user", "content": text}])

        out = teacher.map(one, ["bad 1", "fine", "bad 2", "bad 3", "bad 4", "fine"])
        assert [isinstance(x, TeacherError) for x in out] == [True, False, True, True, True, False]


def test_persistent_5xx_stops_after_retries_but_a_blip_does_not():
    with serve(handler=lambda req: Status(503)) as srv:
        teacher = _teacher(srv.base_url, abort_after=3)
        with pytest.raises(TeacherUnavailable, match="keeps failing"):
            _ask_many(teacher, 10)
        assert srv.count >= 3 * 3  # three calls used up their retries first
    with serve() as srv:
        srv.push(Status(500), Status(500), Status(500), Status(500))  # one call's retries, then answers
        out = _ask_many(_teacher(srv.base_url, abort_after=3), 4)
        assert not any(isinstance(x, BaseException) for x in out)


def test_breaker_gives_a_recently_healthy_endpoint_time():
    now = [0.0]
    b = Breaker(threshold=2, grace_s=60, clock=lambda: now[0])
    b.success()
    now[0] = 10
    assert not b.failure("unreachable", "unreachable", "x") and not b.failure("unreachable", "unreachable", "x")
    now[0] = 80  # down for over a minute: now it trips
    assert b.failure("unreachable", "unreachable", "x") and b.tripped[0] == "unreachable"
    fresh = Breaker(threshold=2, grace_s=60, clock=lambda: 0.0)
    assert not fresh.failure("auth", "http_401", "x") and fresh.failure("auth", "http_401", "x")
