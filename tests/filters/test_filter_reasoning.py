"""A thinking teacher, end to end: three OpenAI-compatible servers that put their reasoning in three places
(``reasoning`` as current vLLM and OpenRouter do, ``reasoning_content`` as DeepSeek and older vLLM do, ``<think>``
in the content as a server without a reasoning parser does).  Each must get every earlier turn's reasoning back
under its own field, and each must give SFT rows whose qwen3 rendering holds the reasoning of every assistant
turn, trained, with no tool token trained."""

from __future__ import annotations

import json

import pyarrow.dataset as ds
import pytest

from flows.config import load_config
from flows.stages import FILTER, INDEX, ROLLOUT
from helpers.familytok import family_tokenizer
from helpers.filterstore import publish
from helpers.openai_server import call, serve
from helpers.tinytok import save_tokenizer
from helpers.walkstore import commit_stage, make_chain_store
from sft.masking import check_rows
from synth.engine.records import Hop, Question, Walk
from synth.engine.runner import run_stage
from synth.tokenizer.chat_templates import load_template

FIELDS = ["reasoning", "reasoning_content", "think"]


def _store(root):
    store = make_chain_store(root, n=3, hops=2, extra_pages=10)
    run_stage(INDEX, load_config(None, []), store)
    walks = [Walk.from_row(r) for r in store.read("walks").to_pylist()]
    qs = [Question(question_id=f"q-{w.walk_id}", kind="walk", source_id=w.walk_id, path=w.path, titles=w.titles,
                   question=f"Start from {w.titles[0]} ({w.walk_id}); where do two links lead?", answer=w.titles[-1],
                   answer_aliases=[], answer_page_id=w.path[-1], hops=[Hop("h", t, p) for t, p in
                                                                        zip(w.titles[1:], w.path[1:])],
                   teacher_model="hand", prompt_sha="-", seed=0, split="sft") for w in walks]
    commit_stage(store, "questions", "questions", Question.to_table(qs))
    return store, {q.question: q for q in qs}


def report_of(store, stage: str) -> dict:
    return json.loads((store.root / "reports" / f"{stage}.json").read_text())


def thought(question: str, turn: int) -> str:
    return f"Thought {turn} on {question.split('(')[1].split(')')[0]}: step {turn} of my plan."


