"""The agent's tools over the local index: every tool of :mod:`synth.tools.registry` (``search``, ``open``
and ``find`` built in, each in its own module under :mod:`synth.tools.agent`).

A teacher rollout hands every tool call to :meth:`Toolbox.call`, which never raises:
a bad call (malformed JSON, an unknown tool, a missing or mistyped argument, an
unknown page) comes back as an observation ``{"error": "..."}`` the agent can read
and recover from, and :class:`ToolCallInfo` records which pages the call showed
(``searched_page_ids``) or read (``opened_page_ids``) for the trace.

Arguments are checked against the tool schemas of :mod:`synth.tools.schema`, so the
schemas the model is shown and the checks it meets cannot drift apart.  Source
masking (LiteResearcher) applies to ``search`` (and ``multi_search``, where offered): a rollout's toolbox is built with
the question's answer page in ``mask_page_ids`` and its searches never return it,
while ``open`` still reads it once the agent has found its name through the hops.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from synth.engine.errors import json_problem
from synth.tools.agent.find import run_find
from synth.tools.agent.open_page import run_open
from synth.tools.agent.search import run_search
from synth.tools.analysis import clean_text
from synth.tools.base import ToolError, resolve_page, text_window, window_links
from synth.tools.config import ToolsConfig
from synth.tools.registry import get_tool
from synth.tools.schema import tool_schemas
from synth.tools.search import SearchIndex


@dataclass(slots=True)
class ToolCallInfo:
    """What one tool call did, for the trace: its parsed arguments, error and pages."""

    name: str
    arguments: dict | None  # None when the arguments did not parse
    error: str | None = None
    searched_page_ids: list[str] = field(default_factory=list)  # pages a search returned, in rank order
    opened_page_ids: list[str] = field(default_factory=list)  # the page an open or find read

    @property
    def is_error(self) -> bool:
        """Whether the call failed (its observation is ``{"error": ...}``)."""
        return self.error is not None


# ---- argument checks from the schemas -------------------------------------------------------


def check_arguments(name: str, args: Any, schemas: list[dict]) -> dict:
    """``args`` checked against tool ``name``'s entry in ``schemas``; :class:`ToolError` says what is wrong."""
    params = next((s["function"]["parameters"] for s in schemas if s["function"]["name"] == name), None)
    if params is None:
        known = ", ".join(s["function"]["name"] for s in schemas)
        raise ToolError(f"unknown tool {name!r}; the tools are: {known}")
    if not isinstance(args, dict):
        raise ToolError(f"{name}: arguments must be a JSON object, got {type(args).__name__}")
    props = params["properties"]
    unknown = sorted(set(args) - set(props))
    if unknown:
        raise ToolError(f"{name}: unknown argument(s) {', '.join(unknown)}; allowed: {', '.join(props)}")
    out = {}
    for key, spec in props.items():
        value = args.get(key)
        if value is None:
            if key in params["required"]:
                raise ToolError(f"{name}: missing argument '{key}' ({spec['description']})")
            continue
        if spec["type"] == "string":
            if not isinstance(value, str):
                raise ToolError(f"{name}: '{key}' must be a string, got {type(value).__name__}")
            value = clean_text(value)
            if not value.strip():
                raise ToolError(f"{name}: '{key}' is empty")
        elif spec["type"] == "array":
            value = _check_list(name, key, value, spec)
        elif spec["type"] == "integer":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ToolError(f"{name}: '{key}' must be an integer, got {json.dumps(value)}")
            lo, hi = spec.get("minimum"), spec.get("maximum")
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                bounds = f">= {lo}" if hi is None else f"between {lo} and {hi}"
                raise ToolError(f"{name}: '{key}' must be {bounds}, got {value}")
        out[key] = value
    return out


