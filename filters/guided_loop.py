"""ACTGUIDE-RL's guidance played by verl: the agent loop ``hopforge_guided`` (``+agent=actguide``).

An ``rl_pool`` row the band measured all-wrong carries ``extra_info.guidance`` (the tool calls of the teacher's best
correct rollout, :func:`filters.guidance.guidance_calls`) and ``extra_info.guidance_k`` (k*, the fewest of them with
which the student succeeds, :mod:`sft.rlband`).  :class:`GuidedToolAgentLoop` is verl 0.9.1's ``tool_agent`` loop
(:class:`~verl.experimental.agent_loop.tool_agent_loop.ToolAgentLoop`) that, before the policy's first generation,
plays the first k guidance actions: for each, an assistant turn holding that one tool call, as the student's chat
template writes it (the message is the one verl's loop builds for a parsed call), then the call run by the loop's own
``_call_tool`` with the row's ``tools_kwargs`` (so the answer page stays masked) and its observation appended as
verl appends any observation.  This is the prefix ``rl_band`` measured k* with
(:func:`synth.rollout.loop.rollout_one`'s ``prefix``).

**Where the prefix goes: the response, with ``response_mask`` 0.**  verl cuts a trajectory's tokens at the end of
``run`` into ``prompt_ids`` (the tokens before the first response token) and ``response_ids``, and pads every prompt
to ``rollout.prompt_length`` (``data.max_prompt_length``: 2048 in the RL config, the harness alone is ~900 tokens);
a longer prompt is left-truncated, which would cut the system prompt, not the guidance.  k observations (search
results, 2,000-character page windows) do not fit there, and they do fit the response's budget
(``rollout.response_length``), the same budget an unguided trajectory's turns and observations share.  Every prefix
token has ``response_mask`` 0, as verl gives tool observations: the policy loss, the KL loss and the entropy are
taken over the policy's own continuation only (ACTGUIDE trains on it), while the policy's log-probs are computed
with the prefix in context.  Rollout log-probs (when verl asks for them) are 0 over the prefix, as over an
observation.  The policy's first ``generate`` sees the prompt and the prefix as its prompt ids.

**What the reward sees.**  The reward decodes the whole response, so it scores the trajectory as a whole: the
answer is the policy's, and the guided calls count as calls of the trajectory (``filters/reward.py``'s
``tool_calls``, the step penalty, the evidence and rubric terms), as ``rl_band`` counted them when it measured k*
(the prefix turns are turns of the guided trace).  All ``rollout.n`` rollouts of a row play the same prefix, so in
a GRPO group what they add is common to the group.  ``hopforge``'s advantage estimator reads turns from
``response_mask`` and sees the prefix (one leading masked run) as no turn of the policy's.  Every output records
``guided_k`` (the actions played, 0 when none) and ``guidance_error`` (why a row's guidance was not played in
full, None otherwise) in ``extra_fields``, which verl's reward managers merge into the ``extra_info`` the reward
receives: a reward that should not count the guided calls can subtract them.

**Turns.**  The guided turns are not charged to ``multi_turn.max_assistant_turns`` / ``max_user_turns``: the
policy gets its own turns after them, as in ``rl_band``; ``num_turns`` counts them (the trajectory holds them).

**Bad guidance never stops a run.**  A row whose guidance cannot be played as written (not a JSON list of calls,
a k that is not an integer in 0..K, a call naming a tool the loop does not offer, arguments that are not a JSON
object) runs unguided, exactly as ``tool_agent`` would, with the reason in ``guidance_error`` and a warning naming
the question and the field.  Every action to be played is checked before the first is played, so a row is played
in full or not at all.  A row with ``guidance`` but no ``guidance_k`` (a teacher-band pool: k* was not measured)
runs unguided the same way.  A prefix that fills ``rollout.response_length`` ends the trajectory there, as an
observation that fills it does in ``tool_agent``.

**Knob.**  ``hopforge.guidance.max_guided`` (``configs/rl/agent/actguide.yaml``; null: k*): play at most this
many actions (0 turns guidance off), e.g. to anneal the guidance between resumed runs.  Rows without guidance
(or with k = 0) run exactly as ``tool_agent`` does; their output differs only by the two ``extra_fields`` keys.

This module imports verl; nothing verl-free imports it (verl loads it from ``configs/rl/agent/actguide_loops.yaml``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from verl.experimental.agent_loop.agent_loop import register
from verl.experimental.agent_loop.tool_agent_loop import AgentData, AgentState, ToolAgentLoop
from verl.experimental.agent_loop.tool_parser import FunctionCall
from verl.utils.tokenizer.chat_template import apply_chat_template
from verl.utils.tokenizer.tokenizer import normalize_token_ids

log = logging.getLogger("hopforge")

NAME = "hopforge_guided"
# the keys every output of this loop carries in extra_fields (the same keys for every row: verl concatenates them)
GUIDED_K, GUIDANCE_ERROR = "guided_k", "guidance_error"


@dataclass(frozen=True, slots=True)
class GuidancePlan:
    """The guidance actions to play (``[(name, arguments)]``), or why none is played (``error``)."""

    actions: tuple[tuple[str, dict], ...] = ()
    error: str | None = None


def _as_int(v: Any) -> int | None:
    """An integer (a numpy integer, an integral float as a nullable column may give), else None."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f.is_integer() else None


