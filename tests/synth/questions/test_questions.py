"""Question synthesis: oracle and openai backends, validation reasons, cache, secrets."""

import json
import re

import pyarrow.dataset as ds
import pytest

from helpers.openai_server import Reply, Status, serve
from helpers.demostore import copy_demo_store, demo_config
from helpers.walkstore import chain_title, make_chain_store
from synth.text.answers import mentions, normalize_answer
from flows.config import load_config
from synth.engine.errors import StageFailed
from synth.engine.runner import run_stage
from synth.engine.records import Question
from flows.stages import QUESTIONS

SECRET = "sk-hopforge-SECRET-4242"
ENTITY = re.compile(r"^(\d+)\. ([A-Za-z]+ (\d+)-\d+)", re.M)


def _questions(root):
    return ds.dataset(root / "questions").to_table().to_pylist()


def _rejects(root):
    return ds.dataset(root / "rejects" / "questions").to_table().to_pylist()


def _check_valid(rows, qcfg):
    seen = set()
    for r in rows:
        assert r["answer"] == r["titles"][-1] and r["answer_page_id"] == r["path"][-1]
        assert not mentions(r["question"], r["answer"])
        assert not any(mentions(r["question"], a) for a in r["answer_aliases"])
        hops = Question.from_row(r).hops
        assert [h.bridge for h in hops] == r["titles"][1:] and [h.page_id for h in hops] == r["path"][1:]
        assert qcfg.min_words <= len(r["question"].split()) <= qcfg.max_words
        assert normalize_answer(r["question"]) not in seen
        seen.add(normalize_answer(r["question"]))


def test_oracle_questions_pass_every_validation(tmp_path, demo_store):
    # Against the default (lexical) adversaries about one 3-hop walk in thirteen gets a question (one in a hundred
    # with the dense one added): a clue no engine finds is rare on 10,000 pages.
    store = copy_demo_store(demo_store[0], tmp_path / "run", walks=240)
    cfg = demo_config("questions.from_subgraphs=false")
    out = run_stage(QUESTIONS, cfg, store)
    rows = _questions(store.root)
    assert out.report["output"] == len(rows) >= 2
    assert out.report["depth"]["adversaries"]["names"] == ["tool", "body", "keywords"]  # dense is one to add
    # A walk the oracle writes no question for is declined, by name, never passed with a shortcut in it.
    assert set(out.report["dropped"]) <= {"no_clue", "enterable_hop"}
    _check_valid(rows, cfg.questions)
    assert all(r["teacher_model"] == "oracle-v1" and r["prompt_sha"] for r in rows)
    assert all(r["effective_depth"] == len(r["hops"]) for r in rows)
    # Deterministic: the same config gives the same rows.
    run_stage(QUESTIONS, cfg, store, force=True)
    assert _questions(store.root) == rows


def test_optional_checks_with_the_oracle(tmp_path, demo_store):
    # The oracle "knows" two-hop chains closed-book, so every question there is too easy.
    two = copy_demo_store(demo_store[0], tmp_path / "two", walks=24, hops=2)
    checks = ["questions.from_subgraphs=false", "questions.check_closed_book=true", "questions.check_solvable=true",
              "questions.obfuscate=true", "questions.adversaries=[tool,body,keywords]"]  # enough questions to check
    with pytest.raises(StageFailed, match=r"every one of its 24 items was dropped \(.*too_easy"):
        run_stage(QUESTIONS, demo_config(*checks), two)  # an empty result is not a finished stage...
    cfg = demo_config(*checks, "runner.allow_empty=true")  # ...unless the config says it is fine
    out = run_stage(QUESTIONS, cfg, two)
    assert out.report["dropped"]["too_easy"] >= 3 and out.report["output"] == 0
    # Three hops: closed-book fails, the gold pages solve it, and the rewrite blurs the start name (and must
    # pass every check again, effective depth included).
    three = copy_demo_store(demo_store[0], tmp_path / "three", walks=800)  # about one in a hundred passes every check
    out = run_stage(QUESTIONS, cfg, three)
    rows = _questions(three.root)
    assert out.report["output"] == len(rows) >= 3
    assert all(not mentions(r["question"], r["titles"][0]) for r in rows), [(r["titles"][0], r["question"]) for r in rows if mentions(r["question"], r["titles"][0])]
    # Every kept question cost a write, a rewrite, a closed-book and a solvable call.
    assert out.report["teacher"]["requests"] >= out.report["input"] + 3 * out.report["output"]


