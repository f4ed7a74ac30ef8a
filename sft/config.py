"""Config of the pipeline's ``sft`` and ``eval`` stages (``sft:``, ``eval:``); the training recipe
itself is a TRL-style YAML file (``configs/sft/*.yaml``, read by :mod:`sft.train`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from synth.engine.config import Section


class SFTStageConfig(Section):
    config: str = Field("configs/sft/tiny.yaml", description="SFT recipe of the `sft` stage (TRL-style YAML: "
                        "sft/train.py arguments, trl SFTConfig, trl ModelConfig).")
    overrides: list[str] = Field(default_factory=list, description="key=value overrides of the recipe, e.g. max_steps=20.")
    reasoning: Literal["keep", "inline", "drop"] | None = Field(
        None, description="How the teacher's reasoning (each assistant turn's `reasoning_content`) is trained. "
        "`keep`: in the chat template's own thinking format (qwen3's `<think>` on every assistant turn; a template "
        "that reads `reasoning_content`). `inline`: as text before the turn's content, for a family without a "
        "thinking format (llama3, mistral, gemma3, qwen2.5, tiny). `drop`: not trained. Unset: keep where the "
        "template has a thinking format, inline elsewhere. keep with a template that has none, and inline with one "
        "that has one, are config errors. The filter's length count renders the rows the same way (with "
        "DIR/tokenizer's template), and the sft stage passes it to the recipe as `reasoning`.")
    context: Literal["full", "as_seen"] = Field(
        "full", description="What the student trains, is evaluated and does RL on, one policy for the sft rows, "
        "eval, the student band and rl_pool. `full`: every tool observation in full (the teacher may have run with "
        "rollout.compress_observations; OpenSeeker puts the raw results back into training); one row per kept trace, "
        "every assistant turn trained; eval and rl_band run the student without compression. `as_seen`: one row per "
        "assistant turn of a kept trace, holding exactly the context the teacher saw at that turn (older "
        "observations as placeholders, rollout.compress_observations / keep_observations), with the loss on that "
        "turn's message alone; eval and rl_band compress the student's context the same way.")


class EvalConfig(Section):
    n: int = Field(1, ge=1, le=64, description="Trajectories per held-out question.")
    max_turns: int = Field(8, ge=1, description="Assistant turns per trajectory (the student's budget).")
    max_new_tokens: int = Field(512, ge=1, description="Tokens the student may generate per turn: room for a "
                                "short thought plus one tool call or an answer.  Turns cut here are counted in "
                                "eval_report.json (`truncation`).")
    temperature: float = Field(0.0, ge=0, le=2, description="0: greedy decoding.")
    max_questions: int | None = Field(None, ge=1, description="Evaluate at most this many held-out questions.")