def guidance_plan(extra_info: Mapping | None, tool_names: Iterable[str], max_guided: int | None = None) -> GuidancePlan:
    """What a row's ``extra_info`` asks the loop to play: the first ``min(guidance_k, max_guided)`` calls of
    ``guidance``, each checked against ``tool_names`` (the tools the loop offers this row); an empty plan with no
    error for a row without guidance (or k = 0), an empty plan with the reason for one that cannot be played."""
    extra = extra_info or {}
    raw, k_raw = extra.get("guidance"), extra.get("guidance_k")
    if k_raw is None:
        return GuidancePlan(error=None if raw in (None, "", "[]") else
                            "guidance_k: null (k* was not measured: rl.band_by teacher); the row runs unguided")
    k = _as_int(k_raw)
    if k is None or k < 0:
        return GuidancePlan(error=f"guidance_k: {k_raw!r} is not a non-negative integer")
    n = k if max_guided is None else min(k, max(int(max_guided), 0))
    if n == 0:
        return GuidancePlan()
    try:
        calls = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as e:
        return GuidancePlan(error=f"guidance: not JSON ({e})")
    if not isinstance(calls, list) or not all(isinstance(c, Mapping) for c in calls):
        return GuidancePlan(error="guidance: not a JSON list of {name, arguments} objects")
    if k > len(calls):
        return GuidancePlan(error=f"guidance_k: {k} is above the {len(calls)} guidance actions")
    names = set(tool_names)
    actions = []
    for i, c in enumerate(calls[:n]):
        name, args = c.get("name"), c.get("arguments")
        if not isinstance(name, str) or name not in names:
            return GuidancePlan(error=f"guidance[{i}].name: {name!r} is not a tool of this loop "
                                      f"({', '.join(sorted(names)) or 'none'})")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                pass
        if not isinstance(args, Mapping):
            return GuidancePlan(error=f"guidance[{i}].arguments: {c.get('arguments')!r} is not a JSON object")
        actions.append((name, dict(args)))
    return GuidancePlan(actions=tuple(actions))


def max_guided_of(config: Any) -> int | None:
    """``hopforge.guidance.max_guided`` of the trainer config (None when unset)."""
    from omegaconf import OmegaConf

    if config is None:
        return None
    v = OmegaConf.select(config, "hopforge.guidance.max_guided", default=None) if OmegaConf.is_config(config) else (
        ((config.get("hopforge") or {}).get("guidance") or {}).get("max_guided"))
    if v is None:
        return None
    n = _as_int(v)
    if n is None or n < 0:
        raise ValueError(f"hopforge.guidance.max_guided must be null or an integer >= 0, not {v!r}")
    return n


