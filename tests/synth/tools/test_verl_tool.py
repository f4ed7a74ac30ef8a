"""verl 0.9.x itself on a real ``rl_pool``: its dataset, its reward loading, its tool registry and its config.

Everything here is verl's own code path, on CPU and offline: ``RLHFDataset`` reads the pipeline's
``rl_pool`` with the student's tokenizer and the tool config, ``get_custom_reward_fn`` loads
``filters/reward.py``, ``initialize_tools_from_config`` builds ``configs/rl/tools.yaml`` and
``ToolAgentLoop._call_tool`` (what a multi-turn rollout runs for each tool call) drives the tools
against a local tool server with the ``tools_kwargs`` the dataset hands over, and Hydra composes
``configs/rl/qwen2.5-7b-lora.yaml`` over verl's ``ppo_trainer`` for ``validate_config``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

# Skipped only where verl is not installed (the `rl` extra; `make setup` installs it).  An installed verl
# that fails to import (a missing dependency of the extra) is an error, not a skip.
if importlib.util.find_spec("verl") is None:
    pytest.skip("verl is not installed (pip install -e '.[rl]' && pip install --no-deps verl)", allow_module_level=True)

import verl  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402  (verl brings omegaconf)

from helpers.verlloop import call_tool, index, response_ids, server, tokenizer, tool_loop, tools_url  # noqa: E402,F401
from synth.tools.config import ToolsConfig  # noqa: E402
from synth.tools.server import start_server  # noqa: E402
from synth.tools.toolbox import Toolbox  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
TOOLS_YAML = ROOT / "configs" / "rl" / "tools.yaml"
RL_CONFIG_DIR = ROOT / "configs" / "rl"


@pytest.fixture
def dataset(rl_files, tokenizer, tools_url, tmp_path):
    from verl.utils.dataset.rl_dataset import RLHFDataset

    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 4096, "filter_overlong_prompts": True,
                            "filter_overlong_prompts_workers": 1, "truncation": "error", "return_raw_chat": True,
                            "cache_dir": str(tmp_path / "verl-cache"), "tool_config_path": str(TOOLS_YAML)})
    return RLHFDataset(data_files=rl_files, tokenizer=tokenizer, config=cfg)


# ---- the dataset -----------------------------------------------------------------------------------


def test_verl_dataset_loads_rl_pool_with_the_students_tokenizer(dataset, rl_rows, sft_rows, rl_questions,
                                                                 tokenizer) -> None:
    from verl.utils.dataset.rl_dataset import collate_fn

    assert len(dataset) == len(rl_rows)  # no prompt too long, none dropped
    # The tools verl renders (from configs/rl/tools.yaml) are the rows' JSON, key for key.
    assert dataset.tool_schemas is not None
    assert json.dumps(dataset.tool_schemas, ensure_ascii=False) == rl_rows[0]["tools"]
    by_id = {r["extra_info"]["question_id"]: r for r in rl_rows}
    sft_tools = json.loads(sft_rows[0]["tools"])
    system = sft_rows[0]["messages"][0]
    for i in range(len(dataset)):
        item = dataset[i]
        row = by_id[item["extra_info"]["question_id"]]
        q = rl_questions[row["extra_info"]["question_id"]]
        assert item["data_source"] == "hopforge"
        assert list(item["raw_prompt"]) == row["prompt"]
        gt = row["reward_model"]["ground_truth"]
        target = gt["target"]
        assert list(item["reward_model"]["ground_truth"]["target"]) == target
        assert list(item["reward_model"]["ground_truth"]["other_titles"]) == gt["other_titles"]
        assert target[0] == q["answer"] and set(q["answer_aliases"]) <= set(target)
        assert item["index"] == row["extra_info"]["index"] and item["extra_info"]["split"] == "rl"
        assert item["tools_kwargs"]["search"] == {"create_kwargs": {"exclude": [q["answer_page_id"]]}}
        assert list(item["tools_kwargs"]["check_answer"]["create_kwargs"]["target"]) == target
        # The prompt tokens RL starts from are those SFT trained after: the SFT system prompt and tools,
        # the question as the user turn, under the student's template.
        rl_text = tokenizer.apply_chat_template(item["raw_prompt"], tools=dataset.tool_schemas,
                                                add_generation_prompt=True, tokenize=False)
        sft_text = tokenizer.apply_chat_template([{"role": "system", "content": system["content"]},
                                                  {"role": "user", "content": q["question"]}],
                                                 tools=sft_tools, add_generation_prompt=True, tokenize=False)
        assert rl_text == sft_text
        assert '"additionalProperties": false' in rl_text and f'"maximum": {ToolsConfig().search_max_k}' in rl_text
    for r in sft_rows:  # and that prefix is exactly how SFT rendered its rows' beginning
        full = tokenizer.apply_chat_template([{k: v for k, v in m.items() if v is not None} for m in r["messages"]],
                                             tools=sft_tools, tokenize=False)
        head = tokenizer.apply_chat_template([{"role": m["role"], "content": m["content"]} for m in r["messages"][:2]],
                                             tools=sft_tools, add_generation_prompt=True, tokenize=False)
        assert full.startswith(head)
    batch = collate_fn([dataset[i] for i in range(len(dataset))])
    assert list(batch["data_source"]) == ["hopforge"] * len(dataset)


# ---- the reward ------------------------------------------------------------------------------------


def _solution(tokenizer, row: dict, answer: str, *, call: dict | None = None) -> str:
    """A rollout's response as verl's reward manager decodes it: one tool call, its observation, an answer,
    rendered by the student's template, tokenized, and decoded with ``skip_special_tokens=True``."""
    return tokenizer.decode(response_ids(tokenizer, row, answer, call=call), skip_special_tokens=True)


