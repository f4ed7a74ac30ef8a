"""Hand-made questions and traces for the filter and report tests.

``make_trace`` writes a valid OpenAI-format ReAct conversation over the tools
``search`` / ``open`` / ``find`` (one tool call per assistant turn, each answered by a
``tool`` message, then a final ``<answer>``), and fills every :class:`Trace` field
consistently with it.  Tests then break exactly one thing (``dataclasses.replace``) to
make a filter fire; ``.to_row()`` gives the table row.
"""

from __future__ import annotations

import json
from typing import Any

from synth.engine.records import Hop, Question, ToolCount, Trace
from synth.tools.schema import tool_schemas_json

SYSTEM = ("You answer multi-hop questions by searching a local Wikipedia. Use the tools search, open and find; "
          "give the final answer as <answer>...</answer>.")
TOOLS_JSON = tool_schemas_json()


def make_question(question_id: str = "q1", *, path: list[str] | None = None, titles: list[str] | None = None,
                  question: str | None = None, answer: str | None = None, aliases: list[str] | None = None,
                  teacher_model: str = "teacher-a", split: str = "sft") -> Question:
    """A question; by default a 3-hop chain A -> Bravo -> Charlie (planet) -> Delta City."""
    path = path or ["p0", "p1", "p2", "p3"]
    titles = titles or ["Alpha Station", "Bravo Harbour", "Charlie (planet)", "Delta City"]
    answer = answer if answer is not None else titles[-1]
    q = Question(
        question_id=question_id, kind="walk", source_id=f"w-{question_id}", path=path, titles=titles,
        question=question or f"Start from {titles[0]} and follow the links three times; which city do you reach "
        f"({question_id})?",
        answer=answer, answer_aliases=list(aliases or []), answer_page_id=path[-1],
        hops=[Hop(f"hop {i}", t, p) for i, (t, p) in enumerate(zip(titles[1:], path[1:]))],
        teacher_model=teacher_model, prompt_sha="abc", seed=0, split=split,
    )
    return q


def call(name: str, **args: Any) -> tuple[str, dict]:
    """A tool call spec for :func:`make_trace`."""
    return name, args


DEFAULT_CALLS = [call("search", query="Alpha Station"), call("open", page="p1"),
                 call("find", page="p2", text="Delta"), call("search", query="Delta City")]


def make_trace(trace_id: str = "t1", question_id: str = "q1", *, sample_index: int = 0,
               calls: list[tuple[str, dict]] | None = None, answer: str | None = "Delta City",
               thoughts: list[str] | None = None, final_text: str | None = None,
               gold_page_ids: list[str] | None = None, gold_first_seen: list[int] | None = None,
               teacher_model: str = "teacher-a", question: str = "Which city?",
               completion_tokens: int = 100, tools: str = TOOLS_JSON, split: str = "sft") -> Trace:
    """A valid trace: one tool call per turn, each answered, then ``<answer>answer</answer>``.

    ``thoughts[i]`` is the assistant text of turn i+1 (default "Step i."); ``final_text``
    replaces the whole last message (then ``answer`` only sets ``final_answer``).
    """
    calls = DEFAULT_CALLS if calls is None else calls
    messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    searched, opened = [], []
    counts = {"search": 0, "open": 0, "find": 0}
    for i, (name, args) in enumerate(calls):
        cid = f"{trace_id}-c{i}"
        text = thoughts[i] if thoughts and i < len(thoughts) else f"Step {i + 1}."
        messages.append({"role": "assistant", "content": text, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        messages.append({"role": "tool", "tool_call_id": cid, "name": name,
                         "content": json.dumps({"ok": True, "tool": name})})
        counts[name] = counts.get(name, 0) + 1
        if name == "open":
            opened.append(str(args.get("page")))
        if name == "search":
            searched.append(f"r{i}")
    last = final_text if final_text is not None else (
        f"I have it. <answer>{answer}</answer>" if answer is not None else "I could not find it.")
    messages.append({"role": "assistant", "content": last})
    gold = gold_page_ids or ["p0", "p1", "p2", "p3"]
    return Trace(
        trace_id=trace_id, question_id=question_id, sample_index=sample_index, messages=json.dumps(messages),
        tools=tools, final_answer=answer, stop_reason="answer" if answer is not None else "no_answer",
        n_turns=len(calls) + 1, n_tool_calls=len(calls),
        tool_counts=[ToolCount(name, n) for name, n in counts.items()], n_tool_errors=0, searched_page_ids=searched, opened_page_ids=opened,
        gold_page_ids=gold,
        gold_first_seen=gold_first_seen if gold_first_seen is not None else [1, 2, 3, 4][:len(gold)],
        prompt_tokens=1000, completion_tokens=completion_tokens, latency_s=1.0, teacher_model=teacher_model,
        error=None, split=split,
    )


__all__ = ["DEFAULT_CALLS", "SYSTEM", "TOOLS_JSON", "call", "make_question", "make_trace"]
