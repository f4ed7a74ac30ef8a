"""Untrusted strings in Markdown (synth/text/markdown.py), read back as a renderer reads them."""

from __future__ import annotations

import pytest
from helpers.markdown import code_spans, fences, inline_texts, raw_html, tables

from synth.text.markdown import md_code, md_fence, md_text, one_line

HOSTILE = [
    "evil` | x | <script>alert(1)</script>",
    "a\nb\r\n| c | d |\n\n# heading",
    "<img src=x onerror=alert(1)>",
    "<!-- not a comment",
    "***bold*** _it_ __strong__ a_b_ _c_d x__y__z [link](http://evil.example) ![img](x) <http://evil.example>",
    "~~struck~~ $x^2$ $$y$$",
    "&amp; &lt;b&gt; &#60;script&#62;",
    "a\\|b \\ \\` \\\\",
    "`", "``", "x`y``z", "|", "||", " padded ", "#", "# not a heading #",
    "line\u2028separator\u2029paragraph\x00nul\x1b[31mansi\tab",
    "Qwen/Qwen3-32B",  # an ordinary model name
    "Zürich — 東京 — عربى",
]


def _table(*cells: str) -> str:
    return "\n".join(["| " + " | ".join(f"h{i}" for i in range(len(cells))) + " |",
                      "| " + " | ".join("---" for _ in cells) + " |",
                      "| " + " | ".join(cells) + " |"])


@pytest.mark.parametrize("value", HOSTILE)
def test_text_shows_itself_in_a_paragraph_a_heading_and_a_cell(value):
    shown = " ".join(one_line(value).split())  # a renderer may trim a cell or heading and fold spaces
    md = "\n\n".join([f"Said: {md_text(value)} (end)", f"## {md_text(value)}", _table(md_text(value), "after")])
    texts = [" ".join(t.split()) for t in inline_texts(md)]
    assert texts[0] == " ".join(f"Said: {one_line(value)} (end)".split())
    assert texts[1] == shown
    assert tables(md) == [[["h0", "h1"], [shown, "after"]]]  # the row keeps its two cells
    assert raw_html(md) == []


@pytest.mark.parametrize("value", HOSTILE)
def test_a_code_span_holds_the_string_whole_in_a_paragraph_and_a_cell(value):
    md = f"Model {md_code(value)} here.\n\n" + _table(md_code(value, table=True), "after")
    assert code_spans(md) == [one_line(value)] * 2
    assert len(tables(md)[0][1]) == 2 and tables(md)[0][1][1] == "after"
    assert raw_html(md) == []


def test_one_line_folds_every_control_run_into_one_space():
    assert one_line("a\r\n\tb\x00\x7f\x85c\u2028d") == "a b c d"
    assert one_line(None) == "" and one_line(3.5) == "3.5"
    assert md_code("") == "` `" and code_spans(f"x {md_code('')} y") == [" "]


@pytest.mark.parametrize("text", [
    "model: a\n```\n<script>alert(1)</script>\n```",
    "  ```\nindented closer",
    "````\nfour ticks",
    "plain: yes",
])
def test_a_fence_is_never_closed_by_its_text(text):
    md = "\n".join(["before", *md_fence(text, "yaml"), "after <b>x</b>"])
    assert fences(md) == [("yaml", text + "\n")]
    assert raw_html(md) == ["<b>", "</b>"]  # only what follows the block is parsed as Markdown


def test_ordinary_text_stays_readable():
    assert md_text("Qwen/Qwen3-32B, 8 hops (2 splits).") == "Qwen/Qwen3-32B, 8 hops (2 splits)."
    assert md_text("after wrong_answer: hotpot_dev_v1.json") == "after wrong_answer: hotpot_dev_v1.json"
    assert md_text("_x_ a__b") == "\\_x\\_ a\\_\\_b"
    assert md_code("gpt-4o") == "`gpt-4o`" and md_code("a|b", table=True) == "`a\\|b`"
