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


class NoClue(Exception):
    """No clue qualifies for hop ``hop`` (0-based); ``why`` lists what each candidate failed."""

    def __init__(self, hop: int, title: str, why: list[str]):
        super().__init__(f"hop {hop + 1} (to {title!r}): no clue is locally unique and globally ambiguous")
        self.hop, self.title, self.why = hop, title, why


def chain_question(chain: list[dict], seed: int, corpus: CorpusView,
                   fix: frozenset[int] | None = frozenset(), short: bool = False,
                   maker: ClueMaker | None = None) -> tuple[str, list[dict]]:
    """Question text and hops (``sub_question``, ``bridge``) through every entity of ``chain``, in order.

    Each entity links to the next; ``corpus`` is what the clues are checked against.  ``fix`` names hops (0-based) whose clue a repair chooses anew (None: every
    hop).  Raises :class:`NoClue` when a hop has none.
    """
    maker = maker or ClueMaker(corpus)
    fixed = frozenset(range(len(chain))) if fix is None else fix
    phrasing = random.Random(derive_seed(seed, "oracle-phrasing", 0))
    gives = [giveaways(e) for e in chain]
    parts = [opener(chain[0]["title"], phrasing)]
    hops = []
    for i in range(len(chain) - 1):
        h = HopContext(chain, i, gives[i + 1:], seed, short)
        clue, why = maker.choose(h, fix=i in fixed)
        if clue is None:
            raise NoClue(i, chain[i + 1]["title"], why)
        parts.append(clue.sentence)
        hops.append({"sub_question": clue.sub_question, "bridge": chain[i + 1]["title"]})
    parts.append(closer(phrasing))
    return " ".join(parts), hops


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


__all__ = ["NoClue", "chain_question", "subgraph_chain"]
