"""A tiny byte-level BPE tokenizer with a tool-aware chat template, made in code for tests.

The template tests keys for truthiness (Arrow fills missing keys
with null), renders tool-call ``arguments`` as the JSON strings they are stored as, and
lists the tool schemas in a system block.  ``save_tokenizer(path)`` writes it where
``AutoTokenizer.from_pretrained(path)`` finds it.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{%- if tools %}<|system|>\n# Tools\n{%- for t in tools %}\n{{ t | tojson }}{%- endfor %}\n<|end|>\n{%- endif %}"
    "{%- for m in messages %}"
    "<|{{ m['role'] }}|>\n"
    "{%- if m['content'] %}{{ m['content'] }}{%- endif %}"
    "{%- if m['tool_calls'] %}{%- for tc in m['tool_calls'] %}\n"
    "<tool_call>{\"name\": \"{{ tc['function']['name'] }}\", "
    "\"arguments\": {{ tc['function']['arguments'] }}}</tool_call>{%- endfor %}{%- endif %}"
    "<|end|>\n"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>\n{%- endif %}"
)

SPECIAL = ["<|system|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|end|>", "<tool_call>", "</tool_call>"]


def save_tokenizer(path: str | Path, vocab_size: int = 400) -> Path:
    """Train the tokenizer on a few sentences and save it (with its chat template) under ``path``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL + ["<|pad|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = ["search open find the query page text answer", "Alpha Station Bravo Harbour Charlie Delta City",
              '{"name": "search", "arguments": {"query": "x"}}', "Step 1. I have it. <answer>Delta City</answer>"] * 20
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|end|>")
    fast.chat_template = CHAT_TEMPLATE
    path = Path(path)
    fast.save_pretrained(str(path))
    return path


__all__ = ["CHAT_TEMPLATE", "save_tokenizer"]
