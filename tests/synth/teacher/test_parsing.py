"""Replies as they really come: reasoning set apart, finish_reason kept, JSON read through the mess,
and every parse failure named for what it is."""

from __future__ import annotations

import asyncio
import json

import pytest

from helpers.openai_server import Reply, serve
from synth.teacher.client import Teacher, TeacherConfig
from synth.teacher.prompting import PARSE_REASONS, extract_answer, read_json
from synth.teacher.tasks import CLOSED_BOOK, JUDGE, OBFUSCATE, QUESTION
from synth.teacher.types import ChatResponse, normalise_message, split_reasoning

KEY_ENV = "HOPFORGE_TEST_TEACHER_KEY"


@pytest.mark.parametrize("text, finish, expected", [
    ('<think>maybe {"question": "no"}</think>\n{"question": "yes"}', "stop", [{"question": "yes"}]),
    ('The reasoning ends here.</think>{"question": "yes"}', "stop", [{"question": "yes"}]),  # <think> was in the prompt
    ('{"a": 1}\n{"b": 2}', "stop", [{"a": 1}, {"b": 2}]),
    ('{"a": [1, 2,],}', "stop", [{"a": [1, 2]}]),
    ("```json\n{'a': 'single quotes'}\n```", "stop", [{"a": "single quotes"}]),
    ('Sure! Here it is: {"a": 1} Hope that helps.', "stop", [{"a": 1}]),
    ('{"a": 1}\n{"b": "cut sho', "length", [{"a": 1}]),  # a whole object before the cut still counts
])
def test_json_survives_think_blocks_fences_commas_and_company(text, finish, expected):
    objs, reason, _ = read_json(text, finish)
    assert reason is None and objs == expected


def test_a_broken_outer_object_is_repaired_not_replaced_by_a_nested_one():
    text = '{"question": "Q?", "hops": [{"bridge": "A", "sub_question": "a?"},], "answer": "B"}'
    [obj], reason, _ = read_json(text, "stop")
    assert reason is None and obj["question"] == "Q?" and obj["hops"] == [{"bridge": "A", "sub_question": "a?"}]


@pytest.mark.parametrize("text, finish, reason", [
    ("", "stop", "empty"),
    ("   \n", None, "empty"),
    ("<think>I should write JSON.</think>", "stop", "empty"),
    ("<think>still thinking when the tokens ran o", "length", "truncated"),
    ('{"question": "Which river flows thro', "length", "truncated"),
    ('{"question": "Which river flows thro', None, "truncated"),  # unknown finish: never closed, not invented
    ("I would rather not write JSON today.", "stop", "prose"),
    ("I would rather not", "length", "truncated"),
    ("The set {x} is empty.", "stop", "prose"),  # braces around no key are not JSON
    ("Here: { : , : }", "stop", "invalid_json"),
    ("[1, 2, 3]", "stop", "schema_error"),
])
def test_parse_failures_say_what_went_wrong(text, finish, reason):
    objs, got, detail = read_json(text, finish)
    assert objs == [] and got == reason and detail
    assert reason in PARSE_REASONS and QUESTION.format_output(text, finish).reason == reason


def test_format_output_reads_the_response_and_its_finish_reason():
    cut = ChatResponse({"role": "assistant", "content": '{"question": "Which'}, finish_reason="length")
    assert QUESTION.format_output(cut).reason == "truncated"
    assert QUESTION.format_output(cut.content, "stop").value == {"question": "Which"}  # the model ended it: repaired
    whole = ChatResponse({"role": "assistant", "content": '<think>x</think>{"question": "Q?"}'}, finish_reason="stop")
    assert OBFUSCATE.format_output(whole).value == {"question": "Q?"}
    # Of two objects the first with the required keys wins; a wrong shape is schema_error.
    assert OBFUSCATE.format_output('{"note": 1} {"question": "Q2?"}').value == {"question": "Q2?"}
    assert OBFUSCATE.format_output('{"question": 3}').reason == "schema_error"
    # Answer tasks: the reasoning's tries never count, and each failure has its reason.
    assert CLOSED_BOOK.format_output("<think><answer>guess</answer></think>So: <answer>Paris</answer>").value == "Paris"
    assert CLOSED_BOOK.format_output("<think><answer>guess</answer></think>I am not sure.").reason == "prose"
    assert CLOSED_BOOK.format_output("<think>hmm</think>").reason == "empty"
    assert CLOSED_BOOK.format_output(ChatResponse({"content": "Let me think about"}, finish_reason="length")).reason \
        == "truncated"
    # A task with its own reader gets the same reasons first.
    assert JUDGE.format_output("Yes, it is right.").reason == "prose"
    assert JUDGE.format_output('{"correct": "yes"}').value is True


