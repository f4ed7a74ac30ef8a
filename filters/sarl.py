"""SARL (self-assessment RL) for verl 0.9.1: the ``hopforge_sarl`` agent loop.

verl's ``tool_agent`` loop (``ToolAgentLoop``) with one addition.  When a turn ends the episode on an answer (no
tool call, an ``<answer>...</answer>``), the same policy, through the same ``server_manager.generate``, assesses it
in an isolated context: a fresh conversation of the assessment prompt
(``synth/teacher/prompts/sarl_assess.jinja2``) holding only the question (the row's first user message), the
evidence (the policy's own steps: what it wrote and the tool calls it made, never an observation; the last
``evidence_chars`` characters) and the answer.  The assessment lists the question's essential constraints, the step
that resolves each, and ends with ``Verdict: COMPLETE`` or ``Verdict: INCOMPLETE`` (:func:`parse_verdict`).

- COMPLETE, or a verdict that cannot be read (recorded ``UNPARSED``): the episode ends on that answer.
- INCOMPLETE: the assessment goes back into the conversation as a tool observation (``role: tool``; hopforge's
  Qwen2.5 template writes it as a ``<tool_response>`` in a user turn), masked 0 in ``response_mask`` like every
  observation, so the policy is never trained on it as its own tokens and the reward's parser
  (:mod:`filters.solution`) sets it aside; the policy then goes on (more searches, a new answer) within the loop's
  limits (``multi_turn.max_assistant_turns``, ``max_user_turns``, ``data.max_response_length``), each new answer
  assessed again.  The assessment's own tokens never enter the response.

The loop records in ``AgentLoopOutput.extra_fields`` ``sarl_answers`` (the answer of each round, in order) and
``sarl_verdicts`` (the verdict of each assessment, :data:`filters.reward_modes.VERDICTS`).  verl's reward loop
(``AgentLoopWorker._compute_score`` hands them as ``tool_extra_fields``; the ``naive`` manager merges them into
``extra_info``) gives them to ``filters.reward.compute_score``, whose ``sarl`` mode scores the rounds.

**Knobs** (``hopforge.sarl`` in the trainer config, each optional): ``max_assessments`` (null: only the loop's
limits stop it), ``assess_max_tokens`` (1024, the assessment's ``max_tokens``), ``evidence_chars`` (8000) and
``prompt`` (``sarl_assess``, a prompt file of ``synth/teacher/prompts``).  ``+agent=sarl``
(``configs/rl/agent/sarl.yaml``) selects the loop and the reward mode; verl finds the class through
``rollout.agent.agent_loop_config_path`` (``configs/rl/agent/sarl_loops.yaml``), as the ``@register`` below does
where this module is imported.  This module imports verl: the reward (:mod:`filters.reward`) never imports it.
"""

from __future__ import annotations

import re
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import register
from verl.experimental.agent_loop.tool_agent_loop import AgentData, AgentState, ToolAgentLoop
from verl.utils.profiler import simple_timer

from synth.teacher.prompting import extract_answer, render
from synth.teacher.types import split_reasoning

from filters.reward_modes import COMPLETE, INCOMPLETE, UNPARSED

NAME = "hopforge_sarl"
DEFAULTS: dict[str, Any] = {"max_assessments": None, "assess_max_tokens": 1024, "evidence_chars": 8000,
                            "prompt": "sarl_assess"}

_VERDICT = re.compile(r"verdict\W{0,8}(INCOMPLETE|COMPLETE)\b", re.I)
_BARE = re.compile(r"^\W*(INCOMPLETE|COMPLETE)\W*$", re.I)
_OBSERVATION_TAGS = re.compile(r"</?tool_response>", re.I)

# What the policy reads after an INCOMPLETE verdict (a tool observation of the main conversation).
FEEDBACK = ("Self-assessment of your answer: INCOMPLETE.\n{assessment}\n\n"
            "Your answer is not final: resolve what is missing, then give a new <answer>...</answer>.")


def parse_verdict(text: str | None) -> str:
    """The verdict of an assessment: the last ``Verdict: COMPLETE|INCOMPLETE`` (case and punctuation aside, a
    ``<think>`` block set aside), else a last line that is the bare word; ``UNPARSED`` when neither is there."""
    body = split_reasoning(text)[0] or ""
    found = _VERDICT.findall(body)
    if found:
        return found[-1].upper()
    lines = [line for line in body.splitlines() if line.strip()]
    m = _BARE.match(lines[-1]) if lines else None
    return m.group(1).upper() if m else UNPARSED


def settings(config: Any) -> dict[str, Any]:
    """The loop's knobs from the trainer config's ``hopforge.sarl`` (:data:`DEFAULTS` for the missing ones); an
    unknown key is refused (a typo would otherwise be ignored)."""
    hopforge = config.get("hopforge") if config is not None else None
    given = dict((hopforge.get("sarl") if hopforge is not None else None) or {})
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown hopforge.sarl key(s) {', '.join(unknown)} (allowed: {', '.join(DEFAULTS)})")
    out = {**DEFAULTS, **given}
    if out["max_assessments"] is not None and int(out["max_assessments"]) < 0:
        raise ValueError("hopforge.sarl.max_assessments must be >= 0 (or null: the loop's limits only)")
    return out


