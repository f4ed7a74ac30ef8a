"""Loss-mask validation: right templates pass with exact counts, wrong ones fail naming the row."""

from __future__ import annotations

import pytest

from synth.tokenizer.chat_templates import load_template
from sft.masking import check_rows, raise_on_failure
from synth.tokenizer.turns import conversation_turns
from helpers.sftrows import make_rows
from synth.engine.errors import InputError


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from helpers.sftdata import pages, pages_table
    from synth.tokenizer.tokens import load_tokenizer, train_demo_tokenizer

    d = tmp_path_factory.mktemp("tok")
    train_demo_tokenizer(pages_table(pages(150)), d)
    return load_tokenizer(d)


@pytest.fixture(scope="module")
def rows():
    from helpers.sftdata import pages

    return make_rows(pages(150), 12, seed=5, max_hops=2, page_chars=400)


def _decode_trained(tok, row, template):
    enc = tok.apply_chat_template(row["messages"], tools=__import__("json").loads(row["tools"]), chat_template=template,
                                  return_dict=True, return_assistant_tokens_mask=True)
    return tok.decode([i for i, m in zip(enc["input_ids"], enc["assistant_masks"]) if m])


@pytest.mark.parametrize("name", ["tiny", "qwen2.5"])
def test_shipped_templates_train_only_the_agent(tok, rows, name):
    report = check_rows(rows, tok, load_template(name), "<|im_end|>")
    assert report["ok"], report["failures"]
    assert report["tool_tokens_trained"] == 0 and report["prompt_tokens_trained"] == 0
    assert report["eot_untrained_turns"] == 0
    assert report["assistant_turns"] == sum(m["role"] == "assistant" for r in rows for m in r["messages"])
    assert report["tool_tokens"] > report["trained_tokens"] > 0  # observations dominate, as in real traces
    assert report["trained_tokens"] + report["masked_tokens"] == report["total_tokens"]
    trained = _decode_trained(tok, rows[0], load_template(name))
    assert trained.count("<|im_end|>") == sum(m["role"] == "assistant" for m in rows[0]["messages"])
    assert "<tool_call>" in trained and '"page_id"' not in trained  # calls trained, observations not
    raise_on_failure(report)


def test_template_without_markers_trains_by_prefix_renders(tok, rows):
    bare = load_template("tiny").replace("{%- generation %}", "").replace("{%- endgeneration %}", "")
    report = check_rows(rows, tok, bare, "<|im_end|>")
    assert report["ok"], report["failures"]
    assert report["mask_source"] == "prefix renders"
    marked = check_rows(rows, tok, load_template("tiny"), "<|im_end|>")
    assert report["trained_tokens"] == marked["trained_tokens"]  # the markers cover exactly what the model writes


def test_template_with_empty_markers_fails(tok, rows):
    empty = load_template("tiny").replace("{%- generation %}", "{%- generation %}{%- endgeneration %}", 1)
    empty = empty.replace("{%- endgeneration %}\n        {{- '\\n' }}", "{{- '\\n' }}")
    assert empty.count("endgeneration") == 1
    report = check_rows(rows, tok, empty, "<|im_end|>")
    assert not report["ok"] and report["rows_without_trained_tokens"] == len(rows)
    with pytest.raises(InputError, match=rf"trace_id={rows[0]['trace_id']}.*no token is trained"):
        raise_on_failure(report)


def test_template_leaving_eot_outside_markers_fails(tok, rows):
    t = load_template("tiny").replace("{{- '<|im_end|>' }}\n        {%- endgeneration %}",
                                      "{%- endgeneration %}\n        {{- '<|im_end|>' }}")
    assert t != load_template("tiny")
    report = check_rows(rows, tok, t, "<|im_end|>")
    assert report["eot_untrained_turns"] == report["assistant_turns"] > 0
    assert report["tool_tokens_trained"] == 0
    with pytest.raises(InputError, match="end-of-turn"):
        raise_on_failure(report)


def test_template_training_tool_observations_fails(tok, rows):
    t = load_template("tiny").replace(
        "{{- '<|im_start|>' + message.role + '\\n' + (message.content if message.content else '') + '<|im_end|>\\n' }}",
        "{%- generation %}{{- '<|im_start|>' + message.role + '\\n' + (message.content if message.content else '') "
        "+ '<|im_end|>\\n' }}{%- endgeneration %}")
    assert t != load_template("tiny")
    report = check_rows(rows, tok, t, "<|im_end|>")
    assert report["tool_tokens_trained"] == report["tool_tokens"] > 0
    assert report["prompt_tokens_trained"] > 0  # the user turn is trained too
    with pytest.raises(InputError, match="tool message"):
        raise_on_failure(report)


def test_message_spans_cover_each_message(tok, rows):
    import json

    row = rows[1]
    for name in ("tiny", "qwen2.5"):
        turns = conversation_turns(tok, row["messages"], json.loads(row["tools"]), load_template(name), "<|im_end|>")
        full, spans = turns.text, turns.spans
        assert spans[0][0] == 0 and spans[-1][1] == len(full)
        for m, (a, b) in zip(row["messages"], spans):
            if m["content"]:
                assert m["content"] in full[a:b]  # each message's text lies inside its own span
            for c in m["tool_calls"] or []:
                assert c["function"]["arguments"] in full[a:b]


def test_rows_over_max_length_are_flagged_not_truncated(tok, rows):
    lengths = check_rows(rows, tok, load_template("tiny"), "<|im_end|>")["total_tokens"]
    cut = sorted(len(tok.apply_chat_template(r["messages"], tools=__import__("json").loads(r["tools"]),
                                             chat_template=load_template("tiny"))["input_ids"]) for r in rows)
    assert sum(cut) == lengths
    limit = cut[len(cut) // 2]
    report = check_rows(rows, tok, load_template("tiny"), "<|im_end|>", max_length=limit)
    assert report["too_long"] == sum(1 for n in cut if n > limit) > 0
    assert report["total_tokens"] == sum(n for n in cut if n <= limit)  # kept rows whole, long ones out
