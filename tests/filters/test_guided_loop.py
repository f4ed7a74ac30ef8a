"""ACTGUIDE's guidance played by verl's agent loop ``hopforge_guided`` (filters/guided_loop.py), on CPU and offline.

The rows are a real ``rl_pool`` (the session's ``rl_run``) with a question's guidance and k* set the way the student
band writes them (``extra_info.guidance``: the calls of its best correct teacher rollout from ``filter/references``),
read back by verl's ``RLHFDataset``.  The loop is found by name in verl's agent-loop registry after the loop list of
``+agent=actguide`` is loaded as ``AgentLoopWorker`` loads it, and run by verl's own ``AgentLoopWorker._run_agent_loop``
(hydra instantiation, ``run``, the padding of its post-processing) with the real hopforge tools against a tool server
over the run's index; only the LLM server is scripted (``generate`` returns fixed token ids and records its prompts).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

if importlib.util.find_spec("verl") is None:
    pytest.skip("verl is not installed (pip install -e '.[rl]' && pip install --no-deps verl)", allow_module_level=True)

from omegaconf import OmegaConf  # noqa: E402

from helpers.verlloop import index, leaf_keys, server, tokenizer, tools_url, verl_trainer_keys  # noqa: E402,F401
from synth.engine.records import RL_SCHEMA  # noqa: E402
from synth.tools.config import ToolsConfig  # noqa: E402
from synth.tools.toolbox import Toolbox  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RL_CONFIG_DIR = ROOT / "configs" / "rl"
TOOLS_YAML = RL_CONFIG_DIR / "tools.yaml"
K = 2  # the guided rows' k*


@pytest.fixture(scope="module")
def references(rl_run) -> dict[str, list[dict]]:
    """Question id -> the guidance of its best correct teacher rollout (the filter's ``filter/references``)."""
    from filters.guidance import REFERENCES

    rows = ds.dataset(rl_run / REFERENCES).to_table().to_pylist()
    return {r["question_id"]: json.loads(r["calls"]) for r in rows}


@pytest.fixture(scope="module")
def guided_row(rl_rows, references) -> dict:
    """An rl_pool row guided as the student band guides one: its reference's calls and k* = K (K actions
    the tools offer, the first a search)."""
    for row in rl_rows:
        calls = references.get(row["extra_info"]["question_id"]) or []
        if len(calls) > K and calls[0]["name"] == "search" and all(
                c["name"] in ("search", "open", "find") and isinstance(c["arguments"], dict) for c in calls[:K]):
            extra = dict(row["extra_info"], guidance=json.dumps(calls, ensure_ascii=False), guidance_k=K)
            return dict(row, extra_info=extra)
    raise AssertionError("no rl_pool question of the demo run has a reference with more than K calls")


@pytest.fixture(scope="module")
def plain_row(rl_rows, guided_row) -> dict:
    """An rl_pool row without guidance (guidance and guidance_k null), another question."""
    row = next(r for r in rl_rows if r["extra_info"]["question_id"] != guided_row["extra_info"]["question_id"])
    assert row["extra_info"]["guidance"] is None and row["extra_info"]["guidance_k"] is None
    return row


def _verl_kwargs(rows: list[dict], tokenizer, tmp_path: Path) -> list[dict]:
    """What verl hands an agent loop's ``run`` for each row: the rows written in rl_pool's layout, read by verl's
    ``RLHFDataset``, collated, and cut per sample as ``AgentLoopWorker.generate_sequences`` cuts them."""
    import numpy as np
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    path = tmp_path / "rl_pool.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=RL_SCHEMA), path)
    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 4096, "filter_overlong_prompts": True,
                            "filter_overlong_prompts_workers": 1, "truncation": "error", "return_raw_chat": True,
                            "cache_dir": str(tmp_path / "verl-cache"), "tool_config_path": str(TOOLS_YAML)})
    data = RLHFDataset(data_files=[str(path)], tokenizer=tokenizer, config=cfg)
    batch = collate_fn([data[i] for i in range(len(data))])
    non_tensor = {k: v for k, v in batch.items() if isinstance(v, np.ndarray)}
    return [{k: v[i] for k, v in non_tensor.items()} for i in range(len(data))]


