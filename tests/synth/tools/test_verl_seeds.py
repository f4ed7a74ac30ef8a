"""The seeds' RL signals inside verl 0.9.x itself, on a real ``rl_pool``, on CPU and offline.

- The ``rubric`` reward mode through verl's ``BatchRewardManager`` (``verl.workers.reward_manager``): a
  fake ``DataProto`` step of two GRPO groups, responses rendered by the student's template and decoded by
  the manager, each group normalised by its own maximum.
- CAPF's ``check_answer`` tool built by verl's tool registry from ``configs/rl/tools-capf.yaml`` and run
  by ``ToolAgentLoop._call_tool`` with the ``tools_kwargs`` verl's dataset hands over.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

if importlib.util.find_spec("verl") is None:
    pytest.skip("verl is not installed (pip install -e '.[rl]' && pip install --no-deps verl)", allow_module_level=True)

from omegaconf import OmegaConf  # noqa: E402

from helpers.verlloop import call_tool, response_ids, tool_loop  # noqa: E402
from synth.tools.config import ToolsConfig  # noqa: E402
from synth.tools.server import start_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
CAPF_YAML = ROOT / "configs" / "rl" / "tools-capf.yaml"


@pytest.fixture(scope="module")
def tokenizer(student_path):
    from verl.utils import hf_tokenizer

    return hf_tokenizer(str(student_path))


@pytest.fixture(scope="module")
def deep_rows(rl_rows) -> list[dict]:
    """Rows whose path has two bridge entities, at least two questions."""
    rows = [r for r in rl_rows if len(r["extra_info"]["path"]) >= 4]
    assert len(rows) >= 2, "the demo run has fewer than two 3-hop rl_pool rows"
    return rows[:2]


def _response(tokenizer, row: dict, answer: str, names: list[str]) -> list[int]:
    """A rollout's response tokens under the student's template: one search naming ``names``, an answer."""
    text = f"I follow {' and then '.join(names)}." if names else "Let me search."
    return response_ids(tokenizer, row, answer, content=text)


def test_the_rubric_mode_runs_in_verls_batch_reward_manager(tokenizer, deep_rows) -> None:
    import numpy as np
    import torch
    from verl import DataProto
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager.registry import get_reward_manager_cls

    lam = 0.5
    a, b = deep_rows
    bridges = {id(r): list(r["extra_info"]["titles"][1:-1]) for r in deep_rows}
    wrong = "Nowhere In Particular"
    cases = [  # (row, answer, entities named): group a, then group b, interleaved as a step may hold them
        (a, a["reward_model"]["ground_truth"]["target"][0], bridges[id(a)]),
        (b, b["reward_model"]["ground_truth"]["target"][0], bridges[id(b)][:1]),
        (a, a["reward_model"]["ground_truth"]["target"][0], bridges[id(a)][:1]),
        (a, wrong, bridges[id(a)]),
        (b, wrong, []),
    ]
    responses = [_response(tokenizer, r, ans, names) for r, ans, names in cases]
    prompt_len, resp_len = 4, max(len(x) for x in responses)
    pad = tokenizer.pad_token_id
    prompts = torch.full((len(cases), prompt_len), pad, dtype=torch.long)
    resp = torch.full((len(cases), resp_len), pad, dtype=torch.long)
    mask = torch.zeros((len(cases), prompt_len + resp_len), dtype=torch.long)
    mask[:, :prompt_len] = 1
    for i, ids in enumerate(responses):
        resp[i, :len(ids)] = torch.tensor(ids)
        mask[i, prompt_len:prompt_len + len(ids)] = 1
    data = DataProto.from_dict(
        tensors={"prompts": prompts, "responses": resp, "attention_mask": mask},
        non_tensors={"data_source": np.array([r["data_source"] for r, _, _ in cases], dtype=object),
                     "reward_model": np.array([r["reward_model"] for r, _, _ in cases], dtype=object),
                     "extra_info": np.array([dict(r["extra_info"]) for r, _, _ in cases], dtype=object)})

    cfg = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": "pkg://filters.reward", "name": "compute_score",
        "reward_kwargs": {"mode": "rubric", "rubric_weight": lam, "min_f1": 0.8}}}})
    fn = get_custom_reward_fn(cfg)
    manager = get_reward_manager_cls("batch")(tokenizer=tokenizer, num_examine=0, compute_score=fn)
    out = manager(data, return_dict=True)
    scores = out["reward_tensor"].sum(dim=-1).tolist()
    info = out["reward_extra_info"]
    half_a = 1 / len(bridges[id(a)])
    assert info["rubric"][:4] == [1.0, 1 / len(bridges[id(b)]), half_a, 0.0]  # positive-only: a wrong answer's is 0
    assert info["raw_rubric"][:4] == [1.0, 1 / len(bridges[id(b)]), half_a, 1.0]  # ... though it names every one
    # group a: max share 1 among its correct responses; group b: its one correct response is its own max
    assert scores == pytest.approx([1 + lam, 1 + lam, 1 + lam * half_a, 0.0, 0.0])
    assert info["acc"] == [1.0, 1.0, 1.0, 0.0, 0.0] and info["format_ok"] == [1.0] * 5
    # the reward sits on each response's last valid token, as verl's GRPO reads it
    for i, ids in enumerate(responses):
        assert out["reward_tensor"][i, len(ids) - 1].item() == pytest.approx(scores[i])


def test_check_answer_runs_through_verls_tool_registry(rl_run, rl_rows, rl_questions, monkeypatch) -> None:
    from verl.tools.tool_registry import initialize_tools_from_config

    with start_server(rl_run / "index", ToolsConfig()) as server:
        monkeypatch.setenv("HOPFORGE_TOOLS_URL", server.url)
        tools = initialize_tools_from_config(str(CAPF_YAML))
    assert [t.name for t in tools] == ["search", "open", "find", "check_answer"]
    schema = tools[-1].tool_schema.model_dump()
    assert schema["function"]["parameters"]["required"] == ["answer"]
    loop = tool_loop(tools)
    for row in rl_rows:
        q = rl_questions[row["extra_info"]["question_id"]]
        kwargs = row["extra_info"]["tools_kwargs"]
        assert call_tool(loop, "check_answer", {"answer": q["answer"]}, kwargs).startswith("Correct")
        assert call_tool(loop, "check_answer", {"answer": q["answer"].upper() + "."}, kwargs).startswith("Correct")
        wrong = call_tool(loop, "check_answer", {"answer": "Nowhere In Particular"}, kwargs)
        assert wrong.startswith("Incorrect")
        # a bridge entity of the chain: partially right, and which step it is; the answer is never revealed
        for j in range(1, len(q["titles"]) - 1):
            text = call_tool(loop, "check_answer", {"answer": q["titles"][j]}, kwargs)
            assert text.startswith("Partially right") and f"step {j} of {len(q['titles']) - 1}" in text
            assert q["answer"] not in text
        start = call_tool(loop, "check_answer", {"answer": q["titles"][0]}, kwargs)
        assert start.startswith("Partially right") and "starts from" in start
    # another question's ground truth gives another verdict: the tool reads tools_kwargs, nothing else
    first, second = rl_rows[0], rl_rows[1]
    other = rl_questions[second["extra_info"]["question_id"]]["answer"]
    if other != rl_questions[first["extra_info"]["question_id"]]["answer"]:
        assert not call_tool(loop, "check_answer", {"answer": other},
                         first["extra_info"]["tools_kwargs"]).startswith("Correct")
    # no ground truth (a row without tools_kwargs): an error the agent reads, not a verdict
    assert "no ground truth" in call_tool(loop, "check_answer", {"answer": "x"}, {})
    assert "error" in json.loads(call_tool(loop, "check_answer", {"candidate": "x"}, first["extra_info"]["tools_kwargs"]))


# ---- the RL page of the docs (docs/rl.md): one verl command line per seed method ---------------------------

RL_CONFIG_DIR = ROOT / "configs" / "rl"
TOOLS, CAPF, MULTI = "tools.yaml", "tools-capf.yaml", "tools-multisearch.yaml"
HOPFORGE_EST = {"algorithm.adv_estimator": "hopforge", "algorithm.use_kl_in_reward": False}

# What each labelled docs/rl.md line (``# [label]``) must set: ``cfg`` (dotted keys of the composed config), ``kw`` (the
# reward_kwargs verl hands filters/reward.py), ``tools`` (the rollouts' tool config), ``rl`` (the RL settings of the
# data step that precedes the line: its own ``hopforge run``, else the [grpo] block's), ``judge`` (a judge endpoint
# whose key variable the block exports).  A label in docs/rl.md without an entry here, or an entry without a line
# there, fails the test.
SEED_LINES: dict[str, dict] = {
    "grpo": {"cfg": {"algorithm.adv_estimator": "grpo"}, "kw": {"mode": "em", "evidence_weight": 0.0,
             "step_weight": 0.0}, "tools": TOOLS, "rl": {"band_by": "teacher", "baselines": False, "guidance": False}},
    "rubric": {"cfg": {**HOPFORGE_EST, "algorithm.hopforge.rubric": True, "algorithm.hopforge.capf": False,
                       "algorithm.hopforge.pica": False},
               "kw": {"mode": "rubric", "advantage": "hopforge"}, "tools": TOOLS},
    "evidence": {"cfg": {"algorithm.adv_estimator": "grpo"}, "kw": {"mode": "em", "evidence_weight": 0.25},
                 "tools": TOOLS},
    "gain": {"cfg": {"algorithm.adv_estimator": "grpo"}, "kw": {"mode": "gain"}, "tools": TOOLS,
             "rl": {"baselines": True}},
    "dual": {"cfg": {"algorithm.adv_estimator": "grpo"}, "kw": {"mode": "gain", "process_max": 0.5, "cost_alpha": 0.1},
             "tools": TOOLS, "rl": {"baselines": True}, "judge": True},
    "capf": {"cfg": {"algorithm.adv_estimator": "grpo"}, "kw": {"mode": "em", "rho_pf": 0.8}, "tools": CAPF},
    "capf-step": {"cfg": {**HOPFORGE_EST, "algorithm.hopforge.rubric": False, "algorithm.hopforge.capf": True,
                          "algorithm.hopforge.pica": False},
                  "kw": {"mode": "em", "advantage": "hopforge"}, "tools": CAPF},
    "pica": {"cfg": {"algorithm.adv_estimator": "grpo"}, "kw": {"mode": "em", "step_weight": 0.05, "step_alpha": 1.2},
             "tools": TOOLS},
    "pica-step": {"cfg": {**HOPFORGE_EST, "algorithm.hopforge.rubric": False, "algorithm.hopforge.capf": False,
                          "algorithm.hopforge.pica": True},
                  "kw": {"mode": "em", "advantage": "hopforge", "step_weight": 0.0}, "tools": TOOLS},
    "hopforge": {"cfg": {**HOPFORGE_EST, "algorithm.hopforge.rubric": True, "algorithm.hopforge.capf": True,
                         "algorithm.hopforge.pica": True, "algorithm.hopforge.step_alpha": 1.5},
                 "kw": {"mode": "rubric", "advantage": "hopforge"}, "tools": CAPF},
    "actguide": {"cfg": {"algorithm.adv_estimator": "grpo",
                         "actor_rollout_ref.rollout.agent.default_agent_loop": "hopforge_guided",
                         "actor_rollout_ref.rollout.agent.agent_loop_config_path":
                             str(RL_CONFIG_DIR / "agent" / "actguide_loops.yaml")},
                 "kw": {"mode": "em"}, "tools": TOOLS, "rl": {"band_by": "student", "guidance": True}},
    "curriculum": {"cfg": {"algorithm.adv_estimator": "grpo", "data.shuffle": False}, "kw": {"mode": "em"},
                   "tools": TOOLS, "rl": {"band_by": "student"}, "stages": True},
    "multisearch": {"cfg": {"algorithm.adv_estimator": "gdpo", "algorithm.gdpo_reward_keys": ["f1", "multi_query", "merge"]},
                    "kw": {"mode": "f1"}, "tools": MULTI},
    "rltr": {"cfg": {"algorithm.adv_estimator": "grpo"}, "kw": {"mode": "em", "rltr_weight": 0.5}, "tools": TOOLS,
             "judge": True},
    "sarl": {"cfg": {"algorithm.adv_estimator": "grpo",
                     "actor_rollout_ref.rollout.agent.default_agent_loop": "hopforge_sarl",
                     "actor_rollout_ref.rollout.agent.agent_loop_config_path":
                         str(RL_CONFIG_DIR / "agent" / "sarl_loops.yaml")},
             "kw": {"mode": "sarl", "sarl_alpha": 0.8, "sarl_lam": 0.5}, "tools": TOOLS},
}

MAIN_PPO = "python -m verl.trainer.main_ppo"


def _rl_section() -> str:
    """docs/rl.md, the README's "RL with verl" section (its subsections included) moved to a page of its own."""
    page = (ROOT / "docs" / "rl.md").read_text()
    assert page.startswith("# RL with verl\n")
    return page


