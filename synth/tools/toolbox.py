"""The agent's tools over the local index: ``search``, ``open`` and ``find``.

A teacher rollout hands every tool call to :meth:`Toolbox.call`, which never raises:
a bad call (malformed JSON, an unknown tool, a missing or mistyped argument, an
unknown page) comes back as an observation ``{"error": "..."}`` the agent can read
and recover from, and :class:`ToolCallInfo` records which pages the call showed
(``searched_page_ids``) or read (``opened_page_ids``) for the trace.

Arguments are checked against the tool schemas of :mod:`synth.tools.schema`, so the
schemas the model is shown and the checks it meets cannot drift apart.  Source
masking (LiteResearcher) applies to ``search``: a rollout's toolbox is built with
the question's answer page in ``mask_page_ids`` and its searches never return it,
while ``open`` still reads it once the agent has found its name through the hops.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable
from urllib.parse import unquote

from synth.tools.search import SearchIndex
from synth.tools.analysis import clean_text, page_text
from synth.tools.config import ToolsConfig
from synth.tools.schema import tool_schemas

ECHO_CHARS = 200  # of a find pattern, in the result


class ToolError(ValueError):
    """A tool call the agent got wrong; ``status`` is the HTTP status the tool server answers with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


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


# ---- the tools as plain functions (the tool server calls these too) ------------------------


def resolve_page(index: SearchIndex, page: str) -> dict:
    """The page named by id, exact title, or a Wikipedia URL; :class:`ToolError` (404) if none."""
    found = index.get_page(page)
    if found is None and "/wiki/" in page:
        found = index.get_page(unquote(page.rsplit("/wiki/", 1)[1]).split("#", 1)[0])
    if found is None:
        raise ToolError(f"no page with id or title {page!r}; search for it and use a page_id from the results", 404)
    return found


def run_search(index: SearchIndex, cfg: ToolsConfig, query: str, k: int | None = None,
               exclude: Iterable[str] = ()) -> list[dict]:
    """``[{page_id, title, snippet}]`` for ``query``, never returning a page in ``exclude``."""
    return index.search(query, k or cfg.search_k, exclude_page_ids=exclude, snippet_chars=cfg.snippet_chars)


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
        elif spec["type"] == "integer":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ToolError(f"{name}: '{key}' must be an integer, got {json.dumps(value)}")
            lo, hi = spec.get("minimum"), spec.get("maximum")
            if (lo is not None and value < lo) or (hi is not None and value > hi):
                bounds = f">= {lo}" if hi is None else f"between {lo} and {hi}"
                raise ToolError(f"{name}: '{key}' must be {bounds}, got {value}")
        out[key] = value
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
        if name == "search":
            return run_search(self.index, self.cfg, args["query"], args.get("k"), exclude=self.mask_page_ids)
        if name == "open":
            return run_open(self.index, self.cfg, args["page"], args.get("offset", 0))
        return run_find(self.index, self.cfg, args["page"], args["text"])

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
        if name == "search":
            info.searched_page_ids = [r["page_id"] for r in result]
        else:
            info.opened_page_ids = [result["page_id"]]
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
        raise ToolError(f"arguments are not valid JSON ({e.msg} at character {e.pos}): {arguments[:200]!r}") from None


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
