"""The RL tests' world: a real ``rl_pool`` made by the pipeline, the student's tokenizer.

``rl_run`` runs ``hopforge run --until filter`` on the embedded demo corpus (600 slots of 3-hop walks, of which
about one in thirteen gets a question that no adversary's search enters; the oracle teacher; more questions in
the rl split than by default so the band holds several), exactly as a
user would, once per session: its ``rl_pool``, ``sft``, ``questions`` and ``index`` are consistent.
``student_tokenizer`` is a small BPE made offline with the Qwen2.5 student's layout: ``<|im_start|>``,
``<|im_end|>`` and ``<|endoftext|>`` special, ``<tool_call>`` / ``</tool_call>`` added but not special
(they survive ``skip_special_tokens``, as in Qwen2.5), and the chat template the SFT recipe trains
with (``chat_template: qwen2.5``), which the student checkpoint carries.

The session fixtures built on them (``rl_run``, ``rl_files``, ``rl_rows``, ``sft_rows``, ``rl_questions``,
``student_path``) are registered by ``tests/conftest.py``, so the tests of ``filters/`` (the pool, the
reward) and of ``synth/tools/verl_tool.py`` share one run.
"""


from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from helpers.cli import hopforge_command

ROOT = Path(__file__).resolve().parents[2]  # the project
RUN_ARGS = ["--set", "walk.num_walks=600", "--set", "walk.hops=3", "--set", "expand.num_subgraphs=0",
            "--set", "questions.splits={sft: 0.35, rl: 0.6, eval: 0.05}"]


@pytest.fixture(scope="session")
def rl_run(tmp_path_factory) -> Path:
    """DIR of ``hopforge run --until filter`` on the demo corpus, with a non-empty ``rl_pool`` and ``sft``."""
    out = tmp_path_factory.mktemp("rlrun") / "run"
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1", TERM="dumb")
    r = subprocess.run([*hopforge_command(), "run", "--until", "filter", "--out", str(out), *RUN_ARGS], cwd=ROOT, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:]
    assert ds.dataset(out / "rl_pool").count_rows() >= 2, "the demo run put fewer than 2 questions in rl_pool"
    assert ds.dataset(out / "sft").count_rows() >= 1
    return out


@pytest.fixture(scope="session")
def rl_files(rl_run) -> list[str]:
    """The Parquet files of ``DIR/rl_pool``, as verl's ``data.train_files`` lists them."""
    return sorted(str(p) for p in (rl_run / "rl_pool").resolve().glob("part-*.parquet"))


@pytest.fixture(scope="session")
def rl_rows(rl_run) -> list[dict]:
    return ds.dataset(rl_run / "rl_pool").to_table().to_pylist()


@pytest.fixture(scope="session")
def sft_rows(rl_run) -> list[dict]:
    return ds.dataset(rl_run / "sft").to_table().to_pylist()


@pytest.fixture(scope="session")
def rl_questions(rl_run) -> dict[str, dict]:
    return {q["question_id"]: q for q in ds.dataset(rl_run / "questions").to_table().to_pylist()}


def save_student_tokenizer(path: Path) -> Path:
    """A byte-level BPE in the Qwen2.5 layout with hopforge's Qwen2.5 training template (see the module docstring)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from synth.tokenizer.chat_templates import load_template

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = ["search open find the query page text answer offset title snippet passages",
              '{"name": "search", "arguments": {"query": "x"}}', '{"page_id": "12", "title": "Alpha", "offset": 0}',
              "You are a research agent with tools over a local copy of Wikipedia.", "<answer>Delta City</answer>"] * 20
    tok.train_from_iterator(corpus, trainer)
    tok.add_tokens([AddedToken("<tool_call>", special=False, normalized=False),
                    AddedToken("</tool_call>", special=False, normalized=False)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = load_template("qwen2.5")
    fast.save_pretrained(str(path))
    return path


@pytest.fixture(scope="session")
def student_path(tmp_path_factory) -> Path:
    return save_student_tokenizer(tmp_path_factory.mktemp("student") / "tokenizer")
