"""The ReAct rollout loop over OpenAI tool calling.

A trajectory is ``system, user, (assistant [+ tool_calls], tool*)*, assistant <answer>``.
It ends when the assistant replies with ``<answer>…</answer>`` and no tool call
(``answer``), with neither (``no_answer``), with a reply cut at the teacher's max_tokens
(``truncated``, whatever it holds: the turn never ended), at ``rollout.max_turns`` (``max_turns``), when the context
reaches ``rollout.max_tokens`` (``max_tokens``), or when a teacher call fails for good
(``teacher_failed``).  Tool calls reach the loop in OpenAI's shape whatever protocol
carried them; the trace records which (``tool_protocol``).  A malformed or unknown
tool call becomes a tool message with the error; it never aborts the run.

With ``rollout.compress_observations`` only the latest ``rollout.keep_observations`` observations
are sent in full (earlier ones become a short placeholder, past actions, the model's own words and its
reasoning are kept); the stored trace always keeps every observation in full (OpenSeeker puts raw results
back likewise).  What the teacher saw at each turn is :func:`teacher_view` of the trace's messages up to
that turn, which the ``as_seen`` SFT rows (``sft.context``) and the student's harness reproduce.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from synth.teacher.prompting import extract_answer
from synth.teacher.tasks import AGENT
from synth.engine.records import TEACHER_FAILED as FAILED, Question, ToolCount, Trace
from synth.engine.conversation import GUIDED_CALL, ToolCall, parse_conversation
from synth.engine.seeding import derive_seed, short_hash
from synth.rollout.labels import step_labels
from synth.teacher.client import Teacher, TeacherError
from synth.tools.registry import tool_names
from synth.tools.toolbox import Toolbox

PLACEHOLDER = "[earlier observation omitted to save context; call the tool again if you need it]"


@dataclass(frozen=True)
class RolloutSettings:
    """What one trajectory's loop reads, built once per stage (a stage's config view checks each read):
    the turn and context limits, how the teacher's context is compressed, the run seed and the grounded
    filter's threshold (the step labels use it)."""

    max_turns: int
    max_tokens: int
    compress_observations: bool
    keep_observations: int
    seed: int
    min_grounding: float

    @classmethod
    def of(cls, cfg: Any) -> "RolloutSettings":
        """The teacher's rollouts: ``rollout.*``, ``seed`` and ``filters.min_grounding``."""
        r = cfg.rollout
        return cls(max_turns=r.max_turns, max_tokens=r.max_tokens, compress_observations=r.compress_observations,
                   keep_observations=r.keep_observations, seed=cfg.seed, min_grounding=cfg.filters.min_grounding)


@dataclass
class _Tally:
    n_turns: int = 0
    n_tool_calls: int = 0
    n_errors: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(tool_names(), 0))
    searched: list[str] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    server_cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    latency: float = 0.0


def trace_id(question_id: str, sample_index: int) -> str:
    """Stable id of one sample of one question."""
    return "t-" + short_hash(question_id, sample_index)


def compress(messages: list[dict], keep: int = 1) -> list[dict]:
    """The teacher's view: every tool observation but the latest ``keep`` ones is a placeholder (and always
    those after the last assistant turn are kept: they answer the calls it is acting on)."""
    tools = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    last_assistant = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    kept = set(tools[-keep:]) | {i for i in tools if i > last_assistant}
    return [dict(m, content=PLACEHOLDER) if m["role"] == "tool" and i not in kept else m
            for i, m in enumerate(messages)]


def teacher_view(messages: list[dict], compress_observations: bool, keep: int) -> list[dict]:
    """What the model is sent for its next turn after ``messages``: every message, or under
    ``compress_observations`` :func:`compress` with the latest ``keep`` observations in full.  The rollout
    loop sends it to the teacher and to the student under eval and the band; the ``as_seen`` SFT rows
    (:func:`filters.sftrows.sft_rows`) are it, turn by turn, so training and the student's harness agree."""
    return compress(messages, keep) if compress_observations else messages


def _assistant_message(resp_message: dict, turn: int) -> tuple[dict, list[ToolCall]]:
    """The assistant turn as stored (role, content, its reasoning as ``reasoning_content`` whatever field the
    server used, tool_calls with ids made up when the server gave none) and its tool calls.  The reasoning stays
    in the conversation, so every next request carries it back (the backend puts it where its server reads it:
    :func:`synth.teacher.types.outgoing_reasoning`)."""
    msg: dict[str, Any] = {"role": "assistant", "content": resp_message.get("content") or ""}
    if resp_message.get("reasoning_content"):
        msg["reasoning_content"] = resp_message["reasoning_content"]
    calls = [ToolCall.from_openai(tc, i, f"call_{turn}") for i, tc in enumerate(resp_message.get("tool_calls") or [])]
    if calls:
        msg["tool_calls"] = [tc.to_openai() for tc in calls]
    return msg, calls


