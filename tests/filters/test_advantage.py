"""verl's ``hopforge`` advantage estimator (filters/advantage.py), through verl's own ``compute_advantage``.

Each response is scripted twice, consistently: the decoded text the reward reads (filters/reward.py with
``advantage: hopforge``, on real ``rl_pool`` rows) and the token layout verl's tool agent loop gives the
trainer (a run of policy tokens per assistant turn, a masked run per tool observation, padding after the
end, the reward's code on the last token).  Expected advantages are computed here from the published
formulas (the card's group max, CAPF's ``R·ρ^{N_t}``, PiCA's ``λ·α^(t−3)``, GRPO's normalisation).
"""

from __future__ import annotations

import json
import statistics
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from filters.advantage import NAME, compute_hopforge_advantage
from filters.reward import compute_score
from verl import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn

from helpers.verltrainer import compute_advantage  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TURN, OBS, PAD = 3, 2, 4  # tokens of an assistant turn, of an observation, of padding after the response


def call(name: str, **args) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def observation(obj) -> str:
    return "user\n<tool_response>\n" + json.dumps(obj, ensure_ascii=False) + "\n</tool_response>\nassistant\n"


def response(calls: list[str], answer: str, *, names: list[str] = ()) -> dict:
    """A rollout: one turn per tool in ``calls`` (``search`` or ``check_answer``), then the answer turn;
    the first turn's text names ``names``.  ``text``: what the reward reads; ``mask``: verl's response mask."""
    text = f"I follow {' and then '.join(names)}. " if names else "Searching. "
    mask: list[int] = []
    for tool in calls:
        text += call(tool, query="a place") if tool == "search" else call(tool, answer=answer)
        text += observation("Wrong." if tool == "check_answer" else [{"page_id": "0", "title": "Somewhere"}])
        mask += [1] * TURN + [0] * OBS
    text += f"So the answer is <answer>{answer}</answer>"
    mask += [1] * TURN
    return {"text": text, "mask": mask}


def turn_tokens(j: int) -> range:
    """The token positions of assistant turn ``j`` (1-based) in :func:`response`'s layout."""
    start = (j - 1) * (TURN + OBS)
    return range(start, start + TURN)


def score(row: dict, r: dict, **kw) -> dict:
    return compute_score(row["data_source"], r["text"], row["reward_model"]["ground_truth"], row["extra_info"],
                         advantage="hopforge", **kw)


def advantages(rows: list[dict], responses: list[dict], algorithm: dict, **kw) -> tuple[torch.Tensor, list[dict]]:
    """verl's ``compute_advantage`` with ``adv_estimator: hopforge`` on one batch: response i answers
    ``rows[i]`` (its GRPO group is the row's uid)."""
    scored = [score(row, r, **kw) for row, r in zip(rows, responses)]
    width = max(len(r["mask"]) for r in responses) + PAD
    mask = torch.zeros(len(responses), width, dtype=torch.int64)
    rewards = torch.zeros(len(responses), width, dtype=torch.float32)
    for i, (r, s) in enumerate(zip(responses, scored)):
        mask[i, :len(r["mask"])] = torch.tensor(r["mask"])
        rewards[i, len(r["mask"]) - 1] = s["score"]  # verl: the reward on the response's last token
    uids = np.array([f"uid-{row['extra_info']['question_id']}" for row in rows], dtype=object)
    data = DataProto.from_dict(tensors={"token_level_rewards": rewards, "response_mask": mask},
                               non_tensors={"uid": uids})
    config = OmegaConf.create({"adv_estimator": NAME, "use_kl_in_reward": False, "norm_adv_by_std_in_grpo": True,
                               **algorithm})
    out = compute_advantage(data, adv_estimator=NAME, num_repeat=1,
                            norm_adv_by_std_in_grpo=config.norm_adv_by_std_in_grpo, config=config)
    return out.batch["advantages"], scored


OFF = {"rubric": False, "capf": False, "pica": False}


@pytest.fixture(scope="module")
def rows(rl_rows) -> list[dict]:
    """Two rl_pool rows (two questions) whose paths have two bridge entities each."""
    two = [r for r in rl_rows if len(r["extra_info"]["path"]) == 4]
    assert len(two) >= 2, "the demo run has fewer than two 3-hop rl_pool rows"
    return two[:2]


def gold(row: dict) -> str:
    return row["reward_model"]["ground_truth"]["target"][0]


def bridges(row: dict) -> list[str]:
    return list(row["extra_info"]["titles"][1:-1])


def grpo(values: list[float]) -> list[float]:
    """GRPO's normalisation of one group's returns (verl: torch.std, the sample std; ε = 1e-6)."""
    mean, std = statistics.fmean(values), statistics.stdev(values)
    return [(v - mean) / (std + 1e-6) for v in values]


def test_registered_with_verl_and_declared_as_a_plugin() -> None:
    assert get_adv_estimator_fn("hopforge") is compute_hopforge_advantage
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["verl.plugins"]["hopforge"] == "filters.advantage"


