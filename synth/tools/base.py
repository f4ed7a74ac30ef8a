"""What every agent tool shares: the error a tool call can end in, and reading a page.

:class:`ToolError` is a call the agent got wrong (its ``status`` is the HTTP status the tool server
answers with); :func:`resolve_page` finds a page by id, exact title or Wikipedia URL;
:func:`text_window` and :func:`window_links` cut a page into the windows ``open`` shows.
"""

from __future__ import annotations

from urllib.parse import unquote

from synth.tools.search import SearchIndex


class ToolError(ValueError):
    """A tool call the agent got wrong; ``status`` is the HTTP status the tool server answers with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def resolve_page(index: SearchIndex, page: str) -> dict:
    """The page named by id, exact title, or a Wikipedia URL; :class:`ToolError` (404) if none."""
    found = index.get_page(page)
    if found is None and "/wiki/" in page:
        found = index.get_page(unquote(page.rsplit("/wiki/", 1)[1]).split("#", 1)[0])
    if found is None:
        raise ToolError(f"no page with id or title {page!r}; search for it and use a page_id from the results", 404)
    return found


def window_links(text: str, links: list[list[str]]) -> list[dict]:
    """The links (``[anchor, page id, title]``) whose anchor text ``text`` shows as whole words, each
    target once, ordered by where its anchor first appears; case is ignored, as a reader ignores it."""
    low = text.casefold()
    found = []
    for anchor, _, title in links:
        a = anchor.casefold().strip()
        if not a:
            continue
        i = low.find(a)
        while i >= 0 and not (_edge(low, i - 1) and _edge(low, i + len(a))):
            i = low.find(a, i + 1)
        if i >= 0:
            found.append((i, anchor, title))
    found.sort(key=lambda f: f[0])
    return [{"text": anchor, "title": title} for _, anchor, title in found]


def _edge(text: str, i: int) -> bool:
    """Whether position ``i`` is outside a word (a link's anchor is whole words: "sin" is not in "using")."""
    return i < 0 or i >= len(text) or not text[i].isalnum()


def text_window(text: str, offset: int, size: int) -> tuple[str, int | None]:
    """``text[offset:end]`` of at most ``size`` characters and the next offset (None at the end).

    The cut falls just after the last whitespace in the window's second half, so words
    are not split; consecutive windows cover the text exactly once.
    """
    end = offset + size
    if end >= len(text):
        return text[offset:], None
    lower = offset + size // 2
    cut = max(text.rfind(" ", lower, end), text.rfind("\n", lower, end))
    if cut >= 0:
        end = cut + 1
    return text[offset:end], end


__all__ = ["ToolError", "resolve_page", "text_window", "window_links"]
