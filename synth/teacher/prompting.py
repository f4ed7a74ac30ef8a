"""Prompt files: ``synth/teacher/prompts/<name>.jinja2`` with a ``system`` and a ``user`` block.

``render(name, **inputs)`` turns a prompt into chat messages; ``prompt_sha(name)`` is
the hash recorded with every row a prompt produced (and part of stage content keys).
Parsing lives beside each task: a parser returns a record or a reason and never raises;
:func:`read_json` is the one JSON reader, and :data:`PARSE_REASONS` names why a reply fails.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from synth.teacher.types import split_reasoning

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


# Why a reply could not be read as a task's output.  Stages count dropped items by these names
# (``reports/<stage>.json``, ``rejects/*``), so they are stable: add names, never rename them.
PARSE_REASONS = {
    "empty": "no text once the reasoning (a <think> block, reasoning_content) is set aside",
    "truncated": "cut at max_tokens (finish_reason `length`) before the output was complete, or a JSON object "
                 "that never closes when the finish reason is unknown",
    "prose": "text, but no JSON object (json tasks) or no <answer>...</answer> (answer tasks)",
    "invalid_json": "a JSON object was begun but cannot be read, even after repair",
    "schema_error": "JSON of the wrong shape: not an object, or a required key missing or of the wrong type",
}


def object_spans(text: str) -> tuple[list[tuple[int, int]], int | None]:
    """The top-level ``{...}`` spans of ``text`` (string-aware), and where an unclosed one begins.

    Only top-level spans count: a nested object inside a broken outer one must never stand in
    for it (a trailing comma in ``hops`` would otherwise yield a lone hop as "the" answer).
    """
    spans, depth, start, in_str, esc = [], 0, 0, False, False
    for i, ch in enumerate(text):
        if in_str:  # strings only matter inside an object: apostrophes in prose are not quotes
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"' and depth:
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append((start, i + 1))
    return spans, (start if depth else None)


def read_json(text: str | None, finish_reason: str | None = None) -> tuple[list[dict], str | None, str]:
    """Every JSON object a reply holds, in order, or why there is none: ``(objects, reason, detail)``.

    Reasoning (``<think>`` blocks) is set aside first; objects may be bare, fenced, embedded in
    prose or several in a row.  Objects that parse strictly win; only when none does is
    ``json-repair`` asked (trailing commas, single quotes, missing commas).  An object that never
    closes is ``truncated`` when the reply was cut at max_tokens or its finish reason is unknown
    (repairing it would invent the missing end); a reply that ended on its own gets it repaired.
    Reasons are those of :data:`PARSE_REASONS`; never raises.
    """
    body, reasoning = split_reasoning(text)
    cut = finish_reason == "length"
    if not body or not body.strip():
        if cut:
            return [], "truncated", "cut at max_tokens before any output" + (" (still reasoning)" if reasoning else "")
        return [], "empty", "only reasoning, no output" if reasoning else "no text"
    spans, open_at = object_spans(body)
    # Braces around no key (``{x}`` in prose, LaTeX) are not an attempt at JSON.
    spans = [(a, b) for a, b in spans if ":" in body[a:b]]
    found = []
    for a, b in spans:
        try:
            obj = json.loads(body[a:b])
        except ValueError:
            continue
        if isinstance(obj, dict):
            found.append(obj)
    if found:
        return found, None, ""
    if not spans and open_at is None:
        whole = _FENCE.sub(r"\1", body).strip()
        try:
            value = json.loads(whole)
        except ValueError:
            if cut:
                return [], "truncated", f"cut at max_tokens after {len(body)} characters, before any JSON object"
            return [], "prose", f"no JSON object in {len(body)} characters of text"
        return [], "schema_error", f"a JSON {type(value).__name__}, not an object"
    pieces = [body[a:b] for a, b in spans]
    if open_at is not None:
        if not spans and (cut or finish_reason is None):
            why = "max_tokens" if cut else "the reply looks cut short"
            return [], "truncated", f"the JSON object at character {open_at} never closes ({why})"
        if not cut and finish_reason is not None:  # the model ended the reply itself: close what it left open
            pieces.append(body[open_at:])
    found = [obj for obj in map(_repair, pieces) if obj]
    if found:
        return found, None, ""
    where = spans[0][0] if spans else open_at
    return [], "truncated" if cut else "invalid_json", f"the JSON object at character {where} cannot be read, even " \
        "after repair"


def _repair(piece: str) -> dict | None:
    """``piece`` read by json-repair, when that gives a non-empty object."""
    import json_repair  # imported on first need: most replies parse strictly

    try:
        value = json_repair.loads(piece)
    except Exception:  # noqa: BLE001 - the repairer's failures are not ours to classify
        return None
    return value if isinstance(value, dict) and value else None


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def extract_json(text: str | None, finish_reason: str | None = None) -> tuple[dict | None, str | None]:
    """The first JSON object of a reply (see :func:`read_json`): ``(obj, None)`` or ``(None, reason)``."""
    objs, reason, _ = read_json(text, finish_reason)
    return (objs[0], None) if objs else (None, reason)


_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)


def extract_answer(text: str | None) -> str | None:
    """The last ``<answer>...</answer>`` span of a reply outside its reasoning, stripped; None when absent.

    A ``<think>`` block may try answers on the way; only the reply proper counts.
    """
    text = split_reasoning(text)[0]
    if not text:
        return None
    found = _ANSWER.findall(text)
    return found[-1].strip() if found else None
