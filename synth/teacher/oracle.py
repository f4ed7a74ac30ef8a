"""The ``oracle`` teacher: the offline default backend.

It is deterministic and works from the gold path and its evidence, passed as the
call's ``hint`` (never sent anywhere, never part of a cache key).  It answers with
the same message shapes as a real model -- JSON in ``content`` for question
writing, ``tool_calls`` during rollouts -- so every stage runs unchanged on it.

It dispatches on the call's :class:`~synth.teacher.tasks.Task` (``hint["task"]``):

- ``question`` / ``subgraph_question``: a question from templates over the page
  descriptions and the evidence, through every entity of the chain.
- ``obfuscate``: blurs the named start entity into its description.
- ``closed_book``: knows the answer only for chains of at most two hops.
- ``solvable``: answers when every gold page is in the context.
- ``agent``: a ReAct agent over the real tools (:mod:`synth.teacher.oracle_agent`).
- ``judge``: an answer is correct when it names the gold answer or an alias.
"""

from __future__ import annotations

import json
import random
from typing import Any

from synth.text.answers import mentions, names_of
from synth.teacher.tasks import Source, json_message
from synth.engine.seeding import derive_seed
from synth.teacher.config import TeacherConfig
from synth.teacher.types import ChatResponse

OPENERS = ["Start from the Wikipedia article on {t}.", "Begin with the article about {t}.", "Open the article on {t}."]
FIRST = ["It mentions {d}.", "That article links to {d}.", "Its text refers to {d}."]
NEXT = ["The latter's article mentions {d}.", "That article in turn links to {d}.", "Its article refers to {d}.",
        "From there, the article mentions {d}."]
BACK = ["It is mentioned in the article on {d}.", "It is linked from the article on {d}.",
        "The article on {d} refers to it."]
CLOSERS = ["What is the title of the last article in this chain?", "Which article is reached at the end of the chain?",
           "Name the final entity of this chain."]


def _article(desc: str) -> str:
    return ("an " if desc[:1].lower() in "aeiou" else "a ") + desc


def describe(entity: dict, avoid: list[str]) -> str:
    """A description phrase for an entity that never names anything in ``avoid``."""
    d = (entity.get("description") or "").strip()
    if not d or any(mentions(d, n) for n in avoid):
        return "another topic"
    return _article(d[0].lower() + d[1:])


def chain_question(chain: list[dict], rnd: random.Random, backward: list[bool] | None = None) -> tuple[str, list[dict]]:
    """Question text and hops (sub-question + bridge) for a chain of entities, from templates.

    ``backward[i]`` says hop i follows a link from the next entity to the current one.
    """
    answer_names = names_of(chain[-1])
    parts = [rnd.choice(OPENERS).format(t=chain[0]["title"])]
    hops = []
    for i, e in enumerate(chain[1:], start=1):
        d = describe(e, answer_names)
        prev = chain[i - 1]["title"]
        if backward and backward[i - 1]:
            parts.append(rnd.choice(BACK).format(d=d.split(" ", 1)[-1] if d != "another topic" else d))
            sub = f"Which entity, {d}, has an article that mentions {prev}?"
        else:
            parts.append(rnd.choice(FIRST if i == 1 else NEXT).format(d=d))
            sub = f"Which entity, {d}, does the article on {prev} mention?"
        hops.append({"sub_question": sub, "bridge": e["title"]})
    parts.append(rnd.choice(CLOSERS))
    return " ".join(parts), hops


def subgraph_chain(src: Source, min_hops: int, rnd: random.Random) -> tuple[list[dict], list[bool]] | None:
    """A simple path along the subgraph's links (either direction) with at least ``min_hops`` hops:
    the longest found from seeded starts, with whether each hop runs against its link."""
    by_id = {e["page_id"]: e for e in src.entities}
    adj: dict[str, list[str]] = {}
    forward = {(l.src_id, l.dst_id) for l in src.links}
    for a, b in sorted(forward):
        adj.setdefault(a, []).append(b)
        adj.setdefault(b, []).append(a)
    best: list[str] = []
    starts = sorted(by_id)
    rnd.shuffle(starts)
    for s in starts:
        stack = [[s]]
        while stack:
            path = stack.pop()
            if len(path) > len(best):
                best = path
            if len(best) > min_hops + 2:
                break
            nxt = [n for n in adj.get(path[-1], []) if n not in path and n in by_id]
            rnd.shuffle(nxt)
            stack.extend(path + [n] for n in nxt)
        if len(best) > min_hops + 2:
            break
    if len(best) - 1 < min_hops:
        return None
    return [by_id[p] for p in best], [(a, b) not in forward for a, b in zip(best, best[1:])]


