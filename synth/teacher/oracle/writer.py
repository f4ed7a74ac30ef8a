"""The offline oracle's question writer: a research question through every entity of a chain.

Each hop gets a blurry clue that only the previous page resolves
(:mod:`synth.teacher.oracle.clues`): locally unique among the pages the previous entity
links to, and found by no single search.  The question names the start by its exact
title, gives one sentence per hop in chain order (:mod:`synth.teacher.oracle.frames`), and
asks for the last entity; it quotes no page text.  When some hop has no clue that
qualifies, the writer declines with :class:`NoClue` (the stage drops the source as
``no_clue``): a question whose hop can be skipped or entered by one search is worse than
none.  A repair (``fix``) chooses the named hops' clues anew; ``short`` asks for short
frames (a ``length`` repair).  Every draw comes from ``random.Random`` streams seeded per
question, hop and candidate.
"""

from __future__ import annotations

import random

from synth.engine.records import Evidence
from synth.engine.seeding import derive_seed
from synth.teacher.oracle.clues import ClueMaker, HopContext
from synth.teacher.oracle.frames import closer, opener
from synth.teacher.tasks import CorpusView
from synth.text.question_text import giveaways


WHOLE_TRIES = 4  # questions composed for one chain before a whole-question search that finds it gives up


class NoClue(Exception):
    """No clue qualifies for hop ``hop`` (0-based); ``why`` lists what each candidate failed."""

    def __init__(self, hop: int, title: str, why: list[str]):
        super().__init__(f"hop {hop + 1} (to {title!r}): no clue is locally unique and globally ambiguous")
        self.hop, self.title, self.why = hop, title, why


def chain_question(chain: list[dict], seed: int, corpus: CorpusView,
                   fix: frozenset[int] | None = frozenset(), short: bool = False,
                   maker: ClueMaker | None = None) -> tuple[str, list[dict]]:
    """Question text and hops (``sub_question``, ``bridge``) through every entity of ``chain``, in order.

    Each entity links to the next; ``corpus`` is what the clues are checked against.  ``fix`` names hops
    (0-based) whose clue a repair chooses anew (None: every hop).  The whole question is searched too
    (every adversary of the corpus view): when a search for it returns a page of the chain past the
    start, the clue of the hop into that page is chosen anew (its next candidate that qualifies), up to
    :data:`WHOLE_TRIES` times.  A repair starts from the clues the first question had and changes only
    the hops it names, for the whole question's search too.  Raises :class:`NoClue` when a hop has no
    clue, or when the whole question is still found.
    """
    maker = maker or ClueMaker(corpus)
    skips: dict[int, int] = {}
    if fix:  # the first question's choices, which a repair keeps for the hops it does not name
        try:
            skips = _compose(chain, seed, maker, frozenset(), short, {}, None)[2]
        except NoClue:
            skips = {}
    named = frozenset(range(len(chain))) if fix is None else fix
    text, hops, _ = _compose(chain, seed, maker, named, short, skips, named if fix else None)
    return text, hops


def _compose(chain: list[dict], seed: int, maker: ClueMaker, fixed: frozenset[int], short: bool,
             skips: dict[int, int], movable: frozenset[int] | None) -> tuple[str, list[dict], dict[int, int]]:
    """:func:`chain_question`'s loop: the text, the hops, and the candidates passed over per hop for the
    whole question's sake (``movable``: the hops whose clue that may change; None: any)."""
    gives = [giveaways(e) for e in chain]
    free = entry_allowance(maker.corpus, len(chain) - 1)
    where = {e["page_id"]: j for j, e in enumerate(chain) if j >= free + 1}
    skips = dict(skips)
    for _ in range(WHOLE_TRIES):
        phrasing = random.Random(derive_seed(seed, "oracle-phrasing", 0))
        parts = [opener(chain[0]["title"], phrasing)]
        hops = []
        for i in range(len(chain) - 1):
            h = HopContext(chain, i, gives[i + 1:], seed, short, free)
            clue, why = maker.choose(h, fix=i in fixed, skip=skips.get(i, 0))
            if clue is None:
                raise NoClue(i, chain[i + 1]["title"], why)
            parts.append(clue.sentence)
            hops.append({"sub_question": clue.sub_question, "bridge": chain[i + 1]["title"]})
        parts.append(closer(phrasing))
        text = " ".join(parts)
        found = [where[p] for p in maker.search(text) if p in where]
        if not found:
            return text, hops, skips
        hop = max(found) - 1  # the hop into the latest page found: its clue is chosen anew
        if movable is not None and hop not in movable:
            hop = max(movable)  # a repair changes only the hops it names
        skips[hop] = skips.get(hop, 0) + 1
    title = chain[max(found)]["title"]
    raise NoClue(hop, chain[hop + 1]["title"], [f"one search for the whole question finds {title!r}"])


