"""The oracle's rollout policy: a ReAct agent that follows the gold path through the real tools.

It knows the question's gold chain and the clue of every hop (the call's ``hint``),
but everything it sees of the corpus comes from the real tools: it searches, opens,
finds and answers.  Like a real teacher it varies across samples and makes mistakes:
each sample draws a "persona" (how often it picks a wrong search result, opens a
clue directly, double-checks with ``find``, repeats a call, backtracks, or gives up).
A wrong pick is always one of the results the real index returned, so the later
filters have real work to do.

The policy is stateless: its state is re-derived from its own past actions, which
stay in the context even when observations are compressed, and from the latest
observation; every draw is seeded by (question, sample, turn).  So a rollout
resumed from the call cache continues exactly as it would have.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from synth.text.answers import normalize_answer
from synth.engine.records import Conversation
from synth.engine.seeding import derive_seed


@dataclass(slots=True)
class Persona:
    """How one sample behaves."""

    p_wrong: float  # pick a non-gold search result
    p_direct: float  # open the clue as a title instead of searching for it
    p_find: float  # confirm the clue with `find` before moving on
    p_repeat: float  # repeat the previous search verbatim
    backtracks: bool  # after a wrong page, search again instead of carrying on
    give_up_turn: int | None  # answer "unknown" from this turn on


def persona(seed: int, sample_index: int, hops: int) -> Persona:
    """The seeded behaviour of one sample."""
    r = random.Random(derive_seed(seed, "persona", sample_index))
    return Persona(
        p_wrong=r.choice([0.0, 0.05, 0.1, 0.25]),
        p_direct=r.choice([0.0, 0.3, 0.6]),
        p_find=r.choice([0.0, 0.3, 0.7]),
        p_repeat=r.choice([0.0, 0.0, 0.1]),
        backtracks=r.random() < 0.7,
        give_up_turn=r.randint(2, 3 * hops) if r.random() < 0.08 else None,
    )


def _actions(messages: list[dict]) -> list[tuple[str, dict]]:
    return [(tc.name, tc.args() or {}) for _, tc in Conversation.from_openai(messages).tool_calls()]


def _last_observation(messages: list[dict]):
    if not messages or messages[-1].get("role") != "tool":
        return None
    try:
        return json.loads(messages[-1]["content"])
    except (json.JSONDecodeError, TypeError):
        return None


def _article_phrase(desc: str) -> str:
    if not desc:
        return "the entity the clue points to"
    d = desc[0].lower() + desc[1:]
    return ("an " if d[:1] in "aeiou" else "a ") + d


def _call(name: str, turn: int, **args) -> dict:
    return {"id": f"call_{turn}_0", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _say(text: str, call: dict | None = None) -> dict:
    msg = {"role": "assistant", "content": text}
    if call is not None:
        msg["tool_calls"] = [call]
    return msg


class _Chain:
    """The gold chain and where the agent stands on it, re-derived from its actions."""

    def __init__(self, gold, actions: list[tuple[str, dict]]):
        q = gold.question
        self.ids, self.titles, self.anchors, self.desc = list(q.path), list(q.titles), gold.anchors, gold.descriptions
        self.k = len(self.ids) - 1
        self._index = {pid: j for j, pid in enumerate(self.ids)}
        self._index.update({normalize_answer(t): j for j, t in enumerate(self.titles)})
        self.pos, self.lost, self.current, self.opens = -1, False, None, 0
        self.wrong_opens = 0
        self.searches_since_open = 0
        for name, args in actions:
            if name == "open":
                self.opens += 1
                self.searches_since_open = 0
                j = self.gold_index(args.get("page"))
                self.current = args.get("page")
                if j is not None and j >= self.pos:
                    self.pos, self.lost, self.wrong_opens = j, False, 0
                elif j is None:
                    self.lost, self.wrong_opens = True, self.wrong_opens + 1
            elif name == "search":
                self.searches_since_open += 1

    def gold_index(self, page) -> int | None:
        if not isinstance(page, str):
            return None
        j = self._index.get(page)
        return j if j is not None else self._index.get(normalize_answer(page))

    def target(self) -> int:
        return min(self.pos + 1, self.k)

    def queries(self, j: int) -> list[str]:
        """Ways to search for gold page ``j``."""
        if j == 0:
            return [self.titles[0], f"{self.titles[0]} {self.desc[0]}".strip()]
        clue, d = self.anchors[j - 1], self.desc[j]
        return [clue, f"{clue} {d}".strip(), d or clue, f"{self.titles[j - 1]} {clue}"]


def next_turn(messages: list[dict], sample_index: int, hint: dict) -> dict:
    """The oracle agent's next assistant message for the conversation so far."""
    gold = hint["gold"]
    actions = _actions(messages)
    turn = sum(1 for m in messages if m.get("role") == "assistant") + 1
    c = _Chain(gold, actions)
    me = persona(gold.seed, sample_index, c.k)
    rnd = random.Random(derive_seed(gold.seed, "turn", sample_index, turn))
    obs = _last_observation(messages)
    last = actions[-1] if actions else None
    used = {(n, json.dumps(a, sort_keys=True)) for n, a in actions}

    def search(text: str, query_options: list[str], start: int = 0) -> dict | None:
        # Like a careful agent, never send the very same search twice (the repeat persona aside).
        for k in range(len(query_options)):
            q = query_options[(start + k) % len(query_options)]
            if ("search", json.dumps({"query": q}, sort_keys=True)) not in used:
                return _say(text, _call("search", turn, query=q))
        return None

    def open_clue(text: str) -> dict:
        return _say(text, _call("open", turn, page=c.anchors[j - 1]))

    if me.give_up_turn is not None and turn >= me.give_up_turn:
        return _say("I cannot pin down the remaining links with confidence. <answer>unknown</answer>")
    if last is None:
        return _say(f"I start from {c.titles[0]}. Let me search for it.", _call("search", turn, query=c.queries(0)[0]))
    name, args = last
    if name == "search" and me.p_repeat and rnd.random() < me.p_repeat:
        return _say("Let me run that search once more.", _call("search", turn, **args))

    j = c.target()
    fallback = (open_clue(f"Searching does not surface it; the page should be titled '{c.anchors[j - 1]}', "
                          "so let me open it directly.") if j > 0 else
                _say("I could not find the starting page. <answer>unknown</answer>"))
    if name == "search":
        results = [r.get("page_id") for r in obs] if isinstance(obs, list) else []
        if c.ids[j] in results:
            others = [p for p in results if p != c.ids[j] and p not in c.ids[: j + 1]
                      and ("open", json.dumps({"page": p})) not in used]
            pick = rnd.choice(others) if others and rnd.random() < me.p_wrong else c.ids[j]
            return _say("One of these results looks like the entity I need; let me read it.",
                        _call("open", turn, page=pick))
        if c.searches_since_open < 2:
            again = search("The results do not show it; let me rephrase the search.", c.queries(j),
                           rnd.randrange(len(c.queries(j))))
            if again is not None:
                return again
        if j == 0 and results and ("open", json.dumps({"page": results[0]})) not in used:
            return _say("I will try the best result.", _call("open", turn, page=results[0]))
        return fallback

    if name == "open" and (not isinstance(obs, dict) or "error" in obs):
        return search("That page did not open; let me search instead.", c.queries(j)) or \
            _say("I cannot reach the next page. <answer>unknown</answer>")

    if name == "open" and c.lost:
        page_title = obs.get("title", "") if isinstance(obs, dict) else ""
        if c.opens > c.k or c.wrong_opens >= 2 or not me.backtracks and rnd.random() < 0.5:
            return _say(f"The chain seems to end at {page_title}. <answer>{page_title}</answer>")
        text = (f"{page_title} does not fit the clue. Let me go back and search again." if me.backtracks else
                "This page may still lead on; let me look for the next clue.")
        return search(text, c.queries(j), rnd.randrange(len(c.queries(j)))) or fallback

    # On the gold chain at position c.pos (after an open or a find).
    if c.pos == c.k:
        if name == "open" and rnd.random() < me.p_find * 0.5:
            return _say("Let me confirm this is the entity the last clue describes.",
                        _call("find", turn, page=c.ids[c.k], text=c.titles[c.k].split(" (")[0]))
        return _say(f"Following every link of the chain leads to {c.titles[c.k]}. <answer>{c.titles[c.k]}</answer>")
    clue = c.anchors[c.pos]
    if name == "open" and rnd.random() < me.p_find:
        return _say(f"{c.titles[c.pos]} should mention the next entity; let me find the passage.",
                    _call("find", turn, page=c.ids[c.pos], text=clue))
    nxt = c.pos + 1
    if nxt == c.k or rnd.random() < me.p_direct:  # the answer page is masked from search: open it by name
        return _say(f"The article mentions {clue}; let me open that page.", _call("open", turn, page=clue))
    qs = c.queries(nxt)
    j = nxt
    return search(f"Next I need {_article_phrase(gold.descriptions[nxt])}; let me search for it.", qs,
                  rnd.randrange(len(qs))) or open_clue(f"The article mentions {clue}; let me open that page.")
