"""Small tokenizers made offline with the special tokens of real model families, for template and mask tests.

Each is a byte-level BPE trained in a second on agent text and demo pages, with the family's
control tokens added as special tokens (they are single tokens, as in the real vocabularies),
its tag tokens added as ordinary ones (Qwen's ``<tool_call>``), its bos / eos / pad, and a
post-processor that prepends bos as the real Llama, Gemma and Mistral tokenizers do, so a
template that writes ``bos_token`` itself shows a doubled bos if anything adds one again.
The eos is the base model's where it differs from the end-of-turn token (Llama's
``<|end_of_text|>``, Gemma's ``<eos>``, Qwen3's ``<|endoftext|>``), the case that broke the
old eos-based mask check.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Family:
    """A model family's tokens: ``special`` control tokens, ordinary ``tags``, and the named roles."""

    special: tuple[str, ...]
    tags: tuple[str, ...]
    bos: str | None
    eos: str
    pad: str | None
    eot: str  # what ends an assistant turn in the family's chat format


FAMILIES: dict[str, Family] = {
    "qwen2.5": Family(("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
                      ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"),
                      None, "<|im_end|>", "<|endoftext|>", "<|im_end|>"),
    "qwen3": Family(("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
                    ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"),
                    None, "<|endoftext|>", "<|endoftext|>", "<|im_end|>"),
    "llama3": Family(("<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                      "<|eot_id|>", "<|eom_id|>", "<|python_tag|>", "<|finetune_right_pad_id|>"),
                     (), "<|begin_of_text|>", "<|end_of_text|>", None, "<|eot_id|>"),
    "gemma3": Family(("<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"),
                     (), "<bos>", "<eos>", "<pad>", "<end_of_turn>"),
    "mistral": Family(("<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                       "[TOOL_RESULTS]", "[/TOOL_RESULTS]"),
                      (), "<s>", "</s>", None, "</s>"),
}

_CORPUS = ["search open find the query page text answer offset title snippet passages",
           "Alpha Station Bravo Harbour Charlie Delta City river Paris Seine Rome Tiber",
           '{"name": "search", "arguments": {"query": "x", "k": 3}}, {"page_id": "12", "title": "Paris"}',
           "I should look this up. The chain ends at Delta City. <answer>Delta City</answer>",
           "You are a research agent with a local Wikipedia. Answer the question by searching."]


def _corpus() -> list[str]:
    """Agent text, tool schemas and demo pages: rows then cost about as many tokens as with a real vocabulary."""
    from helpers.sftrows import demo_pages
    from synth.tools.schema import tool_schemas_json

    pages = [p["title"] + "\n" + "\n".join(p["paragraphs"]) for p in demo_pages(150)]
    return _CORPUS * 20 + [tool_schemas_json()] * 20 + pages


@lru_cache(maxsize=None)
def _trained(family: str, vocab_size: int):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    fam = FAMILIES[family]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(fam.special), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_corpus(), trainer)
    if fam.tags:
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in fam.tags])
    steps = [processors.ByteLevel(trim_offsets=False)]  # exact character offsets, as masks need
    if fam.bos:
        bos_id = tok.token_to_id(fam.bos)
        steps.append(processors.TemplateProcessing(single=f"{fam.bos} $A", pair=f"{fam.bos} $A {fam.bos} $B",
                                                   special_tokens=[(fam.bos, bos_id)]))
    tok.post_processor = processors.Sequence(steps)
    return tok.to_str()


def family_tokenizer(family: str, chat_template: str | None = None, vocab_size: int = 3000):
    """A ``PreTrainedTokenizerFast`` with ``family``'s tokens and ``chat_template`` (default: hopforge's shipped one)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    from synth.tokenizer.chat_templates import load_template

    fam = FAMILIES[family]
    fast = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(_trained(family, vocab_size)),
                                   bos_token=fam.bos, eos_token=fam.eos, pad_token=fam.pad, unk_token=None,
                                   clean_up_tokenization_spaces=False, model_max_length=131072)
    fast.chat_template = chat_template if chat_template is not None else load_template(family)
    return fast


__all__ = ["FAMILIES", "Family", "family_tokenizer"]