def test_reasoning_is_kept_apart_from_the_content():
    assert split_reasoning("no tags") == ("no tags", "")
    assert split_reasoning("<think>a</think> B <think>c</think>") == ("B", "a\n\nc")
    assert split_reasoning("a</think>B") == ("B", "a")
    assert split_reasoning("B<think>cut") == ("B", "cut")
    msg = normalise_message({"content": "<think>plan</think>\nDone. <answer>X</answer>", "reasoning_content": "server"})
    assert msg == {"role": "assistant", "content": "Done. <answer>X</answer>", "reasoning_content": "server\n\nplan"}
    assert extract_answer("<think><answer>no</answer></think>") is None


def test_finish_reason_and_reasoning_survive_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-parsing")
    with serve() as srv:
        srv.handler = lambda req: Reply(content='<think>hmm</think>{"question": "Whi', finish_reason="length")
        cfg = TeacherConfig(backend="openai", base_url=srv.base_url, model="m", api_key_env=KEY_ENV, max_retries=0)
        msgs = [{"role": "user", "content": "write"}]
        sent = Teacher(cfg, tmp_path / "t.sqlite").chat_sync(msgs)
        again = Teacher(cfg, tmp_path / "t.sqlite").chat_sync(msgs)
        assert srv.count == 1 and again.cached
    for resp in (sent, again):
        assert resp.finish_reason == "length" and resp.content == '{"question": "Whi'
        assert resp.message["reasoning_content"] == "hmm"
        assert QUESTION.format_output(resp) == (None, "truncated", QUESTION.format_output(resp).detail)


@pytest.mark.parametrize("mode, accepts, sent", [("off", True, False), ("on", True, True), ("auto", True, True),
                                                 ("auto", False, False), ("auto", "json_object", "json_object")])
def test_structured_output_sends_the_tasks_schema(tmp_path, monkeypatch, mode, accepts, sent):
    from helpers.openai_server import Status
    monkeypatch.setenv(KEY_ENV, "sk-test-parsing")

    def handler(req):
        rf = req.get("response_format")
        if rf is not None and not accepts:
            return Status(400, message="response_format is not supported")
        if rf is not None and accepts == "json_object" and rf["type"] != "json_object":
            return Status(500, message="Internal Server Error")  # llama-cpp-python 0.3 on a json_schema
        return Reply(content='{"ok": true, "question": "Q?"}')

    with serve(handler=handler) as srv:
        cfg = TeacherConfig(backend="openai", base_url=srv.base_url, model="m", api_key_env=KEY_ENV, max_retries=0,
                            structured_output=mode)
        t = Teacher(cfg, tmp_path / "t.sqlite")
        resp = t.chat_sync([{"role": "user", "content": "rewrite"}], hint=OBFUSCATE.hint(source=None, question="rewrite", seed=0))
        t.chat_sync([{"role": "user", "content": "free text"}])  # no task: never constrained
        bodies = [r.body for r in srv.requests if "rewrite" in json.dumps(r.body["messages"])]
        plain = [r.body for r in srv.requests if "free text" in json.dumps(r.body["messages"])]
        variant = asyncio.run(t.backend.prepare(None, OBFUSCATE))
    assert OBFUSCATE.format_output(resp).value["question"] == "Q?"
    assert ("response_format" in bodies[-1]) == bool(sent) and "response_format" not in plain[0]
    if sent == "json_object":  # the probe found that only json_object works: no 500 on the task's request
        assert bodies[-1]["response_format"] == {"type": "json_object"} and variant.startswith("rf=")
        assert all(b["response_format"]["type"] == "json_object" for b in bodies) and len(bodies) == 1
    elif sent:
        schema = bodies[-1]["response_format"]["json_schema"]["schema"]
        assert schema["required"] == ["question"] and schema["properties"]["question"] == {"type": "string"}
        # A constrained request is a different call: the cache must not hand it an unconstrained answer.
        assert variant.startswith("rf=")
    else:
        assert variant == ""
