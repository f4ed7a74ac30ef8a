"""What ``sft.train.prepare`` hands the trainer: a typed value, so the report and the tests read fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from synth.tokenizer.losspolicy import LossPolicy


@dataclass
class Prepared:
    """What :func:`sft.train.prepare` found: the tokenizer with its training template, the checked and split rows,
    and the two settings the trainer must take from them (:meth:`configure`)."""

    tokenizer: Any
    policy: LossPolicy  # what is trained: the template, its end-of-turn token, the reasoning mode
    table: str
    tokenizer_path: str
    mask_report: dict[str, Any]
    held_out: list[str]  # question ids held out for evaluation
    funnel: dict[str, Any]  # rows in, rows trained, rows dropped by reason (held_out, too_long)
    train: Any  # datasets.Dataset of messages, input_ids, assistant_masks
    eval: Any | None
    train_tokens: int
    train_trained: int
    eos_token: str | None  # set on the trainer when it differs from the tokenizer's own eos (None: keep it)
    assistant_only_loss: bool  # False when the template has no generation markers (masks travel in a column)

    @property
    def template_name(self) -> str:
        return self.policy.template_name

    @property
    def eot(self) -> str:
        """The template's end-of-turn token (trained on every assistant turn)."""
        return self.policy.eot

    def configure(self, training_args) -> None:
        """Set the trainer's ``eos_token`` and ``assistant_only_loss`` to what the template needs.

        TRL moves the eos onto the tokenizer and the model configs, so generation stops at the turn's end;
        with a template without ``{% generation %}`` markers the masks derived from prefix renders travel in
        the ``assistant_masks`` column, which TRL applies whatever ``assistant_only_loss`` says; left on, TRL
        would look for a marked template of its own and fail on a family it does not know.
        """
        if self.eos_token is not None:
            training_args.eos_token = self.eos_token
        training_args.assistant_only_loss = self.assistant_only_loss
