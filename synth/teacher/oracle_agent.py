"""The oracle's rollout policy: an honest ReAct agent that acts only on what it has read.

It knows nothing of the gold chain: its hint is a persona seed.  It reads the question
by the writer's contract (:mod:`synth.teacher.oracle_agent_reading`): the first sentence
names the start, then one quoted clue per hop, then the closing question.  It searches
for the start and opens the result whose title the first sentence holds; then, hop by
hop, it finds the clue's quoted passage in the page it stands on and opens the name
standing where the quote has its blank (a quote without a blank is a passage of the page
sought, so it searches for it).  Leads come from the question and observations only
(:mod:`synth.teacher.oracle_agent_leads`).  It checks every page it opens: a page is
kept when it holds the passage the *next* clue quotes (the last page, when the clue
framed its name); otherwise it backtracks to its next lead and, when none is left,
continues from the best page it saw.  So it can fail, for the reasons a real agent fails.

Its words say why: each turn quotes the clue and the passage of the observation that
matches it, in wordings drawn per turn (:mod:`synth.teacher.oracle_agent_phrases`).
Samples differ by a seeded persona (how often it picks the runner-up, searches before
opening, double-checks with ``find``, opens by id, how strict its check is, whether it
gives up); every draw is seeded by (question, sample, turn) through ``derive_seed``.  The
policy is stateless: :class:`synth.teacher.oracle_agent_memory.Memory` re-derives what it
has read and where it stands from the conversation, so a rollout resumed from the call
cache continues exactly as it would have.  (With ``rollout.compress_observations`` earlier
observations reach it as placeholders; it cannot re-derive what they said, so it stops
with "unknown" rather than act on a remembered guess.)
"""

from __future__ import annotations

import json
import random
import re

from synth.engine.seeding import derive_seed
from synth.teacher.oracle_agent_leads import FLOOR, MAX_OPENS, MAX_SEARCHES, Cand, Persona
from synth.teacher.oracle_agent_memory import Memory, read_steps, remembered
from synth.teacher.oracle_agent_pages import mentions
from synth.teacher.oracle_agent_phrases import say
from synth.teacher.oracle_agent_reading import excerpt

_TURNS = re.compile(r"at most (\d+) turns")


