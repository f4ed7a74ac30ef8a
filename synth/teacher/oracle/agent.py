"""The oracle's rollout policy: a researcher's ReAct agent that acts only on what it has read.

It knows nothing of the gold chain: its hint is a persona seed.  It reads the question by
the writer's contract (:mod:`synth.teacher.oracle.reading`): the first sentence names the
start, then one blurry clue per hop, then the closing question.  It opens the start, then,
hop by hop, stands on the current page and looks for the clue among the pages that page
links to (``open`` lists them): it searches the clue, and the clue with the titles of the
links it knows nothing of, ranks the links by what it knows of them (a description a search
showed, the clue's relation word in the sentence that links them), opens the likeliest and
checks that the page says it is what the clue describes before moving on
(:mod:`synth.teacher.oracle.memory`).  When nothing fits within its budget it continues from the closest page it saw, or
gives up; a hasty persona sometimes takes a page that only half fits.  So it fails, for the
reasons a real agent fails: a clue it cannot resolve, a budget spent on the wrong links.

Its words say why: each turn names the clue and what the page it judged says it is, in
wordings drawn per turn (:mod:`synth.teacher.oracle.phrases`).  Samples differ by a seeded
persona; every draw is seeded by (question, sample, turn) through ``derive_seed``.  The
policy is stateless: the memory is re-derived from the conversation, so a rollout resumed
from the call cache continues exactly as it would have.  Whenever the path it has walked changes it
says so ("Path so far: …", :func:`~synth.teacher.oracle.memory.note`), as a researcher keeps notes:
with ``rollout.compress_observations`` earlier observations reach it as placeholders, and it goes on
from its own notes, opening the page it stands on again when what it read of it is gone.
"""

from __future__ import annotations

import json
import random
import re

from synth.engine.conversation import GUIDED_CALL
from synth.engine.seeding import derive_seed
from synth.teacher.oracle.memory import (FLOOR, STRONG, TITLES_K, Cand, Memory, Persona, Replays, note, read_notes,
                                         read_steps, remembered, stated, stated_closest, stated_links, stated_out)
from synth.teacher.oracle.phrases import say
from synth.teacher.oracle.reading import excerpt
from synth.tools.analysis import title_key

_TURNS = re.compile(r"at most (\d+) turns")
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")


def persona(seed: int, sample_index: int) -> Persona:
    """The seeded behaviour of one sample."""
    r = random.Random(derive_seed(seed, "persona", sample_index))
    return Persona(
        k=r.choice([5, 5, 10]),
        p_search=r.choice([0.6, 0.9, 1.0]),
        p_titles=r.choice([0.3, 0.6, 0.9]),
        max_opens=r.choice([5, 6, 8]),
        hasty=r.choice([0.0, 0.0, 0.15, 0.3]),
        p_find=r.choice([0.0, 0.15, 0.3]),
        p_direct=r.choice([0.0, 0.5, 1.0]),
        give_up_turn=r.randint(6, 30) if r.random() < 0.03 else None,
        salt=derive_seed(seed, "persona-draws", sample_index),
    )


