"""The loss-mask check for Qwen2.5, Qwen3, Llama 3, Gemma 3 and Mistral students, offline, on realistic rows.

Every family's shipped template must train 0 tool tokens, 0 prompt tokens, and every assistant
turn's end-of-turn token (read off the template, not the eos), with the tool schemas in the
prompt.  The same templates without their markers must give the same masks by prefix renders;
templates that drop the tools, or that no prefix render can attribute, must fail naming the row.
"""

from __future__ import annotations

import json
import re

import pytest

from helpers.familytok import FAMILIES, family_tokenizer
from helpers.sftrows import make_rows
from helpers.tinytok import CHAT_TEMPLATE as UNKNOWN_TEMPLATE
from synth.tokenizer.losspolicy import LossPolicy
from sft.masking import analyse_row, check_rows, raise_on_failure
from synth.engine.errors import InputError
from synth.tokenizer.chat_templates import load_template
from synth.tokenizer.turns import end_of_turn

FAMILY_NAMES = sorted(FAMILIES)


def strip_markers(template: str) -> str:
    """``template`` without its ``{% generation %}`` markers: the same text, no masks."""
    return re.sub(r"\{%-?\s*(end)?generation\s*-?%\}", "", template)


@pytest.fixture(scope="module")
def rows():
    from helpers.sftdata import pages

    return make_rows(pages(80), 8, seed=11, max_hops=2, page_chars=300)


def _masks(tok, row, template):
    out = analyse_row(row, tok, LossPolicy(template, end_of_turn(tok, template)), None)
    return out["input_ids"], out["assistant_masks"]


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_family_students_train_only_the_agent(family, rows):
    tok = family_tokenizer(family)
    template = load_template(family)
    report = check_rows(rows, tok, template, template_name=family)
    assert report["ok"], report["failures"]
    assert report["mask_source"] == "generation markers" and report["eot_token"] == FAMILIES[family].eot
    assert report["tool_tokens_trained"] == 0 and report["prompt_tokens_trained"] == 0
    assert report["eot_untrained_turns"] == 0 and report["rows_missing_tools"] == 0
    n_turns = sum(m["role"] == "assistant" for r in rows for m in r["messages"])
    assert report["assistant_turns"] == n_turns
    assert report["tool_tokens"] > report["trained_tokens"] > 0

    ids, mask = _masks(tok, rows[0], template)
    eot_id = tok.convert_tokens_to_ids(FAMILIES[family].eot)
    trained = [i for i, m in zip(ids, mask) if m]
    assert trained.count(eot_id) == sum(m["role"] == "assistant" for m in rows[0]["messages"])
    text = tok.decode(trained)
    assert '"snippet"' not in text and '"total_chars"' not in text  # observations are never trained
    assert '"query"' in text and "<answer>" in text  # calls and the answer are
    if FAMILIES[family].bos:
        assert ids.count(tok.bos_token_id) == 1  # the template writes bos; nothing adds a second


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_masks_without_markers_are_derived_from_prefix_renders(family, rows):
    tok = family_tokenizer(family)
    marked, bare = load_template(family), strip_markers(load_template(family))
    report = check_rows(rows, tok, bare)
    assert report["ok"], report["failures"]
    assert report["mask_source"] == "prefix renders"
    assert report["tool_tokens_trained"] == 0 and report["eot_untrained_turns"] == 0
    for row in rows[:3]:
        ids, derived = _masks(tok, row, bare)
        ids2, from_markers = _masks(tok, row, marked)
        assert ids == ids2
        if family == "qwen2.5":  # its markers (TRL's) also train the newlines around a turn; nothing else differs
            diff = {tok.decode([i]) for i, a, b in zip(ids, derived, from_markers) if a != b}
            assert diff == {"\n"} and all(b for a, b in zip(derived, from_markers) if a)
        else:
            assert derived == from_markers


