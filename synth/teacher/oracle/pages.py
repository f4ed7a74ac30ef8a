"""What the offline oracle agent reads of the pages it opened: their text, links and definition.

A :class:`PageView` collects what ``open`` and ``find`` showed of one page -- the windows of
its text, the links each window listed, its short description -- and answers what the
agent asks of it: what the page says it is (:meth:`PageView.definition`), which pages it
links to, and in which sentence.  All of it is what the observations showed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from synth.teacher.oracle.reading import split_sentences
from synth.text.clues import definition, sentence_with


@dataclass
class PageView:
    """What the agent has read of one page."""

    page_id: str
    title: str
    windows: dict[int, str] = field(default_factory=dict)
    next_offset: int | None = None
    description: str | None = None
    links: dict[str, str] = field(default_factory=dict)  # target title -> anchor text, in page order
    found: list[str] = field(default_factory=list)
    _sents: list[str] | None = None  # sentences of what was read, until the next read

    def copy(self) -> "PageView":
        """An independent copy (the strings inside are shared)."""
        return PageView(self.page_id, self.title, dict(self.windows), self.next_offset, self.description,
                        dict(self.links), list(self.found))

    def read(self, obs: dict) -> None:
        """Take in an ``open`` or ``find`` observation of this page."""
        self._sents = None
        if "passages" in obs:
            self.found += [p.get("text") or "" for p in obs.get("passages") or [] if isinstance(p, dict)]
            return
        off = int(obs.get("offset") or 0)
        self.windows[off] = obs.get("text") or ""
        if obs.get("description"):
            self.description = obs["description"]
        for link in obs.get("links") or []:
            if isinstance(link, dict) and link.get("title"):
                self.links.setdefault(link["title"], link.get("text") or link["title"])
        nxt = obs.get("next_offset")
        if off >= max(self.windows):
            self.next_offset = nxt if isinstance(nxt, int) else None

    @property
    def text(self) -> str:
        """Everything read of the page, in page order."""
        return "".join(self.windows[o] for o in sorted(self.windows)) + "".join("\n" + p for p in self.found)

    def paragraphs(self) -> list[str]:
        """The paragraphs read so far, in page order, then those only ``find`` showed; no title, no headings."""
        text = "".join(self.windows[o] for o in sorted(self.windows))
        paras = [p.strip() for p in text.split("\n\n")]
        if 0 in self.windows and paras:
            paras = paras[1:]  # the title line
        paras += [p for p in self.found if p.strip() not in paras]
        return [p for p in paras if p and not p.startswith("#")]

    def sentences(self) -> list[str]:
        """The sentences of :meth:`paragraphs`, in order."""
        if self._sents is None:
            self._sents = [s for p in self.paragraphs() for s in split_sentences(p)]
        return self._sents

    def definition(self) -> str:
        """What the page says it is: its description and its first sentence's predicate."""
        return _definition(self.description or "", tuple(self.paragraphs()[:1]))

    def sentence_linking(self, title: str) -> str:
        """The sentence in which this page links to ``title`` (``""`` when it was not seen)."""
        anchor = self.links.get(title)
        return sentence_with(self.text, anchor) if anchor else ""

    def links_to(self, title: str) -> bool:
        """Whether a window read so far listed a link to ``title``."""
        return title in self.links


@lru_cache(maxsize=1 << 14)
def _definition(description: str, lead: tuple[str, ...]) -> str:
    return definition(description, lead)


@lru_cache(maxsize=1 << 14)
def _name_pattern(title: str) -> re.Pattern:
    bare = re.sub(r"\s*\([^)]*\)$", "", title).strip()
    names = "|".join(re.escape(n) for n in sorted({title, bare}, key=len, reverse=True) if n)
    return re.compile(r"(?<![^\W_])(?:" + names + r")(?:s|es)?(?![^\W_])", re.I)


def mentions(text: str, title: str) -> bool:
    """Whether ``text`` names ``title`` (or the title without its qualifier in brackets) as whole words,
    a plural allowed."""
    return _name_pattern(title).search(text) is not None


__all__ = ["PageView", "mentions"]
