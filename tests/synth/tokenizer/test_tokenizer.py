"""The demo tokenizer: trained offline on the pages, deterministic, loadable by AutoTokenizer."""

from __future__ import annotations

import pytest

from synth.tokenizer.tokens import SPECIAL_TOKENS, TAG_TOKENS, count_tokens, files_sha, load_tokenizer, train_demo_tokenizer


@pytest.fixture(scope="module")
def table():
    from helpers.sftdata import pages, pages_table

    return pages_table(pages(200))


def test_demo_tokenizer_is_deterministic_and_loads(tmp_path, table):
    from transformers import AutoTokenizer

    a = train_demo_tokenizer(table, tmp_path / "a")
    b = train_demo_tokenizer(table.take(list(reversed(range(table.num_rows)))), tmp_path / "b")  # other order
    assert a["files_sha"] == b["files_sha"] == files_sha(tmp_path / "a")
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "a"))
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|pad|>"
    for t in SPECIAL_TOKENS + TAG_TOKENS:
        assert len(tok(t, add_special_tokens=False)["input_ids"]) == 1, t
    assert "{% generation %}" in tok.chat_template or "{%- generation %}" in tok.chat_template
    text = "Obsidian is a naturally occurring volcanic glass — Zürich, 東京."
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text  # byte-level: lossless
    prose = "The city is the capital of the country and its largest city by population."
    assert count_tokens(tok, prose) < len(prose) / 3  # it learned merges from the pages
    assert count_tokens(tok, [text, "a"]) == [count_tokens(tok, text), 1]


def _plain_bpe(texts, vocab_size):
    """The demo BPE as it was trained before pieces were cut: the reference for text without a long word."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok


def test_the_trainer_counts_a_long_word_in_pieces_and_the_tokenizer_is_unchanged_for_prose(table):
    """The BPE trainer re-scans a word for every merge inside it, so its time grew with the square of the longest
    word (a 200,000-character word: minutes): it now counts a word in pieces of TRAIN_PIECE_BYTES, so no merge
    spans more than a piece, while prose trains to the very same tokenizer, which still splits words as before."""
    import json
    import random

    from synth.tokenizer.tokens import TRAIN_PIECE_BYTES, page_texts, train_bpe

    prose, _ = page_texts(table)
    rng = random.Random(5)
    blob = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(4 * TRAIN_PIECE_BYTES))
    whole = _plain_bpe(prose + [f"A blob {blob} here."] * 3, 4096)
    assert max(map(len, whole.get_vocab())) > 2 * TRAIN_PIECE_BYTES  # uncut, the blob's merges grow past a piece
    tok = train_bpe(prose + [f"A blob {blob} here."] * 3, 4096)
    assert max(map(len, tok.get_vocab())) <= TRAIN_PIECE_BYTES
    assert tok.decode(tok.encode(f"A blob {blob} here.").ids) == f"A blob {blob} here."
    assert json.loads(tok.to_str())["pre_tokenizer"]["type"] == "ByteLevel"  # the cut is the trainer's only
    assert train_bpe(prose, 4096).to_str() == _plain_bpe(prose, 4096).to_str()


def test_run_tokenizer_stage(tmp_path, table):
    from flows.config import Config
    from synth.engine.stage import Stage, StageContext
    from synth.engine.store import Store, write_parquet_atomic
    from synth.tokenizer.tokens import run_tokenizer

    store = Store(tmp_path / "out")
    write_parquet_atomic(table, store.path("corpus/pages") / "part-00000.parquet")
    from flows.stages import TOKENIZER

    stage = Stage(name="tokenizer", entry=run_tokenizer, sections=TOKENIZER.sections, outputs=("tokenizer",))
    ctx = StageContext(stage, Config(), store, "k1", progress=False)
    res = run_tokenizer(ctx)
    res.check("tokenizer")
    assert res.output == table.num_rows and res.extra["vocab_size"] > 1000
    tok = load_tokenizer(ctx.staging)  # a folder holding `tokenizer/`
    assert tok.eos_token == "<|im_end|>"

    # A non-demo name is loaded and pinned as a copy.
    ctx2 = StageContext(stage, _WithTokenizer(Config(), str(ctx.staging / "tokenizer")), store, "k2", progress=False)
    res2 = run_tokenizer(ctx2)
    assert res2.extra["kind"] == "pretrained" and res2.extra["files_sha"] == files_sha(ctx2.staging / "tokenizer")
    assert res2.extra["chat_template"] == "own"  # the demo tokenizer's template already has the markers


def test_pretrained_qwen_template_is_swapped_for_the_training_one(tmp_path, table):
    from pathlib import Path

    import trl

    from synth.tokenizer.chat_templates import load_template
    from synth.tokenizer.tokens import training_template

    tok = load_tokenizer(train_demo_tokenizer(table, tmp_path / "t") and tmp_path / "t")
    tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    assert training_template(tok) == "qwen2.5" and tok.chat_template == load_template("qwen2.5")


class _WithTokenizer:
    """A config with a top-level ``tokenizer`` field (as proposed for synth/config.py)."""

    def __init__(self, cfg, name):
        self._cfg, self.tokenizer = cfg, name

    def __getattr__(self, k):
        return getattr(self._cfg, k)


def test_load_tokenizer_errors(tmp_path):
    from synth.engine.errors import InputError

    with pytest.raises(InputError):
        load_tokenizer(tmp_path / "missing")


def test_a_saved_tokenizer_does_not_record_how_it_was_loaded(tmp_path, table):
    """HF_HUB_OFFLINE (which the Makefile sets) makes ``from_pretrained`` record ``local_files_only`` in the
    tokenizer's kwargs; a tokenizer saved from it must still be byte-equal to one loaded without it, or the
    same student differs with the environment that trained it (``hopforge verify`` then reports it)."""
    import os
    import subprocess
    import sys

    from synth.tokenizer.tokens import LOAD_TIME_KEYS

    train_demo_tokenizer(table, tmp_path / "src")
    script = ("import sys\nfrom transformers import AutoTokenizer\nfrom synth.tokenizer.tokens import save_tokenizer\n"
              "tok = AutoTokenizer.from_pretrained(sys.argv[1])\n"
              "getattr(tok, sys.argv[3])(sys.argv[2])\n")
    saved = {}
    for offline in ("1", "0"):
        for how in ("save_pretrained", "save"):
            env = {**os.environ, "HF_HUB_OFFLINE": offline}
            out = tmp_path / f"{how}-{offline}"
            code = script if how == "save_pretrained" else script.replace("getattr(tok, sys.argv[3])(sys.argv[2])",
                                                                            "save_tokenizer(tok, sys.argv[2])")
            subprocess.run([sys.executable, "-c", code, str(tmp_path / "src"), str(out), how], env=env, check=True)
            saved[how, offline] = (out / "tokenizer_config.json").read_text()
    # The plain save records the environment (the defect this guards against)...
    assert saved["save_pretrained", "1"] != saved["save_pretrained", "0"]
    # ... the project's save does not, and the folder hashes the same.
    assert saved["save", "1"] == saved["save", "0"]
    assert not any(f'"{k}"' in saved["save", "1"] for k in LOAD_TIME_KEYS)
    assert files_sha(tmp_path / "save-1") == files_sha(tmp_path / "save-0")
