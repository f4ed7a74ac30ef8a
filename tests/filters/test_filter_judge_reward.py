"""filters/judge_reward.py through filters/reward.py, against a local fake judge (an OpenAI-compatible server on
loopback with scripted replies): RLTR's completeness over N samples and its penalties, the dual reward's process
score and Pareto cost, the call cache, a dead or garbage-answering judge, and the API key kept out of everything.

Solutions are written as verl hands them to the reward (see tests/filters/test_filter_reward.py)."""

from __future__ import annotations

import json
import logging
import socket

import pytest

from filters.judge_reward import pareto_cost, read_process, read_verdict, rltr_reward, trajectory_text
from filters.reward import DIAGNOSTIC_KEYS, REWARD_KEYS, compute_score
from helpers.openai_server import Reply, Status, serve

GT = {"target": ["Delta City", "Delta"]}
EXTRA = {"question_id": "q1", "index": 0, "path": ["p0", "p1", "p2", "p3"], "split": "rl",
         "question": "Which city is the terminus of the line that starts at Alpha Station?"}
KEY_ENV, SECRET = "HOPFORGE_TEST_JUDGE_KEY", "sk-judge-secret-4242"


def call(name: str, **args) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def observation(obj) -> str:
    return "user\n<tool_response>\n" + json.dumps(obj, ensure_ascii=False) + "\n</tool_response>\nassistant\n"


def solution(*turns: str, answer: str | None = "Delta City") -> str:
    final = f"I have it. <answer>{answer}</answer>" if answer is not None else "I am not sure."
    return "".join(turns) + final


SEARCH = call("search", query="Alpha Station") + observation([{"page_id": "p0", "title": "Alpha Station",
                                                                "snippet": "..."}])
SEARCH2 = call("search", query="Bravo Harbour history") + observation([{"page_id": "p1", "title": "Bravo Harbour",
                                                                         "snippet": "..."}])
OPEN = call("open", page="p1") + observation({"page_id": "p1", "title": "Bravo Harbour", "offset": 0,
                                               "next_offset": None, "total_chars": 10, "text": "Bravo"})
BAD_OPEN = call("open", page="nope") + observation({"error": "unknown page 'nope'"})


def verdict(complete: bool) -> Reply:
    return Reply(content=json.dumps({"complete": complete, "reason": "scripted"}))


def judged(srv, tmp_path, **options) -> dict:
    """reward_kwargs with a judge at the fake server (cache in tmp_path)."""
    judge = {"base_url": srv.base_url if srv is not None else options.pop("base_url"), "model": "judge-model",
             "api_key_env": KEY_ENV, "timeout_s": 5, "max_retries": 0, "cache": str(tmp_path / "judge.sqlite"),
             **options.pop("judge", {})}
    return {"judge": judge, **options}


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)


def by_prompt(complete: bool = True, process: int | str = 7):
    """A judge answering each prompt of filters/judge_reward.py: a completeness verdict, or a process score."""
    def handler(req: dict) -> Reply:
        system = req["messages"][0]["content"]
        if "how a search agent used its tools" in system:
            return verdict(complete)
        assert "grade the process" in system
        return Reply(content=json.dumps({"score": process, "reason": "scripted"}) if isinstance(process, int)
                     else process)
    return handler


# ---- defaults: nothing moves -----------------------------------------------------------------------------------


def test_the_judge_terms_are_zero_and_the_score_unchanged_by_default() -> None:
    got = compute_score("hopforge", solution(SEARCH, OPEN), GT, EXTRA)
    assert set(got) == set(REWARD_KEYS) | set(DIAGNOSTIC_KEYS)
    assert got["score"] == 1.0 and (got["rltr"], got["process"], got["cost"], got["raw_judge_failed"]) == (0, 0, 0, 0)
    bad = compute_score("hopforge", solution(SEARCH, answer=None), GT, EXTRA)
    assert {k: bad[k] for k in REWARD_KEYS} == dict.fromkeys(REWARD_KEYS, 0.0)


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="judge.model"):
        compute_score("hopforge", solution(SEARCH), GT, EXTRA, rltr_weight=0.5)
    with pytest.raises(ValueError, match="process_max"):
        compute_score("hopforge", solution(SEARCH), GT, EXTRA, process_max=2.0, judge={"model": "m"})
    with pytest.raises(ValueError, match="unknown reward_kwargs.judge"):
        compute_score("hopforge", solution(SEARCH), GT, EXTRA, rltr_weight=0.5, judge={"model": "m", "url": "x"})
    with pytest.raises(ValueError, match="no judge term"):
        compute_score("hopforge", solution(SEARCH), GT, EXTRA, advantage="hopforge", cost_alpha=0.1)