def _labelled_blocks(section: str) -> tuple[dict[str, str], list[str]]:
    """The section's bash blocks cut at ``# [label]`` lines -> ({label: its lines}, the table's labels)."""
    import re

    chunks: dict[str, str] = {}
    for block in section.split("```bash\n")[1:]:
        label, lines = None, []
        for line in block.split("```", 1)[0].splitlines():
            m = re.match(r"# \[([a-z0-9-]+)\]", line)
            if m:
                label, lines = m.group(1), []
                assert label not in chunks, f"two docs/rl.md blocks are labelled [{label}]"
                chunks[label] = ""
            elif label is None:
                assert MAIN_PPO not in line, f"a verl line outside a labelled block: {line}"
            if label is not None:
                lines.append(line)
                chunks[label] = "\n".join(lines) + "\n"
    for label, text in chunks.items():
        assert text.count(MAIN_PPO) == 1, f"[{label}] holds {text.count(MAIN_PPO)} verl lines, not one"
    header = section.index("| method | seed |")
    table = section[header:].split("\n\n", 1)[0].splitlines()[2:]
    labels = [re.match(r"\| `([a-z0-9-]+)` \|", row).group(1) for row in table]
    return chunks, labels


def _run_recorded(script: str, tmp: Path) -> tuple[list[str], list[list[str]], set[str]]:
    """``script`` run by bash as written, ``python`` and ``hopforge`` recording their arguments ->
    (python's argv, each hopforge call's argv, the variables exported when python ran)."""
    import os
    import subprocess

    tmp.mkdir(parents=True, exist_ok=True)
    py, hf, env = tmp / "python", tmp / "hopforge", tmp / "env"
    prelude = ("set -eu\n"
               f'python() {{ printf "%s\\0" "$@" >> {py}; printf "\\1" >> {py}; env -0 > {env}; }}\n'
               f'hopforge() {{ printf "%s\\0" "$@" >> {hf}; printf "\\1" >> {hf}; }}\n')
    clean = {k: v for k, v in os.environ.items() if k != "JUDGE_API_KEY"}
    r = subprocess.run(["bash", "-c", prelude + script + "\nwait\n"], capture_output=True, text=True, cwd=ROOT,
                       env=clean, timeout=60)
    assert r.returncode == 0, r.stderr

    def calls(f: Path) -> list[list[str]]:
        return [[a for a in c.split("\0") if a] for c in (f.read_text().split("\1") if f.exists() else []) if c]

    runs = calls(py)
    assert len(runs) == 1, runs
    exported = {kv.split("=", 1)[0] for kv in env.read_text().split("\0") if "=" in kv}
    return runs[0], calls(hf), exported


