"""The loss-mask policy is one object, and the rows, the mask derivation and the mask check follow it: a policy
resolved from a template names its end-of-turn token and reasoning mode, an as_seen row trains its last turn
only, and changing the policy's reasoning mode changes what the masks train."""

from __future__ import annotations

import pytest

from helpers.familytok import FAMILIES, family_tokenizer
from helpers.sftdata import pages
from helpers.sftrows import make_rows
from sft.masking import analyse_row
from synth.engine.config import ConfigError
from synth.engine.errors import InputError
from synth.tokenizer.chat_templates import load_template
from synth.tokenizer.losspolicy import CONTEXT_ROLE, TRAINED_ROLE, LossPolicy, trained_message


@pytest.fixture(scope="module")
def row() -> dict:
    r = make_rows(pages(60), 2, seed=3, max_hops=2, page_chars=300)[0]
    for i, m in enumerate(r["messages"]):
        if m["role"] == TRAINED_ROLE:
            m["reasoning_content"] = f"  Thought {i}: the next page must be the one the clue names.  "
    return r


def test_a_resolved_policy_reads_its_end_of_turn_and_reasoning_off_the_template() -> None:
    for family in ("qwen3", "llama3", "gemma3"):
        tok, template = family_tokenizer(family), load_template(family)
        p = LossPolicy.resolve(tok, template, family)
        assert p.eot == FAMILIES[family].eot and p.eos == p.eot
        assert p.reasoning == ("keep" if family == "qwen3" else "inline")
        assert p.markers and p.mask_source == "generation markers"
    tok, template = family_tokenizer("gemma3"), load_template("gemma3")
    assert LossPolicy.resolve(tok, template, "gemma3", "drop", eos_token="<eos>").eos == "<eos>"
    with pytest.raises(ConfigError, match=r"sft\.reasoning is 'keep' but chat template 'llama3'"):
        LossPolicy.resolve(family_tokenizer("llama3"), load_template("llama3"), "llama3", "keep")
    with pytest.raises(InputError, match="not in the tokenizer's vocabulary"):
        LossPolicy.resolve(tok, template, "gemma3", eos_token="<|no such token|>")


def test_an_as_seen_row_trains_its_last_assistant_message_only(row) -> None:
    msgs = row["messages"]
    assistants = [i for i, m in enumerate(msgs) if m["role"] == TRAINED_ROLE]
    assert len(assistants) >= 2
    assert LossPolicy.roles(msgs, None) == [m["role"] for m in msgs]
    assert trained_message(msgs, None) is None
    roles = LossPolicy.roles(msgs, 3)
    assert trained_message(msgs, 3) == assistants[-1] and roles[assistants[-1]] == TRAINED_ROLE
    assert all(roles[i] == CONTEXT_ROLE for i in assistants[:-1])
    assert [r for r in roles if r not in (TRAINED_ROLE, CONTEXT_ROLE)] == [m["role"] for m in msgs
                                                                             if m["role"] != TRAINED_ROLE]


def test_the_thoughts_to_train_follow_the_reasoning_mode(row) -> None:
    msgs = row["messages"]
    kept = LossPolicy("t", "<eot>", reasoning="inline").thoughts(msgs)
    assert [bool(t) for t in kept] == [m["role"] == TRAINED_ROLE for m in msgs]
    assert all(t == t.strip() and t.startswith("Thought") for t in kept if t)
    assert LossPolicy("t", "<eot>", reasoning="drop").thoughts(msgs) == [""] * len(msgs)


def test_the_masks_follow_the_policy(row) -> None:
    """The same row under two policies: inline trains every reasoning token, drop trains none of them and fewer
    tokens in all; the end of every turn and nothing of the prompt is trained under both."""
    tok, template = family_tokenizer("llama3"), load_template("llama3")
    eot = FAMILIES["llama3"].eot
    inline = analyse_row(row, tok, LossPolicy(template, eot, reasoning="inline"), None)
    drop = analyse_row(row, tok, LossPolicy(template, eot, reasoning="drop"), None)
    assert inline["problem"] == "" and drop["problem"] == ""
    n_turns = sum(m["role"] == TRAINED_ROLE for m in row["messages"])
    assert inline["reasoning_turns"] == n_turns and inline["reasoning_trained"] == inline["n_reasoning_tokens"] > 0
    assert drop["reasoning_turns"] == 0 and drop["n_reasoning_tokens"] == 0
    assert 0 < drop["n_trained"] < inline["n_trained"]
    trained = tok.decode([i for i, m in zip(drop["input_ids"], drop["assistant_masks"]) if m])
    assert "Thought" not in trained and "Thought" in tok.decode(
        [i for i, m in zip(inline["input_ids"], inline["assistant_masks"]) if m])
    for out in (inline, drop):
        assert out["eot_untrained"] == 0 and out["assistant_turns"] == n_turns
        assert out["tool_trained"] == 0 and out["prompt_trained"] == 0
    # A policy that keeps reasoning the template never renders is caught, not trained silently.
    kept = analyse_row(row, tok, LossPolicy(template, eot, reasoning="keep"), None)
    assert kept["reasoning_untrained"] == n_turns and "reasoning" in kept["problem"]