# ---- RLTR ------------------------------------------------------------------------------------------------------


def test_rltr_averages_the_completeness_verdicts_over_n_samples(tmp_path) -> None:
    with serve() as srv:
        srv.push(verdict(True), verdict(True), verdict(False), verdict(True))
        got = compute_score("hopforge", solution(SEARCH, OPEN), GT, EXTRA,
                            **judged(srv, tmp_path, rltr_weight=0.5, rltr_samples=4))
        assert srv.count == 4
        seeds = {r.body["seed"] for r in srv.requests}
        assert len(seeds) == 4  # four distinct samples of one prompt
        user = srv.requests[0].body["messages"][1]["content"]
        assert EXTRA["question"] in user and "Alpha Station" in user and "Delta City" in user
    # c = 3/4, no repeats or errors; score = 1 (em) + 0.5 * 0.75
    assert got["raw_completeness"] == 0.75 and got["rltr"] == 0.75
    assert got["score"] == pytest.approx(1.375) and got["raw_judge_failed"] == 0.0


def test_rltr_charges_repeated_and_erroneous_calls(tmp_path) -> None:
    text = solution(SEARCH, SEARCH, BAD_OPEN, OPEN, OPEN, OPEN)
    with serve(handler=by_prompt(complete=True)) as srv:
        got = compute_score("hopforge", text, GT, EXTRA, **judged(srv, tmp_path, rltr_weight=1.0, rltr_samples=2,
                                                                   repeat_penalty=0.1, error_penalty=0.25))
    # repeats: the second search, the 2nd and 3rd open of p1 = 3; errors: the open of "nope" = 1
    assert (got["raw_repeat_calls"], got["raw_error_calls"]) == (3, 1)
    assert got["rltr"] == pytest.approx(1.0 - 3 * 0.1 - 1 * 0.25)  # 0.45
    assert got["score"] == pytest.approx(1.0 + 0.45)
    # clipped at -1: c = 0 and 3 * 0.5 + 0.25 of penalties
    with serve(handler=by_prompt(complete=False)) as srv:
        low = compute_score("hopforge", text, GT, EXTRA, **judged(srv, tmp_path / "other", rltr_weight=1.0,
                                                                   rltr_samples=1, repeat_penalty=0.5,
                                                                   error_penalty=0.25))
    assert low["rltr"] == -1.0 and low["score"] == pytest.approx(0.0)
    assert rltr_reward(True, 0.5, 1, 2, 0.1, 0.1) == pytest.approx(0.2)


def test_an_invalid_format_is_minus_one_without_asking_the_judge(tmp_path) -> None:
    with serve(handler=by_prompt()) as srv:
        got = compute_score("hopforge", solution(SEARCH, answer=None), GT, EXTRA,
                            **judged(srv, tmp_path, rltr_weight=0.5, process_max=0.5, cost_alpha=0.3))
        assert srv.count == 0
    assert got["rltr"] == -1.0 and got["format_ok"] == 0.0
    assert got["score"] == pytest.approx(-0.5)  # 0 for the malformed response, plus 0.5 * -1
    assert got["process"] == 0.0 and got["cost"] == 0.0  # both gated on the format


# ---- the dual reward's judge terms -----------------------------------------------------------------------------


def test_r_process_is_the_judges_score_scaled_into_zero_to_process_max(tmp_path) -> None:
    with serve(handler=by_prompt(process=7)) as srv:
        got = compute_score("hopforge", solution(SEARCH, OPEN, answer="Gamma"), GT, EXTRA,
                            **judged(srv, tmp_path, process_max=0.5))
        assert srv.count == 1 and "grade the process" in srv.requests[0].body["messages"][0]["content"]
    # a wrong answer (acc 0): the process term is not gated on correctness
    assert got["acc"] == 0.0 and got["raw_process"] == 0.7 and got["process"] == pytest.approx(0.35)
    assert got["score"] == pytest.approx(0.35)
    with serve(handler=by_prompt(process=10)) as srv:
        top = compute_score("hopforge", solution(SEARCH), GT, EXTRA, **judged(srv, tmp_path / "other",
                                                                               process_max=0.5))
    assert top["process"] == 0.5 and top["score"] == pytest.approx(1.5)


