"""Rendered token counts: exact against the chat template's own tokenization, batched, cached per tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from filters.length import rendered_length
from filters.sftrows import sft_messages
from helpers.tinytok import save_tokenizer
from helpers.traces import call, make_trace
from synth.tokenizer.counts import CACHE_FOLDER, TokenCounts, compact_cache, tokenizer_key
from synth.tokenizer.tokens import load_tokenizer


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return load_tokenizer(save_tokenizer(tmp_path_factory.mktemp("tok") / "tok"), chat_template=True)


def _items(n: int = 12) -> list[tuple[list[dict], list[dict] | None]]:
    out = []
    for i in range(n):
        calls = [call("search", query=f"river number {i}"), call("open", page=f"p{i}")][: 1 + i % 2]
        t = make_trace(f"t{i}", thoughts=[("Ünïcode and spaces  " * (i + 1)), "next"], calls=calls)
        out.append((sft_messages(t), json.loads(t.tools) if i % 3 else None))  # with and without tools
    return out


def test_counts_equal_the_templates_own_tokenization(tok) -> None:
    items = _items()
    counts = TokenCounts(tok).count(items)
    assert counts == [rendered_length(tok, m, tools) for m, tools in items]
    assert len(set(counts)) > 1  # the conversations differ, and so do their lengths


def test_a_second_counter_reads_the_cache_and_renders_nothing(tok, tmp_path: Path, monkeypatch) -> None:
    items = _items()
    first = TokenCounts(tok, tmp_path)
    expected = first.count(items)
    assert first.computed == len(items) and first.flush() == len(items)
    second = TokenCounts(tok, tmp_path)
    monkeypatch.setattr(second, "render", lambda *a: pytest.fail("a cached conversation was rendered again"))
    assert second.count(items) == expected and second.hits == len(items) and second.computed == 0


def test_another_template_or_tokenizer_never_reads_these_counts(tok, tmp_path: Path) -> None:
    items = _items(3)
    TokenCounts(tok, tmp_path).count(items)
    base = tokenizer_key(tok)
    other = load_tokenizer(save_tokenizer(tmp_path / "tok2"), chat_template=True)
    other.chat_template = other.chat_template + "{{ '\\n' }}"  # one more token at the end of every render
    assert tokenizer_key(other) != base
    counter = TokenCounts(other, tmp_path)
    assert counter.count(items) == [rendered_length(other, m, t) for m, t in items]
    assert counter.hits == 0


def test_unrenderable_conversations_get_no_count(tok) -> None:
    good = _items(1)[0]
    assert TokenCounts(tok).count([([], None), good])[0] is None


def test_a_damaged_cache_file_costs_a_recount_not_a_wrong_count(tok, tmp_path: Path, caplog) -> None:
    items = _items(4)
    c = TokenCounts(tok, tmp_path)
    expected = c.count(items)
    c.flush()
    folder = tmp_path / CACHE_FOLDER / tokenizer_key(tok)
    (folder / "broken.parquet").write_bytes(b"PAR1 not parquet")
    again = TokenCounts(tok, tmp_path)
    assert again.count(items) == expected and again.hits == len(items)
    assert "unreadable" in caplog.text
    for f in folder.glob("*.parquet"):  # every good file damaged: everything is counted again, correctly
        f.write_bytes(b"junk")
    fresh = TokenCounts(tok, tmp_path)
    assert fresh.count(items) == expected and fresh.computed == len(items)


def test_compaction_keeps_every_count(tok, tmp_path: Path) -> None:
    items = _items(20)
    for i in range(20):  # one file per conversation, as workers write one per batch
        c = TokenCounts(tok, tmp_path)
        c.count(items[i:i + 1])
        c.flush()
    folder = tmp_path / CACHE_FOLDER / tokenizer_key(tok)
    assert len(list(folder.glob("*.parquet"))) == 20
    compact_cache(tmp_path, most=4)
    assert len(list(folder.glob("*.parquet"))) == 1
    c = TokenCounts(tok, tmp_path)
    assert c.count(items) == [rendered_length(tok, m, t) for m, t in items] and c.computed == 0
