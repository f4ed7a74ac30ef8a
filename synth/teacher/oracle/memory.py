"""The oracle agent's memory, re-derived from the conversation at every turn.

The agent keeps no state between calls: :meth:`Memory.replay` reads its past tool calls
and their observations in order and rebuilds what it has read (pages, their links and
descriptions, search results) and where it stands (the chain of pages it accepted, the
candidates it tried and rejected at each hop).  Accepting or rejecting an opened page is a
function of the question, what was read and the persona only, so the replay reaches the
decisions the agent made at the time.  :func:`remembered` memoises replays across turns in the
backend's :class:`Replays`; the result is the same.

The agent keeps notes, as a researcher does, in the turns that call a tool (:func:`note`): the
path it has walked when that changed ("Path so far: A [id] → B [id]."), the links of the page it
stands on once it has read them for a clue ("Links of B in the passage on x: “C”, “D”. Its other
links: “E”."), the links a search showed are not what the clue describes ("Not it: “C”."), and the
page it rejected that fits best ("Closest so far: D [id] (about 50% of the clue).").  Under
``rollout.compress_observations`` older observations reach it as placeholders, and the notes carry
what they said (:func:`read_notes`): :meth:`Memory.resume` stands, before each call, where its note
in effect then says it stood, takes from the calls whose observations are gone what their
arguments say (searches made, pages tried at each hop), and replays the calls it still sees; a
note of the links stands in for the page it stands on (:meth:`Memory.linked`).  It never opens a
page twice (the stored trace holds every observation, and the repeats filter drops a repeated
call): a page whose observation is gone is not a candidate again.  Only with no note of the links
of the page it stands on does it open that page again, as the placeholder asks.

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
import re
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
MAX_SEARCHES = 6  # searches per hop
FLOOR = -1.0  # least score of a candidate worth opening
STRONG = 3.0  # a candidate whose known definition fits the clue
TITLES_PER_QUERY = 4  # link titles searched with the clue at once (more, and other pages crowd them out)
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
    related: bool | None = None  # the sentence linking it has the clue's relation word (None: the clue has none)


NOTE = "Path so far: "
OUT = "Not it: "
_NOTE = re.compile(re.escape(NOTE) + r"(.*?\])\.")
_ENTRY = re.compile(r"(.+?) \[([^\[\]]+)\](?: → |$)")
_OUT = re.compile(re.escape(OUT) + r"((?:“[^”]*”(?:, )?)+)\.")
_QUOTED = re.compile(r"“([^”]*)”")
_LIST = r"((?:“[^”]*”(?:, )?)+)\."
_LINKS = re.compile(r"Links of .+? in the passage on .+?: (?:none\.|" + _LIST + r")(?: Its other links: " + _LIST + ")?")
_ALL_LINKS = re.compile(r"Links of .+?: " + _LIST)
MAX_NOTED_LINKS = 24  # links a note lists for one clue, best first
_CLOSEST = re.compile(r"Closest so far: (.+?) \[([^\[\]]+)\] \(about (\d+)% of the clue\)\.")

Path = tuple[tuple[str, str], ...]  # (page id, title) of each page on the chain, in order


@dataclass(frozen=True, slots=True)
class Note:
    """What one assistant turn stated (:func:`note`): the path walked (None: unchanged), the links of the page it
    stands on, those a search showed are not what the next clue describes, and the closest page it rejected;
    ``hop`` is the clue it was at (the length of the path in effect then)."""

    hop: int
    path: Path | None
    out: tuple[str, ...] = ()
    links: "Links | None" = None
    closest: tuple[str, str, float] | None = None  # (page id, title, share) of the best page it rejected


@dataclass(frozen=True, slots=True)
class Links:
    """The links of the page it stands on it noted for the next clue, best first: those in a sentence with the
    clue's relation word (all of them when the clue has none), and the others."""

    related: tuple[str, ...]
    other: tuple[str, ...] = ()


def _quoted(titles) -> str:
    return ", ".join(f"\u201c{t}\u201d" for t in titles)


