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


def test_the_readme_command_lines_compose_into_the_modes_and_the_capf_tools(tmp_path) -> None:
    """The README's shell lines for rubric, gain and CAPF, run by bash as written (``python`` and
    ``hopforge`` record their arguments), compose over the RL config into what they claim."""
    import subprocess
    from functools import partial

    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.reward import get_custom_reward_fn

    readme = (ROOT / "README.md").read_text()
    section = readme.split("### The seeds' rewards", 1)[1].split("\n## ", 1)[0]
    script = section.split("```bash\n", 1)[1].split("```", 1)[0]
    record = tmp_path / "args"
    prelude = f'python() {{ printf "%s\\0" "$@" >> {record}; printf "\\1" >> {record}; }}\nhopforge() {{ :; }}\n'
    r = subprocess.run(["bash", "-c", prelude + script], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    runs = [[a for a in chunk.split("\0") if a] for chunk in record.read_text().split("\1") if chunk]
    assert len(runs) == 3 and all(argv[:2] == ["-m", "verl.trainer.main_ppo"] for argv in runs)
    got = []
    for argv in runs:
        overrides = [a for a in argv[2:] if not a.startswith("--")]
        with initialize_config_dir(config_dir=str(ROOT / "configs" / "rl"), version_base=None):
            cfg = compose(config_name="qwen2.5-7b-lora", overrides=overrides)
        fn = get_custom_reward_fn(cfg)
        assert isinstance(fn, partial) and fn.args[0].__module__ == "filters.reward"
        got.append((fn.args[1], cfg))
    (rubric, rubric_cfg), (gain, _), (capf, capf_cfg) = got
    assert rubric["mode"] == "rubric" and rubric_cfg.reward_model.reward_manager == "batch"
    assert gain["mode"] == "gain"
    assert capf["mode"] == "em" and capf["rho_pf"] == 0.8
    turn = capf_cfg.actor_rollout_ref.rollout.multi_turn
    assert Path(turn.tool_config_path) == CAPF_YAML and capf_cfg.data.tool_config_path == turn.tool_config_path
