"""The oracle agent's memory, re-derived from the conversation at every turn.

The agent keeps no state between calls: :meth:`Memory.replay` reads its past tool calls
and their observations in order and rebuilds what it has read (pages, their links and
descriptions, search results) and where it stands (the chain of pages it accepted, the
candidates it tried and rejected at each hop).  Accepting or rejecting an opened page is a
function of the question, what was read and the persona only, so the replay reaches the
decisions the agent made at the time.  :func:`remembered` memoises replays across turns;
the result is the same.

How it judges a page for hop ``h`` (:meth:`Memory.judge`): the page must say it is what the
clue describes (:meth:`~synth.teacher.oracle.reading.Clue.fits` its definition), and the
clue's relation word, when it has one, stands in the sentence where the previous page links
to it.  A hasty persona sometimes accepts a page that only half fits: a real
mistake, which the correctness filter then drops.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import threading
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from typing import Any

from synth.engine.conversation import Conversation
from synth.engine.seeding import derive_seed
from synth.teacher.oracle.pages import PageView
from synth.teacher.oracle.reading import QuestionView, contains_name, term_seq
from synth.text.clues import definition, relation_holds
from synth.text.question_text import content_words
from synth.tools.analysis import title_key

MAX_WINDOWS = 3  # windows of the current page read for its links
MAX_SEARCHES = 3  # searches per hop
FLOOR = -1.0  # least score of a candidate worth opening
STRONG = 3.0  # a candidate whose known definition fits the clue
TITLES_PER_QUERY = 8  # link titles searched with the clue at once (the index reads a query's first 32 terms)
TITLES_K = 10  # results such a search asks for: the titled pages, and the clue's best


@dataclass(frozen=True, slots=True)
class Persona:
    """How one sample behaves."""

    k: int  # results one search asks for
    p_search: float  # search again (the clue with more link titles) before opening any link
    p_titles: float  # search the clue with the links' titles at once, skipping the clue alone
    max_opens: int  # candidates opened per hop before it settles for the best one seen
    hasty: float  # chance to accept a page that only half fits the clue
    p_find: float  # check where the current page links to a candidate with `find` before opening it
    p_direct: float  # open the start by the title the question gives instead of searching for it
    give_up_turn: int | None  # answer "unknown" from this turn on
    salt: int  # seeds the persona's per-page draws


@dataclass(slots=True)
class Step:
    """One tool call and what came back (``obs`` None: omitted from the context, or not JSON)."""

    turn: int
    name: str
    args: dict
    obs: Any


@dataclass(frozen=True, slots=True)
class Result:
    """One search result as the agent saw it."""

    page_id: str
    title: str
    snippet: str
    description: str
    rank: int


@dataclass(frozen=True, slots=True)
class Cand:
    """A link of the current page the agent could open next, and how likely it is the one."""

    title: str
    page_id: str | None
    score: float
    anchor: str  # its link's anchor text on the current page


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


class Memory:
    """What the agent has read and where it stands; see the module docstring."""

    def __init__(self, question: QuestionView, me: Persona):
        self.q, self.me = question, me
        self.k = len(question.clues)
        self.pages: dict[str, PageView] = {}
        self.ids: dict[str, str] = {}  # title key -> page id, for every title shown with its id
        self.descs: dict[str, str] = {}  # title key -> what a search result showed the page to be
        self.results: dict[int, dict[str, Result]] = defaultdict(dict)  # hop -> page id -> result
        self.chain: list[str] = []
        self.tried: dict[int, set[str]] = defaultdict(set)  # title keys and ids opened (or tried) at each hop
        self.rejected: dict[int, list[tuple[float, str]]] = defaultdict(list)
        self.opens: dict[int, int] = defaultdict(int)
        self.queries: dict[int, list[str]] = defaultdict(list)
        self.finds: dict[int, set[str]] = defaultdict(set)
        self.dead: set[str] = set()  # title keys that did not open
        self.calls: set[tuple[str, str]] = set()
        self.event: tuple | None = None
        self.omitted = 0  # observations left out of the context (rollout.compress_observations)

    def copy(self) -> "Memory":
        """An independent copy: containers copied, their immutable contents (text, tuples) shared."""
        new = copy.copy(self)
        new.pages = {pid: v.copy() for pid, v in self.pages.items()}
        new.ids, new.descs = dict(self.ids), dict(self.descs)
        new.opens = defaultdict(int, self.opens)
        for name in ("results", "tried", "rejected", "queries", "finds"):
            old = getattr(self, name)
            setattr(new, name, defaultdict(old.default_factory, {k: old.default_factory(v) for k, v in old.items()}))
        new.chain, new.calls, new.dead = list(self.chain), set(self.calls), set(self.dead)
        return new

    @property
    def here(self) -> PageView:
        """The page the agent stands on."""
        return self.pages[self.chain[-1]]

    # ---- replay ----------------------------------------------------------------------------
    def replay(self, steps: list[Step]) -> None:
        """Take in every past step, in order."""
        for s in steps:
            self.update(s)
            self.settle()

    def update(self, s: Step) -> None:
        """Take in one tool call and its observation."""
        self.calls.add((s.name, json.dumps(s.args, sort_keys=True)))
        h, obs, self.event = len(self.chain), s.obs, None
        self.omitted += obs is None
        if s.name == "search":
            self.queries[h].append(str(s.args.get("query")))
            for rank, r in enumerate(obs if isinstance(obs, list) else [], start=1):
                if isinstance(r, dict) and r.get("page_id"):
                    res = Result(r["page_id"], r.get("title") or "", r.get("snippet") or "", r.get("description") or "",
                                 rank)
                    self.results[h][res.page_id] = res
                    self.ids.setdefault(title_key(res.title), res.page_id)
                    # What a result shows a page to be: its description and, when the snippet opens the page's
                    # text, the predicate of its first sentence.
                    lead = [res.snippet] if res.snippet and not res.snippet.startswith("\u2026") else []
                    shown = definition(res.description, lead)
                    if shown:
                        self.descs.setdefault(title_key(res.title), shown)
        elif s.name == "find" and isinstance(obs, dict) and obs.get("page_id") in self.pages:
            self.pages[obs["page_id"]].read(obs)
            self.finds[h].add(str(s.args.get("text")))
        elif s.name == "open":
            self._opened(h, s, obs)

    def _opened(self, h: int, s: Step, obs: Any) -> None:
        name = str(s.args.get("page"))
        if obs is None:
            return  # the observation was left out of the context: nothing was learnt from it
        if not (isinstance(obs, dict) and obs.get("page_id") and "error" not in obs):
            self.dead.add(title_key(name))
            self.tried[h].add(title_key(name))
            self.opens[h] += 1
            self.event = ("failed", name)
            return
        pid = obs["page_id"]
        view = self.pages.setdefault(pid, PageView(pid, obs.get("title") or pid))
        view.read(obs)
        self.ids.setdefault(title_key(view.title), pid)
        if pid in self.chain:
            return  # reading on in a page already on the chain
        self.tried[h] |= {title_key(name), title_key(view.title), pid}
        self.opens[h] += 1
        self.judge(h, pid)

    # ---- judging pages ---------------------------------------------------------------------
    def judge(self, h: int, pid: str, how: str = "") -> None:
        """Accept or reject page ``pid`` for hop ``h`` (module docstring)."""
        view = self.pages[pid]
        if h == 0:
            ok = contains_name(self.q.opening, view.title)
            share = 1.0 if ok else 0.0
        else:
            clue, prev = self.q.clues[h - 1], self.here
            d = view.definition()
            related = clue.relation is None or relation_holds(prev.sentence_linking(view.title), clue.relation)
            share = clue.share(d) * (1.0 if related else 0.5)
            ok = related and clue.fits(d)
            if not ok and share >= 0.5 and self.draw("hasty", h, pid) < self.me.hasty:
                self.chain.append(pid)
                self.event = (how + "hasty", pid, h)
                return
        if ok:
            self.chain.append(pid)
            self.event = (how + "accept", pid, h)
        else:
            self.rejected[h].append((share, pid))
            self.event = (how + "reject", pid, h)

    def draw(self, what: str, h: int, pid: str) -> float:
        """The persona's seeded draw about one page at one hop (replays draw the same)."""
        return random.Random(derive_seed(self.me.salt, what, h, pid)).random()

    def settle(self) -> None:
        """Decisions that need no call: a candidate page read before is judged from memory, not opened
        twice; a hop with nothing left to try continues from the best page it rejected."""
        while (h := len(self.chain)) <= self.k:
            if h == 0:
                return
            cands = self.candidates(h)
            top = cands[0] if cands else None
            if top and top.page_id in self.pages and top.score > FLOOR and self.opens[h] < self.me.max_opens:
                self.tried[h] |= {top.page_id, title_key(top.title)}
                self.opens[h] += 1
                self.judge(h, top.page_id, "recall_")
                continue
            if self.rejected[h] and self.exhausted(h):
                share, pid = max(self.rejected[h], key=lambda sp: (sp[0], -self.rejected[h].index(sp)))
                self.chain.append(pid)
                self.event = ("forced", pid, h)
                continue
            return

    # ---- what to do next -------------------------------------------------------------------
    def candidates(self, h: int) -> list[Cand]:
        """Pages to open for hop ``h``, best first: the current page's links, scored by what is known of
        them (a definition read or shown by a search, the clue's relation word where the page links to
        them, the clue's words around the link, the rank a search gave them)."""
        clue, here = self.q.clues[h - 1], self.here
        visited = set(self.chain) | {title_key(self.pages[p].title) for p in self.chain}
        done = self.tried[h] | self.dead | visited
        results = {title_key(r.title): r for r in self.results[h].values()}
        out: list[Cand] = []
        for order, (title, anchor) in enumerate(here.links.items()):
            key = title_key(title)
            pid = self.ids.get(key)
            if key in done or pid in done:
                continue
            score = self._known(clue, key, pid)
            if clue.relation is not None:
                score += 1.0 if relation_holds(here.sentence_linking(title), clue.relation) else -0.5
            said = content_words(title + " " + here.sentence_linking(title))
            score += 0.5 * len(clue.words & said) / max(1, len(clue.words))
            if key in results and score >= 0:  # a result it knows does not fit is no better for ranking high
                score += 1.0 / results[key].rank
            out.append(Cand(title, pid, score - 0.001 * order, anchor))
        return sorted(out, key=lambda c: -c.score)

    def _known(self, clue, key: str, pid: str | None) -> float:
        """What is known of a candidate's fit: +STRONG when a definition read or shown fits the clue; less
        the more of the clue it misses, and well below 0 only for a page read (a search shows a description,
        not the page's first sentence, which the clue may describe); 0 when nothing is known."""
        if pid in self.pages:
            d = self.pages[pid].definition()
            return STRONG if clue.fits(d) else clue.share(d) - 1.5
        if key in self.descs:
            d = self.descs[key]
            return STRONG if clue.fits(d) else clue.share(d) - 0.5
        return 0.0

    def next_query(self, h: int) -> str | None:
        """A search for hop ``h`` not made yet: the clue's words, then the clue's words with the titles of
        the links whose pages it knows nothing of yet (the results then show which of them fits, with
        their descriptions; a linked page the index masks is conspicuous by its absence)."""
        if len(self.queries[h]) >= MAX_SEARCHES:
            return None
        clue = self.q.clues[h - 1]
        unknown = [c.title for c in self.candidates(h) if c.page_id not in self.pages and
                   title_key(c.title) not in self.descs]
        # The clue alone first, unless the persona goes straight to the links (a clue only the current page
        # resolves is seldom among the first results of a search for it alone) or the page has few of them.
        alone = len(unknown) > TITLES_PER_QUERY and self.draw("alone", h, self.here.page_id) >= self.me.p_titles
        options = [clue.phrase + (f" {clue.relation}" if clue.relation else "")] if alone else []
        options += [" ".join([clue.phrase, *unknown[i:i + TITLES_PER_QUERY]])
                    for i in range(0, len(unknown), TITLES_PER_QUERY)]
        made = {q for qs in self.queries.values() for q in qs}
        return next((q for q in options if q and q not in made), None)

    def start_candidates(self) -> list[Result]:
        """Search results whose title the first sentence contains, longest title first."""
        seen = [r for r in self.results[0].values() if r.page_id not in self.tried[0]
                and title_key(r.title) not in self.tried[0] and contains_name(self.q.opening, r.title)]
        return sorted(seen, key=lambda r: -len(term_seq(r.title)))

    def exhausted(self, h: int) -> bool:
        """Nothing left to do at hop ``h``: no candidate to open within the budget, no search to make,
        no more of the current page to read."""
        if self.should_read_on(h):
            return False
        cands = self.candidates(h)
        if self.opens[h] < self.me.max_opens and cands and cands[0].score > FLOOR:
            return False
        return self.next_query(h) is None

    def should_read_on(self, h: int) -> bool:
        """The current page has more text, whose links the hop may need."""
        if h == 0:
            return False
        view = self.here
        return view.next_offset is not None and len(view.windows) < MAX_WINDOWS


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


__all__ = ["Cand", "Memory", "Persona", "Result", "Step", "forget", "read_steps", "remembered", "MAX_SEARCHES"]
