"""The sft table as TRL reads it: Parquet -> datasets -> chat template, with tools and tool calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synth.tokenizer.chat_templates import load_template, resolve_template
from sft.rows import held_out_questions, held_out_score, load_sft_dataset, parse_tools
from helpers.sftrows import make_rows, write_sft_table
from synth.engine.errors import InputError
from synth.tools.schema import tool_schemas_json

TRL_QWEN = Path(__import__("trl").__file__).parent / "chat_templates" / "qwen2_5_training.jinja"


def _call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _row(i, calls, tools):
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": f"question {i}"},
            {"role": "assistant", "content": None, "tool_calls": calls}]
    msgs += [{"role": "tool", "content": f"obs {c['id']}", "tool_call_id": c["id"], "name": c["function"]["name"]}
             for c in calls]
    msgs.append({"role": "assistant", "content": f"<answer>A{i}</answer>"})
    return {"messages": msgs, "tools": json.dumps(tools), "question_id": f"q{i}", "trace_id": f"t{i}",
            "rubric": 1.0, "n_tool_calls": len(calls), "teacher_model": "m", "split": "sft"}


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from helpers.sftdata import pages, pages_table
    from synth.tokenizer.tokens import load_tokenizer, train_demo_tokenizer

    d = tmp_path_factory.mktemp("tok")
    train_demo_tokenizer(pages_table(pages(150)), d)
    return load_tokenizer(d)


def test_from_parquet_renders_tools_and_arguments_unmerged(tmp_path, tok):
    full = json.loads(tool_schemas_json())
    only_search = [full[0]]
    rows = [_row(0, [_call("c0", "search", {"query": "obsidian"})], only_search),
            _row(1, [_call("c1", "search", {"query": "lava", "k": 3}), _call("c2", "open", {"page": "Lava", "offset": 40})],
                 full),
            _row(2, [_call("c3", "find", {"page": "Paris", "text": "Seine"})], full)]
    write_sft_table(rows, tmp_path / "sft", rows_per_shard=2)  # two shards: Arrow unifies them on read
    ds = load_sft_dataset(tmp_path / "sft")
    assert len(ds) == 3 and isinstance(ds[1]["tools"], str)
    by_q = {r["question_id"]: r for r in ds}
    for name in ("tiny", "qwen2.5"):
        template = load_template(name)
        for src in rows:
            r = by_q[src["question_id"]]
            tools = parse_tools(r["tools"])
            assert tools == json.loads(src["tools"])  # the tool schemas were not merged across rows
            text = tok.apply_chat_template(r["messages"], tools=tools, chat_template=template, tokenize=False)
            for m in src["messages"]:
                for c in m.get("tool_calls") or []:
                    args = c["function"]["arguments"]
                    assert f'"arguments": {args}}}' in text, (name, args)  # written once, not re-encoded
            assert "null" not in text.split("</tools>")[-1]  # no Arrow-filled keys rendered anywhere
            listed = [json.loads(line) for line in text.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()]
            assert listed == tools
            assert "None" not in text


def test_trl_qwen_training_template_double_encodes_json_string_arguments(tok):
    """Why hopforge ships its own Qwen2.5 template: TRL's runs `| tojson` on string arguments."""
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [_call("c", "search", {"query": "x"})]}]
    theirs = tok.apply_chat_template(msgs, chat_template=TRL_QWEN.read_text(), tokenize=False)
    ours = tok.apply_chat_template(msgs, chat_template=load_template("qwen2.5"), tokenize=False)
    assert '"arguments": "{\\"query\\": \\"x\\"}"' in theirs
    assert '"arguments": {"query": "x"}}' in ours
    # Apart from that fix and null-safe content, ours renders what TRL's does.
    plain = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    assert tok.apply_chat_template(plain, chat_template=TRL_QWEN.read_text(), tokenize=False) == \
        tok.apply_chat_template(plain, chat_template=load_template("qwen2.5"), tokenize=False)


def test_resolve_template(tok):
    assert resolve_template("tiny", tok)[0] == "tiny"
    assert resolve_template("auto", tok)[0] == "tokenizer"  # the demo tokenizer already has markers
    tok2 = type(tok).from_pretrained(tok.name_or_path)
    tok2.chat_template = "{{ messages[0].content }}"  # an unknown family: kept, its masks derived from prefixes
    assert resolve_template("auto", tok2) == ("tokenizer", "{{ messages[0].content }}")
    tok2.chat_template = None
    with pytest.raises(InputError, match="no chat template"):
        resolve_template("auto", tok2)
    tok2.chat_template = (TRL_QWEN.parent / "qwen2_5.jinja").read_text()  # Qwen2.5-Instruct's own template
    assert resolve_template("auto", tok2)[0] == "qwen2.5"  # ... gets hopforge's training variant


def test_held_out_split_is_by_question_hash():
    ids = [f"q{i:04d}" for i in range(2000)]
    held = held_out_questions(ids, 0.1)
    assert 150 < len(held) < 250
    assert held == held_out_questions(list(reversed(ids)) + ids[:50], 0.1)  # order and duplicates do not matter
    assert all(held_out_score(q) < 0.1 for q in held)
    assert held_out_questions(ids, 0.0) == [] and held_out_questions(["a"], 0.5) == []
    small = held_out_questions(["a", "b", "c"], 0.01)
    assert len(small) == 1  # a small demo still gets one held-out question ...
    assert len(held_out_questions(["a", "b"], 0.99)) == 1  # ... and keeps one to train on


def test_parse_tools_errors():
    assert parse_tools("") is None and parse_tools("[]") is None
    with pytest.raises(InputError):
        parse_tools("{not json")
    with pytest.raises(InputError):
        parse_tools('{"type": "function"}')


def test_synthetic_rows_are_realistic():
    from helpers.sftdata import pages

    rows = make_rows(pages(50), 20, seed=1)
    assert len({r["question_id"] for r in rows}) == 20
    roles = [m["role"] for r in rows for m in r["messages"]]
    assert roles.count("tool") > 40
    assert any(len(m["tool_calls"] or []) == 2 for r in rows for m in r["messages"])  # parallel calls occur
    for r in rows:
        assert r["messages"][-1]["role"] == "assistant" and "<answer>" in r["messages"][-1]["content"]
        for m in r["messages"]:
            for c in m["tool_calls"] or []:
                assert isinstance(json.loads(c["function"]["arguments"]), dict)
    assert make_rows(pages(50), 20, seed=1) == rows
