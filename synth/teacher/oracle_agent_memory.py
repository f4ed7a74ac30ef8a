"""The oracle agent's memory, re-derived from the conversation at every turn.

The agent keeps no state between calls: :meth:`Memory.replay` reads its past tool
calls and their observations in order and rebuilds what it has read (pages, search
results) and where it stands (the chain of pages it accepted, the candidates it tried
and rejected at each hop).  Accepting or rejecting an opened page is a function of the
question and what was read only, so the replay reaches the decisions the agent made at
the time.  :func:`remembered` memoises replays across turns; the result is the same.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from typing import Any

from synth.engine.records import Conversation
from synth.teacher.oracle_agent_leads import FLOOR, MAX_OPENS, Cand, Leads, Persona
from synth.teacher.oracle_agent_pages import PageView, fill_blank, mentions
from synth.teacher.oracle_agent_reading import Clue, QuestionView, contains_name, matched, terms
from synth.tools.text import title_key

MAX_WINDOWS = 3  # windows of a candidate page read before judging it


@dataclass(slots=True)
class Step:
    """One tool call and what came back (``obs`` None: omitted from the context, or not JSON)."""

    turn: int
    name: str
    args: dict
    obs: Any


def read_steps(messages: list[dict]) -> list[Step]:
    """The tool calls of a conversation with their parsed observations, in order."""
    conv = Conversation.from_openai(messages)
    answers = {m.tool_call_id: m.text for m in conv.messages if m.role == "tool"}
    steps = []
    for turn, tc in conv.tool_calls():
        raw = answers.get(tc.id)
        try:
            obs = json.loads(raw) if raw else None
        except ValueError:
            obs = None
        steps.append(Step(turn, tc.name, tc.args() or {}, obs))
    return steps


class Memory(Leads):
    """What the agent has read and where it stands; see the module docstring."""

    def __init__(self, question: QuestionView, me: Persona):
        self.q, self.me = question, me
        self.k = len(question.clues)
        self.pages: dict[str, PageView] = {}
        self.ids: dict[str, str] = {}  # title key -> page id, for every title shown
        self.results: dict[int, dict[str, tuple[str, str]]] = defaultdict(dict)  # hop -> id -> (title, snippet)
        self.chain: list[str] = []
        self.tried: dict[int, set[str]] = defaultdict(set)  # title keys and ids tried at each hop
        self.rejected: dict[int, list[tuple[float, str]]] = defaultdict(list)
        self.attempts: dict[int, int] = defaultdict(int)
        self.queries: dict[int, list[str]] = defaultdict(list)
        self.failed: dict[int, list[str]] = defaultdict(list)  # names that did not open, per hop
        self.dead: set[str] = set()  # names that failed to open, whatever the hop
        self.finds: dict[int, int] = defaultdict(int)
        self.calls: set[tuple[str, str]] = set()
        self.event: tuple | None = None
        self.pending: str | None = None  # a candidate page to read on before judging it
        self.priors: dict[str, float] = {}  # candidate score of each page when it was opened
        self.omitted = 0  # observations left out of the context (rollout.compress_observations)
        self.version = 0  # counts changes of what candidates() depends on, for its one-entry memo
        self._cands: dict[tuple, list[Cand]] = {}

    def copy(self) -> "Memory":
        """An independent copy: containers copied, their immutable contents (text, tuples) shared."""
        new = copy.copy(self)
        new.pages = {pid: PageView(v.page_id, v.title, dict(v.windows), v.next_offset, list(v.found))
                     for pid, v in self.pages.items()}
        new.ids, new.priors = dict(self.ids), dict(self.priors)
        new.attempts, new.finds = defaultdict(int, self.attempts), defaultdict(int, self.finds)
        for name in ("results", "tried", "rejected", "queries", "failed"):
            old = getattr(self, name)
            setattr(new, name, defaultdict(old.default_factory, {k: old.default_factory(v) for k, v in old.items()}))
        new.chain, new.calls, new.dead, new._cands = list(self.chain), set(self.calls), set(self.dead), {}
        return new

    # ---- replay ----------------------------------------------------------------------------
    def replay(self, steps: list[Step]) -> None:
        """Take in every past step, in order."""
        for s in steps:
            self.update(s)
            self.settle()

    def update(self, s: Step) -> None:
        """Take in one tool call and its observation."""
        self.version += 1
        self.calls.add((s.name, json.dumps(s.args, sort_keys=True)))
        h, obs, self.event = len(self.chain), s.obs, None
        self.omitted += obs is None
        if s.name == "search":
            self.queries[h].append(str(s.args.get("query")))
            for r in obs if isinstance(obs, list) else []:
                if isinstance(r, dict) and r.get("page_id"):
                    self.results[h][r["page_id"]] = (r.get("title") or "", r.get("snippet") or "")
                    self.ids.setdefault(title_key(r.get("title") or ""), r["page_id"])
        elif s.name == "find" and isinstance(obs, dict) and obs.get("page_id") in self.pages:
            self.pages[obs["page_id"]].read(obs)
            self.finds[h] += 1
        elif s.name == "open":
            self._opened(h, s, obs)

    def _opened(self, h: int, s: Step, obs: Any) -> None:
        name = str(s.args.get("page"))
        if obs is None:
            return  # the observation was left out of the context: nothing was learnt from it
        if not (isinstance(obs, dict) and obs.get("page_id") and "error" not in obs):
            self.dead.add(title_key(name))
            self.tried[h].add(title_key(name))
            self.failed[h].append(name)
            self.attempts[h] += 1
            self.event = ("failed", name)
            return
        pid = obs["page_id"]
        view = self.pages.setdefault(pid, PageView(pid, obs.get("title") or pid))
        view.read(obs)
        self.ids.setdefault(title_key(view.title), pid)
        if pid in self.chain:
            return  # reading on in a page already on the chain
        if pid != self.pending:
            prior = next((c.score for c in self.candidates(h) if c.page_id == pid or title_key(c.name) in
                          (title_key(name), title_key(view.title))), 0.0) if h else 0.0
            self.priors[pid] = prior
            self.tried[h] |= {title_key(name), title_key(view.title), pid}
            self.attempts[h] += 1
        self.pending = None
        self._judge(h, pid, view)

    def _judge(self, h: int, pid: str, view: PageView, how: str = "") -> None:
        self.version += 1
        fit = self.fit(h, pid, self.priors.get(pid, 0.0))
        if fit >= self.me.strict:
            self.chain.append(pid)
            self.event = (how + "accept", pid, h)
        elif not how and fit > 0 and view.next_offset is not None and len(view.windows) < MAX_WINDOWS:
            self.pending, self.event = pid, ("pending", pid, h)  # judge it when more of it is read
        else:
            self.rejected[h].append((fit, pid))
            self.event = (how + "reject", pid, h)

    def settle(self) -> None:
        """Decisions that need no call: a candidate page read before (at another hop) is judged from
        memory, not opened twice; a hop with nothing left to try continues from its best page."""
        while self.pending is None and (h := len(self.chain)) <= self.k:
            cands = self.candidates(h) if h else []
            top = cands[0] if cands else None
            if top and top.page_id in self.pages and top.score >= FLOOR and self.attempts[h] < MAX_OPENS:
                self.priors[top.page_id] = top.score
                self.tried[h] |= {top.page_id, title_key(top.name)}
                self.attempts[h] += 1
                self._judge(h, top.page_id, self.pages[top.page_id], "recall_")
                continue
            if self.rejected[h] and self.exhausted(h):
                fit, pid = max(self.rejected[h], key=lambda fp: (fp[0], -self.rejected[h].index(fp)))
                self.chain.append(pid)
                self.event = ("forced", pid, h)
                continue
            return

    # ---- judging pages ---------------------------------------------------------------------
    def fit(self, h: int, pid: str, prior: float = 0.0) -> float:
        """How well page ``pid`` fits hop ``h`` (0..1 and more).

        The start must be named by the first sentence.  Any page but the last fits when it holds the
        passage the next clue quotes (the blank's frame found around a name, or most of its
        words in one sentence), or when the next clue names it; a page reached by a quote without
        a blank (the clue quotes the page itself) fits when it holds that quote.  The last page
        has no next clue: it fits when the clue framed its name closely in the page before.
        """
        view = self.pages[pid]
        if h == 0 and not contains_name(self.q.opening, view.title):
            return 0.0
        own = self.q.clues[h - 1] if h else None
        # A quote without a blank is the sought page's own passage: it must hold nearly all of it.
        here = self.holds(view, own) if own is not None and own.elsewhere else 0.0
        here = here if here >= 0.75 else 0.0
        if h < self.k:
            nxt = self.q.clues[h]
            named = 1.0 if not nxt.blank and mentions(nxt.quote, view.title) else 0.0
            return max(self.holds(view, nxt), named, here)
        return max(here, prior - 1.0) if h else 1.0

    def holds(self, view: PageView, clue: Clue) -> float:
        """How much of ``clue``'s quote ``view`` holds.

        A quote with a blank is copied word for word from the page it was drawn from: finding its
        words around the blank counts 1.0, and a page that merely shares its words counts 0.3 of the
        share it holds (never enough alone: sharing words is common, holding the passage is not).  A quote without a blank counts the share of its words in one sentence.
        """
        n = max(1, len(clue.terms))
        if clue.blank:
            if any(fill_blank(p, clue.left, clue.right) for p in view.paragraphs()):
                return 1.0
            return 0.3 * max((len(clue.terms & terms(s)) for s in view.sentences()), default=0) / n
        return max((len(matched(clue.terms, terms(s))) for s in view.sentences()), default=0) / n

    def best_passage(self, pid: str, h: int) -> str:
        """The sentence of page ``pid`` that best matches clue ``h``."""
        want = self.q.clues[h - 1].terms
        return max(self.pages[pid].sentences(), key=lambda s: len(matched(want, terms(s))), default="")


_MEMO: OrderedDict[bytes, Memory] = OrderedDict()
_MEMO_LOCK = threading.Lock()
MEMO_SIZE = 512  # memories kept: one per rollout in flight is enough


def remembered(question: str, me: Persona, steps: list[Step]) -> Memory:
    """The memory after ``steps``: :meth:`Memory.replay` continued from the longest prefix of them this
    process replayed before.  It is a memo of a pure function (the same memory as a replay from scratch,
    which a test checks), so a turn costs its new steps rather than the whole history."""
    h = hashlib.blake2b(repr((question, me)).encode(), digest_size=16)
    keys = [h.digest()]
    for s in steps:
        h.update(json.dumps([s.turn, s.name, s.args, s.obs], sort_keys=True, ensure_ascii=False).encode())
        keys.append(h.digest())
    with _MEMO_LOCK:
        done = next((i for i in range(len(keys) - 1, -1, -1) if keys[i] in _MEMO), None)
        mem = _MEMO[keys[done]].copy() if done is not None else None
    if mem is None:
        mem, done = Memory(QuestionView.parse(question), me), 0
    mem.replay(steps[done:])
    with _MEMO_LOCK:
        _MEMO[keys[-1]] = mem
        while len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)
    return mem  # a later turn copies it before replaying more


def forget() -> None:
    """Drop every remembered memory (tests use it to replay from scratch)."""
    with _MEMO_LOCK:
        _MEMO.clear()


__all__ = ["Memory", "Step", "forget", "read_steps", "remembered"]
