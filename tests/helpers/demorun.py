"""The smallest `hopforge run` of the demo config that trains and evaluates a student: its ``--set`` overrides.

Routed 3-hop walks (``questions.route``, the demo's default): most of them get a question, so the student has
rows to train; four SFT steps, and an eval of two questions with two short turns.
"""

from __future__ import annotations

STUDENT_RUN = ["walk.num_walks=100", "walk.hops=3", "expand.num_subgraphs=0", "rollout.n=2", "assemble.lengths=[2048]",
               "sft.overrides=[max_steps=4, eval_fraction=0.3]", "eval.max_turns=2",
               "eval.max_new_tokens=16", "eval.max_questions=2", "filters.min_tool_calls=2",
               "questions.splits={sft: 0.6, rl: 0.1, eval: 0.3}"]


def sets(overrides: list[str]) -> list[str]:
    """``overrides`` as command-line arguments: ``--set`` before each."""
    return [a for s in overrides for a in ("--set", s)]


__all__ = ["STUDENT_RUN", "sets"]
