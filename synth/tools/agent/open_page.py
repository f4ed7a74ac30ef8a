"""The ``open`` tool: a page read a window at a time, with the links the window shows."""

from __future__ import annotations

from synth.tools.analysis import page_text
from synth.tools.base import ToolError, resolve_page, text_window, window_links
from synth.tools.config import ToolsConfig
from synth.tools.spec import PAGE_ARGUMENT, ToolSpec, function_schema, page_shown
from synth.tools.search import SearchIndex


def schema(cfg: ToolsConfig) -> dict:
    return function_schema(
        "open",
        f"Read a page: its title and paragraphs, {cfg.page_chars} characters at a time. Returns "
        "{page_id, title, offset, next_offset, total_chars, text, links}, with the page's short description "
        "in the first window; links are the pages this window links to, [{text, title}] (open a title to "
        "follow one); call again with offset=next_offset to read on (next_offset is null at the end).",
        {
            "page": PAGE_ARGUMENT,
            "offset": {
                "type": "integer",
                "description": "Character offset to start reading at (default 0).",
                "minimum": 0,
            },
        },
        ["page"],
    )


def run_open(index: SearchIndex, cfg: ToolsConfig, page: str, offset: int = 0) -> dict:
    """One window of a page's text from ``offset``: ``{page_id, title, offset, next_offset, total_chars, text,
    links}``, with the page's ``description`` in its first window when it has one.

    ``links`` are the pages the window links to, as a browser shows a page's links:
    ``[{"text": anchor, "title": target}]``, each target once, in the order their anchors
    first appear in the window (:func:`window_links`).
    """
    p = resolve_page(index, page)
    text = page_text(p["title"], p["paragraphs"])
    if offset >= len(text):
        raise ToolError(f"offset {offset} is past the end of page {p['page_id']!r} (total_chars {len(text)})")
    chunk, next_offset = text_window(text, offset, cfg.page_chars)
    out = {"page_id": p["page_id"], "title": p["title"], "offset": offset, "next_offset": next_offset,
           "total_chars": len(text)}
    if offset == 0 and p.get("description"):
        out["description"] = p["description"]
    out["text"] = chunk
    out["links"] = window_links(chunk, p.get("links") or [])
    return out


SPEC = ToolSpec(name="open", schema=schema,
                run=lambda index, cfg, args, exclude: run_open(index, cfg, args["page"], args.get("offset", 0)),
                shown=page_shown, page_arg="page")

__all__ = ["SPEC", "run_open", "schema"]
