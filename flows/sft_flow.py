"""The ``sft`` flow: warm-start SFT of the student on ``DIR/sft``, as a subprocess.

``prefect deployment run sft/warm-start --param out=data/full`` runs :func:`sft_flow`.  Training
runs in its own process (``accelerate launch ... -m sft.train`` for several GPUs, plain
``python -m sft.train`` for one process), so CUDA, NCCL and the accelerate launcher never
share the flow's process.  Its output is streamed into the flow's logs line by line; a
non-zero exit fails the flow with the exit code and the last lines.
"""

from __future__ import annotations

import collections
import os
import shlex
import subprocess
from pathlib import Path

from prefect import flow

from flows.config import ConfigError
from flows.runlogs import run_logger
from sft.stage import output_dir_of, training_command

TAIL_LINES = 40


class SFTFailed(RuntimeError):
    """The training subprocess exited non-zero; ``returncode`` and ``tail`` say how."""

    def __init__(self, returncode: int, tail: list[str], cmd: list[str]):
        self.returncode, self.tail, self.cmd = returncode, tail, cmd
        last = "\n".join(tail) or "(no output)"
        super().__init__(f"sft exited with code {returncode}: {shlex.join(cmd)}\nlast lines:\n{last}")


def check_inputs(config: str, out: str, accelerate_config: str | None, num_processes: int,
                 overrides: list[str] | tuple[str, ...] = ()) -> list[str]:
    """What is missing before training can start (each line names the parameter)."""
    from synth.engine.config import project_path

    problems = []
    if not project_path(config).is_file():
        problems.append(f"config: SFT config not found: {config} (e.g. configs/sft/tiny.yaml)")
    if accelerate_config and not project_path(accelerate_config).is_file():
        problems.append(f"accelerate_config: not found: {accelerate_config}")
    if num_processes < 1:
        problems.append(f"num_processes must be at least 1 (got {num_processes})")
    elif not problems:
        from sft.stage import hardware_problems

        problems += hardware_problems(config, overrides, num_processes)
    if not (Path(out) / "sft").exists():
        problems.append(f"out: {Path(out).absolute()} has no sft table: run "
                        f"`prefect deployment run synth/demo --param out={out}` (or synth/full) first")
    return problems


def stream(cmd: list[str], logger, env: dict | None = None, cwd: str | None = None) -> tuple[int, list[str]]:
    """Run ``cmd``, logging each output line; returns (exit code, last lines).  Killed if the flow stops."""
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            env=env, cwd=cwd, errors="replace")
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            if line:
                tail.append(line)
                logger.info("%s", line)
        return proc.wait(), list(tail)
    finally:
        if proc.poll() is None:  # the flow was cancelled or crashed: do not leave a trainer running
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


@flow(name="sft", log_prints=False, persist_result=False)
def sft_flow(config: str = "configs/sft/tiny.yaml", out: str = "data/demo", overrides: list[str] = [],  # noqa: B006
             num_processes: int = 1, accelerate_config: str | None = None) -> dict:
    """Train the warm-start student on ``OUT/sft`` (checkpoint in ``OUT/runs/<recipe name>`` unless output_dir= is given)."""
    logger = run_logger()
    problems = check_inputs(config, out, accelerate_config, num_processes, list(overrides))
    if problems:
        raise ConfigError("sft cannot start:\n" + "\n".join(f"  - {p}" for p in problems))
    cmd = training_command(config, out, list(overrides), num_processes=num_processes,
                           accelerate_config=accelerate_config)
    logger.info("sft: %s", shlex.join(cmd))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # Its output is read through a pipe: no \r progress bars (sft.train also turns them off itself there);
    # the trainer's log lines remain.
    for key in ("TQDM_DISABLE", "HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS"):
        env.setdefault(key, "1")
    code, tail = stream(cmd, logger, env=env)
    if code != 0:
        raise SFTFailed(code, tail, cmd)
    output_dir, _ = output_dir_of(out, list(overrides), config)
    report = Path(output_dir) / "train_report.json"
    logger.info("sft: done; checkpoint in %s", Path(output_dir).absolute())
    return {"output_dir": str(Path(output_dir).absolute()),
            "train_report": str(report.absolute()) if report.exists() else None}
