"""Configuration of the RL pool (``rl:``): which model measures a question's difficulty, and how.

``rl_pool`` keeps the questions a GRPO group can learn from: of ``n`` rollouts, ``1 <= c <= n - 1``
answered correctly.  Who rolls out decides what "difficult" means:

- ``band_by: teacher`` (the default): the teacher's rollouts, counted by the ``filter`` stage.  It needs
  no model beyond the teacher that already rolled out, so it works offline and before any student exists.
- ``band_by: student``: the warm-start student, ``n`` rollouts per rl question through the eval
  harness, in the ``rl_band`` stage after ``sft`` (LiteResearcher's curriculum: the policy that RL
  trains decides what is in its band).

The section lives in ``filters/`` because the filter stage reads ``band_by`` (it writes the teacher's
pool only when the teacher measures it) and ``sft/`` builds on ``filters/``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from synth.engine.config import Section, operational

# The two models that can measure the band (the values of ``rl.band_by``, and the prefix of ``band_model``).
TEACHER, STUDENT = "teacher", "student"


class CurriculumStage(Section):
    """One curriculum stage: the band rows whose hops and pass rate c/n fall in these bounds."""

    name: str = Field(..., min_length=1, description="File stem of the stage's table: `DIR/rl_curriculum/<name>`.")
    min_hops: int = Field(1, ge=1, description="Fewest hops of a question in this stage.")
    max_hops: int | None = Field(None, ge=1, description="Most hops (None: no upper bound).")
    min_pass: float = Field(0.0, ge=0, le=1, description="Lowest c/n of a question in this stage.")
    max_pass: float = Field(1.0, ge=0, le=1, description="Highest c/n of a question in this stage.")


class RLConfig(Section):
    """The RL pool: the model that measures the difficulty band, its rollouts, curriculum stages, and what the
    rows carry beyond the band (action guidance, the dual reward's baselines)."""

    band_by: Literal["teacher", "student"] = Field(
        "teacher", description="Who measures each question's band 1 <= c <= n-1. `teacher`: the teacher's rollouts "
        "(`rollout.n` of them for an rl question), counted by the filter; offline, no student needed. `student`: the "
        "warm-start student (DIR/student, or the model at `base_url`), `rl.n` rollouts per rl question in the "
        "`rl_band` stage after `sft` (LiteResearcher: the policy's own difficulty).")
    n: int = Field(8, ge=2, le=64, description="Student rollouts per rl question under `band_by: student` "
                   "(LiteResearcher: 8, keeping 1 <= c <= 7).")
    temperature: float = Field(1.0, gt=0, le=2, description="Student sampling temperature for the band: above 0, "
                               "or the n rollouts of a question would all be the same (c = 0 or n).")
    max_questions: int | None = Field(None, ge=1, description="Measure only the first N rl questions (trial runs).")
    base_url: str | None = Field(None, description="An OpenAI-compatible server serving the student (e.g. vLLM "
                                 "serving DIR/student); None: load DIR/student in-process with transformers.")
    model: str = Field("student", min_length=1, description="The model name the server at `base_url` serves.")
    policy: Literal["student", "oracle"] = Field(
        "student", description="Who rolls out under `band_by: student`. `student`: the warm-start student (DIR/student, "
        "or the model at `base_url`). `oracle`: the offline oracle agent in the student's harness (`eval.max_turns` "
        "turns, the student's context), a stand-in policy with no checkpoint or server, so a demo or a test can show "
        "the band, ACTGUIDE's guidance and k* end to end where the tiny demo student answers nothing. Its band is the "
        "oracle's under the student's turn limit, not the student's: never train on a pool it measured.")
    curriculum: list[CurriculumStage] = Field(
        default_factory=list, description="Optional curriculum stages (LiteResearcher's two stages): each band row "
        "goes to the first stage whose hops and c/n bounds it fits, written to DIR/rl_curriculum/<name>; rows that fit "
        "none are counted as `unstaged`. Empty: no stage files.")
    guidance: bool = Field(
        False,
        description="ACTGUIDE-RL: an rl question whose band is all-wrong also enters rl_pool, with "
        "`extra_info.guidance`, the tool-call sequence of the best correct teacher rollout of that question (a "
        "trainer prefixes its first k actions). A question with no correct rollout has no guidance and stays out. "
        "Under `band_by: student` the `rl_band` stage also measures k* (`extra_info.guidance_k`): the fewest "
        "actions whose prefix lets the student answer (`guidance_min_correct`), by binary search over k = 1..K; "
        "a question no prefix helps stays out.",
    )
    guidance_min_correct: int = Field(
        1, ge=1, le=64, description="Under `band_by: student` with `guidance`: of the `n` guided student rollouts at "
        "a prefix length k, how many must answer correctly for k to work (1: the guided group has a reward to learn "
        "from). k* is the smallest k that works.")
    baselines: bool = Field(
        False,
        description="Store each rl_pool question's closed-book answer and naive-RAG answer (one search for the "
        "question, then an answer from its results), both by the teacher, with their scores, in "
        "`extra_info.baselines` (the `gain` reward mode reads them): asked by the filter under `band_by: teacher`, "
        "by the `rl_band` stage under `student`. Costs two teacher calls a row.",
    )
    rag_k: int = Field(5, ge=1, le=50, description="Search results the naive-RAG baseline answers from.")
    shard_size: int = operational("rl questions per shard of the `rl_band` stage (a unit of resume).", 8, ge=1)
    concurrency: int = operational("Student requests in flight against `base_url` (the local model runs one at a "
                                   "time).", 8, ge=1, le=1024)

    @model_validator(mode="after")
    def _stages(self) -> "RLConfig":
        if self.policy == "oracle" and self.base_url:
            raise ValueError("policy: oracle rolls out the offline oracle agent, so base_url must be unset "
                             f"(it is {self.base_url!r})")
        if self.guidance_min_correct > self.n:
            raise ValueError(f"guidance_min_correct {self.guidance_min_correct} is above n {self.n}")
        names = [s.name for s in self.curriculum]
        if len(set(names)) != len(names):
            raise ValueError(f"curriculum: a stage name is used twice ({', '.join(names)})")
        for s in self.curriculum:
            if s.max_hops is not None and s.max_hops < s.min_hops:
                raise ValueError(f"curriculum stage {s.name!r}: max_hops {s.max_hops} is below min_hops {s.min_hops}")
            if s.max_pass < s.min_pass:
                raise ValueError(f"curriculum stage {s.name!r}: max_pass {s.max_pass} is below min_pass {s.min_pass}")
        return self


__all__ = ["STUDENT", "TEACHER", "CurriculumStage", "RLConfig"]
