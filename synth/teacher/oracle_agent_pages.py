"""What the offline oracle agent reads in the pages it was shown: their text, and the names in it.

:func:`fill_blank` finds the name a clue's blank stands for in a page that holds the
quoted passage; :func:`names_in` proposes names from a sentence when no passage is
quoted word for word; :func:`mentions` says whether a text names a page.  All of it
works on observations only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from synth.teacher.oracle_agent_reading import FUNCTION_WORDS, WORD, matched, split_sentences, term_seq

def _pattern(words: str) -> str:
    """A regex for ``words`` as whole words, any whitespace between them ("in" must not match in "building")."""
    body = r"\s+".join(re.escape(w) for w in words.split())
    head = r"(?<![^\W_])" if words[:1].isalnum() else ""
    tail = r"(?![^\W_])" if words[-1:].isalnum() else ""
    return head + body + tail


_JOINED = re.compile(r"[-–—/]")  # joins two words into one token ("quark–gluon", "mind-independence")
_NAME_LINKS = {"of", "de", "du", "la", "le", "von", "van", "del", "da", "di"}  # inside names: "Gulf of Thailand"


@lru_cache(maxsize=1 << 15)
def fill_blank(paragraph: str, left: str, right: str) -> tuple[tuple[str, float], ...]:
    """The words of ``paragraph`` that stand where the clue ``left ___ right`` has its blank, with how
    much of the quote framed them (1.0: both sides found around them).

    Both sides given: the shortest text between an occurrence of ``left`` and the next ``right``.
    One side given: the one to five words next to it, a whole phrase first, and the part of a
    joined word ("mind" of "mind-independence") on that side, since a link may cover part of a word.
    """
    out: dict[str, float] = {}
    if left and right:
        for m in re.finditer(f"(?i){_pattern(right)}", paragraph):
            before = paragraph[:m.start()]
            starts = [x.end() for x in re.finditer(f"(?i){_pattern(left)}", before)]
            if starts:
                name = before[starts[-1]:].strip(" ,")
                if 0 < len(name.split()) <= 8 and not re.search(r"[.;:!?]\s", name):
                    out.setdefault(name, 1.0)
    elif left or right:
        side = left or right
        for m in re.finditer(f"(?i){_pattern(side)}", paragraph):
            near = paragraph[m.end():].split() if left else paragraph[:m.start()].split()[::-1]
            for n in (1, 2, 3, 4, 5):
                if len(near) < n:
                    break
                run = near[:n] if left else near[:n][::-1]
                if any(re.search(r"([,.;:!?]|['’]s)$", w) for w in run[:-1]):
                    break  # punctuation or a possessive ends a name ("organism's cognition" is two)
                name = re.sub(r"['’]s$", "", " ".join(run).strip(" ,.;:!?\"'()"))
                ends = {name.split()[0].lower(), name.split()[-1].lower()} if name.split() else set()
                # A whole noun phrase -- up to punctuation, a function word or the paragraph's end -- is
                # likelier to be the linked name than a part of one ("Arctic Ocean", not "Arctic").
                far = near[n] if len(near) > n else None
                ends_here = far is None or far.lower() in FUNCTION_WORDS - _NAME_LINKS
                whole = ends_here or re.search(r"[,.;:!?)]$", run[-1] if left else far)
                # A name neither starts nor ends with a function word, and seldom joins two with "and".
                joined = 0.15 * any(w.lower() in ("and", "or") for w in run[1:-1])
                if not ends & FUNCTION_WORDS:
                    out.setdefault(name, (0.8 if whole else 0.6) - 0.05 * n - joined)
                if n == 1 and _JOINED.search(name):
                    part = _JOINED.split(name)[0 if left else -1]
                    if part and part.lower() not in FUNCTION_WORDS:
                        out.setdefault(part, 0.55)
    return tuple((k, v) for k, v in out.items() if k and WORD.search(k))


@dataclass
class PageView:
    """What the agent has read of one page: the windows ``open`` showed and the passages ``find`` showed."""

    page_id: str
    title: str
    windows: dict[int, str] = field(default_factory=dict)
    next_offset: int | None = None
    found: list[str] = field(default_factory=list)
    _sents: list[str] | None = None  # sentences of what was read, until the next read

    def read(self, obs: dict) -> None:
        """Take in an ``open`` or ``find`` observation of this page."""
        self._sents = None
        if "passages" in obs:
            self.found += [p.get("text") or "" for p in obs.get("passages") or [] if isinstance(p, dict)]
            return
        off = int(obs.get("offset") or 0)
        self.windows[off] = obs.get("text") or ""
        nxt = obs.get("next_offset")
        if off >= max(self.windows):
            self.next_offset = nxt if isinstance(nxt, int) else None

    @property
    def lead(self) -> str:
        """The first paragraph of text after the title (what a reader skims first)."""
        return next(iter(self.paragraphs()), "")

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


def singulars(name: str) -> list[str]:
    """``name`` with its last word made singular, when it looks plural ("industrial resins" -> "industrial resin")."""
    head, _, last = name.rpartition(" ")
    one = _singular(last)
    return [f"{head} {one}".strip()] if one else []


def _singular(word: str) -> str | None:
    """A naive singular of an English plural ("resins" -> "resin", "bodies" -> "body") or possessive; None if
    neither."""
    w = word.lower()
    if w.endswith(("'s", "’s")):
        return word[:-2]  # a possessive: "organism's" -> "organism"
    if len(w) < 4 or not w.endswith("s") or w.endswith(("ss", "us", "is")):
        return None
    if w.endswith("ies"):
        return word[:-3] + "y"
    if w.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    return word[:-1]


@lru_cache(maxsize=1 << 15)
def names_in(sentence: str, clue: frozenset[str], skip: frozenset[str] = frozenset()) -> tuple[tuple[str, float], ...]:
    """Phrases of ``sentence`` that may name a page, each with how strongly the clue frames it.

    A candidate is a run of non-stop words (or its head: a run's last words), cut at
    punctuation, whose words are neither the clue's nor in ``skip`` (the current page's
    title).  A candidate with clue words right before and after it sits where the clue
    leaves a gap, and scores higher; so does a capitalised one (a proper name).
    """
    toks = [(m.group(), m.start(), m.end()) for m in WORD.finditer(sentence)]
    info = []
    for w, a, b in toks:
        ts = frozenset(term_seq(w))
        info.append((w.lower() in FUNCTION_WORDS or not ts, bool(ts) and bool(matched(ts, clue)), ts <= skip and bool(ts)))
    runs, cur = [], []
    for i, ((w, a, b), (stop, hit, own)) in enumerate(zip(toks, info)):
        if stop or hit or own or (cur and sentence[toks[cur[-1]][2]:a].strip()):
            # A stop word, a clue word, the page's own name or punctuation ends a run.
            if cur:
                runs.append(cur)
            cur = []
            if stop or hit or own:
                continue
        cur.append(i)
    if cur:
        runs.append(cur)
    out: dict[str, float] = {}
    for run in runs:
        left = any(info[j][1] for j in range(max(0, run[0] - 3), run[0]))
        right = any(info[j][1] for j in range(run[-1] + 1, min(len(toks), run[-1] + 4)))
        for start in range(run[0], run[-1] + 1):
            span = toks[start:run[-1] + 1]
            if len(span) > 4:
                continue
            phrase = sentence[span[0][1]:span[-1][2]]
            caps = phrase[:1].isupper() and span[0][1] > 0
            score = 0.5 * left + 0.5 * right + 0.3 * caps + 0.05 * len(span) - 0.1 * (start - run[0])
            forms = [phrase]
            single = _singular(span[-1][0])
            if single is not None:
                forms.insert(0, sentence[span[0][1]:span[-1][1]] + single)
            for k, f in enumerate(forms):
                out.setdefault(f, score - 0.01 * k)
    return tuple(sorted(out.items(), key=lambda kv: -kv[1]))


@lru_cache(maxsize=1 << 14)
def _name_pattern(title: str) -> re.Pattern:
    bare = re.sub(r"\s*\([^)]*\)$", "", title).strip()
    names = "|".join(re.escape(n) for n in sorted({title, bare}, key=len, reverse=True) if n)
    return re.compile(r"(?<![^\W_])(?:" + names + r")(?:s|es)?(?![^\W_])", re.I)


def mentions(text: str, title: str) -> bool:
    """Whether ``text`` names ``title`` (or the title without its qualifier in brackets) as whole words,
    a plural allowed.  Stems are too loose here: "behavior" does not name "Behaviorism"."""
    return _name_pattern(title).search(text) is not None


__all__ = ["PageView", "fill_blank", "mentions", "names_in", "singulars"]