def test_rubric_is_normalised_by_each_groups_max(rows) -> None:
    a, b = rows
    lam = 0.5
    group_a = [response(["search"], gold(a), names=bridges(a)),      # right, both bridges: the group's max
               response(["search"], gold(a), names=bridges(a)[:1]),  # right, one of two
               response(["search"], "Nowhere In Particular", names=bridges(a))]  # wrong: no credit
    group_b = [response(["search"], gold(b), names=bridges(b)[:1]),  # right, one: this group's max
               response(["search"], gold(b)),                         # right, none
               response(["search"], "Nowhere In Particular")]
    adv, scored = advantages([a] * 3 + [b] * 3, group_a + group_b,
                             {"hopforge": {**OFF, "rubric": True, "rubric_weight": lam}}, mode="rubric")
    # the shares the reward saw, as scripted (the rubric key is positive-only: the wrong answer's share is raw only)
    assert [s["raw_rubric"] for s in scored] == [1.0, 0.5, 1.0, 0.5, 0.0, 0.0]
    assert [s["rubric"] for s in scored] == [1.0, 0.5, 0.0, 0.5, 0.0, 0.0]
    assert [s["acc"] for s in scored] == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    # r = acc + λ·share/max_group(share) for right answers: group A's max is 1.0, group B's 0.5
    expected = grpo([1 + lam * 1.0 / 1.0, 1 + lam * 0.5 / 1.0, 0.0]) + grpo([1 + lam * 0.5 / 0.5, 1 + 0.0, 0.0])
    for i, r in enumerate(group_a + group_b):
        m = torch.tensor(r["mask"] + [0] * (adv.shape[1] - len(r["mask"])), dtype=torch.bool)
        assert torch.allclose(adv[i][m], torch.full((int(m.sum()),), expected[i]), atol=1e-5)
        assert torch.all(adv[i][~m] == 0)  # observations and padding carry no advantage
    # the same response in two groups: one is its group's best, the other is not
    assert expected[3] > expected[1]


def test_capf_attenuates_each_turn_by_the_feedback_calls_still_ahead(rows) -> None:
    row = rows[0]
    rho = 0.8
    x = response(["search", "check_answer", "search", "check_answer"], gold(row))
    y = response(["search"], gold(row))
    adv, scored = advantages([row, row], [x, y], {"norm_adv_by_std_in_grpo": False,
                                                  "hopforge": {**OFF, "capf": True, "rho_pf": rho}})
    assert [s["check_calls"] for s in scored] == [2, 0]
    R = 1.0
    # x's turns 1..5 make calls search, check, search, check, then answer: N_t = checks among calls t..4
    n_ahead = [2, 2, 1, 1, 0]
    returns_x = [R * rho ** n for n in n_ahead]
    mean = (returns_x[0] + R) / 2  # the group's whole-trajectory returns: G at each response's first token
    for j, want in enumerate(returns_x, start=1):
        got = adv[0, list(turn_tokens(j))]
        assert torch.allclose(got, torch.full((TURN,), want - mean), atol=1e-6), f"turn {j}"
    assert adv[0, list(turn_tokens(5))][0] > adv[0, list(turn_tokens(1))][0]  # after the last check: full R
    assert torch.allclose(adv[1, list(turn_tokens(1)) + list(turn_tokens(2))], torch.full((2 * TURN,), R - mean))


def test_pica_charges_each_call_from_the_third_at_its_own_step(rows) -> None:
    row = rows[0]
    lam, alpha = 0.1, 2.0
    r = response(["search"] * 5, gold(row))
    adv, _ = advantages([row], [r], {"norm_adv_by_std_in_grpo": False,
                                     "hopforge": {**OFF, "pica": True, "step_weight": lam, "step_alpha": alpha}})
    cost = {1: 0.0, 2: 0.0, 3: lam, 4: lam * alpha, 5: lam * alpha ** 2}  # λ·α^(t−3) from t = 3
    R = 1.0
    got = [adv[0, list(turn_tokens(j))] for j in range(1, 7)]
    for j in range(1, 7):  # turn j's return: R minus the costs of the calls it and the later turns make
        want = R - sum(c for t, c in cost.items() if t >= j)
        assert torch.allclose(got[j - 1], torch.full((TURN,), want), atol=1e-6), f"turn {j}"
    assert torch.allclose(got[0], got[2])  # the first two calls are free
    assert got[3][0] - got[2][0] == pytest.approx(lam)  # the third call: −λ, at its own step
    assert got[4][0] - got[3][0] == pytest.approx(lam * alpha)  # the fourth: −λα
    assert got[5][0] - got[4][0] == pytest.approx(lam * alpha ** 2)


def test_every_part_off_is_verls_grpo(rows) -> None:
    a, b = rows
    rs = [response(["search", "check_answer"], gold(a)), response(["search"] * 4, "Nowhere"),
          response(["search"], gold(b)), response(["search"] * 3, gold(b))]
    adv, scored = advantages([a, a, b, b], rs, {"hopforge": OFF})
    plain = torch.zeros_like(adv)
    mask = torch.zeros_like(adv, dtype=torch.int64)
    for i, r in enumerate(rs):
        plain[i, len(r["mask"]) - 1] = scored[i]["acc"]
        mask[i, :len(r["mask"])] = torch.tensor(r["mask"])
    data = DataProto.from_dict(tensors={"token_level_rewards": plain, "response_mask": mask},
                               non_tensors={"uid": np.array(["a", "a", "b", "b"], dtype=object)})
    ref = compute_advantage(data, adv_estimator="grpo", num_repeat=1).batch["advantages"]
    assert torch.allclose(adv, ref, atol=1e-6)