@pytest.mark.parametrize("path", ["pkg://filters.reward", str(ROOT / "filters" / "reward.py")])
def test_verl_loads_the_reward_which_scores_rl_pool_rows(path, rl_rows, tokenizer) -> None:
    from verl.trainer.ppo.reward import get_custom_reward_fn

    cfg = OmegaConf.create({"reward": {"custom_reward_function": {"path": path, "name": "compute_score",
                                                                  "reward_kwargs": {"min_f1": 0.8}}}})
    fn = get_custom_reward_fn(cfg)
    assert fn is not None
    for row in rl_rows:
        gt, extra = row["reward_model"]["ground_truth"], row["extra_info"]
        right = _solution(tokenizer, row, gt["target"][0])
        assert "<tool_call>" in right and "<|im_end|>" not in right  # as Qwen2.5's tokenizer decodes
        wrong = _solution(tokenizer, row, "Nowhere In Particular")
        good = fn(data_source=row["data_source"], solution_str=right, ground_truth=gt, extra_info=extra)
        bad = fn(data_source=row["data_source"], solution_str=wrong, ground_truth=gt, extra_info=extra)
        assert good["score"] == 1.0 and good["format_ok"] == 1.0 and good["tool_calls"] == 1
        assert bad["score"] == 0.0 and bad["format_ok"] == 1.0
        broken = _solution(tokenizer, row, gt["target"][0], call={"name": "browse", "arguments": {"url": "x"}})
        assert fn(data_source=row["data_source"], solution_str=broken, ground_truth=gt,
                  extra_info=extra)["score"] == 0.0


def test_other_data_sources_go_to_verls_default_reward() -> None:
    from filters.reward import compute_score

    got = compute_score("openai/gsm8k", "The answer is #### 72", "72")  # verl's gsm8k rule
    assert (got["score"] if isinstance(got, dict) else got) == 1.0
    wrong = compute_score("openai/gsm8k", "The answer is #### 71", "72")
    assert (wrong["score"] if isinstance(wrong, dict) else wrong) == 0.0


# ---- the tools ---------------------------------------------------------------------------------------


