"""The agent's tools described as OpenAI function schemas, as each registered tool writes its own.

Rollouts send these to the teacher, SFT rows store them (as a JSON string: Arrow would
merge dict keys across rows), and the tool server answers
``GET /tools`` with them.  Descriptions carry the config's numbers (window size,
default and largest k), so the model is told exactly what a call returns.
"""

from __future__ import annotations

import json

from synth.tools.config import ToolsConfig
from synth.tools.registry import tool_names, tools


def tool_schemas(cfg: ToolsConfig | None = None) -> list[dict]:
    """``[{"type": "function", "function": {"name", "description", "parameters"}}]`` of every tool ``cfg`` offers
    (:func:`synth.tools.registry.tools`: the registered ones, optional ones only where ``cfg.extra_tools`` names
    them), in registration order."""
    cfg = cfg or ToolsConfig()
    return [spec.schema(cfg) for spec in tools(cfg)]


def tool_schemas_json(cfg: ToolsConfig | None = None) -> str:
    """The schemas as one JSON string: the form stored in trace and SFT rows."""
    return json.dumps(tool_schemas(cfg), ensure_ascii=False, sort_keys=True)


TOOL_SCHEMAS: list[dict] = tool_schemas()  # the built-in tools under the default config

__all__ = ["TOOL_SCHEMAS", "tool_names", "tool_schemas", "tool_schemas_json"]