def test_a_malformed_response_gets_zero_and_no_penalty(rows) -> None:
    row = rows[0]
    bad = response(["search"] * 4, gold(row))
    bad["text"] = bad["text"].replace("</answer>", "")  # the format gate fails
    adv, scored = advantages([row], [bad], {"norm_adv_by_std_in_grpo": False, "hopforge": {"step_weight": 0.5}})
    assert scored[0]["format_ok"] == 0.0
    assert torch.all(adv == 0)


def test_the_coded_outcome_gives_evidence_credit_to_right_answers_only(rows) -> None:
    from filters.advantage import decode
    from filters.reward import REWARD_KEYS

    row = rows[0]
    path = list(row["extra_info"]["path"])
    read = call("open", page=path[1]) + observation({"page_id": path[1], "title": "x", "offset": 0, "text": "x"})
    share = 1 / len(path)  # one gold page of the path read
    right = {"text": read + f"So the answer is <answer>{gold(row)}</answer>"}
    wrong = {"text": read + "So the answer is <answer>Nowhere In Particular</answer>"}
    r, w = score(row, right, evidence_weight=0.5), score(row, wrong, evidence_weight=0.5)
    assert decode(r["score"])["outcome"] == pytest.approx(1 + 0.5 * share, abs=1 / 256) and r["evidence"] == share
    assert decode(w["score"])["outcome"] == 0.0 and w["evidence"] == 0.0 and w["raw_evidence"] == share
    broken = score(row, {"text": right["text"].replace("</answer>", "")}, evidence_weight=0.5)
    assert decode(broken["score"]) == {"format_ok": False, "outcome": 0.0, "hits": None, "checks_back": []}
    assert all(broken[k] == 0 for k in REWARD_KEYS if k != "score")  # the score is the code, its fields all 0


def test_refuses_rewards_without_the_code_and_kl_in_reward(rows) -> None:
    row = rows[0]
    r = response(["search"], gold(row))
    rewards = torch.zeros(1, len(r["mask"]))
    rewards[0, -1] = 1.0  # a plain reward: reward_kwargs.advantage was not set
    data = DataProto.from_dict(tensors={"token_level_rewards": rewards,
                                        "response_mask": torch.tensor([r["mask"]])},
                               non_tensors={"uid": np.array(["u"], dtype=object)})
    with pytest.raises(ValueError, match="advantage=hopforge"):
        compute_advantage(data, adv_estimator=NAME, config=OmegaConf.create({"use_kl_in_reward": False}))
    with pytest.raises(ValueError, match="use_kl_in_reward"):
        compute_advantage(data, adv_estimator=NAME, config=OmegaConf.create({"use_kl_in_reward": True}))
    with pytest.raises(ValueError, match="step_weight"):
        score(row, r, step_weight=0.1)  # the penalty would be charged twice


def test_the_example_config_selects_the_estimator_and_its_knobs(tmp_path) -> None:
    """``+estimator=hopforge`` (configs/rl/estimator/hopforge.yaml) composes over the RL config into the
    estimator, the coded reward and knobs the estimator accepts, and passes verl's own start-up checks."""
    from functools import partial

    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from filters.advantage import DEFAULTS, knobs

    with initialize_config_dir(config_dir=str(ROOT / "configs" / "rl"), version_base=None):
        cfg = compose(config_name="qwen2.5-7b-lora",
                      overrides=["+estimator=hopforge", f"hopforge.root={ROOT}", f"hopforge.out={tmp_path}",
                                 "algorithm.hopforge.rho_pf=0.9", "actor_rollout_ref.rollout.name=sglang"])
    assert cfg.algorithm.adv_estimator == NAME and not cfg.algorithm.use_kl_in_reward
    fn = get_custom_reward_fn(cfg)
    assert isinstance(fn, partial) and fn.args[1]["advantage"] == "hopforge" and fn.args[1]["step_weight"] == 0
    got = knobs(cfg.algorithm)
    assert set(got) == set(DEFAULTS) and got["rho_pf"] == 0.9  # the command line reaches the estimator
    turn = cfg.actor_rollout_ref.rollout.multi_turn
    assert turn.max_parallel_calls == 1 and Path(turn.tool_config_path) == ROOT / "configs" / "rl" / "tools-capf.yaml"
    assert cfg.data.tool_config_path == turn.tool_config_path
    assert cfg.data.train_files == f"{tmp_path}/rl_pool/part-00000.parquet"  # the base config underneath
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    with pytest.raises(ValueError, match="unknown keys"):
        knobs(OmegaConf.create({"hopforge": {"rho": 0.9}}))
