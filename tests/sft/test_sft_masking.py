"""Loss-mask validation: right templates pass with exact counts, wrong ones fail naming the row."""

from __future__ import annotations

import sys

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


@pytest.mark.parametrize("name", ["tiny", "qwen2.5", "qwen3", "llama3", "gemma3", "mistral"])
def test_prefix_renders_match_apply_chat_template(tok, rows, name):
    """The fast prefix path (the conversation converted once) renders every prefix, with and without the
    generation prompt, exactly as apply_chat_template does, refusals included."""
    import json

    from synth.tokenizer.turns import PrefixRenderer, _render_prefix

    template = load_template(name)
    for row in rows[:3]:
        msgs, tools = [dict(m) for m in row["messages"]], json.loads(row["tools"])
        prefix = PrefixRenderer(tok, msgs, tools, template)
        assert prefix.fast, name
        for n in range(len(msgs) + 1):
            for gen in (False, True):
                assert prefix(n, add_generation_prompt=gen) == _render_prefix(tok, msgs[:n], tools, template, gen), (n, gen)


def test_untracked_generation_blocks_render_the_same_text_and_scope(tok, rows):
    """Prefix renders compile {% generation %} blocks as plain scopes: a template that assigns inside a block,
    writes the name after it and branches on the conversation's end renders every prefix as
    apply_chat_template does (an assignment inside the block does not leak out of it, as with the tracker)."""
    import json

    from synth.tokenizer.turns import PrefixRenderer, _render_prefix, untracked_template

    template = (
        "{%- set who = 'outer' %}"
        "{%- for m in messages %}"
        "{%- if m.role == 'assistant' %}<|im_start|>assistant\n"
        "{%- generation %}{%- set who = 'inner' %}{{ m.content or '' }}[{{ who }}]<|im_end|>{%- endgeneration %}"
        "[{{ who }}]\n"
        "{%- else %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}<|im_end|>\n{%- endif %}"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}")
    assert untracked_template(template) is not None
    for row in rows[:3]:
        msgs = [dict(m) for m in row["messages"]]
        prefix = PrefixRenderer(tok, msgs, json.loads(row["tools"]), template)
        assert prefix.fast and "[inner]<|im_end|>[outer]" in prefix.full
        for n in range(len(msgs) + 1):
            for gen in (False, True):
                assert prefix(n, add_generation_prompt=gen) == _render_prefix(tok, msgs[:n], json.loads(row["tools"]),
                                                                              template, gen), (n, gen)


def test_turns_are_the_same_on_the_exact_path(tok, rows, monkeypatch):
    """With the fast path unavailable (another transformers), every prefix goes through apply_chat_template
    and the turns found are identical; so are they for a template given tools as functions."""
    import json

    from synth.tokenizer.turns import PrefixRenderer

    template = load_template("qwen2.5")
    fast = [conversation_turns(tok, r["messages"], json.loads(r["tools"]), template, "<|im_end|>") for r in rows[:4]]

    monkeypatch.setattr(PrefixRenderer, "use_fast", False)
    assert not PrefixRenderer(tok, rows[0]["messages"], json.loads(rows[0]["tools"]), template).fast
    exact = [conversation_turns(tok, r["messages"], json.loads(r["tools"]), template, "<|im_end|>") for r in rows[:4]]
    assert [(t.text, t.spans, t.written, t.eot_at, t.unattributable) for t in fast] == \
           [(t.text, t.spans, t.written, t.eot_at, t.unattributable) for t in exact]
    assert any(w is not None for t in fast for w in t.written)
    monkeypatch.setattr(PrefixRenderer, "use_fast", True)

    def lookup(query: str) -> str:
        """Look a page up.

        Args:
            query: what to look for
        """
        return query

    assert not PrefixRenderer(tok, rows[0]["messages"], [lookup], template).fast


def test_leak_counts_match_a_token_by_token_count():
    """The vectorized leak count against the plain definition (a token belongs to every message its
    characters overlap), on random spans and tokens that straddle message boundaries."""
    import random

    from sft.masking import _leaks
    from synth.tokenizer.turns import Turns

    rnd = random.Random(3)
    for _ in range(200):
        cuts = sorted(rnd.sample(range(1, 300), rnd.randint(1, 12)))
        bounds = [0, *cuts, 300]
        spans = list(zip(bounds, bounds[1:]))
        roles = [rnd.choice(["system", "user", "assistant", "tool"]) for _ in spans]
        offsets, at = [], 0
        while at < 300:
            step = rnd.randint(0, 9)
            offsets.append((at, min(at + step, 300)))  # empty tokens too
            at += max(step, 1)
        mask = [rnd.randint(0, 1) for _ in offsets]
        turns = Turns("x" * 300, spans=spans)
        want = {"n_tool_tokens": 0, "tool_trained": 0, "prompt_trained": 0}
        leaked: dict[str, dict[int, int]] = {}
        for t, (s, e) in enumerate(offsets):
            for m, (a, b) in enumerate(spans):
                if e > s and e > a and s < b:
                    if roles[m] == "tool":
                        want["n_tool_tokens"] += 1
                        want["tool_trained"] += mask[t]
                    elif roles[m] != "assistant":
                        want["prompt_trained"] += mask[t]
                    if roles[m] != "assistant" and mask[t]:
                        leaked.setdefault(roles[m], {}).setdefault(m, 0)
                        leaked[roles[m]][m] += 1
        got = {"n_tool_tokens": 0, "tool_trained": 0, "prompt_trained": 0}
        problems = _leaks(got, turns, roles, offsets, mask)
        assert got == want
        assert problems == [f"{sum(per.values())} token(s) of {role} message(s) {sorted(per)} are trained"
                            for role, per in sorted(leaked.items(), key=lambda kv: kv[0] != "tool")]


def _rss_file_kib() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    raise AssertionError("no RssFile in /proc/self/status")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise on /proc/self/maps is Linux's")
def test_release_mapped_pages_drops_read_pages_and_keeps_data_and_private_writes(tmp_path):
    """The pages of a memory-mapped Arrow file leave the reader's RSS, its rows still read the same, and a
    writable private mapping in the same folder keeps what was written to it."""
    import mmap

    import numpy as np
    import pyarrow as pa

    from sft.masking import release_mapped_pages

    folder = tmp_path / "cache"
    folder.mkdir()
    values = np.arange(12 << 20, dtype=np.int64)  # 96 MiB
    with pa.OSFile(str(folder / "rows.arrow"), "wb") as sink, pa.ipc.new_file(sink, pa.schema([("v", pa.int64())])) as w:
        w.write_table(pa.table({"v": values}))
    private = folder / "scratch.bin"
    private.write_bytes(b"\0" * mmap.PAGESIZE * 4)
    with open(private, "r+b") as f:
        copy = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)  # writable, private: dropping it would lose data
    copy[:5] = b"hello"
    table = pa.ipc.open_file(pa.memory_map(str(folder / "rows.arrow"))).read_all()
    total = int(np.asarray(table.column("v").chunk(0)).sum())  # every page read
    before = _rss_file_kib()
    released = release_mapped_pages(folder)
    after = _rss_file_kib()
    assert released >= 96 << 20
    assert before - after >= 80 << 10, (before, after)  # KiB
    assert int(np.asarray(table.column("v").chunk(0)).sum()) == total == int(values.sum())
    assert copy[:5] == b"hello" and private.read_bytes()[:5] == b"\0" * 5
    assert release_mapped_pages(tmp_path / "elsewhere") == 0 and release_mapped_pages(None) == 0
    copy.close()
