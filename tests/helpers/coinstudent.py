"""A real ``transformers`` checkpoint whose answers are a coin toss between a right and a wrong answer.

A tiny trained student answers nothing right, so its band would always be empty; this one is built by hand so a
test can see a band.  It is a Qwen2 causal LM whose attention and MLP output projections are zero, so each layer
adds nothing and the next-token logits depend only on the last token (a bigram model):

- after the generation prompt's last token it puts equal weight on two added tokens, ``<answer>RIGHT</answer>``
  and ``<answer>WRONG</answer>`` (each a single token, so one draw decides the answer);
- after either of them it ends the turn (``<|im_end|>``).

Sampled at temperature 1, each rollout answers right with probability 1/2: over n rollouts of the question whose
answer is RIGHT, c is binomial, and every other question gets c = 0.  The tokenizer is the Qwen2.5-layout BPE of
:func:`helpers.rlrun.save_student_tokenizer`, with hopforge's Qwen2.5 template.
"""

from __future__ import annotations

from pathlib import Path


def save_coin_student(path: Path, right: str, wrong: str = "nobody at all") -> Path:
    """Write the checkpoint (config, weights, tokenizer) to ``path``; returns ``path``."""
    import torch
    from tokenizers import AddedToken
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from helpers.rlrun import save_student_tokenizer

    save_student_tokenizer(path)
    tok = AutoTokenizer.from_pretrained(str(path))
    answers = [f"<answer>{right}</answer>", f"<answer>{wrong}</answer>"]
    tok.add_tokens([AddedToken(a, special=False, normalized=False) for a in answers])
    ids = [tok.convert_tokens_to_ids(a) for a in answers]
    prompt = tok.apply_chat_template([{"role": "user", "content": "q"}], add_generation_prompt=True, tokenize=False)
    last = tok(prompt, add_special_tokens=False)["input_ids"][-1]
    eot = tok.convert_tokens_to_ids("<|im_end|>")
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=8, intermediate_size=8, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=65536,
                      tie_word_embeddings=False, eos_token_id=eot, pad_token_id=tok.pad_token_id)
    model = Qwen2ForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.fill_(1.0)
        emb, head = model.model.embed_tokens.weight, model.lm_head.weight
        emb[last, 0] = 1.0  # the generation prompt's last token -> direction 0
        for i in ids:
            emb[i, 1] = 1.0  # either answer -> direction 1
            head[i, 0] = 20.0  # direction 0 -> the two answers, equally
        head[eot, 1] = 20.0  # direction 1 -> end of turn
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path


__all__ = ["save_coin_student"]