def test_verl_instantiates_the_tools_and_runs_them_against_the_tool_server(tools_url, dataset, rl_rows, rl_questions,
                                                                           index) -> None:
    from verl.tools.tool_registry import initialize_tools_from_config

    tools = initialize_tools_from_config(str(TOOLS_YAML))
    assert [t.name for t in tools] == ["search", "open", "find"]
    assert all(t.url == tools_url for t in tools)
    schemas = [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in tools]
    assert json.dumps(schemas, ensure_ascii=False) == rl_rows[0]["tools"]  # the SFT JSON, key for key
    loop = tool_loop(tools)
    item = dataset[0]
    q = rl_questions[item["extra_info"]["question_id"]]
    answer_id = q["answer_page_id"]
    masked = Toolbox(index, ToolsConfig(), mask_page_ids=[answer_id])
    query = q["answer"]

    # search: the question's answer page is masked, exactly as the rollout's Toolbox masked it
    text = call_tool(loop, "search", {"query": query, "k": 10}, item["tools_kwargs"])
    assert text == masked.call("search", {"query": query, "k": 10})[0]
    assert answer_id not in [r["page_id"] for r in json.loads(text)]
    unmasked = call_tool(loop, "search", {"query": query, "k": 10}, {})
    assert answer_id in [r["page_id"] for r in json.loads(unmasked)]  # (so the mask is what hid it)
    # the model cannot lift the mask with an `exclude` of its own: the Toolbox's error, word for word
    sneaky = call_tool(loop, "search", {"query": query, "exclude": []}, item["tools_kwargs"])
    assert sneaky == masked.call("search", {"query": query, "exclude": []})[0]
    assert "unknown argument(s) exclude" in sneaky

    # open and find read the answer page once its name is known, as in the rollouts
    opened = call_tool(loop, "open", {"page": answer_id}, item["tools_kwargs"])
    assert opened == masked.call("open", {"page": answer_id})[0]
    assert json.loads(opened)["page_id"] == answer_id
    word = json.loads(opened)["text"].split()[-1].strip(".,;:()\"'")
    found = call_tool(loop, "find", {"page": q["answer"], "text": word}, item["tools_kwargs"])
    assert found == masked.call("find", {"page": q["answer"], "text": word})[0]
    assert json.loads(found)["page_id"] == answer_id and json.loads(found)["total"] >= 1

    # a call the agent got wrong is an observation it can read, the Toolbox's words
    missing = call_tool(loop, "open", {"page": "No such page at all"}, {})
    assert missing == masked.call("open", {"page": "No such page at all"})[0] and "error" in json.loads(missing)
    assert call_tool(loop, "find", {"page": answer_id}, {}) == masked.call("find", {"page": answer_id})[0]


def test_the_tools_refuse_a_server_with_other_tools_settings(rl_run, monkeypatch) -> None:
    from synth.tools.verl_tool import HopforgeTool, ToolServerError

    with start_server(rl_run / "index", ToolsConfig(page_chars=500)) as other:
        with pytest.raises(ToolServerError, match="serves other tools"):
            HopforgeTool({"type": "native", "name": "open", "url": other.url})
        ok = HopforgeTool({"type": "native", "name": "open", "url": other.url, "tools": {"page_chars": 500}})
        assert "500 characters at a time" in ok.tool_schema.model_dump()["function"]["description"]


def test_an_unreachable_server_is_an_error_not_an_observation() -> None:
    import socket

    from synth.tools.verl_tool import HopforgeTool, ToolServerError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tool = HopforgeTool({"type": "native", "name": "search", "url": f"http://127.0.0.1:{port}", "max_retries": 1,
                         "timeout_s": 2})

    async def run():
        iid, _ = await tool.create(create_kwargs={"exclude": ["1"]})
        return await tool.execute(iid, {"query": "x"})

    with pytest.raises(ToolServerError, match="did not answer"):
        asyncio.run(run())


# ---- the verl config -----------------------------------------------------------------------------------


def _compose(*overrides: str):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(RL_CONFIG_DIR), version_base=None):
        return compose(config_name="qwen2.5-7b-lora", overrides=list(overrides))