def _handler(req, mode=None):
    user = req["messages"][-1]["content"]
    ents = ENTITY.findall(user)
    titles = [t for _, t, _ in ents]
    c = int(ents[0][2])
    # One sentence per hop, each with a clue that tells its place apart (a clue of no content words is
    # an ambiguous hop), between a first sentence naming the start and a last one asking for the end.
    hop = "Then find the place closely associated with it that locals visit often."
    valid = {"question": f"Consider {titles[0]}. " + " ".join([hop] * (len(titles) - 1))
                         + " Which place do you reach at the very end?",
             "answer": titles[-1], "answer_aliases": [],
             "hops": [{"sub_question": "Which place closely associated with the previous one do locals visit often?",
                       "bridge": t} for t in titles[1:]]}
    mode = c % 10 if mode is None else mode
    if mode == 1:
        return Reply(content="Sure, here is a great question for you!")
    if mode == 2:
        return Reply(content=json.dumps({"question": valid["question"], "answer": titles[-1]}))
    if mode == 3:
        return Reply(content=json.dumps({**valid, "question": valid["question"] + f" Hint: it is {titles[-1]}."}))
    if mode == 4:
        return Reply(content=json.dumps({**valid, "answer": titles[1]}))
    if mode == 5:
        return Reply(content=json.dumps({**valid, "hops": valid["hops"][::-1]}))
    if mode == 6:
        return Reply(content=json.dumps({**valid, "question": "Which place?"}))
    if mode == 7:
        zero = chain_title(0, 0)
        return Reply(content=json.dumps({**valid, "question": valid["question"].replace(titles[0], zero)}))
    if mode == 8:
        return Status(500)
    return Reply(content="```json\n" + json.dumps(valid) + "\n```")


def _openai_cfg(base_url, *more):
    return load_config(None, [
        "questions.check_shortcut=false", "teacher.backend=openai", f"teacher.base_url={base_url}",
        "teacher.model=test-model", "teacher.max_retries=1", "teacher.backoff_base_s=0", "teacher.timeout_s=5",
        "teacher.concurrency=3", *more,
    ])


def test_openai_backend_every_reason_counted_and_nothing_leaked(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    store = make_chain_store(tmp_path, n=10, hops=3)
    with serve(handler=_handler) as srv:
        cfg = _openai_cfg(srv.base_url, "runner.max_failed_fraction=0.2")
        out = run_stage(QUESTIONS, cfg, store)
        rep = out.report
        assert rep["dropped"] == {"prose": 1, "schema_error": 1, "answer_leak": 1, "wrong_answer": 1,
                                  "hop_missing": 1, "length": 1, "duplicate": 1}
        # A call that failed is no drop: the source is listed as failed, and not among the rejects.
        assert rep["failed"] == {"http_500": 1} and rep["failed_items"][0]["detail"].startswith("write")
        assert rep["output"] == 2 and rep["input"] == 10
        assert rep["input"] == rep["output"] + sum(rep["dropped"].values()) + sum(rep["failed"].values())
        # A parsed question that fails a check gets one repair request; this server never fixes it.
        fixable = ("answer_leak", "hop_missing", "length", "wrong_answer")
        assert rep["repairs"] == {r: {"attempted": 1, "repaired": 0} for r in fixable}
        # Chain 8 always answers 500: one try plus one retry, then it fails with its reason.
        assert rep["teacher"]["failures"] == {"http_500": 1} and rep["teacher"]["retries"] == 1
        assert rep["teacher"]["requests"] == 11 + len(fixable)
        rejects = _rejects(tmp_path)
        assert sorted(r["reason"] for r in rejects) == sorted(rep["dropped"])
        assert next(r for r in rejects if r["reason"] == "prose")["raw"].startswith("Sure")
        assert all(r["detail"].startswith("after repair") for r in rejects if r["reason"] in fixable)
        first = _questions(tmp_path)
        _check_valid(first, cfg.questions)
        # The key went only into the Authorization header.
        assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in srv.requests)
        n_sent = srv.count

        # A plain rerun pays nothing for completed calls: only the failed one is retried.
        out2 = run_stage(QUESTIONS, cfg, store)
        assert not out2.reused and srv.count - n_sent == 2 and out2.report["teacher"]["cache_hits"] == 9 + len(fixable)
        assert _questions(tmp_path) == first

    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in caplog.text