@register(NAME)
class GuidedToolAgentLoop(ToolAgentLoop):
    """verl's ``tool_agent`` loop that plays a row's first k guidance actions before the policy's first turn
    (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_guided = max_guided_of(self.config)
        self._extra_info: Mapping = {}
        self._played = self._turns = 0
        self._error: str | None = None

    async def run(self, sampling_params: dict[str, Any], priority: int = 0, **kwargs):
        # verl builds one loop per trajectory (AgentLoopWorker._run_agent_loop), so the row's state lives here
        self._extra_info, self._played, self._turns, self._error = kwargs.get("extra_info") or {}, 0, 0, None
        output = await super().run(sampling_params, priority, **kwargs)
        output.num_turns += self._turns
        output.extra_fields.update({GUIDED_K: self._played, GUIDANCE_ERROR: self._error})
        return output

    async def _handle_pending_state(self, agent_data: AgentData, sampling_params: dict[str, Any]) -> AgentState:
        state = await super()._handle_pending_state(agent_data, sampling_params)
        tools = getattr(agent_data, "_active_tools", self.tools)
        plan = guidance_plan(self._extra_info, tools, self.max_guided)
        if plan.error:
            self._skip(plan.error)
        if state != AgentState.GENERATING or not plan.actions:
            return state
        return await self._play(agent_data, plan.actions)

    async def _play(self, agent_data: AgentData, actions: tuple[tuple[str, dict], ...]) -> AgentState:
        """Append each action's assistant turn and observation to the trajectory, with response_mask 0."""
        schemas = getattr(agent_data, "_active_tool_schemas", self.tool_schemas)
        for i, (name, args) in enumerate(actions):
            agent_data.tool_calls = [FunctionCall(name=name, arguments=json.dumps(args, ensure_ascii=False))]
            message = self._build_assistant_message("", agent_data)
            turn_ids = await self.loop.run_in_executor(None, self._turn_ids, agent_data.messages, message, schemas)
            if turn_ids is None:
                agent_data.tool_calls = []
                self._skip(f"guidance[{i}]: the chat template does not write this call as a continuation of the "
                           f"generation prompt; {i} of {len(actions)} actions played")
                return AgentState.GENERATING
            merged, mask, _ = await self.ct_merge_assistant_token(agent_data.prompt_ids, turn_ids,
                                                                  agent_data.response_mask)
            agent_data.prompt_ids = merged.token_ids
            agent_data.response_mask = [0] * len(mask)  # the whole prefix so far is guidance, none of it the policy's
            agent_data.messages.append(message)
            self._played, self._turns = i + 1, self._turns + 1
            full = f"the guidance filled rollout.response_length at action {i + 1} of {len(actions)}"
            if len(agent_data.response_mask) >= self.response_length:  # as tool_agent ends after a turn that fills it
                self._error = full
                return AgentState.TERMINATED
            state = await self._handle_processing_tools_state(agent_data)  # _call_tool with the row's tools_kwargs
            if state == AgentState.TERMINATED:  # the observation did not fit: verl ends the trajectory without it
                self._error = full
                return state
            agent_data.user_turns -= 1  # the policy's own turn budget starts after the guidance
            self._turns += 1
        agent_data.tool_calls = []
        return AgentState.GENERATING

    def _turn_ids(self, messages: list[dict], message: dict, schemas: list[dict]) -> list[int] | None:
        """The tokens the student's template writes for assistant turn ``message`` after the generation prompt
        (None when the template does not write it as a continuation of that prompt)."""
        kwargs = dict(self.apply_chat_template_kwargs or {})
        head = normalize_token_ids(apply_chat_template(self.tokenizer, messages, tokenize=True,
                                                       add_generation_prompt=True, tools=schemas, **kwargs))
        full = normalize_token_ids(apply_chat_template(self.tokenizer, [*messages, message], tokenize=True,
                                                       add_generation_prompt=False, tools=schemas, **kwargs))
        if full[: len(head)] != head or len(full) == len(head):
            return None
        return full[len(head):]

    async def _handle_generating_state(self, agent_data: AgentData, sampling_params: dict[str, Any],
                                       ignore_termination: bool = False) -> AgentState:
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        # After a prefix, the first generation's log-probs start after it: give the prefix 0, as verl gives an
        # observation (a no-op for an unguided row, whose two lists always have one length).
        short = len(agent_data.response_mask) - len(agent_data.response_logprobs)
        if agent_data.response_logprobs and short > 0:
            agent_data.response_logprobs = [0.0] * short + agent_data.response_logprobs
        return state

    def _skip(self, error: str) -> None:
        self._error = error
        log.warning("hopforge_guided: the guidance of question %s is not played in full: %s",
                    (self._extra_info or {}).get("question_id"), error)


__all__ = ["GUIDANCE_ERROR", "GUIDED_K", "GuidancePlan", "GuidedToolAgentLoop", "NAME", "guidance_plan",
           "max_guided_of"]