def _leaves(d: dict, prefix: str = "") -> set[str]:
    out = set()
    for k, v in d.items():
        out |= _leaves(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {prefix + k}
    return out


def test_the_rl_config_composes_over_verls_trainer_and_passes_its_checks(tmp_path) -> None:
    import yaml
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    out = tmp_path / "full"
    cfg = _compose(f"hopforge.root={ROOT}", f"hopforge.out={out}")
    assert cfg.data.train_files == f"{out}/rl_pool/part-00000.parquet"
    assert cfg.actor_rollout_ref.model.path == f"{out}/runs/qwen2.5-7b-lora"  # the SFT recipe's checkpoint
    turn = cfg.actor_rollout_ref.rollout.multi_turn
    assert turn.enable and turn.format == "hermes" and Path(turn.tool_config_path) == TOOLS_YAML
    assert cfg.data.tool_config_path == turn.tool_config_path  # the dataset's length filter sees the same tools
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "tool_agent"
    assert cfg.reward.custom_reward_function.path == "pkg://filters.reward"
    assert cfg.reward.custom_reward_function.name == "compute_score"
    assert get_custom_reward_fn(cfg) is not None
    # the LoRA of the SFT recipe, at a rank vLLM serves
    sft = yaml.safe_load((ROOT / "configs" / "sft" / "qwen2.5-7b-lora.yaml").read_text())
    model = cfg.actor_rollout_ref.model
    assert (model.lora_rank, model.lora_alpha) == (sft["lora_r"], sft["lora_alpha"]) and model.lora_rank in (
        1, 8, 16, 32, 64, 128, 256, 320, 512)
    # every key we set is one of verl's (a typo would be silently ignored by the merge)
    mine = yaml.safe_load((RL_CONFIG_DIR / "qwen2.5-7b-lora.yaml").read_text())
    for key in ("hydra", "defaults", "hopforge"):
        mine.pop(key)
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        base = OmegaConf.to_container(compose(config_name="ppo_trainer"), resolve=False)
    unknown = sorted(k for k in _leaves(mine) if k not in _leaves(base)
                     and not k.startswith("reward.custom_reward_function.reward_kwargs."))
    assert unknown == []
    # verl's own start-up checks; vLLM (absent here) only adds its LoRA-rank check, asserted above
    checked = _compose(f"hopforge.root={ROOT}", f"hopforge.out={out}", "actor_rollout_ref.rollout.name=sglang")
    validate_config(checked, use_reference_policy=need_reference_policy(checked), use_critic=need_critic(checked))
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    assert rollout.multi_turn.max_tool_response_length >= 16384 and rollout.n == 8


def test_the_gdpo_option_composes_over_the_rl_config_and_passes_verls_checks(tmp_path) -> None:
    """``+estimator=gdpo`` (configs/rl/estimator/gdpo.yaml): MultiSearch's reward components as verl's GDPO keys,
    the multi_search tools, and verl's own start-up checks."""
    import dataclasses
    from functools import partial

    import yaml
    from hydra import compose, initialize_config_dir
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    from filters.reward import REWARD_KEYS, compute_score

    cfg = _compose("+estimator=gdpo", f"hopforge.root={ROOT}", f"hopforge.out={tmp_path}",
                   "actor_rollout_ref.rollout.name=sglang")
    algo = cfg.algorithm
    assert algo.adv_estimator == "gdpo" and list(algo.gdpo_reward_keys) == ["f1", "multi_query", "merge"]
    assert len(algo.gdpo_reward_weights) == len(algo.gdpo_reward_keys) and not algo.use_kl_in_reward
    assert set(algo.gdpo_reward_keys) <= set(REWARD_KEYS)  # gated components, never a raw_ diagnostic
    assert omega_conf_to_dataclass(algo, dataclass_type=AlgoConfig).gdpo_reward_keys == list(algo.gdpo_reward_keys)
    fn = get_custom_reward_fn(cfg)
    assert isinstance(fn, partial)
    kwargs = fn.args[1]
    assert (kwargs["mode"], kwargs["query_weight"], kwargs["merge_weight"]) == ("f1", 0.1, 0.1)
    # the reward returns every key the estimator reads
    scored = compute_score("hopforge", "<answer>x</answer>", {"target": ["x"]}, {}, **dict(kwargs))
    assert set(algo.gdpo_reward_keys) <= set(scored)
    turn = cfg.actor_rollout_ref.rollout.multi_turn
    tools_yaml = RL_CONFIG_DIR / "tools-multisearch.yaml"
    assert Path(turn.tool_config_path) == tools_yaml and cfg.data.tool_config_path == turn.tool_config_path
    tools = OmegaConf.load(tools_yaml)
    assert [t.config.name for t in tools.tools] == ["search", "open", "find", "multi_search"]
    served = ToolsConfig(**OmegaConf.to_container(tools.server.tools))
    assert served.extra_tools == ["multi_search"] and kwargs["max_queries"] == served.multi_search_max_queries
    # every key the option sets is one of verl's (ppo_trainer's, or a field of verl's AlgoConfig)
    mine = yaml.safe_load((RL_CONFIG_DIR / "estimator" / "gdpo.yaml").read_text())
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        base = OmegaConf.to_container(compose(config_name="ppo_trainer"), resolve=False)
    known = _leaves(base) | {f"algorithm.{f.name}" for f in dataclasses.fields(AlgoConfig)}
    unknown = sorted(k for k in _leaves(mine) if k not in known
                     and not k.startswith("reward.custom_reward_function.reward_kwargs."))
    assert unknown == []
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))