def persona(seed: int, sample_index: int) -> Persona:
    """The seeded behaviour of one sample."""
    r = random.Random(derive_seed(seed, "persona", sample_index))
    return Persona(
        p_wrong=r.choice([0.0, 0.0, 0.1, 0.2]),
        p_search=r.choice([0.0, 0.3, 0.6]),
        p_find=r.choice([0.0, 0.15, 0.3]),
        p_ids=r.choice([0.0, 0.5, 1.0]),
        strict=r.choice([0.34, 0.4, 0.5]),
        query_order=tuple(r.sample(range(3), 3)),
        give_up_turn=r.randint(6, 30) if r.random() < 0.03 else None,
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


def next_turn(messages: list[dict], sample_index: int, hint: dict) -> dict:
    """The oracle agent's next assistant message for the conversation so far.

    ``hint`` holds only ``seed``, the persona seed of this question; the question is
    read from the conversation like any model reads it.
    """
    question = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    seed = int(hint.get("seed", 0))
    turn = sum(1 for m in messages if m.get("role") == "assistant") + 1
    me = persona(seed, sample_index)
    mem = remembered(question, me, read_steps(messages))
    rnd = random.Random(derive_seed(seed, "turn", sample_index, turn))
    return _Turn(mem, me, rnd, turn, _max_turns(messages)).decide()


class _Turn:
    """One decision: the memory, the persona and this turn's draws."""

    def __init__(self, mem: Memory, me: Persona, rnd: random.Random, turn: int, max_turns: int):
        self.m, self.me, self.rnd, self.turn, self.max_turns = mem, me, rnd, turn, max_turns
        self.prefix = self._reaction()

    def say(self, kind: str, **slots: str) -> str:
        """A wording of ``kind``, after the agent's reaction to the last observation."""
        text = say(kind, self.rnd, **slots)
        return f"{self.prefix} {text}" if self.prefix else text

    def act(self, kind: str, tool: str, args: dict, **slots: str) -> dict:
        """An assistant turn that says ``kind`` and calls ``tool`` with ``args``."""
        return _msg(self.say(kind, **slots), _call(tool, self.turn, **args))

    def clue(self, h: int) -> str:
        """Clue ``h``'s quote, shortened for quoting it back."""
        c = self.m.q.clues[h - 1]
        return excerpt(c.quote, c.terms, 16)

    def _reaction(self) -> str:
        """What the agent makes of the last observation, when it decided something."""
        m, ev = self.m, self.m.event
        if ev is None or ev[0] not in ("accept", "reject", "forced", "failed", "recall_accept", "recall_reject"):
            return ""
        if ev[0] == "failed":
            return self.rnd.choice([f'There is no page titled "{ev[1]}".', f'"{ev[1]}" is not a page title here.',
                                    f'Opening "{ev[1]}" failed.'])
        kind, pid, h = ev
        title = m.pages[pid].title
        if kind.endswith("accept") and h >= m.k or m.k == 0:
            return ""
        kind = {"recall_accept": "recall", "recall_reject": "reject"}.get(kind, kind)
        if kind == "forced":
            return say("accept_weak", self.rnd, page=title, clue=self.clue(max(h, 1)))
        nxt = min(h + 1, m.k)
        passage = m.best_passage(pid, nxt) if kind in ("accept", "recall") else ""
        return say(kind, self.rnd, page=title, clue=self.clue(nxt), passage=excerpt(passage, m.q.clues[nxt - 1].terms))

    def decide(self) -> dict:
        """The next assistant message: give up, answer, find the start, or follow the next clue."""
        m, me = self.m, self.me
        h = len(m.chain)
        if me.give_up_turn is not None and self.turn >= me.give_up_turn or self.turn >= self.max_turns - 1:
            return self.give_up(h)
        if m.omitted:
            # Earlier observations were compressed away: what they said cannot be re-derived, and acting on a
            # remembered guess is what this agent never does.
            return _msg(say("lost", self.rnd) + " <answer>unknown</answer>")
        if m.k == 0 or h > m.k:
            return self.answer()
        if h == 0:
            return self.start()
        return self.hop(h)

    def give_up(self, h: int) -> dict:
        """Say so and answer "unknown" (the correctness filter drops the trace)."""
        clue = self.clue(min(max(h, 1), self.m.k)) if self.m.k else ""
        return _msg(self.say("give_up", clue=clue) + " <answer>unknown</answer>")

    def answer(self) -> dict:
        """Every clue followed: answer with the title of the page reached, quoting the last link."""
        m = self.m
        title = m.pages[m.chain[-1]].title
        if m.k == 0 or len(m.chain) < 2:
            return _msg(f"The question names no hop to follow, so the answer is where I stand. <answer>{title}</answer>")
        prev = m.pages[m.chain[-2]]
        passage = next((s for s in prev.sentences() if mentions(s, title)), "")
        text = say("answer", self.rnd, clue=self.clue(m.k), prev=prev.title, title=title,
                   passage=excerpt(passage, m.q.clues[-1].terms) or title)
        return _msg(f"{text} <answer>{title}</answer>")

    def start(self) -> dict:
        """Find the start: open a result the first sentence names, else search, else open the name."""
        m, opening = self.m, excerpt(self.m.q.opening, frozenset(), 24)
        cands = m.start_candidates()
        if cands:
            pid, title = cands[0]
            page = pid if self.rnd.random() < self.me.p_ids else title
            return self.act("open_start", "open", {"page": page}, title=title, opening=opening)
        query = m.next_start_query()
        if query is not None:
            kind = "start_again" if m.queries[0] else "start"
            return self.act(kind, "search", {"query": query}, opening=opening, query=query)
        guess = m.start_guess()
        if guess is not None:
            return self.act("open_guess", "open", {"page": guess}, name=guess)
        return self.give_up(1)

    def hop(self, h: int) -> dict:
        """Follow clue ``h`` from the current page: read on, search, check with ``find``, or open a lead."""
        m, me, rnd = self.m, self.me, self.rnd
        page = m.pages[m.chain[-1]]
        clue = self.clue(h)
        if m.pending is not None:
            cand = m.pages[m.pending]
            return self.act("read_candidate", "open", {"page": cand.page_id, "offset": cand.next_offset},
                            page=cand.title, clue=self.clue(min(h + 1, m.k)))
        if m.should_read_on(h):
            return self.act("read_on", "open", {"page": page.page_id, "offset": page.next_offset},
                            page=page.title, clue=clue)
        cands = m.candidates(h)
        query = m.next_hop_query(h) if len(m.queries[h]) < MAX_SEARCHES else None
        if query in m.failed[h] and (not cands or cands[0].score < 2.0):
            # The name in the blank is not a title as written: search it before trying weaker leads.
            return self.act("search_name", "search", {"query": query}, name=query, clue=clue)
        if m.attempts[h] < MAX_OPENS and cands and cands[0].score >= FLOOR:
            best = cands[0]
            unsure = best.source == "page" and best.page_id is None and best.score < 3.0 and h < m.k
            if unsure and not m.queries[h] and best.name not in m.failed[h]:
                # The blank's extent is open ("the strong interaction between quarks"): see which reading is
                # a title before opening guesses (not at the last hop, whose page search never returns).
                return self.act("search_reading", "search", {"query": best.name}, name=best.name, clue=clue,
                                page=page.title)
            if not m.queries[h] and best.source == "page" and rnd.random() < me.p_search:
                query = m.next_hop_query(h)
                if query is not None:
                    return self.act("search_hop", "search", {"query": query}, clue=clue, query=query, page=page.title)
            if not m.finds[h] and best.source == "page" and rnd.random() < me.p_find:
                args = {"page": page.page_id, "text": best.name}
                if ("find", json.dumps(args, sort_keys=True)) not in m.calls:
                    return self.act("find", "find", args, clue=clue, page=page.title, text=best.name,
                                    passage=excerpt(best.passage, m.q.clues[h - 1].terms))
            # A hasty pick of the runner-up, only where the next clue will show the mistake.
            hasty = h < m.k and len(cands) > 1 and cands[1].score >= FLOOR and rnd.random() < me.p_wrong
            pick = cands[1] if hasty else best
            return self.open(h, pick, page.title, clue)
        if query is not None:
            # A passage of some other page names entities that outrank it: look further down the results.
            args = {"query": query, "k": 20} if m.q.clues[h - 1].elsewhere else {"query": query}
            return self.act("search_hop", "search", args, clue=clue, query=query, page=page.title)
        return self.give_up(h)

    def open(self, h: int, c: Cand, here: str, clue: str) -> dict:
        """Open lead ``c`` (by page id when one was shown and the persona likes ids), saying why."""
        target = c.page_id if c.page_id is not None and self.rnd.random() < self.me.p_ids else c.name
        kind = "open_result" if c.source == "result" else "open_hop"
        passage = excerpt(c.passage, self.m.q.clues[h - 1].terms)
        return self.act(kind, "open", {"page": target}, clue=clue, page=here, name=c.name, passage=passage)


__all__ = ["next_turn", "persona"]
