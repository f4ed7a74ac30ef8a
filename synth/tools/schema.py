"""The agent's tools described as OpenAI function schemas: the one place they are defined.

Rollouts send these to the teacher, SFT rows store them (as a JSON string: Arrow would
merge dict keys across rows), and the tool server answers
``GET /tools`` with them.  Descriptions carry the config's numbers (window size,
default and largest k), so the model is told exactly what a call returns.
"""

from __future__ import annotations

import json

from synth.tools.config import ToolsConfig

TOOL_NAMES = ("search", "open", "find")


def tool_schemas(cfg: ToolsConfig | None = None) -> list[dict]:
    """``[{"type": "function", "function": {"name", "description", "parameters"}}]`` for search, open, find."""
    cfg = cfg or ToolsConfig()
    page = {
        "type": "string",
        "description": "The page: its page_id (from search results) or its exact title.",
    }
    return [
        _fn(
            "search",
            "Search a local Wikipedia index (BM25 over whole pages). Returns a JSON list of "
            f"{{page_id, title, snippet}} (and the page's short description when it has one), best first; the "
            f"snippet is the page's best-matching passage (at most {cfg.snippet_chars} characters). Use keywords, "
            "not a question.",
            {
                "query": {"type": "string", "description": "Keywords to search for."},
                "k": {
                    "type": "integer",
                    "description": f"How many results (default {cfg.search_k}, at most {cfg.search_max_k}).",
                    "minimum": 1,
                    "maximum": cfg.search_max_k,
                },
            },
            ["query"],
        ),
        _fn(
            "open",
            f"Read a page: its title and paragraphs, {cfg.page_chars} characters at a time. Returns "
            "{page_id, title, offset, next_offset, total_chars, text, links}, with the page's short description "
            "in the first window; links are the pages this window links to, [{text, title}] (open a title to "
            "follow one); call again with offset=next_offset to read on (next_offset is null at the end).",
            {
                "page": page,
                "offset": {
                    "type": "integer",
                    "description": "Character offset to start reading at (default 0).",
                    "minimum": 0,
                },
            },
            ["page"],
        ),
        _fn(
            "find",
            "Find the passages (paragraphs) of a page that contain a text, ignoring case. Returns "
            f"{{page_id, title, text, total, passages}} with at most {cfg.find_max_passages} passages, "
            "each {index, offset, text}; offset is where the passage starts for open.",
            {
                "page": page,
                "text": {"type": "string", "description": "The text to look for (a word or a phrase)."},
            },
            ["page", "text"],
        ),
    ]


def _fn(name: str, description: str, properties: dict, required: list[str]) -> dict:
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


def tool_schemas_json(cfg: ToolsConfig | None = None) -> str:
    """The schemas as one JSON string: the form stored in trace and SFT rows."""
    return json.dumps(tool_schemas(cfg), ensure_ascii=False, sort_keys=True)


TOOL_SCHEMAS: list[dict] = tool_schemas()

__all__ = ["TOOL_NAMES", "TOOL_SCHEMAS", "tool_schemas", "tool_schemas_json"]
