"""Training chat templates: the ones shipped in ``sft/templates/`` and how a run picks one.

TRL's ``assistant_only_loss=True`` trains exactly the tokens a template puts inside
``{% generation %}`` markers, so the template decides what the student learns.  hopforge
ships two, both with the assistant's end-of-turn token ``<|im_end|>`` inside the markers:

* ``qwen2.5`` (``qwen2_5_tools.jinja2``): TRL's ``qwen2_5_training.jinja`` with tool-call
  arguments that are already JSON strings written as is (TRL's copy encodes them twice);
* ``tiny`` (``tiny_chatml.jinja2``): a compact ChatML template for the demo tokenizer, with
  the same ``<tool_call>`` format so :mod:`synth.teacher.hf` parses both students alike.
"""

from __future__ import annotations

import re
from pathlib import Path

from synth.engine.errors import InputError

TEMPLATE_DIR = Path(__file__).parent / "templates"
TEMPLATES: dict[str, str] = {"qwen2.5": "qwen2_5_tools.jinja2", "tiny": "tiny_chatml.jinja2"}
_GENERATION = re.compile(r"\{%-?\s*generation\s*-?%\}")


def template_path(name: str) -> Path:
    """The file of a shipped template (``qwen2.5``, ``tiny``)."""
    if name not in TEMPLATES:
        raise InputError(f"unknown chat template {name!r} (shipped: {', '.join(sorted(TEMPLATES))}; "
                         "or give a path to a .jinja/.jinja2 file)")
    return TEMPLATE_DIR / TEMPLATES[name]


def load_template(spec: str) -> str:
    """The text of a template named by ``spec``: a shipped name or a path to a Jinja file."""
    if spec in TEMPLATES:
        return template_path(spec).read_text(encoding="utf-8")
    p = Path(spec)
    if p.is_file():
        return p.read_text(encoding="utf-8")
    raise InputError(f"chat template {spec!r} is neither a shipped template ({', '.join(sorted(TEMPLATES))}) "
                     "nor an existing file")


def has_generation_markers(template: str | None) -> bool:
    """Whether ``template`` has ``{% generation %}`` markers (any whitespace-control variant)."""
    return bool(template) and _GENERATION.search(template) is not None


def resolve_template(spec: str | None, tokenizer) -> tuple[str, str]:
    """``(name, text)`` of the training template for ``tokenizer``.

    ``spec`` is a shipped name, a path, or ``auto``/None: keep the tokenizer's own template if
    it already has generation markers, take ``qwen2.5`` for a ChatML template that calls tools
    with ``<tool_call>`` (the Qwen2.5 family), and otherwise fail, naming the choices, rather
    than train on a template whose masks nobody checked.
    """
    if spec and spec != "auto":
        return spec, load_template(spec)
    current = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else None
    if has_generation_markers(current):
        return "tokenizer", current  # type: ignore[return-value]
    if current and "<|im_start|>" in current and "<tool_call>" in current:
        return "qwen2.5", load_template("qwen2.5")
    raise InputError("the tokenizer's chat template has no {% generation %} markers and is not a known family; "
                     f"set chat_template to one of {', '.join(sorted(TEMPLATES))} or to a .jinja file with markers")


def eot_token(tokenizer) -> str:
    """The assistant's end-of-turn token: ``<|im_end|>`` for ChatML vocabularies, else the eos token."""
    if "<|im_end|>" in tokenizer.get_vocab():
        return "<|im_end|>"
    if not tokenizer.eos_token:
        raise InputError("the tokenizer has neither <|im_end|> nor an eos token: cannot tell where a turn ends")
    return tokenizer.eos_token


__all__ = ["TEMPLATES", "eot_token", "has_generation_markers", "load_template", "resolve_template", "template_path"]