def test_order_and_content_do_not_depend_on_concurrency(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    with serve(handler=_handler) as srv:
        rows = []
        for conc in (1, 8):
            root = tmp_path / f"c{conc}"
            store = make_chain_store(root, n=10, hops=3)
            cfg = load_config(None, ["questions.check_shortcut=false", "teacher.backend=openai",
                                     f"teacher.base_url={srv.base_url}", "teacher.model=m", "teacher.max_retries=0",
                                     f"teacher.concurrency={conc}", "runner.max_failed_fraction=0.2"])
            run_stage(QUESTIONS, cfg, store)
            rows.append(_questions(root))
        assert rows[0] == rows[1] and len(rows[0]) == 2


def test_a_question_records_the_model_the_endpoint_says_wrote_it(tmp_path, monkeypatch):
    """An endpoint answering as another model than teacher.model: the question rows say which one wrote them."""
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    store = make_chain_store(tmp_path, n=3, hops=3)

    def handler(req):
        reply = _handler(req, mode=0)
        reply.model = "another-model"
        return reply

    with serve(handler=handler) as srv:
        run_stage(QUESTIONS, _openai_cfg(srv.base_url), store)
    rows = _questions(tmp_path)
    assert rows and {r["teacher_model"] for r in rows} == {"another-model"}


def test_missing_key_fails_fast_naming_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    store = make_chain_store(tmp_path, n=1, hops=3)
    cfg = load_config(None, ["questions.check_shortcut=false", "teacher.backend=openai",
                             "teacher.base_url=http://127.0.0.1:9/v1"])
    with pytest.raises(Exception, match="OPENAI_API_KEY"):
        run_stage(QUESTIONS, cfg, store)


def test_run_finishes_whatever_the_server_does(tmp_path, monkeypatch):
    from helpers.openai_server import Drop, Malformed, Stall

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    store = make_chain_store(tmp_path, n=6, hops=3)
    actions = {0: lambda: Drop(), 1: lambda: Malformed(), 2: lambda: Stall(30),
               3: lambda: Status(429, headers={"Retry-After": "0"}), 4: lambda: Status(400), 5: None}

    def handler(req):
        c = int(ENTITY.findall(req["messages"][-1]["content"])[0][2])
        make = actions[c]
        return make() if make else _handler(req, mode=0)

    with serve(handler=handler) as srv:
        cfg = load_config(None, ["questions.check_shortcut=false", "teacher.backend=openai",
                                 f"teacher.base_url={srv.base_url}", "teacher.model=m", "teacher.max_retries=1",
                                 "teacher.backoff_base_s=0", "teacher.timeout_s=0.5", "runner.max_failed_fraction=1"])
        out = run_stage(QUESTIONS, cfg, store)
    rep = out.report
    assert rep["input"] == 6 and rep["output"] == 1 and rep["dropped"] == {}
    assert rep["failed"] == {"connection": 1, "bad_response": 1, "timeout": 1, "http_429": 1, "http_400": 1}
    assert rep["teacher"]["failures"] == {"connection": 1, "bad_response": 1, "timeout": 1, "http_429": 1, "http_400": 1}
    # 400 is not retried; the other four failures were retried once.
    assert rep["teacher"]["retries"] == 4
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_a_check_reply_cut_at_max_tokens_is_truncated_not_a_verdict(tmp_path, monkeypatch):
    """The obfuscate, closed-book and solvable checks read the whole response: a reply cut at max_tokens is
    dropped as `truncated`, not read as a wrong answer (`unsolvable`) or a failed rewrite."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    store = make_chain_store(tmp_path, n=4, hops=3)
    cut = {"obfuscate": "You rewrite research questions", "solvable": "Answer the question using only the documents"}

    def handler(req):
        system = req["messages"][0]["content"]
        if system.startswith("Answer the question from memory"):
            return Reply(content="I don't know.")
        for task, prefix in cut.items():
            if system.startswith(prefix):
                if task == "obfuscate":
                    q = req["messages"][-1]["content"].split("Question: ", 1)[1].split("\n", 1)[0]
                    return Reply(content='{"question": "' + q[:20], finish_reason="length")
                return Reply(content="The documents say that the answer is", finish_reason="length")
        return _handler(req, mode=0)

    with serve(handler=handler) as srv:
        cfg = load_config(None, ["questions.check_shortcut=false", "teacher.backend=openai",
                                 f"teacher.base_url={srv.base_url}", "teacher.model=test-model",
                                 "teacher.max_retries=0", "teacher.timeout_s=5", "runner.allow_empty=true",
                                 "questions.obfuscate=true", "questions.check_closed_book=true"])
        out = run_stage(QUESTIONS, cfg, store)
        assert out.report["dropped"] == {"truncated": 4} and out.report["output"] == 0
        assert all(r["detail"].startswith("obfuscate: ") and "max_tokens" in r["detail"] for r in _rejects(tmp_path))
        # obfuscation off: the solvable check's cut reply is `truncated` too, not `unsolvable`
        cfg = load_config(None, ["questions.check_shortcut=false", "teacher.backend=openai",
                                 f"teacher.base_url={srv.base_url}", "teacher.model=test-model",
                                 "teacher.max_retries=0", "teacher.timeout_s=5", "runner.allow_empty=true",
                                 "questions.check_solvable=true"])
        out = run_stage(QUESTIONS, cfg, store, force=True)
        assert out.report["dropped"] == {"truncated": 4}
        assert all(r["detail"].startswith("solvable: ") and "max_tokens" in r["detail"] for r in _rejects(tmp_path))


def test_splits_are_grouped_by_answer_page():
    # A student must not score on eval by remembering an answer it was trained on: the split is a hash of the
    # answer page, so questions that share an answer share a split, whatever their ids.
    from collections import defaultdict

    from synth.questions.config import SplitFractions
    from synth.questions.sources import split_of

    fractions = SplitFractions()
    by_answer = defaultdict(set)
    counts = defaultdict(int)
    for i in range(3000):
        answer = f"p{i % 600}"  # 600 answers, five questions each
        s = split_of(answer, fractions)
        by_answer[answer].add(s)
        counts[s] += 1
    assert all(len(s) == 1 for s in by_answer.values())
    eval_answers = {a for a, s in by_answer.items() if s == {"eval"}}
    train_answers = {a for a, s in by_answer.items() if s & {"sft", "rl"}}
    assert eval_answers and not eval_answers & train_answers
    # The configured fractions still hold over the answers (0.7 / 0.2 / 0.1, within sampling noise).
    assert abs(counts["sft"] / 3000 - 0.7) < 0.06 and abs(counts["eval"] / 3000 - 0.1) < 0.04

