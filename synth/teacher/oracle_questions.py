"""The offline oracle's question writer: one clue per hop, drawn from that hop's evidence.

The clue for the hop from entity ``i`` to entity ``i+1`` is a window of the paragraph in
``i``'s article that links to ``i+1`` (:class:`~synth.engine.records.Evidence`), with the
linking words blanked: ``... examined by ___ to determine the cause ...``.  A solver must
reach article ``i`` to read it, so a hop cannot be skipped, and the last clue is never the
answer page's own description.  An inner hop sometimes adds its bridge's description as a
type hint ("the blank is a river in France"), always when its window is too thin to tell
the page apart; the last hop never does.  A hop that runs against
its link (a subgraph chain may do that) quotes the next article's own paragraph instead,
the anchor that names the current entity left in, and is found by searching that quote.

The window sits around whichever of the anchor text's first three occurrences in the
paragraph leaves the most to quote (the same words name the same page).  A window never
holds a name or a distinctive token of the next entity or of any later one
(:func:`synth.teacher.question_text.leaked`), nor the answer's description (nor does a type
hint); among the windows left it prefers few words shared with those entities' titles and
descriptions (which pull their pages up a search) and a length drawn per hop.  A repair
asks for other clue choices on given hops: the window least like the first one, and no
type hint.  Every draw comes from ``random.Random`` streams seeded per question and per hop.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

from synth.engine.records import Evidence
from synth.engine.seeding import derive_seed
from synth.teacher.question_frames import closer, hop_sentence, opener, sub_question
from synth.teacher.question_text import (Giveaways, content_words, description_cores, giveaways, normalized,
                                         repeats_description)
from synth.text.answers import names_of

_STOPS = '.!?"[]{}\n\u201c\u201d'  # a window never crosses these: a clue stays inside one sentence, unquoted
MAX_SIDE = 9  # words on either side of the anchor
_GLUE = re.compile(r"\s+([,;:%)\]])")  # a mark the anchor's edge split off goes back against its word
BLANK = "___"


@dataclass(frozen=True)
class Window:
    """``left`` words, the anchor, ``right`` words: one way to quote a hop's evidence."""

    left: tuple[str, ...]
    anchor: str
    right: tuple[str, ...]

    def text(self, backward: bool) -> str:
        """The quoted clue: the anchor blanked on a forward hop, shown on a backward one."""
        mid = self.anchor if backward else BLANK
        return _GLUE.sub(r"\1", " ".join([*self.left, mid, *self.right])).strip(" ,")

    @property
    def size(self) -> int:
        """Words around the anchor."""
        return len(self.left) + len(self.right)


def _edge(text: str, i: int) -> bool:
    """Whether position ``i`` of ``text`` is outside a word (before the start, past the end, or not alphanumeric)."""
    return i < 0 or i >= len(text) or not text[i].isalnum()


def _clauses(paragraph: str, anchor: str, most: int = 3) -> list[tuple[list[str], str, list[str]]]:
    """For each of the first ``most`` occurrences of the anchor: the words left and right of it inside its
    clause, and the anchor widened to whole words.  The link is one of them; any carries the same name."""
    if not anchor.strip():
        return []
    low, key = paragraph.lower(), anchor.lower()
    # Whole-word occurrences first, then ones that start a word ("Roman" in "Romans"); one inside a word
    # ("sin" in "using") only when there is nothing else.
    found = [m.start() for m in re.finditer(re.escape(key), low)]
    whole = [i for i in found if _edge(low, i - 1) and _edge(low, i + len(key))]
    prefix = [i for i in found if _edge(low, i - 1)]
    starts = (whole or prefix or found)[:most]
    out = []
    for i in starts:
        a, b = i, i + len(anchor)
        while a > 0 and paragraph[a - 1].isalnum():
            a -= 1
        while b < len(paragraph) and paragraph[b].isalnum():
            b += 1
        left, right = paragraph[:a], paragraph[b:]
        cut = max(left.rfind(c) for c in _STOPS)
        left = left[cut + 1:]
        ends = [j for j in (right.find(c) for c in _STOPS) if j >= 0]
        right = right[:min(ends)] if ends else right
        out.append((left.split(), paragraph[a:b], right.split()))
    return out


_words = lru_cache(maxsize=1 << 16)(content_words)
_norm = lru_cache(maxsize=1 << 16)(normalized)  # paragraphs repeat their words across hops and questions


def _running(flags: list[bool]) -> list[int]:
    """Running counts: ``out[n]`` is how many of the first ``n`` flags are set."""
    out = [0]
    for f in flags:
        out.append(out[-1] + f)
    return out


