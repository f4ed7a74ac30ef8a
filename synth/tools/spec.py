"""What an agent tool is: a :class:`ToolSpec` (see :mod:`synth.tools.registry`), and the helpers a tool's module
builds one with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from synth.tools.config import ToolsConfig


@dataclass(frozen=True)
class ToolSpec:
    """One agent tool.

    - ``schema(cfg)``: its OpenAI function schema under a tools config (descriptions carry the config's
      numbers); the checked arguments are its ``properties``;
    - ``run(index, cfg, args, exclude)``: the JSON-able result of a call on checked ``args``; ``exclude``
      are the pages masked from the agent (only for a ``masked`` tool); raises
      :class:`~synth.tools.base.ToolError` for a call the agent got wrong;
    - ``shown(result)``: ``(listed page ids, read page ids)``: the pages a result listed (search hits,
      in rank order) and the pages it read (an open, a find), for the trace and the grounding rule;
    - ``text_arg``: the argument holding words the agent chose (a query, a pattern), which the grounding
      rule checks against what it had seen (None: none);
    - ``page_arg``: the argument naming a page to read (None: none), which must name a page it had seen;
    - ``masked``: whether the answer-page mask applies (the page must not be *found* this way);
    - ``aliases``: argument names the HTTP server accepts for others (``q`` for ``query``);
    - ``optional``: offered only where a tools config's ``extra_tools`` names it (the schemas of a run
      that names none, and the SFT rows it makes, stay those of the other tools).
    """

    name: str
    schema: Callable[[ToolsConfig], dict]
    run: Callable[[Any, ToolsConfig, dict, tuple[str, ...]], Any]
    shown: Callable[[Any], tuple[list[str], list[str]]]
    text_arg: str | None = None
    page_arg: str | None = None
    masked: bool = False
    aliases: dict[str, str] = field(default_factory=dict)
    optional: bool = False

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier():
            raise ValueError(f"a tool's name must be an identifier, got {self.name!r}")


def function_schema(name: str, description: str, properties: dict, required: list[str]) -> dict:
    """An OpenAI function schema: ``{"type": "function", "function": {name, description, parameters}}``."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


def hits_shown(result: Any) -> tuple[list[str], list[str]]:
    """``shown`` of a tool that lists pages: their ids, in rank order."""
    return [r["page_id"] for r in result], []


def page_shown(result: Any) -> tuple[list[str], list[str]]:
    """``shown`` of a tool that reads one page."""
    return [], [result["page_id"]]


PAGE_ARGUMENT = {"type": "string", "description": "The page: its page_id (from search results) or its exact title."}

__all__ = ["ToolSpec", "function_schema", "hits_shown", "page_shown", "PAGE_ARGUMENT"]