def _check_list(name: str, key: str, value: Any, spec: dict) -> list:
    """A list argument checked against its schema (``items`` of type string, ``minItems``, ``maxItems``)."""
    kind = (spec.get("items") or {}).get("type")
    if not isinstance(value, list):
        example = '["first", "second"]' if kind == "string" else "[...]"
        of = f" of {kind}s" if kind else ""
        raise ToolError(f"{name}: '{key}' must be a list{of}, e.g. {example}; got {type(value).__name__}")
    lo, hi = spec.get("minItems"), spec.get("maxItems")
    if not value and lo:
        raise ToolError(f"{name}: '{key}' is empty; give {lo} to {hi} items" if hi else f"{name}: '{key}' is empty")
    if hi is not None and len(value) > hi:
        raise ToolError(f"{name}: '{key}' holds {len(value)} items; at most {hi} are allowed in one call")
    if lo is not None and len(value) < lo:
        raise ToolError(f"{name}: '{key}' holds {len(value)} items; at least {lo} are needed")
    if kind != "string":
        return value
    out = []
    for i, item in enumerate(value, 1):
        if not isinstance(item, str):
            raise ToolError(f"{name}: item {i} of '{key}' must be a string, got {json.dumps(item)[:100]}")
        item = clean_text(item)
        if not item.strip():
            raise ToolError(f"{name}: item {i} of '{key}' is empty")
        out.append(item)
    return out


# ---- the dispatcher ---------------------------------------------------------------------------


class Toolbox:
    """The tools of one rollout: an index, the tools config and the pages masked from search."""

    def __init__(self, index: SearchIndex, cfg: ToolsConfig | None = None, mask_page_ids: Iterable[str] = ()):
        self.index = index
        self.cfg = cfg or ToolsConfig()
        self.mask_page_ids = tuple(mask_page_ids) if self.cfg.mask_answer_page else ()
        self._schemas = tool_schemas(self.cfg)

    def schemas(self) -> list[dict]:
        """The OpenAI function schemas of these tools."""
        return tool_schemas(self.cfg)

    def invoke(self, name: str, args: Any) -> Any:
        """Run a tool on checked arguments and return its JSON-able result; raises :class:`ToolError`."""
        args = check_arguments(name, args, self._schemas)
        spec = get_tool(name)
        return spec.run(self.index, self.cfg, args, self.mask_page_ids if spec.masked else ())

    def call(self, name: str, arguments: str | dict | None) -> tuple[str, ToolCallInfo]:
        """Run one tool call as the model wrote it; returns (observation as JSON text, info). Never raises."""
        info = ToolCallInfo(name=name if isinstance(name, str) else repr(name), arguments=None)
        try:
            args = parse_arguments(arguments)
            info.arguments = args if isinstance(args, dict) else None
            result = self.invoke(name, args)
        except ToolError as e:
            info.error = str(e)
            return json.dumps({"error": info.error}, ensure_ascii=False), info
        info.searched_page_ids, info.opened_page_ids = get_tool(name).shown(result)
        return json.dumps(result, ensure_ascii=False), info


def parse_arguments(arguments: str | dict | None) -> Any:
    """A tool call's arguments as the model wrote them (a JSON string, or already a dict)."""
    if arguments is None:
        return {}
    if isinstance(arguments, dict):
        return arguments
    if not isinstance(arguments, str):
        raise ToolError(f"arguments must be a JSON object, got {type(arguments).__name__}")
    if not arguments.strip():
        return {}
    try:
        return json.loads(arguments)
    except json.JSONDecodeError as e:
        raise ToolError(f"arguments are not valid JSON ({json_problem(e, at='character')}): {arguments[:200]!r}") from None


def is_shortcut(index: SearchIndex, question_text: str, answer_page_id: str, k: int = 5) -> bool:
    """True when one search for the question text already returns its answer page in the top ``k``
    (LiteResearcher's shortcut filter: such a question needs no multi-hop search)."""
    return answer_page_id in index.search_ids(question_text, k)


__all__ = [
    "ToolError",
    "ToolCallInfo",
    "Toolbox",
    "resolve_page",
    "run_search",
    "run_open",
    "run_find",
    "window_links",
    "text_window",
    "check_arguments",
    "parse_arguments",
    "is_shortcut",
]