def _reach(allowed, most: int) -> int:
    """The largest ``n <= most`` with ``allowed(n)``, for a predicate that stays false once false
    (a binary search: a side that grows never becomes allowed again)."""
    lo, hi = 0, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if allowed(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


class Windows:
    """The allowed windows of one hop's evidence, and how strongly each pulls up a later entity's page.

    A side of the window (the words left or right of the anchor) is allowed while it gives
    away no later entity, does not repeat the anchor (on a forward hop) and does not
    repeat the answer's description.  Growing a side never makes it allowed
    again, so each side has a longest allowed reach and every window within both reaches
    is allowed.  The blank splits the two sides, so no name is read across it.
    """

    def __init__(self, clause: tuple[list[str], str, list[str]] | None, later: list[Giveaways], answer: dict,
                 backward: bool, pull: set[str], known: Iterable[str] = ()):
        self.left, self.anchor, self.right = clause if clause else ([], "", [])
        self.ok = clause is not None and not (backward and any(g.find(self.anchor) for g in later))
        self.backward = backward

        # Normalised word by word once: SQuAD normalisation never joins or splits words.
        nleft, nright = [_norm(w) for w in self.left], [_norm(w) for w in self.right]
        cores = [f" {c} " for c in description_cores(answer.get("description"))]  # never, on any hop
        anchor = f" {normalized(self.anchor)} "

        def allowed(words: list[str], norm_words: list[str]) -> bool:
            norm = " ".join(" ".join(norm_words).split())
            padded = f" {norm} "
            return not (any(g.find(" ".join(words), norm) for g in later) or (not backward and anchor in padded)
                        or any(c in padded for c in cores))

        self.max_l = _reach(lambda n: allowed(self.left[len(self.left) - n:], nleft[len(nleft) - n:]),
                            min(len(self.left), MAX_SIDE))
        self.max_r = _reach(lambda n: allowed(self.right[:n], nright[:n]), min(len(self.right), MAX_SIDE))
        # lpull[n]: words among the n nearest on the left that share a content word with a later entity
        self.lpull = _running([bool(_words(w) & pull) for w in reversed(self.left[len(self.left) - self.max_l:])])
        self.rpull = _running([bool(_words(w) & pull) for w in self.right[:self.max_r]])
        # lcontent[n]: content words among the n nearest on the left, the words of titles already reached aside
        known = set(known)
        self.lcontent = _running([len(_words(w) - known) for w in reversed(self.left[len(self.left) - self.max_l:])])
        self.rcontent = _running([len(_words(w) - known) for w in self.right[:self.max_r]])

    def sizes(self, min_words: int, max_words: int = 14) -> list[tuple[int, int]]:
        """The allowed ``(left, right)`` word counts with ``min_words``..``max_words`` words in all."""
        if not self.ok:
            return []
        return [(l, r) for l in range(self.max_l + 1) for r in range(self.max_r + 1) if min_words <= l + r <= max_words]

    def pull(self, l: int, r: int) -> int:
        """Words of the window that a later entity's title or description also uses."""
        return self.lpull[l] + self.rpull[r]

    @classmethod
    def best(cls, link: Evidence, *args) -> "Windows":
        """The windows around the occurrence of the anchor with the most to say (the first, on a tie)."""
        options = [cls(c, *args) for c in _clauses(link.paragraph, link.anchor_text)] or [cls(None, *args)]
        return max(options, key=lambda w: w.content(w.max_l, w.max_r) if w.ok else -1)

    def content(self, l: int, r: int) -> int:
        """Content words of the window (a clue needs two to tell its page apart)."""
        return self.lcontent[l] + self.rcontent[r]

    def window(self, l: int, r: int) -> Window:
        """The window with ``l`` words left and ``r`` right of the anchor."""
        return Window(tuple(self.left[len(self.left) - l:]), self.anchor, tuple(self.right[:r]))


def choose(ws: Windows, rnd: random.Random, unlike: tuple[int, int] | None = None,
           target: int | None = None) -> tuple[int, int] | None:
    """The hop's window sizes (module docstring); with ``unlike``, the window sharing fewest words with it."""
    target = rnd.randint(5, 9) if target is None else target
    for lo in (3, 1):  # a thin clue only when the clause has no room for a fuller one
        pool = [s for s in ws.sizes(lo) if s != unlike]
        if pool:
            break
    if not pool:
        return None

    def key(s: tuple[int, int]) -> tuple:
        base = (ws.pull(*s), abs(s[0] + s[1] - target), rnd.random())
        thin = ws.content(*s) < 2  # a clue of fewer content words fits any page: only when nothing else is left
        if unlike is None:
            return (thin,) + base
        shared = min(s[0], unlike[0]) + min(s[1], unlike[1])  # windows all grow from the anchor
        return (thin, shared / max(1, s[0] + s[1])) + base

    return min(pool, key=key)


def _hint(bridge: dict, later: list[Giveaways], answer: dict) -> str | None:
    """A type phrase for an intermediate bridge ("a river in France"), when its description gives nothing
    later away and does not repeat the answer's own (two countries of one continent share theirs)."""
    d = (bridge.get("description") or "").strip().rstrip(".")
    if not d or any(g.find(d) for g in later) or any(c in d for c in '.!?"'):
        return None
    if repeats_description(d, answer.get("description")):
        return None
    d = d[0].lower() + d[1:]
    return ("an " if d[:1] in "aeiou" else "a ") + d


def evidence_of(links: list[Evidence], a: str, b: str) -> tuple[Evidence, bool] | None:
    """The evidence for the hop ``a`` -> ``b`` and whether it runs against its link (``b`` links to ``a``)."""
    for l in links:
        if l.src_id == a and l.dst_id == b:
            return l, False
    for l in links:
        if l.src_id == b and l.dst_id == a:
            return l, True
    return None


def chain_question(chain: list[dict], links: list[Evidence], seed: int, fix: frozenset[int] | None = frozenset(),
                   short: bool = False, max_words: int = 220) -> tuple[str, list[dict]]:
    """Question text and hops (``sub_question``, ``bridge``) through every entity of ``chain``, in order.

    ``links`` hold the evidence of each hop (either direction).  ``fix`` names hops (0-based)
    whose clue a repair must choose anew, without a type hint (None: every hop); ``short`` asks
    for short clues; clues are sized so the question stays under ``max_words``.
    """
    fixed = range(len(chain)) if fix is None else fix
    phrase = random.Random(derive_seed(seed, "oracle-phrasing", 0))
    gives = [giveaways(e) for e in chain]
    parts = [opener(chain[0]["title"], phrase)]
    hops = []
    k = len(chain) - 1
    own = [content_words(f"{e['title']} {e.get('description') or ''}") for e in chain]
    # Room per clue: the question's words less the opener and closer (~12) and each hop's frame (~12).
    room = max(3, min(9, (max_words - 24) // max(1, k) - 12))
    for i in range(k):
        b, later = chain[i + 1], gives[i + 1:]
        rnd = random.Random(derive_seed(seed, "oracle-hop", i))
        pull = set().union(*own[i + 1:])
        ev = evidence_of(links, chain[i]["page_id"], b["page_id"])
        clue, backward, thin = BLANK, False, True
        if ev is not None:
            link, backward = ev
            known = content_words(" ".join(e["title"] for e in chain[:i + 1]))
            ws = Windows.best(link, later, chain[-1], backward, pull, known)
            target = 3 if short else min(rnd.randint(5, 9), room)
            size = choose(ws, rnd, target=target)
            if size is not None and i in fixed:
                redo = random.Random(derive_seed(seed, "oracle-repair", i))
                size = choose(ws, redo, unlike=size, target=target) or size
            if size is not None:
                clue = ws.window(*size).text(backward)
                thin = ws.content(*size) < 2
        # A type hint now and then on an inner hop; always when the evidence is too thin to tell the page apart.
        want_hint = i < k - 1 and (thin or i not in fixed and rnd.random() < 0.3)
        hint = _hint(b, later[1:], chain[-1]) if want_hint else None
        parts.append(hop_sentence(clue, backward, hint, phrase))
        hops.append({"sub_question": sub_question(clue, backward, hint, phrase), "bridge": b["title"]})
    parts.append(closer(phrase))
    return " ".join(parts), hops


def subgraph_chain(entities: list[dict], links: list[Evidence], min_hops: int,
                   rnd: random.Random) -> tuple[list[dict], list[bool]] | None:
    """A simple path through the subgraph's links (either direction) with at least ``min_hops`` hops, or None.

    No entity of the path links to one two or more steps further on (the hop between them
    could be skipped), and the last hop follows its link forwards (a backward last hop
    would quote the answer's own page).  The longest path found from seeded starts wins.
    """
    by_id = {e["page_id"]: e for e in entities}
    forward = {(l.src_id, l.dst_id) for l in links}
    adj: dict[str, list[str]] = {}
    for a, b in sorted(forward):
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)
    best: list[str] = []
    starts = sorted(by_id)
    rnd.shuffle(starts)
    enough = min_hops + 3
    for s in starts:
        stack = [[s]]
        while stack and len(best) < enough:
            path = stack.pop()
            if len(path) > len(best) and len(path) > 1 and (path[-2], path[-1]) in forward:
                best = path
            nxt = [n for n in adj.get(path[-1], []) if n not in path and n in by_id
                   and not any((p, n) in forward for p in path[:-1])]
            rnd.shuffle(nxt)
            stack.extend(path + [n] for n in nxt)
        if len(best) >= enough:
            break
    if len(best) - 1 < min_hops:
        return None
    return [by_id[p] for p in best], [(a, b) not in forward for a, b in zip(best, best[1:])]


def answer_of(chain: list[dict]) -> tuple[str, list[str]]:
    """The answer's title and its other names."""
    return chain[-1]["title"], names_of(chain[-1])[1:]


__all__ = ["Window", "Windows", "choose", "evidence_of", "chain_question", "subgraph_chain", "answer_of"]