def test_the_pareto_cost_over_turns_and_query_words() -> None:
    text = solution(SEARCH, SEARCH2, OPEN)
    got = compute_score("hopforge", text, GT, EXTRA, cost_alpha=0.2, cost_max_turns=4, cost_max_words=10)
    # T = 3 turns with a call, W = 2 + 3 query words: R_cost = 0.5 * 3/4 + 0.5 * 5/10 = 0.625
    assert got["raw_cost"] == pytest.approx(0.625) and got["cost"] == pytest.approx(0.125)
    assert got["score"] == pytest.approx(0.875)
    assert pareto_cost(9, 100, 4, 10) == 1.0  # each part saturates at its maximum
    bad = compute_score("hopforge", solution(SEARCH, answer=None), GT, EXTRA, cost_alpha=0.2)
    assert bad["cost"] == 0.0 and bad["score"] == 0.0 and bad["raw_cost"] > 0


def test_the_batch_manager_asks_the_judge_for_the_whole_step(tmp_path) -> None:
    texts = [solution(SEARCH, OPEN), solution(SEARCH), solution(SEARCH, answer=None)]
    with serve(handler=by_prompt(complete=True, process=4)) as srv:
        out = compute_score(data_sources=["hopforge"] * 3, solution_strs=texts, ground_truths=[GT] * 3,
                            extra_infos=[EXTRA] * 3, **judged(srv, tmp_path, rltr_weight=0.5, rltr_samples=3,
                                                              process_max=0.5))
        assert srv.count == 2 * (3 + 1)  # the malformed one asks nothing
    assert [o["rltr"] for o in out] == [1.0, 1.0, -1.0]
    assert [o["process"] for o in out] == pytest.approx([0.2, 0.2, 0.0])
    assert [o["score"] for o in out] == pytest.approx([1.7, 1.7, -0.5])


# ---- the cache, failures, the key ------------------------------------------------------------------------------


def test_a_trajectory_scored_again_sends_no_request(tmp_path) -> None:
    kw = dict(rltr_weight=0.5, rltr_samples=3, process_max=0.5)
    with serve(handler=by_prompt(complete=True, process=6)) as srv:
        first = compute_score("hopforge", solution(SEARCH, OPEN), GT, EXTRA, **judged(srv, tmp_path, **kw))
        assert srv.count == 4
        again = compute_score("hopforge", solution(SEARCH, OPEN), GT, EXTRA, **judged(srv, tmp_path, **kw))
        assert srv.count == 4 and again == first
        compute_score("hopforge", solution(SEARCH2, OPEN), GT, EXTRA, **judged(srv, tmp_path, **kw))
        assert srv.count == 8  # another trajectory is asked


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_judge_is_recorded_and_the_rule_score_stands(tmp_path, caplog) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    kw = judged(None, tmp_path, base_url=url, rltr_weight=0.5, process_max=0.5, cost_alpha=0.2, cost_max_turns=4,
                cost_max_words=10, judge={"cooldown_s": 3600})
    with caplog.at_level(logging.DEBUG):
        for _ in range(2):  # the second finds the breaker tripped and fails at once
            got = compute_score("hopforge", solution(SEARCH, OPEN), GT, EXTRA, **kw)
            assert got["raw_judge_failed"] == 1.0 and got["rltr"] == 0.0 and got["process"] == 0.0
            # the rule's score, with the cost term (no judge needed): 1 - 0.2 * (0.5 * 2/4 + 0.5 * 2/10)
            assert got["score"] == pytest.approx(1.0 - 0.2 * 0.35)
    assert SECRET not in caplog.text and SECRET not in repr(got)