class OracleModel:
    """Deterministic scripted teacher; see the module docstring."""

    def __init__(self, cfg: TeacherConfig, **kw: Any):
        self.cfg = cfg
        self.name = cfg.model
        from synth.engine.codekey import code_hash

        # The oracle's answers are its code: a change to it must not be served old cached replies.
        self.cache_salt = "@" + code_hash("synth.teacher.oracle")

    async def aclose(self) -> None:
        """Nothing to close: the oracle holds no connections."""

    async def chat(self, messages: list[dict], tools: list[dict] | None = None, *, sample_index: int = 0,
                   hint: Any = None) -> ChatResponse:
        """One assistant turn for ``messages``, decided from ``hint``."""
        if not isinstance(hint, dict) or "task" not in hint:
            message = {"role": "assistant", "content": "I can only answer hopforge tasks (no hint given)."}
        else:
            message = getattr(self, "_" + hint["task"].name)(messages, tools, sample_index, hint)
        prompt_chars = sum(len(m.get("content") or "") for m in messages)
        out_chars = len(message.get("content") or "") + len(json.dumps(message.get("tool_calls") or []))
        usage = {"prompt_tokens": prompt_chars // 4 + 1, "completion_tokens": out_chars // 4 + 1}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        # A simulated, deterministic latency: 200 ms to first token plus 20 ms per output token.
        simulated = round(0.2 + 0.02 * usage["completion_tokens"], 3)
        return ChatResponse(message=message, usage=usage, finish_reason=finish, model=self.name,
                            model_latency_s=simulated)

    # ---- tasks ---------------------------------------------------------------------------
    def _question(self, messages, tools, sample_index, hint) -> dict:
        src: Source = hint["source"]
        rnd = random.Random(derive_seed(hint["seed"], "oracle-question", sample_index))
        text, hops = chain_question(src.entities, rnd)
        answer = src.entities[-1]
        return json_message({"question": text, "answer": answer["title"], "answer_aliases": names_of(answer)[1:],
                              "hops": hops})

    def _subgraph_question(self, messages, tools, sample_index, hint) -> dict:
        src: Source = hint["source"]
        rnd = random.Random(derive_seed(hint["seed"], "oracle-subgraph", sample_index))
        found = subgraph_chain(src, hint["min_hops"], rnd)
        if found is None:
            return {"role": "assistant", "content": "This group has no chain of links long enough for a question."}
        chain, backward = found
        text, hops = chain_question(chain, rnd, backward)
        return json_message({"question": text, "start": chain[0]["title"], "answer": chain[-1]["title"],
                              "answer_aliases": names_of(chain[-1])[1:], "hops": hops})

    def _obfuscate(self, messages, tools, sample_index, hint) -> dict:
        src: Source = hint["source"]
        start = src.entities[0]
        blurred = hint["question"].replace(start["title"], "the " + describe(start, []).split(" ", 1)[-1])
        return json_message({"question": blurred})

    def _closed_book(self, messages, tools, sample_index, hint) -> dict:
        if len(hint["titles"]) <= 3:  # a chain of at most two hops is "common knowledge" to the oracle
            return {"role": "assistant", "content": f"<answer>{hint['answer']}</answer>"}
        return {"role": "assistant", "content": "I am not sure. <answer>I don't know</answer>"}

    def _solvable(self, messages, tools, sample_index, hint) -> dict:
        context = "\n".join(m.get("content") or "" for m in messages)
        if all(t in context for t in hint["titles"]):
            return {"role": "assistant", "content": f"<answer>{hint['answer']}</answer>"}
        return {"role": "assistant", "content": "<answer>unknown</answer>"}

    def _judge(self, messages, tools, sample_index, hint) -> dict:
        pred = hint["prediction"] or ""
        ok = any(mentions(pred, n) or mentions(n, pred) for n in [hint["answer"], *hint["aliases"]])
        return json_message({"correct": ok, "reason": "names the gold answer" if ok else "a different answer"})

    def _agent(self, messages, tools, sample_index, hint) -> dict:
        from synth.teacher.oracle_agent import next_turn

        return next_turn(messages, sample_index, hint)


def make_oracle(cfg: TeacherConfig, **kw: Any) -> OracleModel:
    """The backend factory for ``teacher.backend: oracle``."""
    return OracleModel(cfg, **kw)
