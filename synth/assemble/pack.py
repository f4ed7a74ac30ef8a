"""Packing one long context: exact token accounting, tiered fill, rendering.

Token accounting.  Every page is rendered once as its *segment* — the separator
plus the document with index 1 (``"\n\nDocument [1] (Title)\n<text>"``) — and the
segments are tokenized in large batches with the fast tokenizer; the count is cached
per page id and reused by every question and length.  Indices other than 1 add
``index_extra(i)`` tokens (measured once per index on a dummy document), and the
frame (preamble, question block, answer) is counted once per question.  The sum of
these is an *estimate* of the row's length: a tokenizer may merge across the seams
of a concatenation.  The row's ``n_tokens`` is therefore always measured on the final
text (:mod:`synth.assemble.stage` re-tokenizes every row once), and a row that misses the
window is repaired — :meth:`Packer.adjust` moves the end of its one cut tier-2 page
(or cuts its last tier-2 page) by the miss, everything else in place — or, when that
page cannot take it, planned again with the band shifted by the error just measured.

Fill.  With ``guard = slack // 4``, the plan aims at ``[L - slack + guard, L - guard]``
so that seam errors of up to ``guard`` tokens either way still land in ``[L - slack,
L]``.  Gold pages go in whole, always.  Tier-1 pages go in, in order, when they fit
(a page that does not fit is passed over; tier-1 is never cut).  Tier-2 candidates —
BM25 neighbours, then random pages — go in whole while they fit; once the estimate is
in the band, the first candidate that does not fit ends the fill.  Below the band,
``fill_max_skips`` too-long candidates are passed over; after that (or when every
candidate has been tried) a passed-over tier-2 page is cut at a token boundary to land
on the band's top, if ``truncate_fill`` is on.  A cut page keeps its header and at least
two tokens of text (if the gap is smaller, the last whole tier-2 page is given back and
a longer page cut instead).  At most one page per row is cut, and it is always tier 2;
the row names it in ``truncated_page_id``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from synth.assemble.config import AssembleConfig
from synth.tokenizer.counts import TokenCounter  # exact batched counts, shared with the filter's token counts
from synth.tools.analysis import render_paragraph  # the one place KILT markup becomes Markdown (the tools show the same)

_DUMMY_TITLE, _DUMMY_TEXT = "Title", "Text."


def page_body(paragraphs: list[str] | None) -> str:
    """The text of a page as the context shows it: rendered non-empty paragraphs, one per line."""
    out = [render_paragraph(p) for p in paragraphs or ()]
    return "\n".join(p for p in out if p)


class RandomPages:
    """A question's random tier-2 candidates: a random permutation of the page population,
    drawn lazily (sparse Fisher-Yates, O(1) a draw), skipping excluded pages.

    The order depends only on the seed and the population, never on how many pages
    were drawn before or in which batches, so extending the list is deterministic.
    """

    __slots__ = ("_pop", "_rng", "_i", "_swaps", "_exclude", "ids", "exhausted")

    def __init__(self, population: list[str], rng: random.Random, exclude: set[str]):
        self._pop, self._rng, self._exclude = population, rng, exclude
        self._i, self._swaps = 0, {}
        self.ids: list[str] = []
        self.exhausted = not population

    def extend(self, n: int) -> list[str]:
        """Draw up to ``n`` more candidate ids (fewer once the population is used up); returns them."""
        pop, swaps, rng, size = self._pop, self._swaps, self._rng, len(self._pop)
        new: list[str] = []
        while len(new) < n and self._i < size:
            i = self._i
            j = rng.randrange(i, size)
            vj = swaps.get(j, j)
            swaps[j] = swaps.pop(i, i)
            self._i = i + 1
            pid = pop[vj]
            if pid not in self._exclude:
                new.append(pid)
        self.exhausted = self._i >= size
        self.ids.extend(new)
        return new


@dataclass(slots=True)
class Job:
    """One accepted question and its candidate pages, shared by all its target lengths."""

    question_id: str
    question: str
    answer: str
    answer_aliases: list[str]
    gold: list[str]  # path pages, deduplicated, in path order
    tier1: list[str]  # retrieved non-gold pages, in order of first retrieval
    bm25: list[str]  # BM25 neighbours, excluding gold and tier-1
    random: RandomPages
    frame: int = 0  # tokens of preamble + question block + answer (estimate)


@dataclass(slots=True)
class Plan:
    """The documents chosen for one (question, L), and their estimated token count."""

    docs: list[tuple[str, int]] = field(default_factory=list)  # (page id, tier) in fill order
    est: int = 0
    cut: tuple[str, int] | None = None  # (tier-2 page, tokens of its segment to keep)
    gold_only: bool = False  # the gold pages alone are over the budget
    exhausted: bool = False  # every candidate was tried: more text cannot be had
    need: int = 0  # > 0: the loaded random candidates ran out; load (draw about this many more) and plan again


class Packer:
    """Page segments and their token counts, and the planning and rendering of rows."""

    def __init__(self, cfg: AssembleConfig, counter: TokenCounter):
        self.cfg, self.counter = cfg, counter
        self.guard = cfg.slack // 4
        self._counts: dict[str, int] = {}  # page id -> tokens of its segment (kept across passes)
        self._texts: dict[str, tuple[str, str]] = {}  # page id -> (title, body), pages loaded this pass
        self._empty: set[str] = set()  # pages with no text: never distractors
        self._pre, _, self._post = cfg.doc_template.partition("{text}")
        self._extra: list[int] = [0, 0]
        self._heads: dict[str, int] = {}  # page id -> tokens of its separator + header (pages cut short)
        # Without a preamble the first document has no separator before it.
        first = cfg.preamble if cfg.preamble else None
        self._preamble_tokens = counter.count([first])[0] if first else -counter.count([cfg.doc_separator])[0]

    # ---- pages -------------------------------------------------------------------------------
    def segment(self, title: str, body: str, index: int = 1) -> str:
        """A page's segment: the separator and the document at position ``index``."""
        return self.cfg.doc_separator + self.cfg.doc_template.format(index=index, title=title, text=body)

    def add_pages(self, ids: list[str], titles: list[str], bodies: list[str]) -> None:
        """Hold these pages' text for rendering and count the segments of those not counted before."""
        todo = []
        for pid, title, body in zip(ids, titles, bodies):
            self._texts[pid] = (title, body)
            if not body:
                self._empty.add(pid)
            if pid not in self._counts:
                todo.append(pid)
        step = self.cfg.tokenize_batch
        for s in range(0, len(todo), step):
            chunk = todo[s:s + step]
            n = self.counter.count([self.segment(*self._texts[p]) for p in chunk])
            self._counts.update(zip(chunk, n))

    def unloaded(self, ids) -> set[str]:
        """The pages among ``ids`` whose text this pass does not hold yet."""
        return {p for p in ids if p not in self._texts}

    def mark_absent(self, ids) -> None:
        """Pages the corpus was asked for and does not have: never candidates (a gold one drops its question)."""
        self._empty.update(p for p in ids if p not in self._texts)

    def loaded(self, pid: str) -> bool:
        """Whether this pass holds the page (its text may be empty)."""
        return pid in self._texts

    def usable(self, pid: str) -> bool:
        """Whether the page can be a distractor: loaded this pass, with text."""
        return pid in self._texts and pid not in self._empty

    @property
    def pages_counted(self) -> int:
        """Pages whose segment tokens are known (kept across passes)."""
        return len(self._counts)

    def drop_texts(self) -> None:
        """Forget the page text of this pass (the counts stay)."""
        self._texts.clear()

    def mean_tokens(self) -> float:
        """Mean segment tokens of the pages counted so far (sizes random draws)."""
        return sum(self._counts.values()) / len(self._counts) if self._counts else 256.0

    def index_extra(self, i: int) -> int:
        """Tokens a document at position ``i`` has beyond the same document at position 1."""
        if i >= len(self._extra):
            start, stop = len(self._extra), max(2 * len(self._extra), i + 1)
            base = self.counter.count([self.segment(_DUMMY_TITLE, _DUMMY_TEXT, 1)])[0]
            segs = [self.segment(_DUMMY_TITLE, _DUMMY_TEXT, k) for k in range(start, stop)]
            self._extra.extend(n - base for n in self.counter.count(segs))
        return self._extra[i]

    def frames(self, jobs: list[Job]) -> None:
        """Count each job's frame: preamble, separator + question block, and the answer."""
        tails = [self.cfg.doc_separator + self.tail(j) + j.answer for j in jobs]
        for j, n in zip(jobs, self.counter.count(tails)):
            j.frame = self._preamble_tokens + n

    def tail(self, job: Job) -> str:
        return self.cfg.question_template.format(question=job.question)

    # ---- planning ----------------------------------------------------------------------------
    def plan(self, job: Job, length: int, error: int = 0) -> Plan:
        """Choose the documents of (job, length) so the estimate lands in the band.

        ``error`` is how many tokens a previous measure of this pair found beyond its
        estimate (seams that do not add up); the band is shifted by it.
        """
        counts, extra = self._counts, self.index_extra
        hi = length - self.guard - error
        lo = length - self.cfg.slack + self.guard - error
        p = Plan(est=job.frame)
        for g in job.gold:
            p.est += counts[g] + extra(len(p.docs) + 1)
            p.docs.append((g, 0))
        if p.est > hi:
            p.gold_only = True
            return p
        for t in job.tier1:
            c = counts[t] + extra(len(p.docs) + 1)
            if p.est + c <= hi:
                p.est += c
                p.docs.append((t, 1))
        skipped: list[str] = []
        for batch in (job.bm25, None):
            seq = batch if batch is not None else job.random.ids
            for pid in seq:
                if pid in self._empty:
                    continue
                c = counts.get(pid)
                if c is None:  # drawn but not loaded yet: load, then plan again
                    p.need = int(1.25 * (hi - p.est) / self.mean_tokens()) + 16
                    return p
                c += extra(len(p.docs) + 1)
                if p.est + c <= hi:
                    p.est += c
                    p.docs.append((pid, 2))
                    continue
                if p.est >= lo:
                    return p
                skipped.append(pid)
                if len(skipped) > self.cfg.fill_max_skips:
                    return self._close(p, skipped, hi, lo)
        if p.est < lo and not job.random.exhausted:
            p.need = int(1.25 * (hi - p.est) / self.mean_tokens()) + 16
            return p
        return self._close(p, skipped, hi, lo)

    def _close(self, p: Plan, skipped: list[str], hi: int, lo: int) -> Plan:
        """End of the whole-page fill.  Below the band, cut a passed-over tier-2 page to land on
        ``hi``; a plan still below the band is ``exhausted`` (these rules cannot add more text)."""
        if p.est < lo and skipped and self.cfg.truncate_fill:
            self._count_heads(skipped)
            y = self._cuttable(skipped, hi - p.est - self.index_extra(len(p.docs) + 1))
            last = len(p.docs) - 1
            if y is None and p.docs[last][1] == 2:
                # The gap is too small to hold a header and some text: give back the last whole
                # tier-2 page and cut into a longer one instead.
                pid = p.docs.pop()[0]
                p.est -= self._counts[pid] + self.index_extra(last + 1)
                y = self._cuttable(skipped, hi - p.est - self.index_extra(last + 1))
                if y is None:
                    p.docs.append((pid, 2))
                    p.est += self._counts[pid] + self.index_extra(last + 1)
            if y is not None:
                extra = self.index_extra(len(p.docs) + 1)
                keep = hi - p.est - extra
                p.cut = (y, keep)
                p.est += keep + extra
                p.docs.append((y, 2))
        p.exhausted = p.est < lo
        return p

    def adjust(self, p: Plan, measured: int, target: int, tried: dict) -> Plan | None:
        """The same documents with the cut page — or, to shorten, the last tier-2 page, now cut —
        moved from ``measured`` towards ``target`` tokens; None when that page cannot take it.

        The document list keeps its order, so the shuffle puts every page where it was and only
        the end of one page changes; the re-measure then sees nearly the same seams.  ``tried``
        (``(page, kept tokens) -> measured``, kept by the caller across rounds) keeps a cut whose
        end merges oddly with what follows from bouncing between two lengths: a length already
        tried is stepped past, one token at a time.
        """
        if p.cut is not None:
            pid, keep = p.cut
        else:
            pid = p.docs[-1][0] if p.docs and p.docs[-1][1] == 2 else None
            if pid is None or not self.cfg.truncate_fill:
                return None
            keep = self._counts[pid]
        tried[(pid, keep)] = measured
        step = target - measured
        k = keep + step
        if (pid, k) in tried:
            d = 1 if step > 0 else -1
            k = keep + d
            while (pid, k) in tried:
                k += d
        self._count_heads([pid])
        if not self._heads[pid] + 2 <= k < self._counts[pid]:
            return None
        return Plan(docs=list(p.docs), est=p.est + k - keep, cut=(pid, k))

    def _count_heads(self, ids: list[str]) -> None:
        todo = [pid for pid in ids if pid not in self._heads]
        segs = [self.cfg.doc_separator + self._pre.format(index=1, title=self._texts[pid][0]) for pid in todo]
        self._heads.update(zip(todo, self.counter.count(segs)))

    def _cuttable(self, skipped: list[str], keep: int) -> str | None:
        """The first passed-over page that, cut to ``keep`` tokens, keeps its header and some text."""
        for pid in skipped:
            if self._heads[pid] + 2 <= keep < self._counts[pid]:
                return pid
        return None

    # ---- rendering ---------------------------------------------------------------------------
    def render(self, job: Job, plan: Plan, rng: random.Random) -> tuple[str, list[tuple[str, int]], list[int], bool]:
        """The prompt of a plan, its documents shuffled by ``rng``.

        Returns (prompt, documents in prompt order, their segment tokens, whether a page was cut).
        """
        docs = list(plan.docs)
        bodies = {pid: self._texts[pid][1] for pid, _ in docs}
        cut_id, cut = None, False
        if plan.cut is not None:
            cut_id, keep = plan.cut
            title, body = self._texts[cut_id]
            seg = self.segment(title, body)
            start = len(self.cfg.doc_separator) + len(self._pre.format(index=1, title=title))
            end = self.counter.cut(seg, keep)
            if end > start:
                bodies[cut_id], cut = body[: end - start], True
            else:  # the budget does not reach past the header: leave the page out
                docs = [d for d in docs if d[0] != cut_id]
        rng.shuffle(docs)
        parts = [self.cfg.preamble] if self.cfg.preamble else []
        fmt = self.cfg.doc_template.format
        tokens = []
        for i, (pid, _) in enumerate(docs, 1):
            parts.append(fmt(index=i, title=self._texts[pid][0], text=bodies[pid]))
            n = plan.cut[1] if cut and pid == cut_id else self._counts[pid]
            tokens.append(n + self.index_extra(i))
        parts.append(self.tail(job))
        return self.cfg.doc_separator.join(parts), docs, tokens, cut


__all__ = ["TokenCounter", "RandomPages", "Job", "Plan", "Packer", "page_body", "render_paragraph"]