def thinking_server(field: str, questions: dict):
    """A model that thinks before every turn, searches, opens the start page, then answers; its server puts the
    reasoning under ``field``."""

    def handler(req: dict) -> dict:
        msgs = req["messages"]
        q = questions[next(m["content"] for m in msgs if m["role"] == "user")]
        turn = sum(m["role"] == "assistant" for m in msgs) + 1
        r = thought(q.question, turn)
        if turn == 1:
            msg = {"content": "Let me search.", "tool_calls": [call("search", {"query": q.titles[0]}, id="c1")]}
        elif turn == 2:
            msg = {"content": None, "tool_calls": [call("open", {"page": q.titles[0]}, id="c2")]}
        else:
            msg = {"content": f"<answer>{q.answer}</answer>"}
        if field == "think":
            msg["content"] = f"<think>\n{r}\n</think>\n\n{msg['content'] or ''}"
        else:
            msg[field] = r
        finish = "tool_calls" if msg.get("tool_calls") else "stop"
        return {"id": "x", "object": "chat.completion", "model": req["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", **msg}, "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10}}

    return handler


def sent_back(req_body: dict, field: str) -> list[str | None]:
    """The reasoning of each earlier assistant turn of a request, read from where ``field`` puts it; None where
    it is missing.  Any reasoning under another field is an error."""
    out = []
    for m in req_body["messages"]:
        if m["role"] != "assistant":
            continue
        others = {"reasoning", "reasoning_content"} - {field}
        assert not others & set(m), f"reasoning sent under {others & set(m)} to a server that uses {field}"
        if field == "think":
            c = m.get("content") or ""
            out.append(c.split("<think>\n", 1)[1].split("\n</think>", 1)[0] if c.startswith("<think>") else None)
        else:
            out.append(m.get(field))
    return out


@pytest.mark.parametrize("field", FIELDS)
def test_a_thinking_teacher_s_reasoning_goes_back_to_it_and_into_the_sft_rows(tmp_path, monkeypatch, field) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    store, questions = _store(tmp_path / "run")
    publish(store, "tokenizer", {"tokenizer": save_tokenizer(tmp_path / "tok")})
    with serve(handler=thinking_server(field, questions)) as srv:
        cfg = load_config(None, ["rollout.n=1", "rollout.max_turns=5", "teacher.backend=openai",
                                 f"teacher.base_url={srv.base_url}", "teacher.model=m", "teacher.max_retries=0",
                                 "teacher.tool_protocol=native", "rollout.policy=fixed",
                                 "filters.chain=[format, correctness, length]"])
        run_stage(ROLLOUT, cfg, store)
        # Every request after the first turn carries every earlier turn's reasoning, under the server's own field.
        later = [r for r in srv.requests if any(m["role"] == "assistant" for m in r.body["messages"])]
        assert later
        for r in later:
            q = questions[r.body["messages"][1]["content"]]
            back = sent_back(r.body, field)
            assert back == [thought(q.question, t) for t in range(1, len(back) + 1)]
    traces = ds.dataset(store.path("traces")).to_table().to_pylist()
    assert len(traces) == 3 and {t["reasoning_field"] for t in traces} == {field}
    assert report_of(store, "rollout")["reasoning"] == {"field": field, "traces": 3, "by_field": {field: 3}}
    run_stage(FILTER, cfg, store)
    rows = ds.dataset(store.path("sft")).to_table().to_pylist()
    assert len(rows) == 3
    tok = family_tokenizer("qwen3")
    template = load_template("qwen3")
    for row in rows:
        q = next(q for q in questions.values() if q.question_id == row["question_id"])
        assistants = [m for m in row["messages"] if m["role"] == "assistant"]
        assert [m["reasoning_content"] for m in assistants] == [thought(q.question, t) for t in (1, 2, 3)]
        assert all("<think>" not in (m["content"] or "") for m in assistants)  # the answer is read alone
        text = tok.apply_chat_template(row["messages"], tools=json.loads(row["tools"]), chat_template=template,
                                       tokenize=False)
        for m in assistants:
            assert f"<|im_start|>assistant\n<think>\n{m['reasoning_content']}\n</think>\n\n" in text
    report = check_rows(rows, tok, template, template_name="qwen3")
    assert report["ok"], report["failures"]
    r = report["reasoning"]
    assert (r["mode"], r["rows"], r["turns"]) == ("keep", 3, 9)
    assert r["tokens"] == r["tokens_trained"] > 0 and report["reasoning_untrained_turns"] == 0
    assert report["tool_tokens"] > 0 and report["tool_tokens_trained"] == 0
    assert 0 < r["share_of_trained"] < 1
    # The filter's report: every kept row carries reasoning; the tiny template has no thinking format, so the
    # length filter rendered it inline (sft.reasoning unset).
    fr = report_of(store, "filter")["reasoning"]
    assert fr["mode"] == "inline" and fr["traces_with_reasoning"] == 3 and 0 < fr["share_of_assistant_tokens"] < 1
    # The length filter counted the rows with their reasoning, as training will render them.
    from synth.tokenizer.counts import TokenCounts
    from synth.tokenizer.reasoning import apply_reasoning
    from synth.tokenizer.tokens import load_tokenizer

    counts = TokenCounts(load_tokenizer(store.path("tokenizer"), chat_template=True), None)
    verdicts = {v["trace_id"]: v["n_tokens"] for v in ds.dataset(store.path("filter/verdicts")).to_table().to_pylist()}
    for row in rows:
        tools = json.loads(row["tools"])
        with_it, without = counts.count([(apply_reasoning(row["messages"], "inline"), tools),
                                         (apply_reasoning(row["messages"], "drop"), tools)])
        assert verdicts[row["trace_id"]] == with_it > without
