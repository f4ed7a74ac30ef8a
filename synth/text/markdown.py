"""Strings hopforge did not write, put into Markdown so they read as the text they are.

The dataset card (which the Hub renders), the run report (``report/index.md``) and Prefect's
Markdown artifacts show configured values (``teacher.model``, ``publish.pretty_name``, file
names, paths) and corpus or teacher text (titles, benchmark questions, model names recorded in
the tables).  Any of them may hold Markdown or HTML: ``evil | x | <script>alert(1)</script>``
as a model name would cut a table row in three and put a script tag into a page a browser
renders.  Every such string goes through one of these functions, and nowhere else is one
escaped by hand:

* :func:`md_text`: running text, a heading or a table cell.  Line breaks and other control
  characters become one space (a newline would end a table row or a heading); ``&``, ``<`` and
  ``>`` become HTML entities, so no tag or entity of the string's own is ever parsed; the ASCII
  punctuation Markdown reads inline (emphasis, code, links, tables, headings, strikethrough,
  math) is backslash-escaped, which CommonMark allows for any ASCII punctuation, except an
  underscore inside a word (``wrong_answer``), which Markdown never reads as emphasis.
* :func:`md_code`: a code span (a model name, a file name), whose content Markdown shows as
  written, HTML included.  The span's fence is longer than any run of backticks in the string,
  so none of them ends it; ``table=True`` escapes ``|`` as ``\\|``, which a GitHub-flavoured
  table reads as a pipe inside the cell, even in a code span.
* :func:`md_fence`: a fenced code block (a config as YAML, a command), fenced with more
  backticks than any run in the text, so no line of the text closes it.

CommonMark and its GitHub table extension, as ``markdown-it-py`` implements them, are what
``tests/synth/text/test_markdown.py`` renders the results with.
"""

from __future__ import annotations

import html
import re
from typing import Any

# C0 and C1 controls (line breaks and tabs among them), DEL, and Unicode's own line and paragraph separators.
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
# What Markdown reads inline: escapes, code, emphasis, links and images, table cells, headings' closing
# hashes, strikethrough (GFM) and math ($, which the Hub renders).  An underscore between two letters or
# digits can neither open nor close emphasis (CommonMark's flanking rules), so `wrong_answer` stays as it is
# written.  & < > are written as entities instead.
_INLINE = re.compile(r"[\\`*\[\]|#~$]|_(?![^\W_])|(?<![^\W_])_")
_TICKS = re.compile(r"`+")


def one_line(value: Any) -> str:
    """``value`` as a string on one line: each run of control characters (newlines, tabs...) is one space."""
    return _BREAKS.sub(" ", "" if value is None else str(value))


def md_text(value: Any) -> str:
    """``value`` as literal Markdown text on one line: safe in a paragraph, a heading or a table cell."""
    return html.escape(_INLINE.sub(lambda m: "\\" + m.group(0), one_line(value)), quote=False)


def md_code(value: Any, table: bool = False) -> str:
    """``value`` as an inline code span on one line (``table``: inside a GitHub-flavoured table cell)."""
    text = one_line(value)
    if not text:
        return "` `"
    fence = "`" * (max((len(run) for run in _TICKS.findall(text)), default=0) + 1)
    if text[0] == "`" or text[-1] == "`" or (text[0] == " " and text[-1] == " " and text.strip()):
        text = f" {text} "  # CommonMark strips one space on each side of a span's content
    if table:
        text = text.replace("|", "\\|")
    return f"{fence}{text}{fence}"


def md_fence(text: str, info: str = "") -> list[str]:
    """The lines of a fenced code block holding ``text`` as written (``info``: its language, e.g. ``yaml``)."""
    fence = "`" * max(3, max((len(run) for run in _TICKS.findall(text)), default=0) + 1)
    return [fence + one_line(info).replace("`", ""), *text.splitlines(), fence]


__all__ = ["md_code", "md_fence", "md_text", "one_line"]
