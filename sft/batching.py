"""How SFT batches are formed: attention implementation, packing safety, padding accounting.

Packing (TRL ``bfd``, which implies padding-free batches: the samples of a batch are laid end
to end in one row, with ``position_ids`` restarting at 0 for each) is only correct when the
attention implementation keeps the samples apart:

* flash-attention 2/3 read the sample boundaries (``cu_seq_lens``) and run varlen kernels;
* ``sdpa`` / ``eager`` / ``flex_attention`` in transformers >= 4.53 build a block-diagonal
  causal mask from the restarting ``position_ids`` (``masking_utils.find_packed_sequence_indices``,
  active when there is no attention mask and no cache: TRL passes ``use_cache=False``).

Anything else would let a sample attend to the one before it, so packing falls back to
length-grouped batching (``train_sampling_strategy="group_by_length"``).  When the model is
built in-process, the claim is also checked on it (:func:`packed_attention_isolated`).
Correct is not always faster: see :func:`decide_batching` for what ``auto`` picks.
"""

from __future__ import annotations

import logging
from typing import Any

from synth.engine.errors import InputError

log = logging.getLogger("hopforge")
FLASH = ("flash_attention_2", "flash_attention_3")


def resolve_attn_implementation(requested: str | None) -> str:
    """The attention implementation to load with: ``auto``/None picks the fastest one available.

    ``auto`` on CUDA: flash-attention 3, then 2, then ``sdpa``; elsewhere ``sdpa``.  An explicit
    flash implementation whose package is missing is an error here rather than deep in loading.
    """
    import torch
    from transformers.utils import is_flash_attn_2_available

    try:
        from transformers.utils import is_flash_attn_3_available
    except ImportError:  # pragma: no cover - older transformers
        def is_flash_attn_3_available() -> bool:
            return False

    if requested in (None, "", "auto"):
        if torch.cuda.is_available():
            if is_flash_attn_3_available():
                return "flash_attention_3"
            if is_flash_attn_2_available():
                return "flash_attention_2"
        return "sdpa"
    if requested == "flash_attention_2" and not is_flash_attn_2_available():
        raise InputError("attn_implementation flash_attention_2 needs the flash-attn package and a CUDA GPU; "
                         "set attn_implementation: auto (or sdpa) to use what is installed")
    if requested == "flash_attention_3" and not is_flash_attn_3_available():
        raise InputError("attn_implementation flash_attention_3 needs flash-attn 3 (flash_attn_interface) and a "
                         "Hopper GPU; set attn_implementation: auto (or sdpa)")
    return requested


def packing_support(attn: str) -> tuple[bool, str]:
    """Whether ``attn`` keeps packed samples apart, and how."""
    if attn in FLASH or "flash" in attn:
        return True, "varlen flash attention (cu_seq_lens)"
    if attn in ("sdpa", "eager", "flex_attention"):
        try:
            from transformers.masking_utils import find_packed_sequence_indices  # noqa: F401
        except ImportError:
            return False, f"{attn} in this transformers version does not read packed position_ids"
        return True, "block-diagonal causal mask from restarting position_ids"
    return False, f"{attn} is not known to keep packed samples apart"


def packed_attention_isolated(model, atol: float = 1e-4) -> bool:
    """Check on ``model`` that two samples packed in one row give the logits they give alone."""
    import torch

    was_training = model.training
    model.eval()
    try:
        dev = next(model.parameters()).device
        vocab = model.get_input_embeddings().num_embeddings
        g = torch.Generator().manual_seed(0)
        a = torch.randint(0, vocab, (1, 9), generator=g).to(dev)
        b = torch.randint(0, vocab, (1, 6), generator=g).to(dev)
        pos = torch.cat([torch.arange(9), torch.arange(6)])[None].to(dev)
        cu = torch.tensor([0, 9, 15], dtype=torch.int32, device=dev)
        with torch.no_grad():
            alone = model(input_ids=b, use_cache=False).logits[0]
            packed = model(input_ids=torch.cat([a, b], 1), position_ids=pos, use_cache=False, cu_seq_lens_q=cu,
                           cu_seq_lens_k=cu, max_length_q=9, max_length_k=9).logits[0, 9:]
        if next(model.parameters()).dtype != torch.float32:  # half precision: compare loosely
            atol = max(atol, 5e-2)
        return bool(torch.allclose(alone.float(), packed.float(), atol=atol, rtol=1e-2))
    finally:
        model.train(was_training)


BATCHING = ("auto", "packed", "rows", "grouped", "padded")