async def rollout_one(teacher: Teacher, toolbox: Toolbox, question: Question, sample_index: int,
                      settings: RolloutSettings | Any, prefix: list[dict] | None = None) -> Trace:
    """Run one trajectory for ``question`` and return its :class:`Trace` (never raises TeacherError).

    ``settings``: :class:`RolloutSettings` (a config is read as the teacher's rollouts read it).

    ``prefix`` (ACTGUIDE-RL's guidance): tool calls ``{"name", "arguments"}`` played before the model's first
    turn, each as an assistant turn of that one call followed by its observation from ``toolbox``.  They are
    turns of the trace (counted, labelled), but the model still gets ``max_turns`` turns of its own after them.

    The teacher's hint is only a persona seed for the question (what the offline oracle varies its
    samples by); it reads the question from the conversation and never sees the gold chain.
    """
    rcfg = settings if isinstance(settings, RolloutSettings) else RolloutSettings.of(settings)
    messages = AGENT.format_input(question=question.question, max_turns=rcfg.max_turns)
    tools = toolbox.schemas()
    gold_ids = list(question.path)
    first_seen = [-1] * len(gold_ids)
    where = {pid: j for j, pid in enumerate(gold_ids)}
    t = _Tally(counts=dict.fromkeys(tool_names(getattr(toolbox, "cfg", None)), 0))  # the tools this rollout is offered
    stop, answer, error, protocol, reasoning = "max_turns", None, None, None, None
    served: list[str] = []  # the models that answered, as the endpoint named them (the trace's teacher_model)
    hint = AGENT.hint(seed=derive_seed(rcfg.seed, "rollout", question.question_id))

    def act(calls: list[ToolCall]) -> None:
        for tc in calls:
            obs, info = toolbox.call(tc.name, tc.arguments)
            messages.append({"role": "tool", "tool_call_id": tc.id, "name": tc.name, "content": obs})
            t.n_tool_calls += 1
            t.n_errors += info.is_error
            if tc.name in t.counts:
                t.counts[tc.name] += 1
            t.searched += info.searched_page_ids
            t.opened += info.opened_page_ids
            for pid in info.searched_page_ids + info.opened_page_ids:
                j = where.get(pid)
                if j is not None and first_seen[j] < 0:
                    first_seen[j] = t.n_turns

    for i, step in enumerate(prefix or []):
        t.n_turns += 1
        args = step.get("arguments")
        tc = ToolCall(f"{GUIDED_CALL}{i + 1}", str(step.get("name") or ""),
                      args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False))
        messages.append({"role": "assistant", "content": "", "tool_calls": [tc.to_openai()]})
        act([tc])
    budget = t.n_turns + rcfg.max_turns
    while t.n_turns < budget:
        context = teacher_view(messages, rcfg.compress_observations, rcfg.keep_observations)
        try:
            resp = await teacher.chat(context, tools, sample_index=sample_index, hint=hint)
        except TeacherError as e:
            stop, error = FAILED, f"{e.reason}: {e.detail}" if e.detail else e.reason
            break
        t.n_turns += 1
        if resp.model and resp.model not in served:
            served.append(resp.model)
        protocol = resp.tool_protocol or protocol
        reasoning = resp.reasoning_field or reasoning
        t.latency += resp.model_latency_s or 0.0
        t.prompt_tokens += resp.usage.get("prompt_tokens", 0)
        t.server_cached_prompt_tokens += resp.usage.get("server_cached_prompt_tokens", 0)
        t.completion_tokens += resp.usage.get("completion_tokens", 0)
        msg, calls = _assistant_message(resp.message, t.n_turns)
        messages.append(msg)
        if not calls:
            # A reply cut at max_tokens is neither an answer nor the model declining to give one: count it apart,
            # even when an <answer> tag appeared before the cut (the turn never ended; a model reciting its
            # instructions writes one).
            if resp.finish_reason == "length":
                stop = "truncated"
            else:
                answer = extract_answer(msg["content"])
                stop = "answer" if answer is not None else "no_answer"
            break
        act(calls)
        context_tokens = resp.usage.get("prompt_tokens", 0) + resp.usage.get("completion_tokens", 0)
        if context_tokens >= rcfg.max_tokens:
            stop = "max_tokens"
            break
    text = json.dumps(messages, ensure_ascii=False)
    # The step labels read the grounded filter's threshold, so a trace's labels agree with its filter verdict.
    labels = step_labels(parse_conversation(text), first_seen, t.n_turns, rcfg.min_grounding)
    return Trace(
        trace_id=trace_id(question.question_id, sample_index), question_id=question.question_id,
        sample_index=sample_index, messages=text,
        tools=json.dumps(tools, ensure_ascii=False), final_answer=answer, stop_reason=stop, n_turns=t.n_turns,
        n_tool_calls=t.n_tool_calls, tool_counts=[ToolCount(name, n) for name, n in t.counts.items()],
        n_tool_errors=t.n_errors, searched_page_ids=list(dict.fromkeys(t.searched)),
        opened_page_ids=list(dict.fromkeys(t.opened)), gold_page_ids=gold_ids, gold_first_seen=first_seen,
        prompt_tokens=t.prompt_tokens, completion_tokens=t.completion_tokens,
        latency_s=round(t.latency, 6), teacher_model="+".join(served) or teacher.cfg.model, error=error,
        split=question.split,
        tool_protocol=protocol or teacher.tool_protocol, server_cached_prompt_tokens=t.server_cached_prompt_tokens,
        step_labels=labels, reasoning_field=reasoning,
    )

