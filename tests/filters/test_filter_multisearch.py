"""MultiSearch's query and merge rewards (filters/reward.py) on hand-written responses, and verl's ``gdpo``
estimator normalising each of them within its group on its own (the keys of ``configs/rl/estimator/gdpo.yaml``,
whose composition and verl's checks are in ``tests/synth/tools/test_verl_tool.py``).

The rules: ``multi_query`` is ``query_weight`` (0.1) when one step (an assistant turn) asked more than 2 distinct
queries (a ``multi_search`` call's queries, plus any ``search`` calls of the same turn); ``merge`` is
``merge_weight`` (0.1) when a ``<merge>`` block the student wrote holds its answer.  Both are gated on a right
answer and on the format, and both are 0 unless their weight is set, so the existing modes' ``score`` is
unchanged by default.
"""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from filters.advantage import OUTCOME_STEPS, decode
from filters.reward import DIAGNOSTIC_KEYS, REWARD_KEYS, compute_score
from verl import DataProto

from helpers.verltrainer import compute_advantage  # noqa: E402

GT = {"target": ["Delta City", "Delta"]}
EXTRA = {"question_id": "q1", "index": 0, "path": ["p0", "p1", "p2", "p3"], "split": "rl"}
ON = {"query_weight": 0.1, "merge_weight": 0.1}


def call(name: str, **args) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def observation(obj) -> str:
    return "user\n<tool_response>\n" + json.dumps(obj, ensure_ascii=False) + "\n</tool_response>\nassistant\n"


HITS = [{"page_id": "p0", "title": "Alpha Station", "snippet": "...", "rank": 1, "queries": ["a"]}]


def multi(*queries: str) -> str:
    """One turn: a multi_search call with ``queries``, then its observation."""
    return call("multi_search", queries=list(queries)) + observation(HITS)


def search(query: str) -> str:
    return call("search", query=query) + observation(HITS[:1])


def solution(*turns: str, answer: str = "Delta City", merge: str | None = None) -> str:
    block = f"<merge>{merge}</merge> " if merge is not None else ""
    return "".join(turns) + f"{block}So: <answer>{answer}</answer>"


def score(text: str, **kw) -> dict:
    return compute_score("hopforge", text, GT, EXTRA, **kw)


def test_off_by_default_the_score_is_unchanged() -> None:
    got = score(solution(multi("a", "b", "c"), merge="Delta City"))
    assert got["score"] == 1.0 and got["multi_query"] == 0.0 and got["merge"] == 0.0
    assert {"multi_query", "merge"} <= set(REWARD_KEYS) and {"raw_queries", "raw_merge"} <= set(DIAGNOSTIC_KEYS)
    assert got["raw_queries"] == 3 and got["raw_merge"] == 1.0  # what happened, ungated


def test_a_right_answer_earns_each_one_tenth() -> None:
    both = score(solution(multi("a", "b", "c"), merge="The chains meet at Delta City."), **ON)
    assert (both["multi_query"], both["merge"]) == (0.1, 0.1)
    assert both["score"] == pytest.approx(1.0 + 0.1 + 0.1) and both["acc"] == 1.0
    only_queries = score(solution(multi("a", "b", "c")), **ON)
    assert (only_queries["multi_query"], only_queries["merge"], only_queries["score"]) == (0.1, 0.0, pytest.approx(1.1))
    only_merge = score(solution(multi("a", "b"), merge="delta city"), **ON)
    assert (only_merge["multi_query"], only_merge["merge"], only_merge["score"]) == (0.0, 0.1, pytest.approx(1.1))
    # f1 mode (MultiSearch's outcome): F1 of "Delta" against "Delta City" is 2/3, plus the two terms
    f1 = score(solution(multi("a", "b", "c"), answer="Delta", merge="Delta"), mode="f1", **ON)
    assert f1["f1"] == pytest.approx(1.0) and f1["score"] == pytest.approx(1.2)  # "Delta" is an alias


def test_a_wrong_answer_earns_neither_however_many_queries_or_merges() -> None:
    wrong = score(solution(multi("a", "b", "c", "d"), answer="Echo Town", merge="Echo Town"), **ON)
    assert (wrong["multi_query"], wrong["merge"], wrong["score"]) == (0.0, 0.0, 0.0)
    assert wrong["raw_queries"] == 4 and wrong["raw_merge"] == 1.0
    # a malformed response with the right answer: every component 0
    not_an_object = "<tool_call>\n{\"name\": \"open\", \"arguments\": \"p2\"}\n</tool_call>" + observation({})
    bad = score(solution(multi("a", "b", "c"), not_an_object, merge="Delta City"), **ON)
    assert bad["format_ok"] == 0.0 and (bad["multi_query"], bad["merge"], bad["score"]) == (0.0, 0.0, 0.0)
    assert bad["raw_queries"] == 3 and bad["raw_merge"] == 1.0


@pytest.mark.parametrize("turns, want", [
    ((multi("a", "b"),), 0.0),  # 2 queries: not more than 2
    ((multi("a", "b"), multi("c", "d")), 0.0),  # 4 queries, but 2 a step
    ((search("a") + search("b") + search("c"),), 0.0),  # three turns, one query each
    ((call("search", query="a") + call("search", query="b") + call("search", query="c")
      + observation(HITS) + observation(HITS) + observation(HITS),), 0.1),  # three searches in one turn
    ((call("multi_search", queries=["a", "b"]) + call("search", query="c") + observation(HITS)
      + observation(HITS),), 0.1),  # a multi_search and a search in one turn
    ((multi("Alpha", "alpha ", "b"),), 0.0),  # a repeated query counts once
    ((multi("a", "b", "c", "d", "e", "f"),), 0.0),  # over the tool's cap: the call was refused
    ((multi("a", "b", "c", "d", "e"),), 0.1),  # at the cap
])
def test_the_query_rule_counts_distinct_queries_of_one_step(turns, want) -> None:
    assert score(solution(*turns), **ON)["multi_query"] == want


