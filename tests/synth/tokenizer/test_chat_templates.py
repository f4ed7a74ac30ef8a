"""The shipped training templates against their families' published chat formats, offline.

The published templates' markup is written out below as the exact text they render for a plain
conversation (system, user, assistant): each shipped template must render the same text (its
``{% generation %}`` markers render nothing).  Tool turns, which the published templates render
differently or not at all, are pinned to the exact text hopforge's templates write, in each
family's own delimiters.
"""

from __future__ import annotations

import json
import re

import pytest

from helpers.familytok import FAMILIES, family_tokenizer
from synth.engine.errors import InputError
from synth.tokenizer.chat_templates import (TEMPLATES, family_of, has_generation_markers, load_template,
                                            resolve_template, stop_tokens)
from synth.tokenizer.turns import end_of_turn

SYSTEM, USER, ANSWER = "You are terse.", "Who wrote Hamlet?", "Shakespeare."
PLAIN = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER},
         {"role": "assistant", "content": ANSWER}]

# What each family's published template renders for PLAIN: Qwen2.5-Instruct, Qwen3 (the last assistant turn
# opens with an empty think block), Llama 3.1 / 3.2 / 3.3 Instruct (dated system header), Gemma 3 (the system
# message opens the first user turn; the assistant is `model`).
PUBLISHED_PLAIN = {
    "qwen2.5": "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nWho wrote Hamlet?<|im_end|>\n"
               "<|im_start|>assistant\nShakespeare.<|im_end|>\n",
    "qwen3": "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nWho wrote Hamlet?<|im_end|>\n"
             "<|im_start|>assistant\n<think>\n\n</think>\n\nShakespeare.<|im_end|>\n",
    "llama3": "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
              "Today Date: 26 Jul 2024\n\nYou are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
              "Who wrote Hamlet?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nShakespeare.<|eot_id|>",
    "gemma3": "<bos><start_of_turn>user\nYou are terse.\n\nWho wrote Hamlet?<end_of_turn>\n"
              "<start_of_turn>model\nShakespeare.<end_of_turn>\n",
}
# The published generation prompts: what ends a prompt the model answers.
GENERATION_PROMPT = {"qwen2.5": "<|im_start|>assistant\n", "qwen3": "<|im_start|>assistant\n",
                     "llama3": "<|start_header_id|>assistant<|end_header_id|>\n\n", "gemma3": "<start_of_turn>model\n"}
# Mistral-7B-Instruct-v0.3's published template: `[INST] ` + user + `[/INST]`, ` ` + answer + `</s>`; the system
# message opens the user message when that message is the last one; no generation prompt.
MISTRAL_TURNS = ([{"role": "user", "content": "U1"}, {"role": "assistant", "content": "A1"},
                  {"role": "user", "content": "U2"}, {"role": "assistant", "content": "A2"}],
                 "<s>[INST] U1[/INST] A1</s>[INST] U2[/INST] A2</s>")
MISTRAL_PROMPT = (PLAIN[:2], "<s>[INST] You are terse.\n\nWho wrote Hamlet?[/INST]")

TOOL = {"type": "function", "function": {"name": "search", "description": "Search the wiki.", "parameters": {
    "type": "object", "properties": {"query": {"type": "string", "description": "Keywords."}}, "required": ["query"]}}}
CALL = {"id": "call00001", "type": "function", "function": {"name": "search", "arguments": '{"query": "Hamlet"}'}}
TOOL_CONV = [PLAIN[0], PLAIN[1], {"role": "assistant", "content": None, "tool_calls": [CALL]},
             {"role": "tool", "content": '[{"title": "Hamlet"}]', "tool_call_id": "call00001", "name": "search"},
             PLAIN[2]]
_T = json.dumps(TOOL)
_QWEN_TOOLS = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
               "function signatures within <tools></tools> XML tags:\n<tools>\n" + _T + "\n</tools>\n\nFor each "
               "function call, return a json object with function name and arguments within <tool_call></tool_call> "
               "XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")
_QWEN_CALL = '<tool_call>\n{"name": "search", "arguments": {"query": "Hamlet"}}\n</tool_call>'
_QWEN_RESULT = '<tool_response>\n[{"title": "Hamlet"}]\n</tool_response>'
# What hopforge's templates write for TOOL_CONV, in each family's delimiters.
TOOL_RENDER = {
    "qwen2.5": f"<|im_start|>system\nYou are terse.\n\n{_QWEN_TOOLS}<|im_end|>\n<|im_start|>user\nWho wrote Hamlet?"
               f"<|im_end|>\n<|im_start|>assistant\n{_QWEN_CALL}<|im_end|>\n<|im_start|>user\n{_QWEN_RESULT}<|im_end|>\n"
               "<|im_start|>assistant\nShakespeare.<|im_end|>\n",
    "qwen3": f"<|im_start|>system\nYou are terse.\n\n{_QWEN_TOOLS}<|im_end|>\n<|im_start|>user\nWho wrote Hamlet?"
             f"<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n{_QWEN_CALL}<|im_end|>\n<|im_start|>user\n"
             f"{_QWEN_RESULT}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nShakespeare.<|im_end|>\n",
    "llama3": "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge "
              "Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are terse.<|eot_id|><|start_header_id|>user"
              "<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with "
              "its proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function "
              "name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n"
              + json.dumps(TOOL, indent=4) + "\n\nWho wrote Hamlet?<|eot_id|><|start_header_id|>assistant"
              "<|end_header_id|>\n\n{\"name\": \"search\", \"parameters\": {\"query\": \"Hamlet\"}}<|eot_id|>"
              "<|start_header_id|>ipython<|end_header_id|>\n\n[{\"title\": \"Hamlet\"}]<|eot_id|><|start_header_id|>"
              "assistant<|end_header_id|>\n\nShakespeare.<|eot_id|>",
    "gemma3": f"<bos><start_of_turn>user\nYou are terse.\n\n{_QWEN_TOOLS}\n\nWho wrote Hamlet?<end_of_turn>\n"
              f"<start_of_turn>model\n{_QWEN_CALL}<end_of_turn>\n<start_of_turn>user\n{_QWEN_RESULT}<end_of_turn>\n"
              "<start_of_turn>model\nShakespeare.<end_of_turn>\n",
    "mistral": "<s>[AVAILABLE_TOOLS] [{\"type\": \"function\", \"function\": " + json.dumps(TOOL["function"])
               + "}][/AVAILABLE_TOOLS][INST] You are terse.\n\nWho wrote Hamlet?[/INST][TOOL_CALLS] [{\"name\": "
               "\"search\", \"arguments\": {\"query\": \"Hamlet\"}, \"id\": \"call00001\"}]</s>[TOOL_RESULTS] "
               "{\"content\": [{\"title\": \"Hamlet\"}], \"call_id\": \"call00001\"}[/TOOL_RESULTS] Shakespeare.</s>",
}
FAMILY_NAMES = sorted(FAMILIES)


