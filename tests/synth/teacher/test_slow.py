"""A slow single-slot server: the client keeps its backlog in its own (untimed) queue, cancels what it
abandons, says when it retries, and shows what is waiting and what is being sent."""

from __future__ import annotations

import logging

import pytest

from helpers.openai_server import serve
from synth.teacher.client import Teacher, TeacherConfig

KEY_ENV = "HOPFORGE_TEST_SLOW_KEY"


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-slow")


def teacher(srv, **kw) -> Teacher:
    base = dict(backend="openai", base_url=srv.base_url, model="m", api_key_env=KEY_ENV, backoff_base_s=0.05,
                backoff_max_s=0.2)
    return Teacher(TeacherConfig(**{**base, **kw}))


async def ask(t: Teacher, i: int):
    return await t.chat([{"role": "user", "content": f"item {i}"}])


class Progress:
    def __init__(self):
        self.n, self.postfixes = 0, []

    def update(self, n=1):
        self.n += n

    def set_postfix(self, text):
        self.postfixes.append(text)


def test_requests_queued_in_the_client_are_not_timed_out():
    # Five requests of 0.4 s each, served one after another (the server saw one at a time): the last
    # is answered after the other four were, 2 s of service after the batch began, twice the timeout,
    # but it was only sent 0.4 s before.  Nothing times out, so none was timed while it queued.
    with serve(latency=0.4, slots=1) as srv:
        t = teacher(srv, concurrency=1, timeout_s=1.0, max_retries=0)
        progress = Progress()
        out = t.map(lambda i: ask(t, i), range(5), progress=progress)
        served, busy, cancelled = srv.count, srv.max_busy, srv.cancelled
    assert all(r.finish_reason == "stop" for r in out)
    assert served == 5 and busy == 1 and cancelled == 0  # sequential service: 5 x 0.4 s > timeout_s
    s = t.stats.as_dict()
    assert s["attempt_errors"] == {} and s["requests"] == 5
    assert progress.n == 5 and "1 sending, 1 waiting" in progress.postfixes  # map runs 2 x concurrency at once


def test_a_single_slot_server_is_not_buried_in_abandoned_requests(caplog):
    # Eight 0.5 s requests, six sent at once to one slot with a 1.2 s timeout: the later ones time out
    # in the server's queue.  Each timeout is cancelled (the server sees the client leave) and keeps a
    # slot back, so the backlog moves into the client's queue and every item still gets its answer.
    with serve(latency=0.5, slots=1) as srv, caplog.at_level(logging.WARNING, logger="hopforge"):
        t = teacher(srv, concurrency=6, timeout_s=1.2, max_retries=10)
        out = t.map(lambda i: ask(t, i), range(8))
        cancelled, busy = srv.cancelled, srv.max_busy
    s = t.stats.as_dict()
    timeouts = s["attempt_errors"].get("timeout", 0)
    assert all(not isinstance(r, Exception) for r in out) and s["completed"] == 8 and s["failed"] == 0
    assert timeouts >= 1 and s["retries"] == timeouts and 1 <= cancelled <= timeouts and busy == 1
    assert timeouts <= 8, timeouts  # without the cap every round of retries would time out again
    lines = [r.getMessage() for r in caplog.records if "retr" in r.getMessage()]
    assert lines and "timeout" in lines[0] and "counted in the stage report" in lines[0]
    # Sending less at once than configured, until the server keeps up: the retry line says so.
    assert "sending at most 5 of teacher.concurrency=6 at once" in lines[0]


def test_retry_lines_are_rate_limited(caplog):
    from helpers.openai_server import Status

    with serve(handler=lambda req: Status(503)) as srv, caplog.at_level(logging.WARNING, logger="hopforge"):
        t = teacher(srv, concurrency=4, timeout_s=5, max_retries=3, backoff_base_s=0.0, backoff_max_s=0.0,
                    abort_after=100)
        out = t.map(lambda i: ask(t, i), range(4))
    assert all(e.reason == "http_503" for e in out) and t.stats.as_dict()["retries"] == 12
    retry_lines = [r for r in caplog.records if "retr" in r.getMessage() and "http_503" in r.getMessage()]
    assert len(retry_lines) == 1  # twelve retries, one line (the rest are in the report)
