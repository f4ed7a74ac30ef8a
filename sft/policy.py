"""The warm-start student as a chat model for the rollout harness: in-process, or behind a server.

The student band (:mod:`sft.rlband`) and evaluation (:mod:`sft.evaluate`) roll the student out through
:func:`synth.rollout.loop.rollout_one`, which talks to a :class:`~synth.teacher.client.Teacher`.  Here is
how that teacher is made:

- **local** (``rl.base_url`` unset): ``DIR/student`` loaded with ``transformers`` (the ``hf`` backend).
  The model is loaded once per process and stage run (``ctx.shared``), and shared by every shard of the
  stage that runs in the process (the backend generates one turn at a time under its own lock, seeding each sample from
  ``(seed, sample_index)``, so a result does not depend on which thread asked first).
- **server** (``rl.base_url`` set): any OpenAI-compatible endpoint serving the student (vLLM serving
  ``DIR/student``); the key is read from ``teacher.api_key_env``, tool calls travel as
  ``teacher.tool_protocol`` says, and the request's ``seed`` is derived from the prompt and the sample index.

- **oracle** (``rl.policy: oracle``): the offline oracle agent, rolled out in the student's harness (its turn
  limit and context), as a stand-in policy where no checkpoint can answer (the demo's tiny student).

There is no call cache: a checkpoint retrained at the same path must never be answered from stale calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from synth.engine.errors import InputError
from synth.teacher.client import Teacher

def local_student(path: str | Path, temperature: float, max_new_tokens: int, seed: int,
                  shared: Callable[..., Any] | None = None) -> Any:
    """The ``hf`` backend over checkpoint ``path``; with ``shared`` (a stage run's ``ctx.shared``) loaded once per
    process and stage run for these settings, and used by every shard of the run in the process."""
    path = Path(path).resolve()
    if not (path / "config.json").exists():
        raise InputError(f"{path} is not a transformers checkpoint (no config.json): train the student first "
                         "(`hopforge student`), or set rl.base_url to a server that serves it")

    def load() -> Any:
        from synth.teacher.hf import HFChatModel

        return HFChatModel(path, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed,
                           name=f"hf:{path.name}")

    if shared is None:
        return load()
    key = (str(path), (path / "config.json").stat().st_mtime_ns, temperature, max_new_tokens, seed)
    return shared(f"student:{key}", load)


def student_teacher(cfg: Any, student_dir: str | Path | None, *, temperature: float, max_new_tokens: int,
                    seed: int = 0, shared: Callable[..., Any] | None = None) -> Teacher:
    """A :class:`Teacher` that answers with the student (see the module docstring).

    ``student_dir`` is the local checkpoint; None means the server ``cfg.rl.base_url`` (model ``cfg.rl.model``).
    ``shared`` (a stage run's ``ctx.shared``) shares the loaded checkpoint between the run's shards.
    """
    rl = cfg.rl
    if student_dir is not None:
        backend = local_student(student_dir, temperature, max_new_tokens, seed, shared)
        tcfg = cfg.teacher.model_copy(update={"backend": "hf", "model": str(student_dir), "temperature": temperature,
                                              "max_tokens": max_new_tokens, "concurrency": 1})
        return Teacher(tcfg, None, backend=backend)
    if not rl.base_url:
        raise InputError("rl.base_url is not set: name the server that serves the student, or leave it unset to "
                         "load DIR/student with transformers")
    tcfg = cfg.teacher.model_copy(update={"backend": "openai", "base_url": rl.base_url, "model": rl.model,
                                          "temperature": temperature, "max_tokens": max_new_tokens,
                                          "concurrency": rl.concurrency})
    return Teacher(tcfg, None)


def oracle_student(cfg: Any) -> Teacher:
    """The offline oracle agent as the band's policy (``rl.policy: oracle``): the teacher's oracle backend, with no
    network, key or checkpoint; the student's harness (``eval.max_turns``) is what limits it.  Its draws are seeded
    by each rollout's own hint, as the teacher's are."""
    tcfg = cfg.teacher.model_copy(update={"backend": "oracle", "base_url": None, "model": "oracle-student",
                                          "concurrency": max(1, cfg.rl.concurrency)})
    return Teacher(tcfg, None)


__all__ = ["local_student", "oracle_student", "student_teacher"]
