"""sft.reasoning per chat-template family: keep in a thinking format, inline before the content, or drop; an
unsupported combination is a config error naming the keys; the mask check proves what is trained."""

from __future__ import annotations

import json
import re

import pytest

from helpers.familytok import family_tokenizer
from helpers.sftdata import pages
from helpers.sftrows import make_rows
from sft.masking import check_rows
from synth.engine.config import ConfigError
from synth.tokenizer.chat_templates import load_template
from synth.tokenizer.reasoning import apply_reasoning, has_thinking_format, resolve_mode

PLAIN = ["llama3", "mistral", "gemma3", "qwen2.5", "tiny"]


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    """Realistic rows whose every assistant turn thinks first."""
    out = make_rows(pages(60), 4, seed=5, max_hops=2, page_chars=300)
    for r in out:
        turn = 0
        for m in r["messages"]:
            if m["role"] == "assistant":
                turn += 1
                m["reasoning_content"] = f"Reasoning of turn {turn}: which page holds the next entity?"
    return out


def test_the_mode_follows_the_family_and_refuses_what_it_cannot_render() -> None:
    assert has_thinking_format(load_template("qwen3"))
    assert resolve_mode(None, load_template("qwen3")) == "keep"
    for family in PLAIN:
        assert not has_thinking_format(load_template(family)), family
        assert resolve_mode(None, load_template(family)) == "inline"
        assert resolve_mode("drop", load_template(family)) == "drop"
        with pytest.raises(ConfigError, match=rf"sft\.reasoning is 'keep' but chat template '{re.escape(family)}' has "
                                              "no thinking format"):
            resolve_mode("keep", load_template(family), family)
    with pytest.raises(ConfigError, match=r"sft\.reasoning is 'inline' but .* has a thinking format"):
        resolve_mode("inline", load_template("qwen3"), "qwen3")


@pytest.mark.parametrize("family", ["llama3", "mistral", "gemma3"])
def test_inline_trains_the_reasoning_before_the_content(family, rows) -> None:
    tok, template = family_tokenizer(family), load_template(family)
    report = check_rows(rows, tok, template, template_name=family, reasoning="inline")
    assert report["ok"], report["failures"]
    r = report["reasoning"]
    n_turns = sum(m["role"] == "assistant" for row in rows for m in row["messages"])
    assert (r["mode"], r["rows"], r["turns"]) == ("inline", len(rows), n_turns)
    assert r["tokens"] == r["tokens_trained"] > 0 and 0 < r["share_of_trained"] < 1
    assert report["tool_tokens_trained"] == 0 and report["prompt_tokens_trained"] == 0
    row = rows[0]
    text = tok.apply_chat_template(apply_reasoning(row["messages"], "inline"), tools=json.loads(row["tools"]),
                                   chat_template=template, tokenize=False)
    for m in row["messages"]:
        if m["role"] == "assistant":
            at = text.index(m["reasoning_content"])
            assert m["content"] is None or text.index(m["content"].strip(), at) > at  # before the content


@pytest.mark.parametrize("family", ["llama3", "qwen3"])
def test_drop_trains_no_reasoning(family, rows) -> None:
    tok, template = family_tokenizer(family), load_template(family)
    report = check_rows(rows, tok, template, template_name=family, reasoning="drop")
    assert report["ok"] and report["reasoning"]["rows"] == 0 and report["reasoning"]["tokens"] == 0
    text = tok.apply_chat_template(apply_reasoning(rows[0]["messages"], "drop"), chat_template=template,
                                   tools=json.loads(rows[0]["tools"]), tokenize=False)
    assert "Reasoning of turn" not in text


def test_keep_with_a_template_that_drops_reasoning_fails_the_mask_check(rows) -> None:
    tok, template = family_tokenizer("llama3"), load_template("llama3")
    report = check_rows(rows, tok, template, template_name="llama3", reasoning="keep")
    assert not report["ok"] and report["reasoning_untrained_turns"] > 0
    assert "reasoning of assistant message" in report["failures"][0]["problem"]


def test_qwen3_keeps_it_in_every_turn_s_think_block(rows) -> None:
    tok, template = family_tokenizer("qwen3"), load_template("qwen3")
    report = check_rows(rows, tok, template, template_name="qwen3", reasoning="keep")
    assert report["ok"] and report["reasoning"]["tokens"] == report["reasoning"]["tokens_trained"] > 0
    text = tok.apply_chat_template(rows[0]["messages"], tools=json.loads(rows[0]["tools"]), chat_template=template,
                                   tokenize=False)
    n = sum(m["role"] == "assistant" for m in rows[0]["messages"])
    assert text.count("<think>\nReasoning of turn") == n
