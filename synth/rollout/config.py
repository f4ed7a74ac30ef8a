"""Config of teacher rollouts (``rollout:``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from synth.engine.config import Section, operational


class RolloutConfig(Section):
    n: int = Field(4, ge=1, le=64, description="Samples (trajectories) per question at most, each with its own "
                   "sample index (all of them under `policy: fixed`, and for rl questions).")
    policy: Literal["adaptive", "fixed"] = Field(
        "adaptive", description="How many of the n samples a question gets. `adaptive`: an sft question is sampled "
        "in sample-index order until `filters.keep_per_question` samples are correct (the answer rule at "
        "`filters.min_f1`), up to n; an rl question gets all n (its band needs them), as does an sft question "
        "`questions.share_sft_rl` shares into the teacher's rl_pool; an eval question gets "
        "`eval_n`. `fixed`: every question gets n, so best-of-n can choose among more correct candidates "
        "(by rubric), at the price of more calls.")
    eval_n: int = Field(1, ge=0, le=64, description="Samples of an eval question under `policy: adaptive`: 1 is a "
                        "teacher reference accuracy, 0 skips them.")
    max_turns: int = Field(40, ge=1, description="Assistant turns before a trajectory stops (`max_turns`).")
    max_tokens: int = Field(
        65536, ge=256, description="Context tokens (prompt + completion of the latest call) before it stops (`max_tokens`)."
    )
    compress_observations: bool = Field(
        True, description="Keep only the latest `keep_observations` tool observations in full in the teacher's "
        "context (older ones become a placeholder that asks the model to call the tool again if it needs them); "
        "stored traces always keep every observation."
    )
    keep_observations: int = Field(2, ge=1, description="Tool observations kept in full in the teacher's context "
                                   "under `compress_observations` (the latest ones).")
    max_questions: int | None = Field(None, ge=1, description="Roll out only the first N questions (trial runs).")
    shard_size: int = operational("Questions per shard (a unit of work for a flow task, and of resume).", 32, ge=1)