@register(NAME)
class SarlAgentLoop(ToolAgentLoop):
    """verl's tool agent loop with SARL's isolated self-assessment after each answer (module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sarl = settings(self.config)
        # one instance per trajectory (verl instantiates the loop for every sample)
        self._answers: list[str] = []
        self._verdicts: list[str] = []
        self._steps: list[str] = []
        self._question = ""

    async def run(self, sampling_params: dict[str, Any], **kwargs):
        users = [m for m in kwargs["raw_prompt"] if m.get("role") == "user"]
        self._question = _text(users[0].get("content")) if users else ""
        output = await super().run(sampling_params, **kwargs)
        output.extra_fields.update({"sarl_answers": list(self._answers), "sarl_verdicts": list(self._verdicts)})
        return output

    async def _handle_generating_state(self, agent_data: AgentData, sampling_params: dict[str, Any],
                                       ignore_termination: bool = False) -> AgentState:
        before = len(agent_data.messages)
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        text = self.tokenizer.decode(agent_data.response_ids, skip_special_tokens=True)
        self._steps.append(text.strip())
        if state != AgentState.TERMINATED:
            return state
        answer = extract_answer(text)
        if answer is None or "<tool_call>" in text:
            return state  # the episode ends without an answer round (no answer, or a call cut by a limit)
        self._answers.append(answer)
        # the turn ended the episode itself (verl appended its message); a turn cut by a limit is final
        ended_itself = len(agent_data.messages) > before
        cap = self.sarl["max_assessments"]
        if not ended_itself or (cap is not None and len(self._verdicts) >= int(cap)):
            return state
        assessment = await self._assess(agent_data, sampling_params, answer)
        verdict = parse_verdict(assessment)
        self._verdicts.append(verdict)
        if verdict != INCOMPLETE:
            return state
        return await self._inject(agent_data, assessment)

    async def _assess(self, agent_data: AgentData, sampling_params: dict[str, Any], answer: str) -> str:
        """The policy's assessment of ``answer`` in a fresh conversation (its tokens never enter the response)."""
        messages = assessment_messages(self._question, self._steps, answer, self.sarl)
        # the chat template alone: not ct_build_initial_tokens, which would cut it to the row prompts' length
        prompt_ids = await self.loop.run_in_executor(
            None, lambda: self.continuous_token_builder.build_initial_tokens(messages, tools=None))
        params = {**sampling_params, "max_tokens": int(self.sarl["assess_max_tokens"])}
        with simple_timer("generate_sequences", agent_data.metrics):
            out = await self.server_manager.generate(request_id=uuid4().hex, prompt_ids=prompt_ids,
                                                     sampling_params=params)
        return self.tokenizer.decode(out.token_ids, skip_special_tokens=True)

    async def _inject(self, agent_data: AgentData, assessment: str) -> AgentState:
        """The INCOMPLETE assessment into the main conversation as an observation (mask 0), then the policy again."""
        previous = list(agent_data.messages)
        clean = _OBSERVATION_TAGS.sub("", split_reasoning(assessment)[0] or "").strip()
        agent_data.messages.append({"role": "tool", "content": FEEDBACK.format(assessment=clean)})
        schemas = getattr(agent_data, "_active_tool_schemas", self.tool_schemas)
        merge_result, response_mask, response_logprobs = await self.ct_merge_context_msg(
            previous, agent_data.messages, agent_data.prompt_ids, agent_data.response_mask,
            agent_data.response_logprobs if agent_data.response_logprobs else None, tools=schemas)
        if len(response_mask) >= self.response_length:
            return AgentState.TERMINATED
        agent_data.prompt_ids = merge_result.token_ids
        agent_data.response_mask = response_mask
        if agent_data.response_logprobs:
            agent_data.response_logprobs = response_logprobs or []
        agent_data.tool_calls = []
        agent_data.user_turns += 1
        return AgentState.GENERATING


def assessment_messages(question: str, steps: list[str], answer: str, knobs: dict[str, Any] | None = None) -> list:
    """The isolated assessment conversation: the prompt file rendered with the question, the policy's own steps
    (numbered; the last ``evidence_chars`` characters) and its answer."""
    knobs = {**DEFAULTS, **(knobs or {})}
    evidence = "\n\n".join(f"Step {i}: {s}" for i, s in enumerate(steps, 1) if s)
    limit = int(knobs["evidence_chars"])
    if limit and len(evidence) > limit:
        evidence = "(earlier steps cut)\n" + evidence[-limit:]
    return render(str(knobs["prompt"]), question=question, evidence=evidence or "(none)", answer=answer)


def _text(content: Any) -> str:
    """A message's text (a string, or the text parts of a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


__all__ = ["DEFAULTS", "FEEDBACK", "NAME", "SarlAgentLoop", "assessment_messages", "parse_verdict", "settings"]
