"""Config of teacher rollouts (``rollout:``)."""

from __future__ import annotations

from pydantic import Field

from synth.engine.config import Section, operational


class RolloutConfig(Section):
    n: int = Field(4, ge=1, le=64, description="Samples (trajectories) per question, each with its own sample index.")
    max_turns: int = Field(40, ge=1, description="Assistant turns before a trajectory stops (`max_turns`).")
    max_tokens: int = Field(
        65536, ge=256, description="Context tokens (prompt + completion of the latest call) before it stops (`max_tokens`)."
    )
    compress_observations: bool = Field(
        False, description="Keep only the latest tool observation in full in the teacher's context; "
        "stored traces always keep every observation."
    )
    max_questions: int | None = Field(None, ge=1, description="Roll out only the first N questions (trial runs).")
    shard_size: int = operational("Questions per shard (a unit of work for a flow task, and of resume).", 32, ge=1)
