"""A real ``rl_pool`` (the pipeline on the demo corpus) against the SFT rows and the questions it came from.

RL must start from the harness SFT trained on: the prompt is the SFT rows' system prompt plus the
question, the tools are the same JSON, and each row tells verl's tool which page to mask.
"""

from __future__ import annotations

import json

from synth.tools.schema import tool_schemas


def test_rl_pool_rows_are_the_rl_questions_in_verls_layout(rl_run, rl_rows, rl_questions) -> None:
    from synth.corpus.answerkeys import answer_keys
    from synth.engine.store import Store

    keys = answer_keys(Store(rl_run), 0.8)
    for i, row in enumerate(rl_rows):
        q = rl_questions[row["extra_info"]["question_id"]]
        assert row["data_source"] == "hopforge" and row["ability"] == "multihop_search"
        # The ground truth is the question's answer key: the reward judges with it as the filter did.
        key = keys[q["question_id"]]
        assert row["reward_model"] == {"style": "rule", "ground_truth": {
            "target": list(key.names), "other_titles": list(key.other_titles), "min_f1": 0.8}}
        assert key.names[0] == q["answer"] and set(q["answer_aliases"]) <= set(key.names)
        info = row["extra_info"]
        assert info["index"] == i and info["split"] == q["split"] == "rl" and info["path"] == q["path"]
        assert 1 <= info["c"] <= info["n"] - 1
        # verl's tool rollout: `need_tools_kwargs`, and the search masks the answer page as the rollout did
        assert info["need_tools_kwargs"] is True
        assert info["tools_kwargs"]["search"] == {"create_kwargs": {"exclude": [q["answer_page_id"]]}}
        # every masked tool a run may offer (multi_search too) masks it: verl hands a tool only its own entry
        from synth.tools.registry import get_tool, registered_names

        masked = [n for n in registered_names() if get_tool(n).masked]
        assert "multi_search" in masked
        assert all(info["tools_kwargs"][n] == info["tools_kwargs"]["search"] for n in masked)
        assert q["answer_page_id"] == q["path"][-1]
        # CAPF's check_answer reads the ground truth and the chain from tools_kwargs, never from the prompt
        assert info["tools_kwargs"]["check_answer"] == {"create_kwargs": {
            "target": list(key.names), "chain": q["titles"], "other_titles": list(key.other_titles)}}
        assert info["titles"] == q["titles"] and len(info["titles"]) == len(info["path"])
        # a band row is no guided row, and has no baselines unless rl.baselines asked for them
        assert info["guidance"] is None and info["baselines"] is None


def test_the_prompt_and_tools_are_those_the_sft_rows_trained_on(rl_rows, sft_rows, rl_questions) -> None:
    systems = {r["messages"][0]["content"] for r in sft_rows}
    assert len(systems) == 1 and all(r["messages"][0]["role"] == "system" for r in sft_rows)
    (system,) = systems
    for r in sft_rows:  # SFT: the system prompt, then the question as the user turn
        assert r["messages"][1] == {"role": "user", "content": rl_questions[r["question_id"]]["question"],
                                    "tool_calls": None, "tool_call_id": None, "name": None,
                                    "reasoning_content": None}
    sft_tools = {r["tools"] for r in sft_rows}
    assert len(sft_tools) == 1
    for row in rl_rows:
        question = rl_questions[row["extra_info"]["question_id"]]["question"]
        assert row["prompt"] == [{"role": "system", "content": system}, {"role": "user", "content": question}]
        assert row["tools"] in sft_tools
        assert json.loads(row["tools"]) == tool_schemas()  # the run's tools config is the default