def note(path: Path | None, out: list[str] = (), links: Links | None = None, page: str = "",
         relation: str | None = None, closest: tuple[str, str, float] | None = None) -> str:
    """The agent's notes: "Path so far: A [id] → B [id].", "Links of A in the passage on x: “B”. Its other
    links: “C”." (or "Links of A: …" for a clue with no relation word) and "Not it: “X”, “Y”."."""
    parts = [NOTE + " → ".join(f"{title} [{pid}]" for pid, title in path) + "."] if path else []
    if links is not None and (links.related or links.other):
        if relation:
            parts.append(f"Links of {page} in the passage on {relation}: {_quoted(links.related) or 'none'}.")
            if links.other:
                parts.append(f"Its other links: {_quoted(links.other)}.")
        else:
            parts.append(f"Links of {page}: {_quoted(links.related)}.")
    if closest is not None:
        pid, title, share = closest
        parts.append(f"Closest so far: {title} [{pid}] (about {round(100 * share)}% of the clue).")
    if out:
        parts.append(OUT + _quoted(out) + ".")
    return " ".join(parts)


def read_notes(messages: list[dict]) -> dict[int, Note]:
    """The notes of each assistant turn (counted from 1) that stated any."""
    out: dict[int, Note] = {}
    turn, hop = 0, 0
    for m in messages:
        if m.get("role") != "assistant":
            continue
        turn += 1
        text = m["content"] if isinstance(m.get("content"), str) else ""
        paths, outs = _NOTE.findall(text), _OUT.findall(text)
        links = None
        if (m2 := _LINKS.search(text)) is not None:
            links = Links(tuple(_QUOTED.findall(m2.group(1) or "")), tuple(_QUOTED.findall(m2.group(2) or "")))
        elif (m2 := _ALL_LINKS.search(text)) is not None:
            links = Links(tuple(_QUOTED.findall(m2.group(1))))
        closest = None
        if (m3 := _CLOSEST.search(text)) is not None:
            closest = (m3.group(2), m3.group(1), int(m3.group(3)) / 100)
        if paths or outs or links or closest:
            path = tuple((pid, title) for title, pid in _ENTRY.findall(paths[-1])) if paths else None
            hop = len(path) if path is not None else hop
            out[turn] = Note(hop, path, tuple(t for o in outs for t in _QUOTED.findall(o)), links, closest)
    return out


def stated(notes: dict[int, Note], turn: int) -> Path:
    """The path in effect at ``turn``: the last one stated at or before it (none: the empty path)."""
    best = max((t for t, n in notes.items() if t <= turn and n.path is not None), default=None)
    return notes[best].path if best is not None else ()


def stated_links(notes: dict[int, Note], hop: int) -> "Links | None":
    """The links the agent noted for clue ``hop`` (of the page it stood on), if it noted them."""
    return next((n.links for _, n in sorted(notes.items()) if n.links is not None and n.hop == hop), None)


def stated_closest(notes: dict[int, Note], hop: int) -> tuple[str, str, float] | None:
    """The closest page to clue ``hop`` the agent last noted having rejected, if any."""
    return next((n.closest for _, n in sorted(notes.items(), reverse=True)
                 if n.closest is not None and n.hop == hop), None)


