"""The ``oracle`` teacher: the offline default backend.

It is deterministic and works from the gold path and its evidence, passed as the
call's ``hint`` (never sent anywhere, never part of a cache key).  It answers with
the same message shapes as a real model -- JSON in ``content`` for question
writing, ``tool_calls`` during rollouts -- so every stage runs unchanged on it.

It dispatches on the call's :class:`~synth.teacher.tasks.Task` (``hint["task"]``):

- ``question`` / ``subgraph_question``: a question through every entity of the chain, each
  hop's clue quoted from that hop's evidence (:mod:`synth.teacher.oracle_questions`).
- ``repair``: the same question with other clue choices for the hop a validator named.
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
from synth.teacher.oracle_questions import chain_question, subgraph_chain
from synth.teacher.tasks import Source, json_message
from synth.engine.seeding import derive_seed
from synth.teacher.config import TeacherConfig
from synth.teacher.types import ChatResponse


def describe(entity: dict) -> str | None:
    """The entity's description as a noun phrase ("the simplest aldehyde"), or None when it has none."""
    d = (entity.get("description") or "").strip()
    return "the " + d[0].lower() + d[1:] if d else None


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

    # ---- tasks ----------------------------------------------------------------------------
    def _question(self, messages, tools, sample_index, hint) -> dict:
        src: Source = hint["source"]
        return _written(src.entities, src.links, derive_seed(hint["seed"], "oracle-question", sample_index),
                        max_words=hint.get("max_words", 220))

    def _subgraph_question(self, messages, tools, sample_index, hint) -> dict:
        return self._from_subgraph(hint, sample_index, "oracle-subgraph")

    def _from_subgraph(self, hint: dict, sample_index: int, stream: str, **fixes: Any) -> dict:
        src: Source = hint["source"]
        found = subgraph_chain(src.entities, src.links, hint["min_hops"],
                               random.Random(derive_seed(hint["seed"], stream, sample_index)))
        if found is None:
            return {"role": "assistant", "content": "This group has no chain of links long enough for a question."}
        return _written(found[0], src.links, derive_seed(hint["seed"], "oracle-question", sample_index),
                        start=True, max_words=hint.get("max_words", 220), **fixes)

    def _repair(self, messages, tools, sample_index, hint) -> dict:
        """Rewrite a rejected question with other clue choices: a new window for the hop the check
        named (every hop when it named none), short clues for ``length``, another chain for a
        subgraph's ``skippable_hop``."""
        src: Source = hint["source"]
        hop = hint.get("hop")
        fixes = {"fix": frozenset([hop]) if isinstance(hop, int) else None, "short": hint["reason"] == "length"}
        if src.kind == "walk":
            return _written(src.entities, src.links, derive_seed(hint["seed"], "oracle-question", sample_index),
                            max_words=hint.get("max_words", 220), **fixes)
        stream = "oracle-subgraph-repair" if hint["reason"] == "skippable_hop" else "oracle-subgraph"
        return self._from_subgraph(hint, sample_index, stream, **fixes)

    def _obfuscate(self, messages, tools, sample_index, hint) -> dict:
        src: Source = hint["source"]
        start = src.entities[0]
        phrase = describe(start)
        blurred = hint["question"].replace(start["title"], phrase) if phrase else hint["question"]
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


def _written(chain: list[dict], links: list, seed: int, start: bool = False, **fixes: Any) -> dict:
    """The JSON reply for a question through ``chain`` (with ``start`` for a subgraph question)."""
    text, hops = chain_question(chain, links, seed, **fixes)
    answer = chain[-1]
    obj = {"question": text, "answer": answer["title"], "answer_aliases": names_of(answer)[1:], "hops": hops}
    if start:
        obj = {"question": text, "start": chain[0]["title"], **{k: v for k, v in obj.items() if k != "question"}}
    return json_message(obj)


def make_oracle(cfg: TeacherConfig, **kw: Any) -> OracleModel:
    """The backend factory for ``teacher.backend: oracle``."""
    return OracleModel(cfg, **kw)
