"""How an SFT row's reasoning is rendered for a chat template: ``sft.reasoning`` (``keep | inline | drop``).

Every assistant turn of an SFT row carries the teacher's reasoning as ``reasoning_content``
(:data:`synth.engine.records.MESSAGE_TYPE`).  A template with a thinking format reads that key and
renders it in the family's own way: hopforge's ``qwen3`` template opens every assistant turn of the
tool loop with ``<think>reasoning</think>`` (Qwen3's published one keeps the block only after the last
user message, which is the whole agent loop anyway).  Llama 3, Mistral v0.3, Gemma 3, Qwen2.5 and the
tiny demo template have no thinking format, and would silently drop the key, so for them:

- ``inline``: the reasoning becomes the start of the turn's text, then a blank line, then the content
  (every shipped template writes a turn's text before its tool calls: the family's convention for the
  agent's own words);
- ``drop``: the reasoning is not trained;
- ``keep``: a config error naming the keys, since the template would drop it.

``inline`` with a template that has a thinking format is an error too (the reasoning belongs in the
family's thinking block: use ``keep``).  Unset, the mode is ``keep`` where the template has a thinking
format and ``inline`` elsewhere.  The length filter and the sft stage render through
:func:`apply_reasoning`, so the filter counts exactly the reasoning training sees.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from synth.engine.config import ConfigError

MODES = ("keep", "inline", "drop")
KEY = "reasoning_content"
_COMMENT = re.compile(r"\{#.*?#\}", re.S)


def has_thinking_format(template: str | None) -> bool:
    """Whether ``template`` renders an assistant turn's ``reasoning_content`` (its comments aside)."""
    return bool(template) and KEY in _COMMENT.sub("", template)


def resolve_mode(mode: str | None, template: str | None, template_name: str = "",
                 key: str = "sft.reasoning") -> str:
    """The reasoning mode for ``template``: ``mode`` checked against it, or (None) ``keep`` where the template
    has a thinking format and ``inline`` elsewhere.  An unsupported combination raises
    :class:`~synth.engine.config.ConfigError` naming ``key`` and the template."""
    thinks = has_thinking_format(template)
    if mode is None:
        return "keep" if thinks else "inline"
    if mode not in MODES:
        raise ConfigError(f"bad value for config key '{key}': {mode!r} (allowed: {', '.join(MODES)})")
    name = f"chat template {template_name!r}" if template_name else "the chat template"
    if mode == "keep" and not thinks:
        raise ConfigError(f"{key} is 'keep' but {name} has no thinking format (it never renders an assistant "
                          f"turn's {KEY}, so the reasoning would be dropped unseen): set {key} to inline (the "
                          "reasoning as text before each turn's content) or drop, or train with a template that "
                          "renders it (qwen3)")
    if mode == "inline" and thinks:
        raise ConfigError(f"{key} is 'inline' but {name} has a thinking format of its own (it renders {KEY}): set "
                          f"{key} to keep (or drop); inline would train the reasoning outside the family's "
                          "thinking block")
    return mode


def inline_text(reasoning: str | None, content: str | None) -> str | None:
    """An assistant turn's text under ``inline``: the reasoning, a blank line, the content."""
    parts = [p.strip() for p in (reasoning, content) if p and p.strip()]
    return "\n\n".join(parts) if parts else content


def apply_reasoning(messages: Iterable[dict[str, Any]], mode: str) -> list[dict[str, Any]]:
    """``messages`` (SFT rows' dicts) as the template should see them under ``mode`` (resolved): unchanged for
    ``keep``; for ``inline`` each assistant turn's reasoning moved to the start of its content; for ``drop``
    removed.  A row without reasoning comes back as it was."""
    messages = list(messages)
    if mode == "keep" or not any(m.get(KEY) for m in messages):
        return messages
    out = []
    for m in messages:
        r = m.get(KEY)
        if not r:
            out.append(m)
            continue
        m = dict(m, **{KEY: None})
        if mode == "inline":
            m["content"] = inline_text(r, m.get("content"))
        out.append(m)
    return out


__all__ = ["KEY", "MODES", "apply_reasoning", "has_thinking_format", "inline_text", "resolve_mode"]
