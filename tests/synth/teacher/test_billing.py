"""Billing what the provider bills: prompt tokens the server served from its own prefix cache
(``usage.prompt_tokens_details.cached_tokens``) are recorded apart from hopforge's call cache and
priced at ``teacher.price_per_mtok.cached_prompt`` when it is set."""

from __future__ import annotations

import pytest

from helpers.openai_server import Reply, serve
from synth.teacher.client import Teacher, TeacherConfig
from synth.teacher.config import Price
from synth.teacher.stats import TeacherUsage
from synth.teacher.types import read_usage

KEY_ENV = "HOPFORGE_TEST_BILLING_KEY"
USAGE = {"prompt_tokens": 1000, "completion_tokens": 50, "prompt_tokens_details": {"cached_tokens": 800}}


def _usd(prompt: int, cached: int, completion: int, price: dict) -> float:
    """The bill by hand: the uncached prompt at the prompt rate, the cached part at its rate."""
    return ((prompt - cached) * price["prompt"] + cached * price.get("cached_prompt", price["prompt"])
            + completion * price["completion"]) / 1e6


def test_read_usage_keeps_the_servers_cached_tokens_and_reads_its_own_record_back() -> None:
    u = read_usage(USAGE)
    assert u == {"prompt_tokens": 1000, "completion_tokens": 50, "server_cached_prompt_tokens": 800}
    assert read_usage(u) == u  # a cache record reads back the same
    assert read_usage({"prompt_tokens": 5, "completion_tokens": 1}) == {"prompt_tokens": 5, "completion_tokens": 1}
    # A server claiming more cached tokens than it was sent is held to the prompt.
    assert read_usage({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 9}})[
        "server_cached_prompt_tokens"] == 5
    with pytest.raises(ValueError, match="cached_tokens is -1"):
        read_usage({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": -1}})


def test_price_bills_server_cached_tokens_at_the_cached_rate_when_set() -> None:
    price = {"prompt": 2.0, "completion": 8.0, "cached_prompt": 0.5}
    assert Price(**price).usd(1000, 50, 800) == pytest.approx(_usd(1000, 800, 50, price))
    plain = {"prompt": 2.0, "completion": 8.0}
    assert Price(**plain).usd(1000, 50, 800) == pytest.approx(_usd(1000, 0, 50, plain))  # unset: ordinary tokens
    assert "no cached_prompt set" in Price(**plain).describe()


def test_a_server_that_reports_cached_tokens_is_billed_at_the_cached_rate(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    price = {"prompt": 2.0, "completion": 8.0, "cached_prompt": 0.5}
    with serve(handler=lambda req: Reply(content="ok", usage=USAGE)) as srv:
        cfg = TeacherConfig(backend="openai", base_url=srv.base_url, model="m", api_key_env=KEY_ENV,
                            max_retries=0, tool_protocol="native", price_per_mtok=price)
        t = Teacher(cfg, tmp_path / "teacher.sqlite")
        for text in ("one", "two", "one"):  # the second "one" is a call-cache hit: no request
            t.chat_sync([{"role": "user", "content": text}])
        sent = srv.count
    d = t.stats.as_dict()
    assert sent == 2 and d["cache_hits"] == 1
    assert (d["prompt_tokens"], d["server_cached_prompt_tokens"], d["completion_tokens"]) == (2000, 1600, 100)
    assert (d["cached_prompt_tokens"], d["cached_server_cached_prompt_tokens"]) == (1000, 800)
    assert d["cost_usd"] == pytest.approx(sent * _usd(1000, 800, 50, price))
    u = TeacherUsage.from_report(d).priced(Price(**price))
    assert u.cost_with_cache_usd == pytest.approx(3 * _usd(1000, 800, 50, price))
    assert u.server_cached_prompt_tokens == 1600