def test_a_template_of_an_unknown_family_is_checked_by_prefix_renders(rows):
    tok = family_tokenizer("qwen2.5", UNKNOWN_TEMPLATE)
    for t in ("<|system|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|end|>"):
        tok.add_special_tokens({"additional_special_tokens": [t]}, replace_extra_special_tokens=False)
    report = check_rows(rows, tok, None)
    assert report["ok"], report["failures"]
    assert report["eot_token"] == "<|end|>" and report["mask_source"] == "prefix renders"


def test_a_last_turn_rendered_differently_is_still_attributed(rows):
    """Qwen3's published template writes the think block only into the last assistant turn."""
    tok = family_tokenizer("qwen3")
    think = "{{- '<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}"
    assert think in load_template("qwen3")
    published_like = strip_markers(load_template("qwen3").replace(
        think, "{{- ('<think>\\n' + reasoning.strip('\\n') + '\\n</think>\\n\\n' if loop.last else '') + "
               "content.lstrip('\\n') }}"))
    report = check_rows(rows, tok, published_like)
    assert report["ok"], report["failures"]
    ids, mask = _masks(tok, rows[0], published_like)
    trained = tok.decode([i for i, m in zip(ids, mask) if m])
    assert trained.count("<think>") == 1 and trained.rstrip().endswith("<|im_end|>")


@pytest.mark.parametrize("family,tool_line", [("qwen3", "{{- tool | tojson }}"),
                                              ("llama3", "{{- t | tojson(indent=4) }}"),
                                              ("mistral", "((tool.function if tool.function else tool) | tojson)")])
def test_an_empty_tools_block_fails_naming_the_row(family, tool_line, rows):
    template = load_template(family)
    assert tool_line in template
    empty = template.replace(tool_line, "'{}'" if family == "mistral" else "")
    report = check_rows(rows, family_tokenizer(family), empty)
    assert not report["ok"] and report["rows_missing_tools"] == len(rows)
    assert report["tool_tokens_trained"] == 0  # the masks alone would have passed
    with pytest.raises(InputError, match=rf"trace_id={rows[0]['trace_id']}.*tool schema.*search \(description"):
        raise_on_failure(report)


def test_a_template_that_drops_tools_fails(rows):
    tok = family_tokenizer("gemma3")
    dropped = load_template("gemma3").replace("{%- if tools %}", "{%- if false %}", 1)
    report = check_rows(rows, tok, dropped)
    assert report["rows_missing_tools"] == len(rows) and report["eot_untrained_turns"] == 0
    with pytest.raises(InputError, match="rows_missing_tools=8"):
        raise_on_failure(report)


def test_a_template_no_prefix_render_can_attribute_fails(rows):
    """Mistral's published quirk: the system message goes into the user message only while that message is last."""
    quirk = strip_markers(load_template("mistral")).replace(
        "{%- if system_message and loop.index0 == ns.last_user %}", "{%- if system_message and loop.last %}")
    report = check_rows(rows, family_tokenizer("mistral"), quirk)
    assert not report["ok"]
    with pytest.raises(InputError, match="masks cannot be derived"):
        raise_on_failure(report)


def test_a_row_the_template_cannot_render_is_named(rows):
    refuses = load_template("llama3").replace("{%- if message.tool_calls %}",
                                              "{%- if message.tool_calls|length > 1 %}{{ raise_exception('one call "
                                              "at a time') }}{%- endif %}{%- if message.tool_calls %}", 1)
    parallel = next(r for r in rows if any(len(m["tool_calls"] or []) > 1 for m in r["messages"]))
    with pytest.raises(InputError, match=rf"cannot render row trace_id={parallel['trace_id']}.*one call"):
        check_rows([parallel], family_tokenizer("llama3"), refuses)


def test_tools_column_reaches_every_family_unmerged(rows):
    schemas = json.loads(rows[0]["tools"])
    for family in FAMILY_NAMES:
        tok = family_tokenizer(family)
        text = tok.apply_chat_template(rows[0]["messages"], tools=schemas, tokenize=False)
        assert all(s["function"]["description"] in text for s in schemas), family
        in_data = sum((m["content"] or "").count('": null') for m in rows[0]["messages"])
        assert text.count('": null') == in_data and "None" not in text, family  # no Arrow-filled key rendered
