"""SARL: the ``hopforge_sarl`` agent loop driven through verl 0.9.1's own agent-loop path, and the ``sarl`` reward.

The loop runs as verl's ``AgentLoopWorker._run_agent_loop`` runs it: the class looked up by name in verl's agent-loop
registry (filled from ``configs/rl/agent/sarl_loops.yaml`` as the worker fills it from
``rollout.agent.agent_loop_config_path``), instantiated by Hydra with the composed ``+agent=sarl`` trainer config,
the student's tokenizer (the Qwen2.5 layout and hopforge's template) and a scripted ``server_manager`` whose
``generate`` answers the main conversation and the isolated assessments from two scripts; then verl's
post-processing pads it.  The reward is checked against hand-computed numbers for each transition and ``α^(n−1)``.
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

from filters.reward import DIAGNOSTIC_KEYS, REWARD_KEYS, compute_score
from helpers.verlloop import leaf_keys, verl_trainer_keys
from filters.reward_modes import SARL_TRANSITIONS, sarl_assess_reward, sarl_reward, sarl_rounds

ROOT = Path(__file__).resolve().parents[2]
RL_CONFIG_DIR = ROOT / "configs" / "rl"
LOOPS_YAML = RL_CONFIG_DIR / "agent" / "sarl_loops.yaml"
GT = {"target": ["Delta City", "Delta"]}
RIGHT, WRONG, OTHER = "Delta City", "Echo Town", "Foxtrot"
QUESTION = "Which city is the harbour of the station that Alpha Line ends at?"
SYSTEM = "You are a research agent with tools over a local copy of Wikipedia."
OBSERVATION = "OBS-7f3a: Bravo Harbour serves Delta City since 1901."  # what the search tool returns
ASSESS_MARK = "You check an answer"  # the assessment prompt's first words

needs_verl = pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="verl is not installed")


def solution(*answers: str) -> str:
    """A response as verl decodes it: each answer but the last followed by an injected assessment observation."""
    parts = []
    for a in answers[:-1]:
        parts.append(f"<answer>{a}</answer>user\n<tool_response>\nSelf-assessment: INCOMPLETE\n</tool_response>\n"
                     "assistant\n")
    return "".join(parts) + f"I have it. <answer>{answers[-1]}</answer>"


def rounds(answers: list[str], verdicts: list[str]) -> dict:
    return {"question_id": "q", "sarl_answers": answers, "sarl_verdicts": verdicts}


# ---- the reward ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answers, verdicts, want, n, assess", [
    # one round, assessed COMPLETE: right->right +1 / wrong->wrong -0.1
    ([RIGHT], ["COMPLETE"], 1 * 1 + 0.5 * 1, 1, 1.0),
    ([WRONG], ["COMPLETE"], 0 + 0.5 * -0.1, 1, -0.1),
    # wrong, INCOMPLETE, right, COMPLETE: wrong->right +1, right->right +1 -> 1 * 0.8 + 0.5 * 1 = 1.3
    ([WRONG, RIGHT], ["INCOMPLETE", "COMPLETE"], 1 * 0.8 + 0.5 * 1, 2, 1.0),
    # the turn limit stopped it before the second answer's assessment: wrong->right only -> 1.3
    ([WRONG, RIGHT], ["INCOMPLETE"], 1 * 0.8 + 0.5 * 1, 2, 1.0),
    # right, INCOMPLETE, wrong (no assessment left): right->wrong -2 -> 0 * 0.8 + 0.5 * -2 = -1.0
    ([RIGHT, WRONG], ["INCOMPLETE"], -1.0, 2, -2.0),
    # right, INCOMPLETE, wrong, COMPLETE: right->wrong -2, wrong->wrong -0.1 -> 0.5 * -1.05 = -0.525
    ([RIGHT, WRONG], ["INCOMPLETE", "COMPLETE"], 0.5 * (-2 - 0.1) / 2, 2, -1.05),
    # right, INCOMPLETE, right, COMPLETE: +1, +1 -> 0.8 + 0.5 = 1.3
    ([RIGHT, RIGHT], ["INCOMPLETE", "COMPLETE"], 0.8 + 0.5, 2, 1.0),
    # wrong, wrong, right over three rounds: -0.1, +1, +1 -> 1 * 0.8^2 + 0.5 * 1.9 / 3
    ([WRONG, OTHER, RIGHT], ["INCOMPLETE", "INCOMPLETE", "COMPLETE"], 0.64 + 0.5 * 1.9 / 3, 3, 1.9 / 3),
    # an unreadable verdict ends the episode as COMPLETE does: right->right
    ([RIGHT], ["UNPARSED"], 1.5, 1, 1.0),
    # an answer round the turn limit left unassessed: no assessment round, R = r_final
    ([RIGHT], [], 1.0, 1, 0.0),
])
def test_the_sarl_reward_by_hand(answers, verdicts, want, n, assess) -> None:
    got = compute_score("hopforge", solution(*answers), GT, rounds(answers, verdicts), mode="sarl")
    assert got["score"] == pytest.approx(want)
    assert got["sarl_rounds"] == n and got["sarl_assess"] == pytest.approx(assess)
    assert got["raw_sarl_assess"] == pytest.approx(assess) and got["raw_sarl_missing"] == 0.0
    assert got["raw_sarl_unparsed"] == verdicts.count("UNPARSED")
    assert got["acc"] == float(answers[-1] == RIGHT) and got["format_ok"] == 1.0
    assert set(got) == set(REWARD_KEYS) | set(DIAGNOSTIC_KEYS)


def test_the_transition_table_and_the_formula() -> None:
    assert SARL_TRANSITIONS == {(False, True): 1.0, (True, True): 1.0, (False, False): -0.1, (True, False): -2.0}
    assert sarl_rounds(["a", "b", "c"], ["INCOMPLETE", "INCOMPLETE", "COMPLETE"]) == [(0, 1), (1, 2), (2, 2)]
    assert sarl_rounds(["a", "b"], ["INCOMPLETE"]) == [(0, 1)]
    assert sarl_assess_reward([True], []) == 0.0
    assert sarl_reward(1.0, 3, 0.0) == pytest.approx(0.64) and sarl_reward(1.0, 1, 1.0, alpha=0.5, lam=2) == 3.0
    with pytest.raises(ValueError, match="each assessment follows an answer"):
        sarl_rounds(["a"], ["INCOMPLETE", "COMPLETE"])
    with pytest.raises(ValueError, match="unknown SARL verdict"):
        sarl_rounds(["a"], ["MAYBE"])


def test_alpha_and_lambda_are_knobs() -> None:
    extra = rounds([WRONG, RIGHT], ["INCOMPLETE", "COMPLETE"])
    got = compute_score("hopforge", solution(WRONG, RIGHT), GT, extra, mode="sarl", sarl_alpha=0.5, sarl_lam=0.2)
    assert got["score"] == pytest.approx(1 * 0.5 + 0.2 * 1)
    batch = compute_score(data_sources=["hopforge"] * 2, solution_strs=[solution(WRONG, RIGHT), solution(RIGHT)],
                          ground_truths=[GT, GT], extra_infos=[extra, rounds([RIGHT], ["COMPLETE"])], mode="sarl")
    assert [b["score"] for b in batch] == pytest.approx([1.3, 1.5])


def test_a_malformed_response_scores_zero_in_every_component_whatever_its_rounds() -> None:
    broken = solution(WRONG, RIGHT).replace("I have it.", '<tool_call>\n{"name": "browse"}\n</tool_call>')
    got = compute_score("hopforge", broken, GT, rounds([WRONG, RIGHT], ["INCOMPLETE", "COMPLETE"]), mode="sarl")
    assert {k: got[k] for k in REWARD_KEYS} == dict.fromkeys(REWARD_KEYS, 0.0)
    assert got["raw_sarl_assess"] == 1.0  # the diagnostic still says what happened


def test_a_row_without_rounds_falls_back_to_one_unassessed_round_and_says_so(caplog) -> None:
    """Decision: a row the SARL loop did not run (no ``extra_info.sarl_answers``) is scored as one answer round
    without assessment, R = acc, flagged by ``raw_sarl_missing`` (which verl logs) and a warning; it does not stop
    training.  Rounds that are present but inconsistent are refused."""
    import filters.reward as reward

    reward._warned_sarl_missing = False
    with caplog.at_level("WARNING", logger="filters.reward"):
        got = compute_score("hopforge", solution(RIGHT), GT, {"question_id": "q"}, mode="sarl")
    assert got["score"] == 1.0 and got["sarl_rounds"] == 1 and got["sarl_assess"] == 0.0
    assert got["raw_sarl_missing"] == 1.0 and "hopforge_sarl" in caplog.text
    wrong = compute_score("hopforge", solution(WRONG), GT, None, mode="sarl")
    assert wrong["score"] == 0.0 and wrong["raw_sarl_missing"] == 1.0
    # other modes never read the rounds
    assert compute_score("hopforge", solution(RIGHT), GT, rounds([WRONG, RIGHT], ["INCOMPLETE"]))["sarl_rounds"] == 0
    with pytest.raises(ValueError, match="each assessment follows an answer"):
        compute_score("hopforge", solution(RIGHT), GT, rounds([RIGHT], ["INCOMPLETE", "COMPLETE"]), mode="sarl")
    with pytest.raises(ValueError, match="SARL's reward goes below 0"):
        compute_score("hopforge", solution(RIGHT), GT, rounds([RIGHT], []), mode="sarl", advantage="hopforge")


def test_the_reward_never_imports_verl() -> None:
    import subprocess
    import sys

    code = ("import sys; import filters.reward; assert 'verl' not in sys.modules and 'filters.sarl' not in "
            "sys.modules, sorted(m for m in sys.modules if m.startswith(('verl', 'filters.sarl')))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# ---- the verdict -----------------------------------------------------------------------------------------------


@needs_verl
@pytest.mark.parametrize("text, verdict", [
    ("1. city: step 2\nVerdict: COMPLETE", "COMPLETE"),
    ("constraint 1: INCOMPLETE so far\n2. ...\n**Verdict:** INCOMPLETE.", "INCOMPLETE"),
    ("Verdict: INCOMPLETE\nOn second thought: Verdict - complete", "COMPLETE"),
    ("<think>Verdict: COMPLETE?</think>All checked.\nINCOMPLETE", "INCOMPLETE"),
    ("I am not sure what to say.", "UNPARSED"),
    ("", "UNPARSED"),
])
def test_the_verdict_is_the_last_one_written(text, verdict) -> None:
    from filters.sarl import parse_verdict

    assert parse_verdict(text) == verdict


# ---- the agent loop, through verl --------------------------------------------------------------------------------


def _compose(*overrides: str):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(RL_CONFIG_DIR), version_base=None):
        return compose(config_name="qwen2.5-7b-lora", overrides=list(overrides))


class ScriptedServer:
    """A ``server_manager`` whose ``generate`` plays the main conversation's turns and the assessments in order;
    it tells an assessment by its prompt (the assessment prompt's words) and records every call."""

    def __init__(self, tokenizer, turns: list[str], assessments: list[str]) -> None:
        self.tok, self.turns, self.assessments = tokenizer, list(turns), list(assessments)
        self.main_prompts: list[str] = []
        self.assess_prompts: list[str] = []
        self.assess_params: list[dict] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        prompt = self.tok.decode(prompt_ids)
        if ASSESS_MARK in prompt:
            self.assess_prompts.append(prompt)
            self.assess_params.append(dict(sampling_params))
            text = self.assessments.pop(0)
        else:
            self.main_prompts.append(prompt)
            text = self.turns.pop(0)
        ids = self.tok(text, add_special_tokens=False)["input_ids"] + [self.tok.convert_tokens_to_ids("<|im_end|>")]
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")


def _search_tool():
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

    class Search(BaseTool):
        async def execute(self, instance_id, parameters, **kwargs):
            return ToolResponse(text=OBSERVATION), 0.0, {}

    schema = OpenAIFunctionToolSchema.model_validate({"type": "function", "function": {
        "name": "search", "description": "Search the pages.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}})
    return Search({}, schema)


def run_sarl(tokenizer, turns: list[str], assessments: list[str], *overrides: str, tmp: Path):
    """One trajectory as verl's agent-loop worker runs it -> (the padded output, the server, the loop's output)."""
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker, _agent_loop_registry
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.dataset.rl_dataset import RLHFDataset

    cfg = _compose("+agent=sarl", f"hopforge.root={ROOT}", f"hopforge.out={tmp}",
                   "actor_rollout_ref.rollout.name=sglang", "data.max_response_length=2048", *overrides)
    # what AgentLoopWorker.__init__ does with rollout.agent.agent_loop_config_path
    for entry in OmegaConf.load(cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path):
        _agent_loop_registry[entry.name] = entry
    server = ScriptedServer(tokenizer, turns, assessments)
    worker = AgentLoopWorker.__new__(AgentLoopWorker)  # the worker without Ray, its model or its reward workers
    worker.config, worker.llm_client, worker.teacher_client = cfg, server, None
    worker.reward_loop_worker_handles, worker.distillation_enabled = None, False
    worker.rollout_config = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    worker.tokenizer, worker.processor, worker.hf_model_type = tokenizer, None, "qwen2"
    worker.dataset_cls, worker.tools, worker.mm_processor_kwargs = RLHFDataset, [_search_tool()], {}
    captured = {}

    async def go():
        original = AgentLoopWorker._agent_loop_postprocess

        async def keep(self, output, validate, **kwargs):
            captured["output"] = output.model_copy(deep=True)
            return await original(self, output, validate, **kwargs)

        worker._agent_loop_postprocess = keep.__get__(worker)
        raw_prompt = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
        return await worker._run_agent_loop(
            {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True},
            {"step": 0, "sample_index": 0, "rollout_n": 0, "validate": False},
            agent_name=cfg.actor_rollout_ref.rollout.agent.default_agent_loop, raw_prompt=raw_prompt,
            tools_kwargs={}, extra_info={"question_id": "q"}, index=0)

    padded = asyncio.run(go())
    return padded, server, captured["output"]


def _spans(tokenizer, ids: list[int], mask: list[int]) -> tuple[str, str]:
    """(the text of the tokens masked 1, of those masked 0)."""
    return (tokenizer.decode([t for t, m in zip(ids, mask) if m]),
            tokenizer.decode([t for t, m in zip(ids, mask) if not m]))


SEARCH_CALL = 'I must check the harbour.\n<tool_call>\n{"name": "search", "arguments": {"query": "Bravo Harbour"}}\n</tool_call>'
INCOMPLETE_ASSESSMENT = "1. the harbour: unresolved (ASSESS-ONE)\nVerdict: INCOMPLETE"
COMPLETE_ASSESSMENT = "1. the harbour: step 2 (ASSESS-TWO)\nVerdict: COMPLETE"


@pytest.fixture(scope="module")
def tokenizer(student_path):
    pytest.importorskip("verl")
    from verl.utils import hf_tokenizer

    return hf_tokenizer(str(student_path))


@needs_verl
def test_the_loop_is_verls_hopforge_sarl(tmp_path) -> None:
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop

    import filters.sarl as sarl

    entries = OmegaConf.load(LOOPS_YAML)
    assert [(e.name, e._target_) for e in entries] == [("hopforge_sarl", "filters.sarl.SarlAgentLoop")]
    assert _agent_loop_registry["hopforge_sarl"]["_target_"] == "filters.sarl.SarlAgentLoop"  # @register too
    assert issubclass(sarl.SarlAgentLoop, ToolAgentLoop)


@needs_verl
def test_wrong_answer_incomplete_search_right_answer_complete(tokenizer, tmp_path) -> None:
    turns = [f"Quick guess. <answer>{WRONG}</answer>", SEARCH_CALL, f"Found it. <answer>{RIGHT}</answer>"]
    padded, server, out = run_sarl(tokenizer, turns, [INCOMPLETE_ASSESSMENT, COMPLETE_ASSESSMENT], tmp=tmp_path)
    assert server.turns == [] and server.assessments == []  # every scripted turn was asked for, no more
    assert out.extra_fields["sarl_answers"] == [WRONG, RIGHT]
    assert out.extra_fields["sarl_verdicts"] == ["INCOMPLETE", "COMPLETE"]
    # the response mask: the policy's three turns are 1; the injected assessment and the observation are 0
    policy, context = _spans(tokenizer, out.response_ids, out.response_mask)
    for t in turns:
        assert t in policy
    assert "ASSESS-ONE" in context and "Verdict: INCOMPLETE" in context and OBSERVATION in context
    assert "ASSESS-ONE" not in policy and OBSERVATION not in policy and "Verdict" not in policy
    # the COMPLETE assessment never enters the conversation; nor does any assessment prompt
    full = tokenizer.decode(out.response_ids)
    assert "ASSESS-TWO" not in full and ASSESS_MARK not in full and ASSESS_MARK not in "".join(server.main_prompts)
    # the policy's second turn saw the assessment (an observation), its third the search result
    assert "ASSESS-ONE" in server.main_prompts[1] and OBSERVATION in server.main_prompts[2]
    # the isolated assessments: the question, the policy's own steps and the answer; no observation, no earlier
    # assessment, no system prompt or tools of the main conversation
    first, second = server.assess_prompts
    for prompt in (first, second):
        assert QUESTION in prompt and OBSERVATION not in prompt and "ASSESS-ONE" not in prompt
        assert SYSTEM not in prompt and "<tools>" not in prompt
    assert f"Answer: {WRONG}" in first and "Bravo Harbour" not in first
    assert f"Answer: {RIGHT}" in second and '"query": "Bravo Harbour"' in second and "Step 1: Quick guess." in second
    assert all(p["max_tokens"] == 1024 for p in server.assess_params)
    # verl's padding keeps the mask; the reward, given extra_info as verl's naive manager merges extra_fields in
    n = len(out.response_ids)
    assert padded.response_mask[0, :n].tolist() == out.response_mask and padded.response_mask[0, n:].sum() == 0
    assert {"sarl_answers", "sarl_verdicts"} <= set(padded.extra_fields)
    solution_str = tokenizer.decode(out.response_ids, skip_special_tokens=True)
    extra = {"question_id": "q", **out.extra_fields}
    got = compute_score("hopforge", solution_str, GT, extra, mode="sarl")
    assert got["format_ok"] == 1.0 and got["tool_calls"] == 1 and got["acc"] == 1.0
    assert got["score"] == pytest.approx(1 * 0.8 + 0.5 * 1) and got["sarl_rounds"] == 2  # 1.3


@needs_verl
def test_the_turn_limit_stops_the_rounds(tokenizer, tmp_path) -> None:
    """A policy whose every assessment says INCOMPLETE goes on until verl's assistant-turn limit; the answer of the
    last turn is recorded, never assessed."""
    turns = [f"<answer>{WRONG}</answer>", f"<answer>{OTHER}</answer>", f"<answer>{RIGHT}</answer>"]
    _, server, out = run_sarl(tokenizer, turns, [INCOMPLETE_ASSESSMENT] * 2,
                              "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3", tmp=tmp_path)
    assert server.turns == [] and server.assessments == [] and len(server.assess_prompts) == 2
    assert out.extra_fields["sarl_answers"] == [WRONG, OTHER, RIGHT]
    assert out.extra_fields["sarl_verdicts"] == ["INCOMPLETE", "INCOMPLETE"]
    got = compute_score("hopforge", tokenizer.decode(out.response_ids, skip_special_tokens=True), GT,
                        dict(out.extra_fields), mode="sarl")
    # wrong->other -0.1, other->right +1: 1 * 0.8^2 + 0.5 * 0.45
    assert got["score"] == pytest.approx(0.64 + 0.5 * 0.45) and got["sarl_rounds"] == 3


@needs_verl
def test_max_assessments_and_an_unreadable_verdict_end_the_episode(tokenizer, tmp_path) -> None:
    turns = [f"<answer>{WRONG}</answer>", f"<answer>{RIGHT}</answer>"]
    _, server, out = run_sarl(tokenizer, turns, [INCOMPLETE_ASSESSMENT], "hopforge.sarl.max_assessments=1",
                              tmp=tmp_path)
    assert server.turns == [] and len(server.assess_prompts) == 1
    assert out.extra_fields["sarl_answers"] == [WRONG, RIGHT] and out.extra_fields["sarl_verdicts"] == ["INCOMPLETE"]
    _, server, out = run_sarl(tokenizer, [f"<answer>{RIGHT}</answer>", "never asked"], ["Looks fine to me."],
                              tmp=tmp_path)
    assert server.turns == ["never asked"]
    assert out.extra_fields["sarl_answers"] == [RIGHT] and out.extra_fields["sarl_verdicts"] == ["UNPARSED"]
    assert sum(out.response_mask) == len(out.response_mask)  # nothing injected: all the policy's own tokens
    from hydra.errors import InstantiationException

    with pytest.raises(InstantiationException, match="unknown hopforge.sarl key"):  # Hydra wraps the ValueError
        run_sarl(tokenizer, [], [], "+hopforge.sarl.max_rounds=2", tmp=tmp_path)


@needs_verl
def test_the_sarl_option_composes_over_the_rl_config_and_passes_verls_checks(tmp_path) -> None:
    """``+agent=sarl``: the SARL loop for every row, its agent-loop list, reward mode sarl with its knobs; verl's
    start-up checks pass and every key it sets is verl's, a reward kwarg, or hopforge's own."""
    from functools import partial

    import yaml
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.workers.config import AgentLoopConfig

    cfg = _compose("+agent=sarl", f"hopforge.root={ROOT}", f"hopforge.out={tmp_path}",
                   "actor_rollout_ref.rollout.name=sglang")
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    agent = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout).agent  # as verl's agent-loop worker reads it
    assert isinstance(agent, AgentLoopConfig)
    assert agent.default_agent_loop == "hopforge_sarl" and Path(agent.agent_loop_config_path) == LOOPS_YAML
    assert cfg.actor_rollout_ref.rollout.multi_turn.enable and cfg.actor_rollout_ref.rollout.multi_turn.max_assistant_turns
    fn = get_custom_reward_fn(cfg)
    assert isinstance(fn, partial)
    kwargs = dict(fn.args[1])
    assert (kwargs["mode"], kwargs["sarl_alpha"], kwargs["sarl_lam"]) == ("sarl", 0.8, 0.5)
    assert OmegaConf.to_container(cfg.hopforge.sarl) == {"max_assessments": None, "assess_max_tokens": 1024,
                                                        "evidence_chars": 8000, "prompt": "sarl_assess"}
    from filters.sarl import DEFAULTS

    assert OmegaConf.to_container(cfg.hopforge.sarl) == DEFAULTS
    scored = compute_score("hopforge", solution(WRONG, RIGHT), GT, rounds([WRONG, RIGHT], ["INCOMPLETE", "COMPLETE"]),
                           **kwargs)
    assert scored["score"] == pytest.approx(1.3)
    mine = yaml.safe_load((RL_CONFIG_DIR / "agent" / "sarl.yaml").read_text())
    base = verl_trainer_keys()
    assert sorted(k for k in leaf_keys(mine) if k not in base and not k.startswith(
        ("reward.custom_reward_function.reward_kwargs.", "hopforge."))) == []
