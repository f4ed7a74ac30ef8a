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

An *optional* tool (``ToolSpec.optional``, e.g. ``multi_search``) is registered like the others but offered
only under a tools config whose ``extra_tools`` names it: :func:`tools` and :func:`tool_names` take the config
and leave the others out, so what a run offers (schemas, toolbox, server routes, verl's tools, the trace's
counts) is a config choice.  :func:`find_tool` and :func:`registered_names` see every registered tool, for
readers of calls already made (the grounding rule, the RL solution reader).
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


def tools(cfg: Any = None) -> tuple[ToolSpec, ...]:
    """The tools offered under the tools config ``cfg`` (None: the defaults), in registration order: every
    registered tool but the optional ones, and the optional ones ``cfg.extra_tools`` names (a name that is not
    an optional tool's is a ValueError)."""
    extra = list(getattr(cfg, "extra_tools", None) or ())
    unknown = [n for n in extra if n not in optional_tool_names()]
    if unknown:
        raise ValueError(f"tools.extra_tools: {', '.join(map(repr, unknown))} is not an optional tool; the optional "
                         f"tools are: {', '.join(optional_tool_names()) or 'none'}")
    return tuple(s for s in _TOOLS.values() if not s.optional or s.name in extra)


def tool_names(cfg: Any = None) -> tuple[str, ...]:
    """The names of :func:`tools` under ``cfg``, in registration order."""
    return tuple(s.name for s in tools(cfg))


def optional_tool_names() -> tuple[str, ...]:
    """The registered optional tools' names (what ``tools.extra_tools`` may name)."""
    return tuple(s.name for s in _TOOLS.values() if s.optional)


def registered_names() -> tuple[str, ...]:
    """Every registered tool's name, the optional ones included, in registration order."""
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


__all__ = ["ToolSpec", "register", "unregister", "registered", "tools", "tool_names", "optional_tool_names",
           "registered_names", "find_tool", "get_tool"]
