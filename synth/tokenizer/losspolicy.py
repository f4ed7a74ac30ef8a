"""What the student trains on: the loss-mask policy, in one place.

A row's loss mask follows from four decisions, each made here and read by every place that builds, renders,
masks or checks a row (the filter's length count, the sft rows, the mask derivation, the mask check and the
trainer's settings):

* **the trained role**: only what the agent writes, ``assistant`` turns (:data:`TRAINED_ROLE`); system, user
  and tool messages are the prompt, never trained (:data:`UNTRAINED_ROLES`);
* **the context** (``sft.context``, :data:`CONTEXTS`): under ``full`` every assistant turn of a row is trained;
  under ``as_seen`` a row is the context the teacher saw for one turn, then that turn, and only the row's last
  assistant message is trained (the earlier ones are read as :data:`CONTEXT_ROLE`, :meth:`LossPolicy.roles`);
* **the end of a turn**: the end-of-turn token the chat template writes after an assistant message is
  trained with the turn (or the model never learns to stop), and it is the eos generation stops at
  (:meth:`LossPolicy.resolve`, :func:`synth.tokenizer.chat_templates.stop_tokens`);
* **the reasoning** (``sft.reasoning``: ``keep``, ``inline`` or ``drop``, resolved against the template,
  :mod:`synth.tokenizer.reasoning`): kept reasoning is trained, every token of it (:meth:`LossPolicy.render`,
  :meth:`LossPolicy.thoughts`).

Where the mask comes from is the template's business: a template with ``{% generation %}`` markers marks the
trained text itself (``return_assistant_tokens_mask``); one without has its masks derived from prefix renders
(:meth:`synth.tokenizer.turns.Turns.assistant_mask`).  Either way :mod:`sft.masking` checks the result against
this policy, row by row, before anything is trained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from synth.tokenizer.chat_templates import has_generation_markers
from synth.tokenizer.reasoning import KEY as REASONING_KEY, apply_reasoning, resolve_mode

TRAINED_ROLE = "assistant"  # the one role whose tokens are trained
UNTRAINED_ROLES = ("system", "user", "tool")  # the prompt: what the agent reads, never what it writes
CONTEXT_ROLE = "context"  # an earlier assistant message of an as_seen row: read as context, never trained
FULL, AS_SEEN = "full", "as_seen"
CONTEXTS = (FULL, AS_SEEN)


@dataclass(frozen=True)
class LossPolicy:
    """The loss-mask policy of one training template (see the module docstring).

    ``template`` is the chat template rendered with, ``reasoning`` a resolved mode (:meth:`resolve` checks it
    against the template; a policy built directly is taken as given, which is how the check is shown a
    policy that would drop reasoning), ``eot`` the template's end-of-turn token and ``eos`` the eos to train
    with (the end-of-turn token unless a recipe names another).
    """

    template: str | None
    eot: str
    reasoning: str = "keep"
    template_name: str = ""
    eos: str | None = None

    @classmethod
    def resolve(cls, tokenizer: Any, template: str, template_name: str = "", reasoning: str | None = None,
                eos_token: str | None = None, key: str = "sft.reasoning") -> "LossPolicy":
        """The policy for training ``tokenizer`` with ``template``: the reasoning mode resolved against it (a
        :class:`~synth.engine.config.ConfigError` naming ``key`` when they cannot go together), the end-of-turn
        token read off it and the eos (:func:`~synth.tokenizer.chat_templates.stop_tokens`, an
        :class:`~synth.engine.errors.InputError` when neither is known)."""
        from synth.tokenizer.chat_templates import stop_tokens

        mode = resolve_mode(reasoning, template, template_name, key=key)
        eot, eos = stop_tokens(tokenizer, template, eos_token)
        return cls(template=template, eot=eot, reasoning=mode, template_name=template_name, eos=eos)

    @property
    def markers(self) -> bool:
        """Whether the template marks the trained text itself (``{% generation %}``); else masks are derived."""
        return has_generation_markers(self.template)

    @property
    def mask_source(self) -> str:
        return "generation markers" if self.markers else "prefix renders"

    def render(self, messages: list[dict]) -> list[dict]:
        """A row's messages as the template is given them: the reasoning as :attr:`reasoning` says."""
        return rendered(messages, self.reasoning)

    def thoughts(self, messages: list[dict]) -> list[str]:
        """Per message, the reasoning whose every token must be trained ("" where none must)."""
        if self.reasoning == "drop":
            return [""] * len(messages)
        return [(m.get(REASONING_KEY) or "").strip() if m.get("role") == TRAINED_ROLE else "" for m in messages]

    @staticmethod
    def roles(messages: list[dict], turn: int | None) -> list[str]:
        """Each message's role as the mask is checked: an as_seen row (``turn`` set) trains its last assistant
        message only, and its earlier assistant messages read as :data:`CONTEXT_ROLE`."""
        roles = [m["role"] for m in messages]
        if turn is None:
            return roles
        last = trained_message(messages, turn)
        return [CONTEXT_ROLE if r == TRAINED_ROLE and i != last else r for i, r in enumerate(roles)]


def trained_message(messages: list[dict], turn: int | None) -> int | None:
    """The index of the one trained message of an as_seen row (``turn`` set): its last assistant message;
    None for a ``full`` row, where every assistant message is trained."""
    if turn is None:
        return None
    return max(i for i, m in enumerate(messages) if m["role"] == TRAINED_ROLE)


def rendered(messages: list[dict], reasoning: str) -> list[dict]:
    """``messages`` as a template is given them under the resolved reasoning mode ``reasoning``: what the filter's
    length count renders, and what :meth:`LossPolicy.render` trains (:func:`synth.tokenizer.reasoning.apply_reasoning`)."""
    return apply_reasoning(messages, reasoning)


def reasoning_mode(mode: str | None, template: str | None, template_name: str = "", key: str = "sft.reasoning") -> str:
    """``sft.reasoning`` resolved against ``template`` alone (the filter counts lengths before any eos is chosen):
    :func:`synth.tokenizer.reasoning.resolve_mode`."""
    return resolve_mode(mode, template, template_name, key=key)


__all__ = ["AS_SEEN", "CONTEXTS", "CONTEXT_ROLE", "FULL", "LossPolicy", "TRAINED_ROLE", "UNTRAINED_ROLES",
           "reasoning_mode", "rendered", "trained_message"]