def stated_out(notes: dict[int, Note], hop: int) -> set[str]:
    """Title keys of the links the agent stated are not what clue ``hop`` describes."""
    return {title_key(t) for n in notes.values() if n.hop == hop for t in n.out}


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
        self.titles: dict[str, str] = {}  # page id -> title, for chain pages known from the agent's notes
        self.ruled_out: dict[int, set[str]] = defaultdict(set)  # hop -> title keys its notes say do not fit
        self.noted_links: dict[int, Links] = {}  # hop -> the links of the page it stood on its notes list
        self.opened: set[str] = set()  # title keys and ids of every page it asked to open

    def copy(self) -> "Memory":
        """An independent copy: containers copied, their immutable contents (text, tuples) shared."""
        new = copy.copy(self)
        new.pages = {pid: v.copy() for pid, v in self.pages.items()}
        new.ids, new.descs, new.titles = dict(self.ids), dict(self.descs), dict(self.titles)
        new.noted_links = dict(self.noted_links)
        new.opens = defaultdict(int, self.opens)
        for name in ("results", "tried", "rejected", "queries", "finds", "ruled_out"):
            old = getattr(self, name)
            setattr(new, name, defaultdict(old.default_factory, {k: old.default_factory(v) for k, v in old.items()}))
        new.chain, new.calls, new.dead, new.opened = list(self.chain), set(self.calls), set(self.dead), set(self.opened)
        return new

    @property
    def here(self) -> PageView:
        """The page the agent stands on."""
        return self.pages[self.chain[-1]]

    @property
    def sees_here(self) -> bool:
        """What it read of the page it stands on is in its context (always, unless observations were
        compressed away since it opened the page)."""
        return not self.chain or self.chain[-1] in self.pages

    @property
    def knows_links(self) -> bool:
        """It can tell where the page it stands on links: it sees the page, or noted its links for this clue."""
        return self.sees_here or len(self.chain) in self.noted_links

    def linked(self, h: int) -> list[tuple[str, str, bool | None, frozenset]]:
        """The links of the page it stands on: (title, anchor, whether the sentence that links it has clue
        ``h``'s relation word (None: the clue has none), the content words of title and sentence).  From the
        page when it sees it, else from its note of them (no anchors; the title's words only)."""
        rel = self.q.clues[h - 1].relation
        if self.sees_here:
            here = self.here
            return [(t, a, relation_holds(here.sentence_linking(t), rel) if rel else None,
                     content_words(t + " " + here.sentence_linking(t))) for t, a in here.links.items()]
        noted = self.noted_links[h]
        return ([(t, "", True if rel else None, content_words(t)) for t in noted.related] +
                [(t, "", False if rel else None, content_words(t)) for t in noted.other])

    def links_note(self, h: int) -> Links:
        """What it notes of the links of the page it stands on for clue ``h``: the candidates, best first."""
        cands = self.candidates(h)[:MAX_NOTED_LINKS]
        if self.q.clues[h - 1].relation is None:
            return Links(tuple(c.title for c in cands))
        return Links(tuple(c.title for c in cands if c.related), tuple(c.title for c in cands if not c.related))

    def title_of(self, pid: str) -> str:
        """The title of a page it read or noted."""
        return self.pages[pid].title if pid in self.pages else self.titles.get(pid, pid)

    @property
    def path(self) -> Path:
        """The chain as (page id, title) pairs, as its notes state it."""
        return tuple((pid, self.title_of(pid)) for pid in self.chain)

    # ---- replay ----------------------------------------------------------------------------
    def replay(self, steps: list[Step]) -> None:
        """Take in every past step, in order."""
        for s in steps:
            self.update(s)
            self.settle()

    def resume(self, steps: list[Step], notes: dict[int, Note]) -> None:
        """Take in steps some of whose observations were elided (module docstring).  Before each call it
        stands where its note in effect when it made that call says (it judged with what it saw then);
        a call before the last elided one counts by its arguments; the calls after it are replayed, so
        the latest observations are judged as they come."""
        j = max(i for i, s in enumerate(steps) if s.obs is None) + 1
        for h in range(self.k + 1):
            self.ruled_out[h] = stated_out(notes, h)
            if (links := stated_links(notes, h)) is not None:
                self.noted_links[h] = links
            if (closest := stated_closest(notes, h)) is not None:  # what it rejected before, at its best
                self.rejected[h] = [(closest[2], closest[0])]
                self.titles[closest[0]] = closest[1]
        for i, s in enumerate(steps):
            self.recall_path(stated(notes, s.turn))
            if i < j:
                self.elided(s)
            else:
                self.update(s)
                self.settle()

    def recall_path(self, path: Path) -> None:
        """Stand where the agent's note says it stood."""
        self.chain = [pid for pid, _ in path]
        self.titles.update(path)

    def elided(self, s: Step) -> None:
        """Take in a call whose observation is gone: what its arguments say it did at the hop it was made."""
        self.calls.add((s.name, json.dumps(s.args, sort_keys=True)))
        h, self.event = len(self.chain), None
        if s.name == "search":
            self.queries[h].append(str(s.args.get("query")))
        elif s.name == "find":
            self.finds[h].add(str(s.args.get("text")))
        elif s.name == "open":
            name = str(s.args.get("page"))
            self.opened |= {name, title_key(name)}
            on_chain = {k for pid in self.chain for k in (pid, title_key(self.title_of(pid)))}
            if name not in on_chain and title_key(name) not in on_chain:
                self.tried[h].add(title_key(name))
                self.tried[h].add(name)
                self.opens[h] += 1

    def update(self, s: Step) -> None:
        """Take in one tool call and its observation."""
        self.calls.add((s.name, json.dumps(s.args, sort_keys=True)))
        h, obs, self.event = len(self.chain), s.obs, None
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
        self.opened |= {name, title_key(name)}
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
            return  # reading on in a page already on the chain (or reading it again)
        if not self.knows_links:
            return  # judged once it sees again where the page it stands on links to this one
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
            clue = self.q.clues[h - 1]
            d = view.definition()
            if clue.relation is None:
                related = True
            elif self.sees_here:
                related = relation_holds(self.here.sentence_linking(view.title), clue.relation)
            else:  # its note of the links says in which sentence the page it stands on links to this one
                related = title_key(view.title) in {title_key(t) for t in self.noted_links[h].related}
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
            if h == 0 or not self.knows_links:
                return
            cands = self.candidates(h)
            top = cands[0] if cands else None
            if top and top.page_id in self.pages and top.score > FLOOR and self.opens[h] < self.me.max_opens:
                self.tried[h] |= {top.page_id, title_key(top.title)}
                self.opens[h] += 1
                self.judge(h, top.page_id, "recall_")
                continue
            if self.rejected[h] and self.exhausted(h) and (self.closest(h)[0] > 0 or len(self.linked(h)) == 1):
                # Nothing fits: it goes on from the page that fits best, if any fits at all or it is the one
                # link there is (among several, a page that holds none of the clue is a guess, and it does not
                # guess).
                share, pid = self.closest(h)
                self.chain.append(pid)
                self.event = ("forced", pid, h)
                continue
            return

    def closest(self, h: int) -> tuple[float, str] | None:
        """The page it rejected for hop ``h`` that fits best (the first of equals, shares to two places, as
        its notes state them), with its share."""
        rej = self.rejected[h]
        if not rej:
            return None
        return max(rej, key=lambda sp: (round(sp[0], 2), -rej.index(sp)))

    # ---- what to do next -------------------------------------------------------------------
    def candidates(self, h: int) -> list[Cand]:
        """Pages to open for hop ``h``, best first: the current page's links, scored by what is known of
        them (a definition read or shown by a search, the clue's relation word where the page links to
        them, the clue's words around the link, the rank a search gave them)."""
        clue = self.q.clues[h - 1]
        visited = set(self.chain) | {title_key(self.title_of(p)) for p in self.chain}
        done = self.tried[h] | self.dead | visited
        results = {title_key(r.title): r for r in self.results[h].values()}
        out: list[Cand] = []
        for order, (title, anchor, related, said) in enumerate(self.linked(h)):
            key = title_key(title)
            pid = self.ids.get(key)
            if key in done or pid in done:
                continue
            if (key in self.opened or pid in self.opened) and pid not in self.pages:
                continue  # read before, but its observation was compressed away: opening it again repeats a call
            score = self._known(clue, key, pid)
            if score == 0.0 and key in self.ruled_out[h]:
                score = -0.5  # a search it no longer sees showed the page is not it (its note says)
            if related is not None:
                score += 1.0 if related else -0.5
            score += 0.5 * len(clue.words & said) / max(1, len(clue.words))
            if key in results and score >= 0:  # a result it knows does not fit is no better for ranking high
                score += 1.0 / results[key].rank
            out.append(Cand(title, pid, score - 0.001 * order, anchor, related))
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
                   title_key(c.title) not in self.descs and title_key(c.title) not in self.ruled_out[h]]
        # The clue alone first, unless the persona goes straight to the links (a clue only the current page
        # resolves is seldom among the first results of a search for it alone) or the page has few of them.
        alone = len(unknown) > TITLES_PER_QUERY and self.draw("alone", h, self.chain[-1]) >= self.me.p_titles
        options = [clue.phrase + (f" {clue.relation}" if clue.relation else "")] if alone else []
        options += [" ".join([clue.phrase, *unknown[i:i + TITLES_PER_QUERY]])
                    for i in range(0, len(unknown), TITLES_PER_QUERY)]
        made = {q for qs in self.queries.values() for q in qs}
        return next((q for q in options if q and q not in made), None)

    def misfits(self, h: int) -> list[str]:
        """Links of the page it stands on, not opened, that a search showed are not what clue ``h`` describes."""
        clue = self.q.clues[h - 1]
        return [c.title for c in self.candidates(h) if c.page_id not in self.pages and title_key(c.title) in self.descs
                and not clue.fits(self.descs[title_key(c.title)])]

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
        if h == 0 or not self.sees_here:
            return False  # (its note of the links was written once it had read every window it reads)
        view = self.here
        return view.next_offset is not None and len(view.windows) < MAX_WINDOWS