def _render(tok, msgs, **kw):
    return tok.apply_chat_template(msgs, tokenize=False, **kw)


@pytest.mark.parametrize("family", sorted(PUBLISHED_PLAIN))
def test_plain_conversation_renders_as_the_published_template(family):
    tok = family_tokenizer(family)
    assert has_generation_markers(tok.chat_template)
    assert _render(tok, PLAIN) == PUBLISHED_PLAIN[family]
    prompt = PUBLISHED_PLAIN[family].split(GENERATION_PROMPT[family])[0] + GENERATION_PROMPT[family]
    assert _render(tok, PLAIN[:2], add_generation_prompt=True) == prompt


def test_mistral_renders_as_the_published_v03_template():
    tok = family_tokenizer("mistral")
    for msgs, published in (MISTRAL_TURNS, MISTRAL_PROMPT):
        assert _render(tok, msgs) == published
        assert _render(tok, msgs, add_generation_prompt=True) == published  # Mistral has no generation prompt
    # The one deliberate difference: the published template drops the system message from any conversation
    # that goes on after the user message; hopforge's keeps it in the last user message.
    assert _render(tok, PLAIN) == "<s>[INST] You are terse.\n\nWho wrote Hamlet?[/INST] Shakespeare.</s>"


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_tool_turns_in_the_family_format(family):
    tok = family_tokenizer(family)
    assert _render(tok, TOOL_CONV, tools=[TOOL]) == TOOL_RENDER[family]
    # Arrow rows carry every key, null where unused: nothing of it may show.
    nulls = [{"role": m["role"], "content": m.get("content"), "tool_calls": m.get("tool_calls"),
              "tool_call_id": m.get("tool_call_id"), "name": m.get("name"), "reasoning_content": None}
             for m in TOOL_CONV]
    assert _render(tok, nulls, tools=[TOOL]) == TOOL_RENDER[family]


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_parallel_calls_and_text_before_them_are_kept(family):
    tok = family_tokenizer(family)
    second = {"id": "call00002", "type": "function", "function": {"name": "open", "arguments": '{"page": "Hamlet"}'}}
    msgs = TOOL_CONV[:2] + [{"role": "assistant", "content": "Let me look.", "tool_calls": [CALL, second]}]
    text = _render(tok, msgs, tools=[TOOL])
    assert "Let me look." in text
    assert text.count('{"query": "Hamlet"}') == 1 and text.count('{"page": "Hamlet"}') == 1  # written once, as is
    assert "\\\"" not in text.split("Let me look.")[1]  # never JSON-encoded a second time


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_end_of_turn_comes_from_the_template_not_eos(family):
    tok = family_tokenizer(family)
    eot = end_of_turn(tok, tok.chat_template)
    assert eot == FAMILIES[family].eot
    assert stop_tokens(tok, tok.chat_template) == (eot, eot)  # eos follows the turn's end unless a recipe says
    if family in ("gemma3", "llama3", "qwen3"):
        assert tok.eos_token != eot  # <eos>, <|end_of_text|>, <|endoftext|>: what broke the eos-based check


def test_recipe_eos_is_honoured_and_checked():
    tok = family_tokenizer("gemma3")
    assert stop_tokens(tok, tok.chat_template, "<eos>") == ("<end_of_turn>", "<eos>")
    with pytest.raises(InputError, match="not in the tokenizer's vocabulary"):
        stop_tokens(tok, tok.chat_template, "<|eot_id|>")
    bare = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"  # no token closes a turn
    with pytest.raises(InputError, match="set eos_token"):
        stop_tokens(tok, bare)
    assert stop_tokens(tok, bare, "<end_of_turn>") == ("<end_of_turn>", "<end_of_turn>")


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_auto_picks_the_family_template(family):
    tok = family_tokenizer(family, re.sub(r"\{%-?\s*(end)?generation\s*-?%\}", "", load_template(family)))
    assert family_of(tok.chat_template) == family
    assert resolve_template("auto", tok) == (family, load_template(family))
    assert resolve_template(family, tok) == (family, load_template(family))


def test_every_shipped_template_writes_its_end_of_turn_inside_the_markers():
    eots = {name: FAMILIES[name].eot for name in FAMILIES} | {"tiny": "<|im_end|>"}
    assert set(eots) == set(TEMPLATES)
    for name, eot in eots.items():
        text = load_template(name)
        inside = re.findall(r"\{%-?\s*generation\s*-?%\}(.*?)\{%-?\s*endgeneration", text, re.S)
        assert len(inside) == 1 and eot in inside[0], name