def test_a_garbage_answer_is_a_judge_failure(tmp_path) -> None:
    with serve(handler=by_prompt(process="I think it went fine.")) as srv:
        got = compute_score("hopforge", solution(SEARCH, OPEN), GT, EXTRA, **judged(srv, tmp_path, process_max=0.5))
        assert got["raw_judge_failed"] == 1.0 and got["process"] == 0.0 and got["score"] == 1.0
        srv.handler = by_prompt(process=6)  # an unreadable reply was not cached: asked again, and answered
        again = compute_score("hopforge", solution(SEARCH, OPEN), GT, EXTRA, **judged(srv, tmp_path, process_max=0.5))
        assert srv.count == 2 and again["raw_judge_failed"] == 0.0 and again["process"] == pytest.approx(0.3)
    with serve() as srv:
        srv.handler = lambda req: Reply(content="Looks complete to me!")
        got = compute_score("hopforge", solution(SEARCH, OPEN), GT, EXTRA,
                            **judged(srv, tmp_path / "other", rltr_weight=0.5, rltr_samples=2))
    assert got["raw_judge_failed"] == 1.0 and got["rltr"] == 0.0 and got["score"] == 1.0
    # the readers refuse what is not the JSON asked for
    assert read_verdict('{"complete": "yes"}') is None and read_verdict('{"complete": false}') == 0.0
    assert read_process('{"score": 11}') is None and read_process('{"score": true}') is None
    assert read_process('<think>hmm</think>{"score": 5}') == 0.5


def test_some_samples_failing_average_over_the_rest(tmp_path) -> None:
    with serve() as srv:
        srv.push(verdict(True), Reply(content="no idea"), verdict(False), Status(400))
        got = compute_score("hopforge", solution(SEARCH, OPEN), GT, EXTRA,
                            **judged(srv, tmp_path, rltr_weight=1.0, rltr_samples=4))
    assert got["raw_completeness"] == 0.5 and got["rltr"] == 0.5 and got["raw_judge_failed"] == 0.0


def test_the_api_key_is_sent_but_never_returned_logged_or_cached(tmp_path, caplog) -> None:
    with caplog.at_level(logging.DEBUG):
        with serve(handler=by_prompt()) as srv:
            got = compute_score("hopforge", solution(SEARCH, OPEN), GT, EXTRA,
                                **judged(srv, tmp_path, rltr_weight=0.5, rltr_samples=1, process_max=0.5))
            assert srv.requests[0].headers["authorization"] == f"Bearer {SECRET}"
        with serve() as srv:  # a server that rejects the key
            srv.handler = lambda req: Status(401, message=f"bad key {SECRET}")
            failed = compute_score("hopforge", solution(SEARCH2), GT, EXTRA,
                                   **judged(srv, tmp_path, rltr_weight=0.5, rltr_samples=1))
    assert failed["raw_judge_failed"] == 1.0
    assert SECRET not in repr(got) + repr(failed) and SECRET not in caplog.text
    for f in tmp_path.iterdir():
        assert SECRET.encode() not in f.read_bytes(), f


def test_the_judge_reads_observations_cut_short() -> None:
    long = call("open", page="p1") + "user\n<tool_response>" + "x" * 5000 + "</tool_response>\nassistant\n"
    text = trajectory_text(solution(long), obs_chars=100)
    assert "<tool_response>" + "x" * 100 + " [...]</tool_response>" in text and "Delta City" in text
    assert len(trajectory_text("y" * 1000, max_chars=200)) < 260


@pytest.mark.parametrize("cooldown", [3600, 0])
def test_a_tripped_judge_fails_at_once_until_its_cooldown_has_passed(cooldown, tmp_path) -> None:
    kw = judged(None, tmp_path, base_url="", rltr_weight=1.0, rltr_samples=1, judge={"cooldown_s": cooldown})
    with serve() as srv:
        kw["judge"]["base_url"] = srv.base_url
        srv.handler = lambda req: Status(500)
        for i in range(3):  # three failures in a row trip the breaker
            got = compute_score("hopforge", solution(call("search", query=f"q{i}")), GT, EXTRA, **kw)
            assert got["raw_judge_failed"] == 1.0 and got["score"] == 1.0
        assert srv.count == 3
        srv.handler = by_prompt(complete=True)
        got = compute_score("hopforge", solution(SEARCH), GT, EXTRA, **kw)
        if cooldown:  # still cooling down: no request, the rule's score
            assert srv.count == 3 and got["raw_judge_failed"] == 1.0 and got["score"] == 1.0
        else:  # tried again, and answered
            assert srv.count == 4 and got["raw_judge_failed"] == 0.0 and got["score"] == 2.0
