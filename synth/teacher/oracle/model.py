"""The ``oracle`` teacher: the offline default backend.

It is deterministic and works from the facts its call's hint carries (never sent
anywhere, never part of a cache key): the gold path, its evidence and a view of the
corpus around it.  It answers with the same message shapes as a real model -- JSON in
``content`` for question writing, ``tool_calls`` during rollouts -- so every stage runs
unchanged on it.  It dispatches on the hint's type (:mod:`synth.teacher.tasks`):

- :class:`QuestionHint` / :class:`SubgraphHint`: a question through every entity of the
  chain, each hop's clue a blurry phrase that only the previous page resolves
  (:mod:`synth.teacher.oracle.writer`), or ``{"no_clue": hop}`` when some hop has none.
- :class:`RepairHint`: the same question with other clues for the hop a validator named.
- :class:`ObfuscateHint`: blurs the named start entity into its description.
- :class:`ClosedBookHint`: knows the answer only for chains of at most two hops.
- :class:`SolvableHint`: answers when every gold page is in the context.
- :class:`AgentHint`: a ReAct agent over the real tools (:mod:`synth.teacher.oracle.agent`).
- :class:`JudgeHint`: an answer is correct when it names the gold answer or an alias.

Its answers to question tasks read the corpus view as well as the request.  Like a real
teacher's, they are cached by the request alone: a rebuild over a grown corpus reuses a
question the cache holds, and the validators, which read the current corpus, check it again
(and send it back for its one repair when it no longer holds), so adding pages pays only for
new walks.
"""

from __future__ import annotations

import json
import random
import threading
from typing import Any

from synth.engine.seeding import derive_seed
from synth.teacher.config import TeacherConfig
from synth.teacher.oracle.clues import ClueMaker
from synth.teacher.oracle.writer import NoClue, chain_question, clued_chain, subgraph_chain
from synth.teacher.tasks import (AgentHint, ClosedBookHint, JudgeHint, ObfuscateHint, QuestionHint, RepairHint,
                                 SolvableHint, Source, SubgraphHint, current_hint, json_message)
from synth.teacher.types import BaseChatModel, ChatResponse
from synth.text.answers import mentions, names_of

MAKERS = 16  # clue makers kept (one per shard in flight)


def describe(entity: dict) -> str | None:
    """The entity's description as a noun phrase ("the simplest aldehyde"), or None when it has none."""
    d = (entity.get("description") or "").strip()
    return "the " + d[0].lower() + d[1:] if d else None