@pytest.mark.parametrize("option", ["rltr", "dual"])
def test_the_judge_options_compose_over_the_rl_config_and_score_with_a_local_judge(option, tmp_path,
                                                                                   monkeypatch) -> None:
    """``+judge=rltr`` and ``+judge=dual`` (configs/rl/judge/): the judge terms' reward_kwargs pass verl's start-up
    checks, and the kwargs verl hands the reward score a response against a local OpenAI-compatible judge."""
    import yaml
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from filters.reward import REWARD_KEYS, compute_score
    from helpers.openai_server import serve

    with serve(handler=lambda req: json.dumps({"complete": True, "score": 8})) as srv:
        cfg = _compose(f"+judge={option}", f"hopforge.root={ROOT}", f"hopforge.out={tmp_path}",
                       "actor_rollout_ref.rollout.name=sglang",
                       f"reward.custom_reward_function.reward_kwargs.judge.base_url={srv.base_url}")
        validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
        kwargs = get_custom_reward_fn(cfg).args[1]
        judge = kwargs["judge"]
        assert judge["cache"] == f"{tmp_path}/cache/judge.sqlite" and judge["api_key_env"] == "JUDGE_API_KEY"
        monkeypatch.setenv("JUDGE_API_KEY", "EMPTY")
        extra = {"question_id": "q", "baselines": {"closed_book": {"answer": "x"}, "rag": {"answer": "y"}}}
        text = ('<tool_call>\n{"name": "search", "arguments": {"query": "a b"}}\n</tool_call>user\n<tool_response>\n'
                '[]\n</tool_response>\nassistant\n<answer>z</answer>')
        scored = compute_score("hopforge", text, {"target": ["z"]}, extra, **dict(kwargs))
        assert srv.count == (kwargs.get("rltr_samples", 0) if option == "rltr" else 1)
    assert set(REWARD_KEYS) <= set(scored) and scored["raw_judge_failed"] == 0.0
    if option == "rltr":
        assert scored["rltr"] == 1.0 and scored["score"] == pytest.approx(1.0 + kwargs["rltr_weight"])
    else:  # gain 1/2 + 1 - 0 , R_process 0.5 * 8/10, cost 0.1 * (1/2 * 1/10 + 1/2 * 2/60)
        assert scored["process"] == pytest.approx(0.4)
        assert scored["score"] == pytest.approx(1.5 + 0.4 - 0.1 * (0.05 + 1 / 60))
    # every key the option sets is one of verl's, or a reward kwarg
    mine = yaml.safe_load((RL_CONFIG_DIR / "judge" / f"{option}.yaml").read_text())
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        base = OmegaConf.to_container(compose(config_name="ppo_trainer"), resolve=False)
    assert sorted(k for k in _leaves(mine) if k not in _leaves(base)
                  and not k.startswith("reward.custom_reward_function.reward_kwargs.")) == []