def _config(tmp_path: Path, *overrides: str):
    """The RL config with ``+agent=actguide``, composed as main_ppo composes it (the test tokenizer's small vocabulary
    writes the ~900-token harness in ~2,200 tokens: a prompt length that holds it)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(RL_CONFIG_DIR), version_base=None):
        return compose(config_name="qwen2.5-7b-lora", overrides=["+agent=actguide", f"hopforge.root={ROOT}",
                                                                 f"hopforge.out={tmp_path}",
                                                                 "data.max_prompt_length=4096", *overrides])


class ScriptedServer:
    """verl's LLM server client as an agent loop calls it: each ``generate`` returns the next scripted turn's
    token ids (with log-probs when asked) and records the prompt ids it was given."""

    def __init__(self, turns: list[list[int]]):
        self.turns, self.prompts = list(turns), []

    async def generate(self, *, request_id, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(list(prompt_ids))
        ids = self.turns[len(self.prompts) - 1]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids) if sampling_params.get("logprobs") else None,
                           stop_reason="completed")


def _worker(cfg, tokenizer, llm):
    """verl's ``AgentLoopWorker`` as its ``__init__`` sets it up, without Ray and a model checkpoint: the rollout
    config, the tools of ``multi_turn.tool_config_path`` (``load_all_tools``), the loop list of
    ``agent.agent_loop_config_path`` put in the registry, a Qwen2 model type (the student's)."""
    from verl.experimental.agent_loop import agent_loop as al
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.utils.import_utils import resolve_config_path

    w = al.AgentLoopWorker.__new__(al.AgentLoopWorker)
    w.config, w.llm_client, w.teacher_client, w.reward_loop_worker_handles = cfg, llm, None, None
    w.rollout_config = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    w.dataset_cls, w.tokenizer, w.processor, w.hf_model_type = RLHFDataset, tokenizer, None, "qwen2"
    w.mm_processor_kwargs, w.distillation_enabled = {}, False
    w.tools = al.load_all_tools(tool_config_path=resolve_config_path(w.rollout_config.multi_turn.tool_config_path),
                                function_tool_path=None)
    for entry in OmegaConf.load(resolve_config_path(w.rollout_config.agent.agent_loop_config_path)):
        al._agent_loop_registry[entry.name] = entry
    return w


def _run(cfg, tokenizer, turns: list[list[int]], kwargs: dict, *, agent_name: str | None = None,
         logprobs: bool = False):
    """One trajectory through verl's ``AgentLoopWorker._run_agent_loop`` -> (its output, the scripted server)."""
    llm = ScriptedServer(turns)
    worker = _worker(cfg, tokenizer, llm)
    name = agent_name or cfg.actor_rollout_ref.rollout.agent.default_agent_loop
    params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": logprobs}
    trajectory = {"step": 0, "sample_index": 0, "rollout_n": 0, "validate": False}
    out = asyncio.run(worker._run_agent_loop(params, trajectory, agent_name=name, **kwargs))
    return out, llm


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def _policy_turns(tokenizer, answer: str) -> list[list[int]]:
    """The policy's two turns: a search of its own (as the student's template writes a call), then an answer."""
    call = json.dumps({"name": "search", "arguments": {"query": answer}}, ensure_ascii=False)
    return [_ids(tokenizer, f"Let me check.\n<tool_call>\n{call}\n</tool_call><|im_end|>"),
            _ids(tokenizer, f"Found it. <answer>{answer}</answer><|im_end|>")]


def _valid(out, key: str) -> list[int]:
    """A post-processed tensor's unpadded values (the prompt is left-padded, the response right-padded)."""
    prompt_len = out.prompt_ids.shape[1]
    att = out.attention_mask[0].tolist()
    if key == "prompt_ids":
        return [t for t, a in zip(out.prompt_ids[0].tolist(), att[:prompt_len]) if a]
    return [t for t, a in zip(getattr(out, key)[0].tolist(), att[prompt_len:]) if a]


# ---- a guided row ---------------------------------------------------------------------------------------


def test_the_first_k_guidance_actions_are_played_against_the_index_before_the_policys_first_turn(
        guided_row, tools_url, tokenizer, index, rl_questions, tmp_path) -> None:
    from verl.experimental.agent_loop.tool_parser import ToolParser

    from filters.reward import compute_score

    kwargs = _verl_kwargs([guided_row], tokenizer, tmp_path)[0]
    assert kwargs["extra_info"]["guidance_k"] == K  # guidance_k survives verl's dataset
    cfg = _config(tmp_path)
    q = rl_questions[guided_row["extra_info"]["question_id"]]
    answer = guided_row["reward_model"]["ground_truth"]["target"][0]
    turns = _policy_turns(tokenizer, answer)
    out, llm = _run(cfg, tokenizer, turns, kwargs, logprobs=True)

    guidance = json.loads(guided_row["extra_info"]["guidance"])[:K]
    tools = json.loads(guided_row["tools"])
    prompt = _ids(tokenizer, tokenizer.apply_chat_template(list(kwargs["raw_prompt"]), tools=tools,
                                                           add_generation_prompt=True, tokenize=False))
    # the prompt is the row's prompt alone; the guided prefix opens the response
    assert _valid(out, "prompt_ids") == prompt
    response, mask = _valid(out, "response_ids"), _valid(out, "response_mask")
    # the policy's first generate call sees the prompt and the whole prefix, and nothing of its own yet
    first = llm.prompts[0]
    assert first[: len(prompt)] == prompt
    prefix = first[len(prompt):]
    assert prefix and response[: len(prefix)] == prefix
    assert len(llm.prompts) == 2
    # response_mask: 0 over the prefix (and every observation), 1 over exactly the policy's own tokens
    assert set(mask[: len(prefix)]) == {0}
    assert mask[len(prefix): len(prefix) + len(turns[0])] == [1] * len(turns[0])
    assert response[len(prefix): len(prefix) + len(turns[0])] == turns[0]
    assert sum(mask) == len(turns[0]) + len(turns[1]) and response[-len(turns[1]):] == turns[1]
    assert mask[-len(turns[1]):] == [1] * len(turns[1])
    # rollout log-probs: 0 over the prefix, the policy's where it sampled
    logprobs = out.response_logprobs[0].tolist()[: len(response)]
    assert [lp for lp, m in zip(logprobs, mask) if m] == [-0.5] * sum(mask)
    assert set(logprobs[: len(prefix)]) == {0.0}

    # the prefix is K assistant turns, each one call as the student's template writes it (the policy's own parser
    # reads back the guidance's call), and K observations: the real index's results, the answer page masked
    text = tokenizer.decode(prefix)
    masked = Toolbox(index, ToolsConfig(), mask_page_ids=[q["answer_page_id"]])
    parser = ToolParser.get_tool_parser("hermes", tokenizer)
    _, parsed = asyncio.run(parser.extract_tool_calls(prefix, None))
    assert [(c.name, json.loads(c.arguments)) for c in parsed] == [(g["name"], g["arguments"]) for g in guidance]
    for g in guidance:
        obs = masked.call(g["name"], g["arguments"])[0]
        assert obs and obs in text
        if g["name"] == "search":
            assert q["answer_page_id"] not in [r["page_id"] for r in json.loads(obs)]
    assert text.count("<tool_call>") == K and text.count("<tool_response>") == K
    # the template renders exactly these turns: the row's messages with the guided turns equal prompt + prefix
    messages = list(kwargs["raw_prompt"])
    for g in guidance:
        messages += [{"role": "assistant", "content": "",
                      "tool_calls": [{"type": "function",
                                      "function": {"name": g["name"], "arguments": g["arguments"]}}]},
                     {"role": "tool", "content": masked.call(g["name"], g["arguments"])[0]}]
    rendered = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    assert tokenizer.decode(prompt + prefix) == rendered

    # what verl records: the actions played, no error; the guided turns are turns of the trajectory
    assert out.extra_fields["guided_k"] == K and out.extra_fields["guidance_error"] is None
    assert out.num_turns == 2 * K + 2 + 1 + 1  # the guided pairs, the policy's two turns, one observation, the prompt
    # the reward scores the whole trajectory: the policy's answer, the guided calls counted as calls
    extra = dict(kwargs["extra_info"], **out.extra_fields)
    scored = compute_score(guided_row["data_source"], tokenizer.decode(response, skip_special_tokens=True),
                           guided_row["reward_model"]["ground_truth"], extra)
    assert scored["format_ok"] == 1.0 and scored["acc"] == 1.0 and scored["tool_calls"] == K + 1


def test_max_guided_plays_fewer_actions_and_zero_plays_none(guided_row, tools_url, tokenizer, tmp_path) -> None:
    kwargs = _verl_kwargs([guided_row], tokenizer, tmp_path)[0]
    turns = _policy_turns(tokenizer, "x")
    one, llm = _run(_config(tmp_path, "hopforge.guidance.max_guided=1"), tokenizer, turns, kwargs)
    none, llm0 = _run(_config(tmp_path, "hopforge.guidance.max_guided=0"), tokenizer, turns, kwargs)
    plain, llm1 = _run(_config(tmp_path), tokenizer, turns, kwargs, agent_name="tool_agent")
    prompt = llm1.prompts[0]  # the row's prompt alone
    assert llm.prompts[0][: len(prompt)] == prompt
    assert one.extra_fields["guided_k"] == 1
    assert tokenizer.decode(llm.prompts[0][len(prompt):]).count("<tool_call>") == 1
    assert none.extra_fields["guided_k"] == 0 and llm0.prompts == llm1.prompts
    _assert_same(none, plain)


def test_a_prefix_that_fills_the_response_budget_ends_the_trajectory(guided_row, tools_url, tokenizer,
                                                                     tmp_path) -> None:
    kwargs = _verl_kwargs([guided_row], tokenizer, tmp_path)[0]
    out, llm = _run(_config(tmp_path, "data.max_response_length=64"), tokenizer, _policy_turns(tokenizer, "x"),
                    kwargs)
    assert llm.prompts == []  # no room left for the policy
    assert "response_length" in out.extra_fields["guidance_error"] and out.extra_fields["guided_k"] >= 1
    assert out.response_ids.shape[1] == 64 and set(out.response_mask[0].tolist()) == {0}
    # the turns written: the played calls, the observations of all but the last (which did not fit), the prompt
    assert out.num_turns == 2 * out.extra_fields["guided_k"]


# ---- rows without guidance, and guidance that cannot be played ------------------------------------------


def _assert_same(a, b) -> None:
    """Two post-processed agent-loop outputs hold the same trajectory (tokens, masks, positions, turns, and
    extra_fields but the guided loop's two keys)."""
    for key in ("prompt_ids", "response_ids", "input_ids", "position_ids", "response_mask", "attention_mask"):
        assert getattr(a, key).tolist() == getattr(b, key).tolist(), key
    assert a.num_turns == b.num_turns
    strip = lambda d: {k: v for k, v in d.items() if k not in ("guided_k", "guidance_error")}  # noqa: E731
    assert strip(a.extra_fields) == strip(b.extra_fields)


def test_a_row_without_guidance_runs_exactly_as_tool_agent(plain_row, tools_url, tokenizer, tmp_path) -> None:
    kwargs = _verl_kwargs([plain_row], tokenizer, tmp_path)[0]
    cfg = _config(tmp_path)
    turns = _policy_turns(tokenizer, plain_row["reward_model"]["ground_truth"]["target"][0])
    guided, llm_g = _run(cfg, tokenizer, turns, kwargs, logprobs=True)
    plain, llm_p = _run(cfg, tokenizer, turns, kwargs, agent_name="tool_agent", logprobs=True)
    assert llm_g.prompts == llm_p.prompts and len(llm_g.prompts) == 2
    _assert_same(guided, plain)
    assert guided.response_logprobs.tolist() == plain.response_logprobs.tolist()
    assert guided.extra_fields["guided_k"] == 0 and guided.extra_fields["guidance_error"] is None
    assert "guided_k" not in plain.extra_fields


BAD = {  # extra_info changes -> the field the recorded reason names
    "unknown tool": ({"guidance": json.dumps([{"name": "browse", "arguments": {"url": "x"}}] * 3), "guidance_k": 2},
                     "guidance[0].name"),
    "arguments not an object": ({"guidance": json.dumps([{"name": "search", "arguments": {"query": "a"}},
                                                         {"name": "open", "arguments": "page=3"}]), "guidance_k": 2},
                                "guidance[1].arguments"),
    "k above K": ({"guidance": json.dumps([{"name": "search", "arguments": {"query": "a"}}]), "guidance_k": 3},
                  "guidance_k"),
    "k without guidance": ({"guidance": None, "guidance_k": 1}, "guidance"),
    "guidance not JSON": ({"guidance": "[{'name': 'search'", "guidance_k": 1}, "guidance"),
    "k not measured": ({"guidance": json.dumps([{"name": "search", "arguments": {"query": "a"}}]),
                        "guidance_k": None}, "guidance_k"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_guidance_that_cannot_be_played_runs_the_row_unguided_and_says_why(case, plain_row, tools_url, tokenizer,
                                                                          tmp_path, caplog) -> None:
    change, field = BAD[case]
    row = dict(plain_row, extra_info=dict(plain_row["extra_info"], **change))
    kwargs = _verl_kwargs([row], tokenizer, tmp_path)[0]
    cfg = _config(tmp_path)
    turns = _policy_turns(tokenizer, "x")
    with caplog.at_level(logging.WARNING, logger="hopforge"):
        guided, llm_g = _run(cfg, tokenizer, turns, kwargs)
    plain, llm_p = _run(cfg, tokenizer, turns, kwargs, agent_name="tool_agent")
    assert llm_g.prompts == llm_p.prompts  # nothing was played, not even the good first action of a bad list
    _assert_same(guided, plain)
    error = guided.extra_fields["guidance_error"]
    assert guided.extra_fields["guided_k"] == 0 and error.startswith(field)
    qid = row["extra_info"]["question_id"]
    assert any(qid in r.getMessage() and error in r.getMessage() for r in caplog.records)


def test_the_plan_reads_the_row_as_the_band_writes_it() -> None:
    from filters.guided_loop import guidance_plan

    calls = [{"name": "search", "arguments": {"query": "a"}}, {"name": "open", "arguments": {"page": "3"}},
             {"name": "find", "arguments": {"page": "3", "text": "b"}}]
    tools = ["search", "open", "find"]
    extra = {"guidance": json.dumps(calls), "guidance_k": 2}
    assert guidance_plan(extra, tools).actions == (("search", {"query": "a"}), ("open", {"page": "3"}))
    assert guidance_plan(extra, tools, max_guided=5).actions == guidance_plan(extra, tools).actions
    assert len(guidance_plan(extra, tools, max_guided=1).actions) == 1
    assert guidance_plan(extra, tools, max_guided=0) == guidance_plan({}, tools) == guidance_plan(
        {"guidance": None, "guidance_k": None}, tools)
    assert guidance_plan(dict(extra, guidance_k=0), tools).error is None
    assert guidance_plan(dict(extra, guidance_k=2.0), tools).actions  # a nullable column's integral float
    assert guidance_plan(dict(extra, guidance_k=1.5), tools).error.startswith("guidance_k")
    assert guidance_plan(dict(extra, guidance_k=-1), tools).error.startswith("guidance_k")
    # a call past k* is never checked: only what is played must be playable
    bad_tail = {"guidance": json.dumps(calls[:2] + [{"name": "browse", "arguments": {}}]), "guidance_k": 2}
    assert guidance_plan(bad_tail, tools).error is None
    # arguments kept as the string the teacher wrote: a JSON object string is played, anything else is not
    assert guidance_plan({"guidance": json.dumps([{"name": "search", "arguments": '{"query": "a"}'}]),
                          "guidance_k": 1}, tools).actions == (("search", {"query": "a"}),)
    # a tool this loop does not offer (check_answer without the CAPF tools)
    capf = {"guidance": json.dumps([{"name": "check_answer", "arguments": {"answer": "a"}}]), "guidance_k": 1}
    assert guidance_plan(capf, tools).error.startswith("guidance[0].name")
    assert guidance_plan(capf, tools + ["check_answer"]).actions


# ---- the config option ----------------------------------------------------------------------------------


def test_the_actguide_option_composes_over_the_rl_config_and_passes_verls_checks(tmp_path) -> None:
    import hydra
    import yaml
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, _agent_loop_registry
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.utils.import_utils import resolve_config_path

    from filters.guided_loop import NAME, GuidedToolAgentLoop, max_guided_of

    cfg = _config(tmp_path, "actor_rollout_ref.rollout.name=sglang")  # vLLM is absent here
    OmegaConf.to_container(cfg, resolve=True)
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    agent = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout).agent
    assert agent.default_agent_loop == NAME == "hopforge_guided"
    path = Path(resolve_config_path(agent.agent_loop_config_path))
    assert path == RL_CONFIG_DIR / "agent" / "actguide_loops.yaml"
    entries = OmegaConf.load(path)
    assert [e.name for e in entries] == [NAME]
    assert hydra.utils.get_class(entries[0]._target_) is GuidedToolAgentLoop
    assert issubclass(GuidedToolAgentLoop, AgentLoopBase)
    assert _agent_loop_registry[NAME]["_target_"] == entries[0]._target_  # the decorator names the same class
    # the rest of the recipe is the RL config's: tools, reward, estimator
    assert cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path == str(TOOLS_YAML)
    assert cfg.algorithm.adv_estimator == "grpo" and cfg.reward.custom_reward_function.reward_kwargs.mode == "em"
    assert max_guided_of(cfg) is None and max_guided_of(_config(tmp_path, "hopforge.guidance.max_guided=2")) == 2
    with pytest.raises(ValueError, match="max_guided"):
        max_guided_of(_config(tmp_path, "hopforge.guidance.max_guided=-1"))
    # every key the option sets is one of verl's (a typo would be silently ignored by the merge), but hopforge's own
    mine = yaml.safe_load((RL_CONFIG_DIR / "agent" / "actguide.yaml").read_text())
    mine.pop("hopforge")
    assert sorted(leaf_keys(mine) - verl_trainer_keys()) == []


def test_filters_verl_free_modules_do_not_import_the_loop() -> None:
    """The loop imports verl; the reward (and everything verl-free) must not import it."""
    import subprocess
    import sys

    code = ("import sys, filters.reward, filters.guidance, filters.band; "
            "print(sorted(m for m in sys.modules if m == 'verl' or m.startswith('verl.') "
            "or m == 'filters.guided_loop'))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "filters.guided_loop" not in r.stdout
