"""Prompt files: ``synth/prompts/<name>.jinja2`` with a ``system`` and a ``user`` block.

``render(name, **inputs)`` turns a prompt into chat messages; ``prompt_sha(name)`` is
the hash recorded with every row a prompt produced (and part of stage content keys).
Parsing lives beside each task: a parser returns a record or a reason and never raises.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

PROMPT_DIR = Path(__file__).parent / "prompts"
_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(PROMPT_DIR)),
    undefined=jinja2.StrictUndefined,  # a missing input is a bug, not an empty string
    keep_trailing_newline=False,
    autoescape=False,
)


@lru_cache(maxsize=None)
def prompt_sha(name: str) -> str:
    """Short sha256 of the prompt file's bytes."""
    return hashlib.sha256((PROMPT_DIR / f"{name}.jinja2").read_bytes()).hexdigest()[:12]


def render(name: str, **inputs: Any) -> list[dict]:
    """Render prompt ``name`` into ``[system, user]`` messages."""
    tmpl = _env.get_template(f"{name}.jinja2")
    ctx = tmpl.new_context(inputs)
    messages = []
    for role in ("system", "user"):
        block = tmpl.blocks.get(role)
        if block is not None:
            text = "".join(block(ctx)).strip()
            if text:
                messages.append({"role": role, "content": text})
    return messages


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def extract_json(text: str | None) -> tuple[dict | None, str | None]:
    """The JSON object in a model reply (bare, fenced, or embedded in prose).

    Returns ``(obj, None)`` or ``(None, reason)``; never raises.
    """
    if not text or not text.strip():
        return None, "parse_error"
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    first, last = text.find("{"), text.rfind("}")
    if 0 <= first < last:
        candidates.append(text[first : last + 1])
    for c in candidates:
        try:
            obj = json.loads(c)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(obj, dict):
            return obj, None
        return None, "schema_error"
    return None, "parse_error"


_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)


def extract_answer(text: str | None) -> str | None:
    """The last ``<answer>...</answer>`` span of a reply, stripped; None when absent."""
    if not text:
        return None
    found = _ANSWER.findall(text)
    return found[-1].strip() if found else None