class OracleModel(BaseChatModel):
    """Deterministic scripted teacher; see the module docstring."""

    def __init__(self, cfg: TeacherConfig, **kw: Any):
        self.cfg = cfg
        self.name = cfg.model
        from synth.engine.codekey import code_hash

        # The oracle's answers are its code: a change to it must not be served old cached replies.
        self.cache_salt = "@" + code_hash("synth.teacher.oracle")
        self._makers: dict[int, ClueMaker] = {}
        self._lock = threading.Lock()
        from synth.teacher.oracle.memory import Replays

        self._replays = Replays()  # the agent's memory of each rollout in flight, continued turn by turn

    async def chat(self, messages: list[dict], tools: list[dict] | None = None, *, sample_index: int = 0,
                   task: Any = None) -> ChatResponse:
        """One assistant turn for ``messages``, decided from the call's hint (:func:`current_hint`)."""
        message = self.answer(messages, sample_index, current_hint())
        prompt_chars = sum(len(m.get("content") or "") for m in messages)
        out_chars = len(message.get("content") or "") + len(json.dumps(message.get("tool_calls") or []))
        usage = {"prompt_tokens": prompt_chars // 4 + 1, "completion_tokens": out_chars // 4 + 1}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        # A simulated, deterministic latency: 200 ms to first token plus 20 ms per output token.
        simulated = round(0.2 + 0.02 * usage["completion_tokens"], 3)
        return ChatResponse(message=message, usage=usage, finish_reason=finish, model=self.name,
                            model_latency_s=simulated)

    def answer(self, messages: list[dict], sample_index: int, hint: Any) -> dict:
        """The assistant message for one call, by the hint's type."""
        match hint:
            case QuestionHint():
                return self._walk(hint.source, hint.seed, hint.corpus, sample_index)
            case SubgraphHint():
                return self._subgraph(hint.source, hint.seed, hint.min_hops, hint.corpus, sample_index)
            case RepairHint():
                return self._repair(hint, sample_index)
            case ObfuscateHint():
                return self._obfuscate(hint)
            case ClosedBookHint():
                if len(hint.titles) <= 3:  # a chain of at most two hops is "common knowledge" to the oracle
                    return {"role": "assistant", "content": f"<answer>{hint.answer}</answer>"}
                return {"role": "assistant", "content": "I am not sure. <answer>I don't know</answer>"}
            case SolvableHint():
                context = "\n".join(m.get("content") or "" for m in messages)
                found = all(t in context for t in hint.titles)
                return {"role": "assistant", "content": f"<answer>{hint.answer if found else 'unknown'}</answer>"}
            case JudgeHint():
                pred = hint.prediction or ""
                ok = any(mentions(pred, n) or mentions(n, pred) for n in [hint.answer, *hint.aliases])
                return json_message({"correct": ok, "reason": "names the gold answer" if ok else "a different answer"})
            case AgentHint():
                from synth.teacher.oracle.agent import next_turn

                return next_turn(messages, sample_index, hint.seed, self._replays)
        return {"role": "assistant", "content": "I can only answer hopforge tasks (no hint given)."}

    # ---- questions ----------------------------------------------------------------------------
    def _maker(self, corpus) -> ClueMaker:
        """One clue maker per corpus view (its search memo serves every question of a shard; shards on
        other threads have views of their own)."""
        with self._lock:
            maker = self._makers.get(id(corpus))
            if maker is None or maker.corpus is not corpus:
                maker = self._makers[id(corpus)] = ClueMaker(corpus)
                while len(self._makers) > MAKERS:
                    self._makers.pop(next(iter(self._makers)))
            return maker

    def _walk(self, src: Source, seed: int, corpus, sample_index: int, **fixes: Any) -> dict:
        if corpus is None:
            return _declined(0, "the oracle writes questions only against a corpus view")
        return _written(src.entities, derive_seed(seed, "oracle-question", sample_index), corpus,
                        self._maker(corpus), **fixes)

    def _subgraph(self, src: Source, seed: int, min_hops: int, corpus, sample_index: int, stream: str = "oracle-subgraph",
                  **fixes: Any) -> dict:
        if corpus is None:
            return _declined(0, "the oracle writes questions only against a corpus view")
        if subgraph_chain(src.entities, src.links, min_hops, random.Random(derive_seed(seed, stream, sample_index))) is None:
            return json_message({"no_chain": min_hops, "why": f"no chain of {min_hops} links or more in which "
                                 "no page links to one two steps on"})
        try:
            chain, text, hops = clued_chain(src.entities, src.links, min_hops,
                                            random.Random(derive_seed(seed, stream, sample_index, 0)),
                                            derive_seed(seed, "oracle-question", sample_index), corpus,
                                            self._maker(corpus), **fixes)
        except NoClue as e:
            return _declined(e.hop, f"{e}; " + "; ".join(e.why[:6]))
        return _reply(chain, text, hops, start=True)

    def _repair(self, hint: RepairHint, sample_index: int) -> dict:
        """Rewrite a rejected question with other clue choices: new clues for the hop the check named
        (every hop when it named none), short frames for ``length``, another chain for a subgraph's
        ``skippable_hop``."""
        src = hint.source
        fixes = {"fix": frozenset([hint.hop]) if isinstance(hint.hop, int) else None, "short": hint.reason == "length"}
        if src.kind == "walk":
            return self._walk(src, hint.seed, hint.corpus, sample_index, **fixes)
        stream = "oracle-subgraph-repair" if hint.reason == "skippable_hop" else "oracle-subgraph"
        return self._subgraph(src, hint.seed, hint.min_hops, hint.corpus, sample_index, stream, **fixes)

    def _obfuscate(self, hint: ObfuscateHint) -> dict:
        start = hint.source.entities[0]
        phrase = describe(start)
        blurred = hint.question.replace(start["title"], phrase) if phrase else hint.question
        return json_message({"question": blurred})


def _declined(hop: int, why: str) -> dict:
    """The reply for a source with no question: which hop has no clue, and why."""
    return json_message({"no_clue": hop + 1, "why": why})


def _written(chain: list[dict], seed: int, corpus, maker: ClueMaker, start: bool = False, **fixes: Any) -> dict:
    """The JSON reply for a question through ``chain`` (with ``start`` for a subgraph question)."""
    try:
        text, hops = chain_question(chain, seed, corpus, maker=maker, **fixes)
    except NoClue as e:
        return _declined(e.hop, f"{e}; " + "; ".join(e.why[:6]))
    return _reply(chain, text, hops, start)


def _reply(chain: list[dict], text: str, hops: list[dict], start: bool = False) -> dict:
    """The JSON reply for a written question (the subgraph's ``start`` named with ``start``)."""
    answer = chain[-1]
    obj = {"question": text, "answer": answer["title"], "answer_aliases": names_of(answer)[1:], "hops": hops}
    if start:
        obj = {"question": text, "start": chain[0]["title"], **{k: v for k, v in obj.items() if k != "question"}}
    return json_message(obj)


def make_oracle(cfg: TeacherConfig, **kw: Any) -> OracleModel:
    """The backend factory for ``teacher.backend: oracle``."""
    return OracleModel(cfg, **kw)