def test_the_cap_follows_the_runs_tools_config() -> None:
    six = solution(multi("a", "b", "c", "d", "e", "f"))
    assert score(six, max_queries=6, **ON)["multi_query"] == 0.1


@pytest.mark.parametrize("text, want", [
    (solution(search("a"), merge="It is Delta City"), 0.1),
    (solution(search("a"), merge="Alpha Station and Bravo"), 0.0),  # the block does not hold the answer
    (solution(search("a"), merge="Delta Citywide"), 0.0),  # a whole phrase, not a prefix
    (call("search", query="a") + observation({"snippet": "<merge>Delta City</merge>"}) + "So: <answer>Delta City"
     "</answer>", 0.0),  # an observation's block is not the student's
    (solution(search("a")), 0.0),
])
def test_the_merge_rule_reads_the_students_own_block(text, want) -> None:
    assert score(text, **ON)["merge"] == want


def test_the_coded_path_carries_them_in_its_outcome() -> None:
    got = score(solution(multi("a", "b", "c"), merge="Delta City"), advantage="hopforge", **ON)
    # the code carries R in steps of 1 / OUTCOME_STEPS: 1.2 to the nearest step
    assert decode(got["score"])["outcome"] == round(1.2 * OUTCOME_STEPS) / OUTCOME_STEPS and got["multi_query"] == 0.1
    plain = score(solution(multi("a", "b", "c"), merge="Delta City"), advantage="hopforge")
    assert decode(plain["score"])["outcome"] == 1.0  # off by default: the code is what it was


# ---- verl's gdpo estimator over these keys ----------------------------------------------------------------

def test_gdpo_normalises_each_key_within_its_group_on_its_own() -> None:
    """verl's ``compute_advantage`` with ``adv_estimator: gdpo`` over the config's keys: per key, GRPO's
    ``(r − mean_g) / (std_g + ε)`` (sample std) within each group; the weighted sum; then whitened over the
    batch's response tokens (mean, unbiased variance, ``+ 1e-8``)."""
    keys, weights = ["f1", "multi_query", "merge"], [1.0, 1.0, 1.0]
    texts = [solution(multi("a", "b", "c"), merge="Delta City"),   # right, both terms
             solution(multi("a", "b")),                             # right, neither
             solution(multi("a", "b", "c"), answer="Echo"),         # wrong: nothing
             solution(multi("a", "b", "c"), answer="Delta Town"),   # wrong (F1 2/3 against "Delta")
             solution(multi("a", "b", "c")),                        # group 2: right, queries
             solution(search("a"), merge="Delta City"),             # group 2: right, merge
             solution(search("a"), answer="Echo")]                  # group 2: wrong
    groups = ["g1", "g1", "g1", "g1", "g2", "g2", "g2"]
    scored = [score(t, mode="f1", **ON) for t in texts]
    rows = {k: [s[k] for s in scored] for k in keys}
    assert rows["f1"] == pytest.approx([1.0, 1.0, 0.0, 2 / 3, 1.0, 1.0, 0.0])
    assert rows["multi_query"] == [0.1, 0.0, 0.0, 0.0, 0.1, 0.0, 0.0]  # hand-read: right answers with 3 queries
    assert rows["merge"] == [0.1, 0.0, 0.0, 0.0, 0.0, 0.1, 0.0]
    n, prompt, length = len(texts), 2, 5
    attention = torch.ones(n, prompt + length, dtype=torch.int64)
    mask = torch.ones(n, length, dtype=torch.int64)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": torch.zeros(n, length), "response_mask": mask,
                 "prompts": torch.zeros(n, prompt, dtype=torch.int64), "attention_mask": attention},
        non_tensors={"uid": np.array(groups, dtype=object), **{k: np.array(v, dtype=object) for k, v in rows.items()}})
    config = OmegaConf.create({"adv_estimator": "gdpo", "norm_adv_by_std_in_grpo": True, "use_kl_in_reward": False,
                               "gdpo_reward_keys": keys, "gdpo_reward_weights": weights})
    got = compute_advantage(data, adv_estimator="gdpo", num_repeat=1, norm_adv_by_std_in_grpo=True,
                            config=config).batch["advantages"]

    def grpo(values: list[float]) -> list[float]:
        mean, std = statistics.fmean(values), statistics.stdev(values)
        return [(v - mean) / (std + 1e-6) for v in values]

    summed = [0.0] * n
    for key, w in zip(keys, weights):
        for g in ("g1", "g2"):
            members = [i for i in range(n) if groups[i] == g]
            for i, a in zip(members, grpo([rows[key][i] for i in members])):
                summed[i] += w * a
    tokens = [summed[i] for i in range(n) for _ in range(length)]
    mean, var = statistics.fmean(tokens), statistics.variance(tokens)
    want = torch.tensor([[(summed[i] - mean) / (var + 1e-8) ** 0.5] * length for i in range(n)])
    assert torch.allclose(got, want, atol=1e-5)
    # normalised apart: the small 0.1 terms weigh as much as the outcome, which a sum before GRPO would not give
    plain = [sum(rows[k][i] for k in keys) for i in range(n)]
    g1 = [0, 1, 2, 3]
    assert grpo([plain[i] for i in g1]) != pytest.approx([summed[i] for i in g1])

