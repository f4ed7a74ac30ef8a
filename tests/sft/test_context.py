"""One context policy (``sft.context``) for training, evaluation and the band: the student is evaluated in the
context it trained on.  Under ``as_seen`` every SFT row is what the teacher saw for one turn (older observations
as placeholders), only that turn trained; under ``full`` every observation is in full, in rows and in eval."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from filters.sftrows import sft_message, sft_rows
from flows.config import load_config
from flows.stages import INDEX
from helpers.familytok import family_tokenizer
from helpers.traces import make_trace
from helpers.walkstore import make_chain_store
from sft.evaluate import harness_settings
from synth.tokenizer.losspolicy import LossPolicy
from sft.masking import analyse_row, check_rows
from synth.engine.conversation import Conversation
from synth.engine.records import Hop, Question, Walk
from synth.engine.runner import run_stage
from synth.rollout.loop import PLACEHOLDER, rollout_one
from synth.teacher.types import ChatResponse
from synth.tokenizer.chat_templates import load_template
from synth.tokenizer.turns import end_of_turn
from synth.tools.search import SearchIndex
from synth.tools.toolbox import Toolbox


class ScriptedStudent:
    """A student that plays a fixed script of turns and records the context it is sent for each."""

    def __init__(self, turns: list[dict]):
        self.turns, self.contexts = turns, []
        self.cfg = SimpleNamespace(model="scripted")
        self.tool_protocol = "native"

    async def chat(self, messages, tools=None, *, sample_index=0, hint=None) -> ChatResponse:
        self.contexts.append(json.loads(json.dumps(messages)))
        msg = self.turns[len(self.contexts) - 1]
        return ChatResponse(message={"role": "assistant", **msg}, usage={"prompt_tokens": 1, "completion_tokens": 1},
                            finish_reason="tool_calls" if msg.get("tool_calls") else "stop")


def _call(i: int, name: str, **args) -> dict:
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    store = make_chain_store(tmp_path_factory.mktemp("ctx") / "run", n=2, hops=3, extra_pages=10)
    run_stage(INDEX, load_config(None, []), store)
    w = Walk.from_row(store.read("walks").to_pylist()[0])
    q = Question(question_id="q1", kind="walk", source_id=w.walk_id, path=w.path, titles=w.titles,
                 question=f"From {w.titles[0]}, follow three links.", answer=w.titles[-1], answer_aliases=[],
                 answer_page_id=w.path[-1], hops=[Hop("h", t, p) for t, p in zip(w.titles[1:], w.path[1:])],
                 teacher_model="hand", prompt_sha="-", seed=0, split="eval")
    script = [{"content": "Search first.", "reasoning_content": "Plan.",
               "tool_calls": [_call(1, "search", query=w.titles[0])]},
              {"content": None, "tool_calls": [_call(2, "open", page=w.titles[0])]},
              {"content": "Next hop.", "tool_calls": [_call(3, "open", page=w.titles[1])]},
              {"content": None, "tool_calls": [_call(4, "open", page=w.titles[2])]},
              {"content": f"<answer>{w.titles[-1]}</answer>"}]
    return store, q, script


def _seen(context: list[dict]) -> list[dict]:
    """A context the model was sent, as SFT messages."""
    return [sft_message(m) for m in Conversation.from_openai(context).messages]


@pytest.mark.parametrize("policy", ["full", "as_seen"])
def test_eval_sees_what_training_saw(world, policy) -> None:
    store, q, script = world
    cfg = load_config(None, [f"sft.context={policy}", "rollout.compress_observations=true",
                             "rollout.keep_observations=1", "eval.max_turns=6"])
    run_cfg = harness_settings(cfg)
    assert run_cfg.compress_observations is (policy == "as_seen") and run_cfg.max_turns == 6
    student = ScriptedStudent(script)
    index = SearchIndex.open(store.path("index"))
    trace = asyncio.run(rollout_one(student, Toolbox(index, cfg.tools, mask_page_ids=[q.answer_page_id]), q, 0,
                                    run_cfg))
    assert trace.stop_reason == "answer" and len(student.contexts) == 5
    rows = sft_rows(trace, 1.0, context=cfg.sft.context, compress=cfg.rollout.compress_observations,
                    keep=cfg.rollout.keep_observations)
    seen = [_seen(c) for c in student.contexts]
    if policy == "as_seen":
        # one row per turn: its context is exactly what the student was sent for that turn, placeholders and all
        assert [r["turn"] for r in rows] == [1, 2, 3, 4, 5]
        assert [r["messages"][:-1] for r in rows] == seen
        assert any(m["content"] == PLACEHOLDER for m in seen[-1])
    else:
        # one row: each turn's prefix of it is what the student was sent for that turn, every observation in full
        (row,) = rows
        assert row["turn"] is None
        starts = [i for i, m in enumerate(row["messages"]) if m["role"] == "assistant"]
        assert [row["messages"][:i] for i in starts] == seen
        assert not any(m["content"] == PLACEHOLDER for c in seen for m in c)


def test_an_as_seen_row_trains_its_own_turn_only() -> None:
    trace = make_trace("t1", "q1", thoughts=["One.", "Two.", "Three.", "Four."])
    rows = sft_rows(trace, 1.0, context="as_seen", compress=True, keep=1)
    assert len(rows) == 5 and [r["turn"] for r in rows] == [1, 2, 3, 4, 5]
    assert sum(m["content"] == PLACEHOLDER for m in rows[-1]["messages"]) == 3  # four observations, one kept
    tok, template = family_tokenizer("qwen2.5"), load_template("qwen2.5")
    report = check_rows(rows, tok, template, template_name="qwen2.5")
    assert report["ok"], report["failures"]
    assert report["assistant_turns"] == len(rows)  # one trained turn a row; the earlier ones are context
    assert report["prompt_tokens_trained"] == 0 and report["tool_tokens_trained"] == 0
    eot = end_of_turn(tok, template)
    for r in rows:
        out = analyse_row(r, tok, LossPolicy(template, eot), None)
        text = tok.apply_chat_template(r["messages"], tools=json.loads(r["tools"]), chat_template=template,
                                       tokenize=False)
        trained = tok.decode([i for i, m in zip(out["input_ids"], out["assistant_masks"]) if m])
        last = r["messages"][-1]
        assert (last["content"] or "").strip() in trained
        for earlier in [m for m in r["messages"][:-1] if m["role"] == "assistant"]:
            assert earlier["content"] not in trained  # an earlier turn is read, not trained
        assert trained.strip() in text


def test_the_full_policy_trains_every_turn_of_one_row() -> None:
    trace = make_trace("t1", "q1", thoughts=["One.", "Two.", "Three.", "Four."])
    (row,) = sft_rows(trace, 1.0, context="full")
    assert row["turn"] is None and all(m["content"] != PLACEHOLDER for m in row["messages"])
    tok, template = family_tokenizer("qwen2.5"), load_template("qwen2.5")
    report = check_rows([row], tok, template, template_name="qwen2.5")
    assert report["ok"] and report["assistant_turns"] == 5


def test_rl_pool_rows_carry_the_policy() -> None:
    from filters.band import context_of

    full = load_config(None, [])
    assert context_of(full) == {"policy": "full", "compress_observations": False, "keep_observations": 2}
    seen = load_config(None, ["sft.context=as_seen", "rollout.keep_observations=3"])
    assert context_of(seen) == {"policy": "as_seen", "compress_observations": True, "keep_observations": 3}