def test_the_readme_runs_this_config() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## RL with verl", 1)[1].split("\n## ", 1)[0]
    assert "python -m verl.trainer.main_ppo" in section and "--config-name=qwen2.5-7b-lora" in section
    assert "hopforge tools serve" in section and 'hopforge.out="$PWD/data/full"' in section


def _card_bash(card: str) -> str:
    section = card.split("## RL with verl", 1)[1].split("\n## ", 1)[0]
    return section.split("```bash\n", 1)[1].split("```", 1)[0]


def test_the_dataset_card_gives_the_verl_command_line_that_reads_the_published_rl_pool(rl_run, tmp_path) -> None:
    """The card's shell lines, run by bash as written (``python`` / ``hopforge`` record their arguments), give
    verl overrides that compose over the RL config into the published ``rl_pool`` shards, which verl loads."""
    import subprocess

    from flows.config import load_config
    from synth.publish.publisher import publish

    pub = tmp_path / "pub dir"  # a space: the card's quoting must hold
    publish(rl_run, f"local:{pub}", load_config(ROOT / "configs" / "demo.yaml", []))
    card = (pub / "README.md").read_text()
    script = _card_bash(card)
    assert "python -m verl.trainer.main_ppo" in script and "hopforge tools serve" in script
    record = tmp_path / "args"
    prelude = (f'HOPFORGE={ROOT}; RUN={rl_run}\n'
               f'python() {{ printf "%s\\0" "$@" > {record}; }}\n'
               'hopforge() { :; }\n')
    r = subprocess.run(["bash", "-c", prelude + script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    argv = record.read_text().split("\0")[:-1]
    assert argv[:2] == ["-m", "verl.trainer.main_ppo"]
    config_path = next(a.split("=", 1)[1] for a in argv if a.startswith("--config-path="))
    assert Path(config_path) == RL_CONFIG_DIR
    overrides = [a for a in argv[2:] if not a.startswith("--")]
    cfg = _compose(*overrides)
    published = sorted(str(p) for p in (pub / "data" / "rl_pool").glob("*.parquet"))
    assert published and list(cfg.data.train_files) == published and list(cfg.data.val_files) == published
    assert cfg.actor_rollout_ref.model.path == f"{rl_run}/runs/qwen2.5-7b-lora"
    rows = [r for f in cfg.data.train_files for r in pq.read_table(f).to_pylist()]
    assert sorted(r["extra_info"]["question_id"] for r in rows) == sorted(
        r["extra_info"]["question_id"] for r in ds.dataset(rl_run / "rl_pool").to_table().to_pylist())

    # a Hub target: the same lines, the files fetched by `hf download` (huggingface_hub's CLI) into $DATA
    from synth.publish.card import _verl_command

    configs = [{"name": "rl_pool", "files": ["data/rl_pool/rl-00000-of-00002.parquet",
                                             "data/rl_pool/rl-00001-of-00002.parquet"],
                "splits": {"rl": {"rows": 9, "shards": 2}}}]
    lines = _verl_command("org/name", configs, local=False)
    assert lines[2] == "DATA=$(hf download org/name --repo-type dataset --include 'data/rl_pool/*')"
    assert lines[-2].count("'$DATA/data/rl_pool/rl-0000") == 4
    hf = Path(sys.executable).parent / "hf"
    help_text = subprocess.run([str(hf), "download", "--help"], capture_output=True, text=True).stdout
    assert "--repo-type" in help_text and "--include" in help_text
