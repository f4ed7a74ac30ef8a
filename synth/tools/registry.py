"""The registry of the agent's tools: one :class:`ToolSpec` per tool, registered once.

A tool is one module (the built-ins are :mod:`synth.tools.agent.search`, ``open_page`` and
``find``) that provides a :class:`ToolSpec`: its name, its OpenAI function schema, how it runs, and
what it showed the agent.  Everything that serves or reads tool calls iterates this registry
instead of naming tools: the schemas sent to the teacher and stored in SFT rows
(:mod:`synth.tools.schema`), the rollouts' :class:`~synth.tools.toolbox.Toolbox`, the HTTP tool
server's routes (:mod:`synth.tools.server`), verl's tool (:mod:`synth.tools.verl_tool`), the
grounding rule, the rollout loop's per-tool counts and the filter's reading of a solution.

Adding a tool is one module that builds a ``ToolSpec`` and one line in
:mod:`synth.tools.agent` (or :func:`register` at run time; :func:`registered` for a scope, as tests
do).  The order of registration is the order of the schemas, which SFT rows store: the built-ins
keep theirs.  A :class:`ToolSpec` is defined in :mod:`synth.tools.spec`, which a tool's module imports.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

from synth.tools.agent import BUILTIN
from synth.tools.spec import ToolSpec

_LOCK = threading.Lock()
_TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in BUILTIN}


def register(spec: ToolSpec) -> None:
    """Add ``spec`` after the tools already registered; a name is registered once."""
    with _LOCK:
        if spec.name in _TOOLS:
            raise ValueError(f"a tool named {spec.name!r} is already registered")
        _TOOLS[spec.name] = spec


def unregister(name: str) -> None:
    """Remove the tool ``name`` (a KeyError names an unknown one)."""
    with _LOCK:
        if name not in _TOOLS:
            raise KeyError(f"no tool named {name!r} is registered")
        del _TOOLS[name]


@contextmanager
def registered(spec: ToolSpec) -> Iterator[ToolSpec]:
    """``spec`` registered for the ``with`` block, removed after it."""
    register(spec)
    try:
        yield spec
    finally:
        unregister(spec.name)


def tools() -> tuple[ToolSpec, ...]:
    """Every registered tool, in registration order."""
    return tuple(_TOOLS.values())


def tool_names() -> tuple[str, ...]:
    """The registered tools' names, in registration order."""
    return tuple(_TOOLS)


def find_tool(name: Any) -> ToolSpec | None:
    """The tool called ``name``, or None."""
    return _TOOLS.get(name) if isinstance(name, str) else None


def get_tool(name: Any) -> ToolSpec:
    """The tool called ``name``; a ValueError lists the known ones."""
    spec = find_tool(name)
    if spec is None:
        raise ValueError(f"unknown tool {name!r}; the tools are: {', '.join(tool_names())}")
    return spec


__all__ = ["ToolSpec", "register", "unregister", "registered", "tools", "tool_names", "find_tool", "get_tool"]