def entry_allowance(corpus: CorpusView, hops: int) -> int:
    """How many chain pages after the start a search may enter for a question of ``hops`` hops: what
    ``questions.min_effective_depth`` allows (the corpus view's ``free``; 0, every hop needed, without it)."""
    free = getattr(corpus, "free", None)
    return free(hops) if callable(free) else 0


def clued_chain(entities: list[dict], links: list[Evidence], min_hops: int, rnd: random.Random, seed: int,
                corpus: CorpusView, maker: ClueMaker | None = None, budget: int = 96,
                fix: frozenset[int] | None = frozenset(), short: bool = False
                ) -> tuple[list[dict], str, list[dict]]:
    """A chain through the subgraph that every hop of has a clue, and its question (``chain_question``'s
    text and hops): the neighbourhood is widened rather than a clue quoted.

    A depth-first search along the subgraph's links (as :func:`subgraph_chain`: each entity links to
    the next, none to one two or more steps on), from seeded starts, that extends a path only by a
    page its last page can be clued to (:meth:`ClueMaker.choose` for that hop), and composes the whole
    question once a path has ``min_hops`` hops or more; the longest question composed within
    ``budget`` hop checks (or the first of ``min_hops + 2`` hops) wins.  Raises :class:`NoClue` for the
    hop that stopped most paths when none can be composed.
    """
    maker = maker or ClueMaker(corpus)
    by_id = {e["page_id"]: e for e in entities}
    forward = {(l.src_id, l.dst_id) for l in links}
    adj: dict[str, list[str]] = {}
    for a, b in sorted(forward):
        adj.setdefault(a, []).append(b)
    starts = sorted(by_id)
    rnd.shuffle(starts)
    enough, left = min_hops + 2, [budget]
    best: tuple[list[dict], str, list[dict]] | None = None
    failed: dict[tuple[str, str], tuple[int, str, list[str]]] = {}  # (a, b) -> the hop's NoClue facts

    def clued(path: list[str], n: str) -> bool:
        chain = [by_id[p] for p in path + [n]]
        i = len(path) - 1
        key = (path[-1], n)
        if key in failed:
            return False
        left[0] -= 1
        clue, why = maker.choose(HopContext(chain, i, [giveaways(by_id[n])], seed, short,
                                            entry_allowance(corpus, min_hops)))
        if clue is None:
            failed[key] = (i, by_id[n]["title"], why)
        return clue is not None

    def grow(path: list[str]) -> None:
        nonlocal best
        if len(path) - 1 >= min_hops and (best is None or len(path) > len(best[0])):
            try:
                chain = [by_id[p] for p in path]
                text, hops = chain_question(chain, seed, corpus, fix=fix, short=short, maker=maker)
                best = (chain, text, hops)
            except NoClue as e:
                failed.setdefault((path[e.hop], path[e.hop + 1]), (e.hop, e.title, e.why))
        if best is not None and len(best[0]) - 1 >= enough:
            return
        nxt = [n for n in adj.get(path[-1], []) if n not in path and n in by_id
               and not any((p, n) in forward for p in path[:-1])]
        rnd.shuffle(nxt)
        for n in nxt:
            if left[0] <= 0 or best is not None and len(best[0]) - 1 >= enough:
                return
            if clued(path, n):
                grow(path + [n])

    for s in starts:
        if left[0] <= 0 or best is not None and len(best[0]) - 1 >= enough:
            break
        grow([s])
    if best is not None:
        return best
    if failed:
        hop, title, why = max(failed.values(), key=lambda f: f[0])
        raise NoClue(hop, title, why)
    raise NoClue(0, entities[0]["title"] if entities else "", ["no chain of enough links"])


def subgraph_chain(entities: list[dict], links: list[Evidence], min_hops: int,
                   rnd: random.Random) -> list[dict] | None:
    """A simple path along the subgraph's links with at least ``min_hops`` hops, or None.

    Each entity links to the next, as a solver standing on a page sees its links; no entity of
    the path links to one two or more steps further on (the hop between them could be
    skipped).  The longest path found from seeded starts wins.
    """
    by_id = {e["page_id"]: e for e in entities}
    forward = {(l.src_id, l.dst_id) for l in links}
    adj: dict[str, list[str]] = {}
    for a, b in sorted(forward):
        adj.setdefault(a, []).append(b)
    best: list[str] = []
    starts = sorted(by_id)
    rnd.shuffle(starts)
    enough = min_hops + 3
    for s in starts:
        stack = [[s]]
        while stack and len(best) < enough:
            path = stack.pop()
            if len(path) > len(best) and len(path) > 1:
                best = path
            nxt = [n for n in adj.get(path[-1], []) if n not in path and n in by_id
                   and not any((p, n) in forward for p in path[:-1])]
            rnd.shuffle(nxt)
            stack.extend(path + [n] for n in nxt)
        if len(best) >= enough:
            break
    if len(best) - 1 < min_hops:
        return None
    return [by_id[p] for p in best]


__all__ = ["NoClue", "chain_question", "clued_chain", "subgraph_chain"]
