"""Training chat templates: the ones shipped in ``templates/``, how a run picks one, and its stop tokens.

TRL's ``assistant_only_loss=True`` trains exactly the tokens a template puts inside
``{% generation %}`` markers, so the template decides what the student learns.  Every shipped
template puts the assistant's words, its tool calls and its end-of-turn token inside the
markers (the turn header and the newline after the end-of-turn token stay outside: the model
never writes them), renders the ``tools`` schemas into the prompt, writes tool-call
``arguments`` that are already JSON strings as they are, and tests optional keys for
truthiness (Arrow fills missing keys with null):

* ``qwen2.5``: Qwen2.5-Instruct's format (ChatML, ``<tool_call>`` JSON, ``<|im_end|>``);
* ``qwen3``: Qwen3's format, an empty ``<think>`` block opening every assistant turn;
* ``llama3``: Llama 3.1 / 3.2 / 3.3 (``<|start_header_id|>``, JSON calls, ``ipython`` results, ``<|eot_id|>``);
* ``gemma3``: Gemma 3 (``<start_of_turn>model``, ``<end_of_turn>``), which has no tool format of its
  own: tools use the Qwen tags, results come back in a user turn;
* ``mistral``: Mistral v0.3 (``[INST]``, ``[AVAILABLE_TOOLS]``, ``[TOOL_CALLS]``, ``[TOOL_RESULTS]``, ``</s>``);
* ``tiny``: compact ChatML for the demo tokenizer.

Each file's header says where it departs from the family's published template and why.  A
template without markers still trains: :mod:`synth.tokenizer.turns` derives its masks.
"""

from __future__ import annotations

import re
from pathlib import Path

from synth.engine.errors import InputError

TEMPLATE_DIR = Path(__file__).parent / "templates"
TEMPLATES: dict[str, str] = {
    "qwen2.5": "qwen2_5_tools.jinja2",
    "qwen3": "qwen3_tools.jinja2",
    "llama3": "llama3_tools.jinja2",
    "gemma3": "gemma3_tools.jinja2",
    "mistral": "mistral_tools.jinja2",
    "tiny": "tiny_chatml.jinja2",
}
_GENERATION = re.compile(r"\{%-?\s*generation\s*-?%\}")
_COMMENT = re.compile(r"\{#.*?#\}", re.S)  # a template's comments may name the markers they explain
# How a tokenizer's own template gives its family away, most specific first.
_FAMILY_MARKUP = [
    ("llama3", ("<|start_header_id|>",)),
    ("gemma3", ("<start_of_turn>",)),
    ("mistral", ("[INST]", "[TOOL_CALLS]")),
    ("qwen3", ("<|im_start|>", "<tool_call>", "<think>")),
    ("qwen2.5", ("<|im_start|>", "<tool_call>")),
]


def template_path(name: str) -> Path:
    """The file of a shipped template (one of :data:`TEMPLATES`)."""
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
    return bool(template) and _GENERATION.search(_COMMENT.sub("", template)) is not None


def family_of(template: str | None) -> str | None:
    """The shipped template of the family whose markup ``template`` uses, or None if none matches."""
    for name, markup in _FAMILY_MARKUP:
        if template and all(m in template for m in markup):
            return name
    return None


def own_template(tokenizer) -> str | None:
    """The tokenizer's chat template as one string (the tool-use variant of a named set)."""
    t = getattr(tokenizer, "chat_template", None)
    if isinstance(t, dict):
        t = t.get("tool_use") or t.get("default")
    return t if isinstance(t, str) and t else None


def resolve_template(spec: str | None, tokenizer) -> tuple[str, str]:
    """``(name, text)`` of the training template for ``tokenizer``.

    ``spec`` is a shipped name, a path, or ``auto``/None: keep the tokenizer's own template if it
    has generation markers; else take the shipped template of its family (recognised by its turn
    markup), because published templates re-encode JSON-string arguments, drop tools or refuse
    parallel calls; else keep the tokenizer's own template (``tokenizer``), whose masks are then
    derived from prefix renders and checked like any other.  No template at all is an error.
    """
    if spec and spec != "auto":
        return spec, load_template(spec)
    current = own_template(tokenizer)
    if has_generation_markers(current):
        return "tokenizer", current  # type: ignore[return-value]
    family = family_of(current)
    if family:
        return family, load_template(family)
    if current:
        return "tokenizer", current
    raise InputError("the tokenizer has no chat template; set chat_template to one of "
                     f"{', '.join(sorted(TEMPLATES))} or to a .jinja file")


def stop_tokens(tokenizer, template: str, eos_token: str | None = None) -> tuple[str, str]:
    """``(end_of_turn, eos)``: the token that closes an assistant turn in ``template``, and the eos to train with.

    The end-of-turn token is read off the template (:func:`synth.tokenizer.turns.end_of_turn`),
    whatever the tokenizer's eos is.  ``eos_token`` (the recipe's) is honoured as the eos when
    given, and must be in the vocabulary; otherwise the eos becomes the end-of-turn token, so
    generation stops where a turn ends.  A template that writes no token after an assistant
    message needs ``eos_token`` to name one.
    """
    from synth.tokenizer.turns import end_of_turn

    vocab = tokenizer.get_vocab()
    if eos_token is not None and eos_token not in vocab:
        raise InputError(f"eos_token {eos_token!r} is not in the tokenizer's vocabulary")
    eot = end_of_turn(tokenizer, template)
    if eot is None:
        if eos_token is None:
            raise InputError("the chat template writes no special token of this tokenizer after an assistant "
                             "message (is it another tokenizer's template?), so where a turn ends is unknown; set "
                             "eos_token in the recipe to the end-of-turn token")
        eot = eos_token
    return eot, eos_token if eos_token is not None else eot


__all__ = ["TEMPLATES", "family_of", "has_generation_markers", "load_template", "own_template", "resolve_template",
           "stop_tokens", "template_path"]
