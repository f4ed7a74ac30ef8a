"""Markdown as a reader sees it: rendered by markdown-it-py (CommonMark, GitHub's tables and strikethrough).

The dataset card, the report and Prefect's artifacts are Markdown that other programs render; these
helpers let a test look at what they show (the table cells' text, the raw HTML that would reach a
browser) rather than at the source text.
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.token import Token

# html=True: raw HTML is parsed as HTML, as the Hub and GitHub do (before their sanitisers), so a test sees it.
MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def _text(children: list[Token] | None) -> str:
    """What an inline token shows as text: text, code and entities as characters, line breaks as newlines."""
    out = []
    for t in children or []:
        if t.type in ("text", "code_inline", "text_special", "html_inline"):
            out.append(t.content)
        elif t.type in ("softbreak", "hardbreak"):
            out.append("\n")
        elif t.children:
            out.append(_text(t.children))
    return "".join(out)


def tables(md: str) -> list[list[list[str]]]:
    """Every table of ``md``: its rows (header first), each a list of its cells' shown text."""
    found: list[list[list[str]]] = []
    inside = False
    for t in MD.parse(md):
        if t.type == "table_open":
            found.append([])
            inside = True
        elif t.type == "table_close":
            inside = False
        elif inside and t.type == "tr_open":
            found[-1].append([])
        elif inside and t.type == "inline":  # a cell's content
            found[-1][-1].append(_text(t.children))
    return found


def raw_html(md: str) -> list[str]:
    """The raw HTML of ``md`` that a renderer would pass through as markup (blocks and inline tags)."""
    out = []
    for t in MD.parse(md):
        if t.type == "html_block":
            out.append(t.content)
        for c in t.children or []:
            if c.type == "html_inline":
                out.append(c.content)
    return out


def inline_texts(md: str) -> list[str]:
    """The shown text of every paragraph, heading and table cell of ``md``, in order."""
    return [_text(t.children) for t in MD.parse(md) if t.type == "inline"]


def code_spans(md: str) -> list[str]:
    """The content of every inline code span of ``md``, in order."""
    return [c.content for t in MD.parse(md) if t.type == "inline" for c in t.children or [] if c.type == "code_inline"]


def fences(md: str) -> list[tuple[str, str]]:
    """``(info, content)`` of every fenced code block of ``md``."""
    return [(t.info, t.content) for t in MD.parse(md) if t.type == "fence"]