def _call(name: str, turn: int, **args) -> dict:
    return {"id": f"call_{turn}_0", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _msg(text: str, call: dict | None = None) -> dict:
    msg = {"role": "assistant", "content": text}
    if call is not None:
        msg["tool_calls"] = [call]
    return msg


def _max_turns(messages: list[dict]) -> int:
    # The harness states the budget in its system prompt; a reader of the prompt knows it too.
    m = _TURNS.search(str(messages[0].get("content") or "")) if messages else None
    return int(m.group(1)) if m else 40


def _own_turns(messages: list[dict]) -> int:
    """The agent's own assistant turns so far: every one but those the harness played as guidance."""
    return sum(1 for m in messages if m.get("role") == "assistant"
               and not (m.get("tool_calls") and all(str(c.get("id", "")).startswith(GUIDED_CALL)
                                                    for c in m["tool_calls"])))


def next_turn(messages: list[dict], sample_index: int, seed: int, replays: Replays | None = None) -> dict:
    """The oracle agent's next assistant message for the conversation so far.

    ``seed`` is the persona seed of this question; the question is read from the conversation
    like any model reads it.  ``replays`` (the backend's) continues the memory from an earlier turn's.
    """
    question = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    turn = sum(1 for m in messages if m.get("role") == "assistant") + 1
    me = persona(int(seed), sample_index)
    notes = read_notes(messages)
    mem = remembered(question, me, read_steps(messages), notes, replays)
    rnd = random.Random(derive_seed(seed, "turn", sample_index, turn))
    # The stated budget counts its own turns: guided turns are played before them (the harness still gives it
    # max_turns of its own after a guidance prefix).
    budget = _max_turns(messages) + (turn - 1 - _own_turns(messages))
    return _Turn(mem, me, rnd, turn, budget, notes).decide()


class _Turn:
    """One decision: the memory, the persona and this turn's draws."""

    def __init__(self, mem: Memory, me: Persona, rnd: random.Random, turn: int, max_turns: int,
                 notes: dict | None = None):
        self.m, self.me, self.rnd, self.turn, self.max_turns = mem, me, rnd, turn, max_turns
        self.prefix = self._reaction()
        self.note = self._notes(notes or {})

    def _notes(self, notes: dict) -> str:
        """Its notes, as a researcher keeps them: the path walked when that changed since it last stated it,
        and the links of the page it stands on that a search showed do not fit the clue, when it learnt of
        new ones (only turns that call a tool carry notes: the conversation ends with any other)."""
        m, h = self.m, len(self.m.chain)
        path = m.path if m.chain and m.path != stated(notes, self.turn) else None
        out: list[str] = []
        links = closest = None
        if 1 <= h <= m.k and (best := m.closest(h)) is not None:
            said = stated_closest(notes, h)
            if said is None or said[0] != best[1]:
                closest = (best[1], m.title_of(best[1]), best[0])
        if 1 <= h <= m.k and m.knows_links:
            said = stated_out(notes, h) if path is None else set()
            out = [t for t in m.misfits(h) if title_key(t) not in said]
            if m.sees_here and not m.should_read_on(h) and (path is not None or stated_links(notes, h) is None):
                links = m.links_note(h)
        here = m.title_of(m.chain[-1]) if m.chain else ""
        rel = m.q.clues[h - 1].relation if 1 <= h <= m.k else None
        return note(path, out, links, here, rel, closest)

    def say(self, kind: str, **slots: str) -> str:
        """A wording of ``kind``, after the agent's reaction to the last observation."""
        text = say(kind, self.rnd, **slots)
        return f"{self.prefix} {text}" if self.prefix else text

    def act(self, kind: str, tool: str, args: dict, **slots: str) -> dict:
        """An assistant turn that says ``kind`` (after its reaction and its notes, when it has any) and calls
        ``tool`` with ``args``."""
        text = " ".join(t for t in (self.prefix, self.note, say(kind, self.rnd, **slots)) if t)
        return _msg(text, _call(tool, self.turn, **args))

    def clue(self, h: int) -> str:
        """Clue ``h`` as a phrase to quote back ("an organic compound")."""
        c = self.m.q.clues[h - 1]
        text = c.described + (f", linked where the page speaks of {c.relation}" if c.relation else "")
        return excerpt(text, frozenset(), 20)

    def desc(self, pid: str) -> str:
        """What a page says it is, shortened for quoting it back."""
        d = self.m.pages[pid].definition().split(";")[0].strip()
        return excerpt(d[:1].lower() + d[1:], frozenset(), 14) if d else "a page with no description"

    def _reaction(self) -> str:
        """What the agent makes of the last observation, when it decided something."""
        m, ev = self.m, self.m.event
        if ev is None:
            return ""
        if ev[0] == "failed":
            return say("failed", self.rnd, name=ev[1])
        kind, pid, h = ev
        if h == 0:
            return ""
        kind = {"recall_accept": "recall", "recall_reject": "reject", "recall_hasty": "hasty"}.get(kind, kind)
        if kind == "forced":
            return say("forced", self.rnd, page=m.title_of(pid), clue=self.clue(h))
        if h >= m.k and kind in ("accept", "recall", "hasty"):
            return ""  # the answer says it
        return say(kind, self.rnd, page=m.pages[pid].title, desc=self.desc(pid), clue=self.clue(h))

    def decide(self) -> dict:
        """The next assistant message: give up, answer, find the start, or follow the next clue."""
        m, me = self.m, self.me
        h = len(m.chain)
        if me.give_up_turn is not None and self.turn >= me.give_up_turn or self.turn >= self.max_turns - 1:
            return self.give_up(h)
        if m.k == 0 or h > m.k:
            return self.answer()
        if h == 0:
            return self.start()
        if not m.knows_links:
            # What it read of the page it stands on was compressed away and it noted none of its links: read it
            # again (the placeholder says to).
            pid = m.chain[-1]
            return self.act("reopen", "open", {"page": pid}, page=m.title_of(pid), clue=self.clue(h))
        return self.hop(h)

    def give_up(self, h: int) -> dict:
        """Say so and answer "unknown" (the correctness filter drops the trace)."""
        clue = self.clue(min(max(h, 1), self.m.k)) if self.m.k else "the next page"
        return _msg(self.say("give_up", clue=clue) + " <answer>unknown</answer>")

    def answer(self) -> dict:
        """Every clue followed: answer with the title of the page reached."""
        m = self.m
        title = m.title_of(m.chain[-1])
        if m.k == 0 or len(m.chain) < 2:
            return _msg(f"The question names no hop to follow, so the answer is where I stand. <answer>{title}</answer>")
        prev = m.title_of(m.chain[-2])
        return _msg(f"{self.say('answer', clue=self.clue(m.k), prev=prev, title=title)} <answer>{title}</answer>")

    def start(self) -> dict:
        """Open the start: a result the first sentence names, or the title as the question gives it, or search."""
        m, opening = self.m, excerpt(self.m.q.opening, frozenset(), 24)
        cands = m.start_candidates()
        if cands:
            r = cands[0]
            return self.act("open_start", "open", {"page": r.page_id}, title=r.title, opening=opening)
        name = m.q.start
        untried = title_key(name) not in m.tried[0] and title_key(name) not in m.dead
        if not m.queries[0] and (not untried or self.rnd.random() >= self.me.p_direct):
            return self.act("start", "search", {"query": name}, opening=opening)
        if untried:
            kind = "open_direct" if not m.queries[0] else "open_guess"
            return self.act(kind, "open", {"page": name}, title=name, name=name)
        if len(m.queries[0]) < 2:
            return self.act("start_again", "search", {"query": m.q.opening}, opening=opening, query=m.q.opening)
        return self.give_up(1)

    def hop(self, h: int) -> dict:
        """Follow clue ``h`` from the current page: read on, search, check with ``find``, or open a candidate."""
        m, me, rnd = self.m, self.me, self.rnd
        clue, c = m.q.clues[h - 1], self.clue(h)
        if m.should_read_on(h) and ("open", json.dumps({"offset": m.here.next_offset, "page": m.here.page_id},
                                                        sort_keys=True)) not in m.calls:
            here = m.here
            return self.act("read_on", "open", {"page": here.page_id, "offset": here.next_offset},
                            page=here.title, clue=c)
        here = m.title_of(m.chain[-1])
        cands = m.candidates(h)
        strong = bool(cands) and cands[0].score >= STRONG
        query = m.next_query(h)
        # A researcher searches the clue before opening links it knows nothing of, and searches again
        # with the links' titles while that shows nothing linked that fits -- unless impatient.
        if strong:
            return self.open(h, cands[0], here, c)
        if query is not None and (not m.queries[h] or rnd.random() < me.p_search):
            return self.search(h, query, here, c)
        if cands and m.opens[h] < me.max_opens and cands[0].score > FLOOR:
            return self.open(h, cands[0], here, c)
        if query is not None and m.opens[h] < me.max_opens:
            return self.search(h, query, here, c)
        return self.give_up(h)

    def search(self, h: int, query: str, here: str, clue: str) -> dict:
        """Search for hop ``h``'s clue."""
        titles = sum(1 for c in self.m.candidates(h) if c.title in query)
        # Room for every titled page and the pages that outrank them (the page it stands on, which lists them all).
        k = min(TITLES_K, 2 * titles + 2) if titles else self.me.k
        return self.act("search", "search", {"query": query, "k": k}, clue=clue, query=query, page=here)

    def open(self, h: int, cand: Cand, here: str, clue: str) -> dict:
        """Open candidate ``cand`` (first checking its link's passage with ``find``, now and then), saying why."""
        m = self.m
        # The link's anchor text where it sees the page; else (its observation compressed away) the title, as
        # its note of the links gives it, without a disambiguation.
        text = cand.anchor if m.sees_here else _PAREN.sub("", cand.title)
        if text and text not in m.finds[h] and self.rnd.random() < self.me.p_find:
            args = {"page": m.chain[-1], "text": text}
            if ("find", json.dumps(args, sort_keys=True)) not in m.calls:
                return self.act("find", "find", args, name=cand.title, page=here, anchor=text)
        why = ""
        rel = m.q.clues[h - 1].relation
        if rel and cand.score >= 0.5:
            why = f", in the passage on {rel}"
        elif cand.page_id and cand.page_id in m.results[h]:
            d = m.results[h][cand.page_id].description
            why = f", described as {d[:1].lower() + d[1:]}" if d else ", which the search also returned"
        return self.act("open_link", "open", {"page": cand.title}, clue=clue, page=here, name=cand.title, why=why)


__all__ = ["next_turn", "persona"]
