"""Rendered token counts: exact against the chat template's own tokenization, batched, cached per tokenizer."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from filters.length import rendered_length
from filters.sftrows import sft_messages
from helpers.tinytok import save_tokenizer
from helpers.traces import call, make_trace
from synth.tokenizer.counts import CACHE_FOLDER, TokenCounter, TokenCounts, compact_cache, tokenizer_key
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


# ---- each distinct piece tokenized once (TokenCounter) --------------------------------------------------------------
def _whole(counter: TokenCounter, texts: list[str]) -> list[int]:
    return [len(counter.tokenizer.encode(t, add_special_tokens=False)) for t in texts]


def _bpe(tmp_path: Path, pre_tokenizer, specials: list, normalizer=None):
    """A small BPE tokenizer trained here, with ``specials`` as added tokens (strings or AddedToken)."""
    from tokenizers import AddedToken, Tokenizer, models, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizer
    if normalizer is not None:
        tok.normalizer = normalizer
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>"])
    tok.train_from_iterator(["Alpha Station Bravo Harbour the river page text answer search open"] * 30, trainer)
    tok.add_special_tokens([s if isinstance(s, AddedToken) else AddedToken(s, normalized=False) for s in specials])
    return tok


_TEXTS = ["<|user|>\nAlpha Station<|end|>\n<|tool|>\n the river Bravo  Harbour<|end|>",
          "<|user|>\nAlpha Station<|end|>\n<|tool|>\n the river Bravo  Harbour<|end|>\n<|assistant|>\nanswer",
          " leading space<|end|>  <|end|><|end|>trailing ", "no added token at all, Ünïcode", "",
          "<|end|>", "Alpha<|user|>Station<|end|>"]


def test_pieces_counted_once_sum_to_the_whole_texts_count(tok) -> None:
    """Rendered conversations of every shipped template, counted a batch at a time: the same counts as the
    tokenizer's own encoding of each whole text, with the repeated pieces tokenized only once."""
    from synth.tokenizer.chat_templates import TEMPLATES, load_template

    items = _items(12)
    texts = [tok.apply_chat_template(m, tools=t, tokenize=False, chat_template=load_template(name))
             for name in sorted(TEMPLATES) for m, t in items] + _TEXTS
    counter = TokenCounter(tok)
    assert counter.segmented
    got = [n for i in range(0, len(texts), 7) for n in counter.count(texts[i:i + 7])]
    assert got == _whole(counter, texts)
    first = counter.tokenized_chars
    assert first < 0.75 * sum(map(len, texts))  # the system blocks and questions repeat: tokenized once
    assert counter.count(texts) == got and counter.tokenized_chars == first  # all remembered: nothing tokenized


@pytest.mark.parametrize("scheme", ["always", "never"])
def test_metaspace_that_prepends_to_every_piece_is_cut(tmp_path: Path, scheme: str) -> None:
    from tokenizers import pre_tokenizers

    specials = ["<|user|>", "<|end|>", "<|tool|>", "<|assistant|>"]
    counter = TokenCounter(_bpe(tmp_path, pre_tokenizers.Metaspace(prepend_scheme=scheme), specials))
    assert counter.segmented
    assert counter.count(_TEXTS * 2) == _whole(counter, _TEXTS * 2)


def test_a_tokenizer_whose_pieces_are_not_independent_counts_whole_texts(tmp_path: Path) -> None:
    """Metaspace that prepends only at the start of the whole text, or an added token that takes its neighbouring
    whitespace: a piece cut out would be encoded differently, so nothing is cut, and the counts stay exact."""
    from tokenizers import AddedToken, pre_tokenizers

    specials = ["<|user|>", "<|end|>", "<|tool|>", "<|assistant|>"]
    first = TokenCounter(_bpe(tmp_path, pre_tokenizers.Metaspace(prepend_scheme="first"), specials))
    seq = TokenCounter(_bpe(tmp_path, pre_tokenizers.Sequence([pre_tokenizers.Digits(),
                                                               pre_tokenizers.Metaspace(prepend_scheme="first")]),
                            specials))
    strips = TokenCounter(_bpe(tmp_path, pre_tokenizers.Whitespace(),
                               specials[:3] + [AddedToken("<|assistant|>", normalized=False, lstrip=True)]))
    for counter in (first, seq, strips):
        assert not counter.segmented
        assert counter.count(_TEXTS) == _whole(counter, _TEXTS)
    # The check is not vacuous: under "first", the cut pieces would count differently.
    assert any(sum(len(first.tokenizer.encode(p, add_special_tokens=False)) for p in re.split(r"<\|end\|>", t))
               + t.count("<|end|>") != n for t, n in zip(_TEXTS, _whole(first, _TEXTS)))


def test_a_cut_that_disagrees_with_whole_counts_is_switched_off(tok, caplog) -> None:
    counter = TokenCounter(tok)
    counter._pattern = re.compile("( )")  # a wrong cut: spaces belong to the next word's token in byte-level BPE
    texts = [t for t in _TEXTS if t]
    with caplog.at_level("WARNING", logger="hopforge.tokenizer"):
        assert counter.count(texts) == _whole(counter, texts)
    assert not counter.segmented and "counted whole" in caplog.text
    assert counter.count(texts) == _whole(counter, texts)


def test_the_memory_of_pieces_is_bounded_and_counts_stay_exact(tok) -> None:
    counter = TokenCounter(tok, memo_chars=64)
    texts = _TEXTS * 3
    assert counter.count(texts) == _whole(counter, texts)
    assert counter._memo_chars <= 64 and len(counter._memo) <= len(texts)
    assert counter.count(texts) == _whole(counter, texts)


def test_a_conversation_orjson_refuses_still_gets_a_digest() -> None:
    from synth.tokenizer.counts import conversation_digest

    lone = [{"role": "user", "content": "half a pair: \ud800"}]
    big = [{"role": "user", "content": "x", "n": 2 ** 70}]
    plain = [{"content": "caf\u00e9", "role": "user"}]
    digests = {conversation_digest(lone, None), conversation_digest(big, None), conversation_digest(plain, None),
               conversation_digest(plain, [{"type": "function"}])}
    assert len(digests) == 4 and all(len(d) == 16 for d in digests)
    # Key order does not matter, and plain text hashes to the bytes json would write.
    import hashlib
    assert conversation_digest([{"role": "user", "content": "caf\u00e9"}], None) == hashlib.blake2b(
        json.dumps([plain, None], sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode(),
        digest_size=16).digest()