def _hopforge_call(argv: list[str]):
    """A recorded ``hopforge`` call parsed by the CLI itself (an unknown command or option fails) -> (command, params)."""
    import typer

    from flows.cli import app

    cmd, i = typer.main.get_command(app), 0
    while hasattr(cmd, "commands"):  # a group (typer's own click)
        assert argv[i] in cmd.commands, f"hopforge has no command {argv[i]!r}: {argv}"
        cmd, i = cmd.commands[argv[i]], i + 1
    return " ".join(argv[:i]), cmd.make_context(" ".join(argv[:i]), list(argv[i:])).params


def _at(cfg, dotted: str):
    from omegaconf import ListConfig

    v = OmegaConf.select(cfg, dotted, throw_on_missing=True)
    return list(v) if isinstance(v, ListConfig) else v


def test_every_seed_method_has_a_readme_line_that_verl_composes_into_what_its_label_claims(tmp_path,
                                                                                          monkeypatch) -> None:
    """Every ``python -m verl.trainer.main_ppo`` line of the RL page (docs/rl.md), with the ``hopforge`` data lines
    before it, run by bash as written (``python`` and ``hopforge`` record their arguments): the hopforge calls parse
    by the CLI into the RL settings the method needs; the verl line composes through Hydra over
    ``configs/rl/qwen2.5-7b-lora.yaml`` (and verl's ``ppo_trainer``), passes verl's start-up checks, loads
    ``filters/reward.py`` with kwargs it accepts, names a registered estimator, and sets what ``SEED_LINES`` says."""
    import dataclasses
    import re
    from functools import partial

    import verl
    from hydra import compose, initialize_config_dir
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    import filters.advantage  # noqa: F401  (registers the `hopforge` estimator, as the verl.plugins entry point does)
    from filters.advantage import knobs
    from filters.reward import compute_score
    from flows.config import load_config

    monkeypatch.chdir(ROOT)
    chunks, table = _labelled_blocks(_rl_section())
    assert sorted(chunks) == sorted(SEED_LINES), "docs/rl.md labels and the test's expectations differ"
    assert sorted(table) == sorted(SEED_LINES), "docs/rl.md's table of methods and its labelled lines differ"
    # the reward managers verl 0.9.1's reward loop registers (its package imports aiohttp, absent here: read them)
    managers = set(re.findall(r'register\(\s*"([a-z_]+)"', "".join(
        f.read_text() for f in (Path(verl.__file__).parent / "experimental" / "reward_loop" / "reward_manager")
        .glob("*.py"))))
    assert "naive" in managers

    def data_step(calls: list[list[str]]) -> dict:
        """{command: the flows config its --config and --set give} for the block's hopforge calls."""
        out = {}
        for argv in calls:
            name, params = _hopforge_call(argv)
            if name in ("run", "rl-band", "tools serve"):
                out[name] = load_config(params.get("config"), list(params.get("set_") or []))
        return out

    recorded = {label: _run_recorded(chunks[label], tmp_path / label) for label in SEED_LINES}
    base_steps = data_step(recorded["grpo"][1])
    assert {"run", "tools serve"} <= set(base_steps)
    out = tmp_path / "full"
    for label, want in SEED_LINES.items():
        argv, hf_calls, exported = recorded[label]
        steps = {**base_steps, **data_step(hf_calls)}
        assert argv[:2] == ["-m", "verl.trainer.main_ppo"], (label, argv)
        flags = dict(a.split("=", 1) for a in argv[2:] if a.startswith("--"))
        assert Path(flags["--config-path"]) == RL_CONFIG_DIR and flags["--config-name"] == "qwen2.5-7b-lora", label
        overrides = [a for a in argv[2:] if not a.startswith("--")]
        assert f"hopforge.root={ROOT}" in overrides and f"hopforge.out={ROOT}/data/full" in overrides, label
        overrides = [o for o in overrides if not o.startswith("hopforge.out=")] + [f"hopforge.out={out}"]
        with initialize_config_dir(config_dir=flags["--config-path"], version_base=None):
            cfg = compose(config_name=flags["--config-name"],
                          overrides=overrides + ["actor_rollout_ref.rollout.name=sglang"])  # vLLM is absent here
        OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
        validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
        # what main_ppo's reward loop reads: no legacy key that would replace the reward or its manager
        assert cfg.reward_model.reward_manager is None and all(v is None for v in cfg.custom_reward_function.values())
        assert cfg.reward.reward_manager.name in managers, label
        algo = OmegaConf.to_container(cfg.algorithm)
        extra = algo.pop("hopforge", None)
        assert (extra is not None) == (cfg.algorithm.adv_estimator == "hopforge"), label
        assert set(algo) <= {f.name for f in dataclasses.fields(AlgoConfig)}, label
        omega_conf_to_dataclass(OmegaConf.create(algo), dataclass_type=AlgoConfig)
        get_adv_estimator_fn(cfg.algorithm.adv_estimator)
        if extra is not None:
            knobs(cfg.algorithm)  # unknown algorithm.hopforge keys are refused
        for key, value in want["cfg"].items():
            assert _at(cfg, key) == value, (label, key)
        fn = get_custom_reward_fn(cfg)
        assert isinstance(fn, partial) and fn.args[0].__module__ == "filters.reward", label
        kwargs = dict(fn.args[1])
        for key, value in want["kw"].items():
            assert kwargs.get(key) == value, (label, key, kwargs.get(key))
        turn = cfg.actor_rollout_ref.rollout.multi_turn
        assert Path(turn.tool_config_path) == RL_CONFIG_DIR / want["tools"], label
        assert cfg.data.tool_config_path == turn.tool_config_path, label
        # the tool server the block starts serves the tools the rollouts call
        served = OmegaConf.load(turn.tool_config_path).server.tools
        assert steps["tools serve"].tools.extra_tools == list(served.get("extra_tools", [])), label
        # the data step gives the rows the method reads
        for key, value in want.get("rl", {}).items():
            assert getattr(steps["run"].rl, key) == value, (label, key)
        if want.get("judge"):
            judge = kwargs["judge"]
            assert judge["base_url"] and judge["model"] and judge["api_key_env"] in exported, label
        else:
            assert "judge" not in kwargs, label
            row = {"question_id": "q", "path": ["A", "x"], "titles": ["A", "x"],
                   "baselines": {"closed_book": {"answer": "y", "acc": 0.0, "f1": 0.0},
                                 "rag": {"answer": "y", "acc": 0.0, "f1": 0.0}}}
            scored = compute_score("hopforge", "<answer>x</answer>", {"target": ["x"]}, row, **kwargs)
            assert scored["acc"] == 1.0 and scored["format_ok"] == 1.0, label
        if want.get("stages"):
            stages = steps["run"].rl.curriculum
            assert len(stages) >= 2, label
            by_name = {s.name: s for s in stages}
            files = _at(cfg, "data.train_files")
            names = [Path(f).parent.name for f in files]
            assert files == [f"{out}/rl_curriculum/{n}/part-00000.parquet" for n in names], label
            assert sorted(names) == sorted(by_name), label
            # the easier stage (higher pass rates) first
            assert [by_name[n].min_pass for n in names] == sorted((by_name[n].min_pass for n in names), reverse=True)