MEMO_SIZE = 512  # memories kept: one per rollout in flight is enough


class Replays:
    """A bounded memo of :meth:`Memory.replay` by conversation prefix, owned by one oracle backend (so by one
    stage run's teacher): a later turn of a rollout continues from the memory of its earlier turns."""

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self.size = size
        self._memo: OrderedDict[bytes, Memory] = OrderedDict()
        self._lock = threading.Lock()

    def longest(self, keys: list[bytes]) -> tuple[int, Memory | None]:
        """The index of the longest prefix key memoised, and a copy of its memory (0, None for none)."""
        with self._lock:
            done = next((i for i in range(len(keys) - 1, -1, -1) if keys[i] in self._memo), None)
            return (done, self._memo[keys[done]].copy()) if done is not None else (0, None)

    def keep(self, key: bytes, mem: Memory) -> None:
        with self._lock:
            self._memo[key] = mem
            while len(self._memo) > self.size:
                self._memo.popitem(last=False)


def remembered(question: str, me: Persona, steps: list[Step], notes: dict[int, Note] | None = None,
               replays: Replays | None = None) -> Memory:
    """The memory after ``steps``: :meth:`Memory.replay`, continued from the longest prefix of them in
    ``replays`` (None: replayed from scratch).  It is a memo of a pure function (the same memory as a replay
    from scratch, which a test checks), so a turn costs its new steps rather than the whole history.  When
    some observations were elided, :meth:`Memory.resume` from the agent's ``notes`` instead (not memoised:
    it replays only the calls whose observations are still seen)."""
    if any(s.obs is None for s in steps):
        mem = Memory(QuestionView.parse(question), me)
        mem.resume(steps, notes or {})
        return mem
    if replays is None:
        mem = Memory(QuestionView.parse(question), me)
        mem.replay(steps)
        return mem
    h = hashlib.blake2b(repr((question, me)).encode(), digest_size=16)
    keys = [h.digest()]
    for s in steps:
        h.update(json.dumps([s.turn, s.name, s.args, s.obs], sort_keys=True, ensure_ascii=False).encode())
        keys.append(h.digest())
    done, mem = replays.longest(keys)
    if mem is None:
        mem = Memory(QuestionView.parse(question), me)
    mem.replay(steps[done:])
    replays.keep(keys[-1], mem)
    return mem  # a later turn copies it before replaying more


__all__ = ["Cand", "Links", "Memory", "NOTE", "Note", "OUT", "Path", "Persona", "Replays", "Result", "Step", "note", "read_notes", "read_steps",
           "remembered", "stated", "stated_closest", "stated_links", "stated_out", "MAX_SEARCHES"]