def decide_batching(batching: str, training_args, attn: str, model=None) -> dict[str, Any]:
    """Set ``training_args`` for one way of batching and say which and why (for the train report).

    * ``packed``: TRL ``bfd`` packing (padding-free) where the attention keeps samples apart,
      else ``grouped``;
    * ``rows``: one row per micro-batch (``per_device_train_batch_size`` folded into
      ``gradient_accumulation_steps``, so each optimizer step sees the same rows): no padding and
      no attention mask at all, so sdpa takes its fused causal kernel;
    * ``grouped``: batches of rows of similar length (``train_sampling_strategy=group_by_length``);
    * ``padded``: random batches padded to their longest row;
    * ``auto`` (or ``packing: true`` left in the config): ``packed`` with varlen flash attention,
      which computes nothing across samples; on CPU ``rows``, because any padding or packing
      makes sdpa fall back from its fused causal kernel to a masked one about half as fast
      (bench/sft_cpu.py); ``grouped`` on other accelerators, which keeps batches large.
    """
    if batching not in BATCHING:
        raise InputError(f"batching must be one of {', '.join(BATCHING)}, got {batching!r}")
    ok, why = packing_support(attn)
    varlen = attn in FLASH or "flash" in attn  # isolation is what the kernel computes; nothing to probe
    if batching == "auto":
        if training_args.packing or (ok and varlen):
            batching = "packed"
        elif training_args.device.type == "cpu":
            batching, why = "rows", f"{attn} on CPU: a mask (padding or packing) halves attention speed"
        else:
            batching, why = "grouped", f"{attn} would compute attention across a whole pack"
    if batching == "packed":
        if ok and model is not None and not varlen and not packed_attention_isolated(model):
            ok, why = False, f"{attn}: packed samples saw each other in the probe"
        if ok:
            training_args.packing = True
            training_args.packing_strategy = training_args.packing_strategy or "bfd"
            return {"mode": f"packed ({training_args.packing_strategy})", "attn_implementation": attn, "why": why}
        log.warning("packing disabled: %s; batching by length instead", why)
        batching, why = "grouped", f"packing unsafe: {why}"
    training_args.packing = False
    training_args.padding_free = False
    if batching == "rows":
        training_args.gradient_accumulation_steps *= training_args.per_device_train_batch_size
        training_args.per_device_train_batch_size = 1
        training_args.train_sampling_strategy = "random"
        return {"mode": "one row per micro-batch", "attn_implementation": attn, "why": why,
                "gradient_accumulation_steps": training_args.gradient_accumulation_steps}
    if batching == "grouped":
        training_args.train_sampling_strategy = "group_by_length"
        return {"mode": "length-grouped", "attn_implementation": attn, "why": why}
    if training_args.train_sampling_strategy == "group_by_length":
        training_args.train_sampling_strategy = "random"
    return {"mode": "padded", "attn_implementation": attn, "why": "configured"}


def compact_lm_head_on_cpu() -> bool:
    """Make TRL's fused LM head score only the trained positions on CPU too.

    TRL (1.16, ``trl.trainer.utils.add_fused_lm_head``) projects only positions with a label
    on Triton devices and *every* position elsewhere, so that Neuron does not recompile for
    each batch shape.  Eager CPU has no such cost, and with assistant-only loss about 90% of
    positions carry no label, so scoring them all is most of a tiny model's step.  The loss
    and gradients are the same either way.  Returns whether the switch was applied.
    """
    try:
        import trl.trainer.utils as trl_utils
    except ImportError:  # pragma: no cover
        return False
    orig = getattr(trl_utils, "_use_triton", None)
    if orig is None:
        return False
    if getattr(orig, "_hopforge_compact", False):
        return True

    def use_compact(device) -> bool:
        return device.type == "cpu" or orig(device)

    use_compact._hopforge_compact = True  # type: ignore[attr-defined]
    trl_utils._use_triton = use_compact
    return True


class PaddingCounter:
    """Wraps a data collator and counts real and padded tokens of the batches it builds.

    Real tokens are the examples' own tokens; padded tokens are the size of the ``input_ids``
    the model receives.  Counts are per process (exact with ``dataloader_num_workers=0``).
    """

    def __init__(self, collator):
        self.collator = collator
        self.real = 0
        self.padded = 0
        self.batches = 0

    def __call__(self, examples):
        batch = self.collator(examples)
        self.real += sum(len(e["input_ids"]) for e in examples)
        self.padded += int(batch["input_ids"].numel())
        self.batches += 1
        return batch

    def __getattr__(self, name):  # the trainer may read collator attributes (e.g. padding_free)
        if name == "collator":
            raise AttributeError(name)
        return getattr(self.collator, name)

    def snapshot(self) -> dict[str, Any]:
        """``{real_tokens, batch_tokens, padding_fraction, batches}`` so far."""
        frac = 1 - self.real / self.padded if self.padded else 0.0
        return {"real_tokens": self.real, "batch_tokens": self.padded, "padding_fraction": round(frac, 6),
                "batches": self.batches}


__all__ = ["BATCHING", "PaddingCounter", "compact_lm_head_on_cpu", "decide_batching", "packed_attention_isolated", "packing_support",
           "resolve_attn_implementation"]
