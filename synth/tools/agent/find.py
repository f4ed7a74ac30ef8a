"""The ``find`` tool: the paragraphs of a page that hold a text."""

from __future__ import annotations

from synth.tools.base import resolve_page
from synth.tools.config import ToolsConfig
from synth.tools.spec import PAGE_ARGUMENT, ToolSpec, function_schema, page_shown
from synth.tools.search import SearchIndex

ECHO_CHARS = 200  # of a find pattern, in the result


def schema(cfg: ToolsConfig) -> dict:
    return function_schema(
        "find",
        "Find the passages (paragraphs) of a page that contain a text, ignoring case. Returns "
        f"{{page_id, title, text, total, passages}} with at most {cfg.find_max_passages} passages, "
        "each {index, offset, text}; offset is where the passage starts for open.",
        {
            "page": PAGE_ARGUMENT,
            "text": {"type": "string", "description": "The text to look for (a word or a phrase)."},
        },
        ["page", "text"],
    )


def run_find(index: SearchIndex, cfg: ToolsConfig, page: str, text: str) -> dict:
    """The paragraphs of a page that contain ``text`` (case-insensitive), in page order.

    Returns ``{page_id, title, text, total, passages: [{index, offset, text}]}``: ``index``
    is the paragraph's index in the page's paragraphs, ``offset`` where it starts in the
    text ``open`` reads, ``total`` how many paragraphs match (at most
    ``find_max_passages`` are listed).
    """
    p = resolve_page(index, page)
    needle = text.casefold()
    passages, total = [], 0
    offset = len(p["title"]) + 2  # open's text: title, blank line, paragraphs
    for i, para in enumerate(p["paragraphs"]):
        if not para:
            continue
        if needle in para.casefold():
            total += 1
            if len(passages) < cfg.find_max_passages:
                passages.append({"index": i, "offset": offset, "text": para})
        offset += len(para) + 2
    # Echo only a prefix of the pattern: a caller that sent megabytes must not get them back.
    echo = text if len(text) <= ECHO_CHARS else text[:ECHO_CHARS] + "..."
    return {"page_id": p["page_id"], "title": p["title"], "text": echo, "total": total, "passages": passages}


SPEC = ToolSpec(name="find", schema=schema,
                run=lambda index, cfg, args, exclude: run_find(index, cfg, args["page"], args["text"]),
                shown=page_shown, text_arg="text", page_arg="page")

__all__ = ["SPEC", "run_find", "schema", "ECHO_CHARS"]
