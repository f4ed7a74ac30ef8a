"""A piped run reads well in a file: the whole pipeline through the real ``hopforge`` command line, its
stdout and stderr in one file as ``make demo > log 2>&1`` writes them.

No line is longer than 300 bytes and none holds a carriage return (no progress bar of hopforge,
datasets, transformers or huggingface_hub is drawn); progress is logged as lines; the trainer's metrics
are hopforge log lines, never printed dicts; tables and paths are not folded at 80 columns.  The run goes
as a user without a student would: ``hopforge eval`` names the command that makes what it needs, that
command is run as printed, and then ``hopforge eval`` succeeds.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from helpers.cli import hopforge_command
from helpers.demorun import STUDENT_RUN, sets

ROOT = Path(__file__).resolve().parents[2]
MAX_LINE = 300
SETS = sets(STUDENT_RUN)  # routed 3-hop walks: the student has rows to train
# A metric line of the trainer, e.g. "12:00:01 INFO sft: step 3/4: loss 8.9, grad_norm 1.2, ..."
METRIC_LINE = re.compile(r"^\d\d:\d\d:\d\d INFO sft: step \d+/4: loss [0-9.e+-]+, ", re.M)


def piped(log: Path, *args: str, timeout: float = 600) -> tuple[int, str]:
    """Run ``hopforge ARGS`` with stdout and stderr into the file ``log`` (not a terminal, no COLUMNS, as in
    ``make demo > log 2>&1``); returns the exit code and the file's text, carriage returns included."""
    env = dict(os.environ, HOPFORGE_PROGRESS_EVERY="0")  # a short run still logs progress lines (every update)
    env.pop("COLUMNS", None)
    for var in ("TQDM_DISABLE", "HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS"):
        env.pop(var, None)  # hopforge must turn the bars off itself
    with log.open("wb") as f:
        code = subprocess.run([*hopforge_command(), *args], cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT,
                              timeout=timeout).returncode
    return code, log.read_bytes().decode("utf-8", errors="replace")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The demo pipeline piped into log files: every stage to the report, then eval (which names the command
    that trains the student), that command as printed, and eval again."""
    base = tmp_path_factory.mktemp("piped")
    out = base / "run"
    logs: dict[str, str] = {}
    code, logs["run"] = piped(base / "run.log", "run", "--out", str(out), "--until", "report", *SETS)
    assert code == 0, logs["run"][-4000:]
    code, logs["eval-first"] = piped(base / "eval-first.log", "eval", "--out", str(out), *SETS)
    assert code == 2, logs["eval-first"][-4000:]
    hint = re.search(r"run `(hopforge [^`]+)` first", logs["eval-first"])
    assert hint, logs["eval-first"]
    cmd = shlex.split(hint.group(1))
    code, logs["hint"] = piped(base / "hint.log", *cmd[1:], *SETS)
    assert code == 0, logs["hint"][-4000:]
    code, logs["eval"] = piped(base / "eval.log", "eval", "--out", str(out), *SETS)
    assert code == 0, logs["eval"][-4000:]
    return out, logs, hint.group(1)


def test_the_piped_log_has_no_long_line_and_no_carriage_return(run) -> None:
    _, logs, _ = run
    for name, text in logs.items():
        assert "\r" not in text, f"{name}: a carriage return: {text[max(0, text.index(chr(13)) - 200):][:400]!r}"
        # Bytes, as awk and cut count them: a table drawn with box characters (3 bytes each) would not pass.
        long = [line for line in text.split("\n") if len(line.encode()) > MAX_LINE]
        assert not long, f"{name}: {len(long)} line(s) over {MAX_LINE} bytes, e.g. {long[0][:400]!r}"
    # Progress is logged as lines instead of bars.
    assert re.search(r"INFO rollout: trajectories: [\d,]+/[\d,]+ traces", logs["run"]), logs["run"][-3000:]


def test_trainer_metrics_are_log_lines_not_dicts(run) -> None:
    _, logs, _ = run
    text = logs["hint"]
    assert len(METRIC_LINE.findall(text)) == 4, text[-4000:]  # logging_steps 1, 4 steps
    assert re.search(r"INFO sft: step 4/4: train_runtime [0-9.e+-]+, .*train_loss [0-9.e+-]+", text), text[-4000:]
    assert re.search(r"INFO sft: steps: 4/4 steps", text), text[-4000:]  # the step bar, as log lines
    for name, log in logs.items():
        assert not re.search(r"\{'(loss|eval_loss|train_runtime|grad_norm)'", log), name
        assert not [line for line in log.split("\n") if line.startswith(("{'", "{\""))], name


def test_tables_and_paths_are_not_folded(run) -> None:
    out, logs, _ = run
    # The summary table's title is the output folder, whole, on one line (not "…/sour" / "ce/…").
    assert any(f"hopforge: {out}" in line for line in logs["run"].split("\n")), logs["run"][-3000:]
    assert any(str(out / "source" / "kilt_demo.jsonl") in line for line in logs["run"].split("\n")), \
        logs["run"][:3000]
    header = [line for line in logs["run"].split("\n") if "teacher calls" in line and "seconds" in line]
    assert header and all(w in header[0] for w in ("stage", "status", "input", "output", "dropped")), header


def test_eval_hint_names_the_command_that_makes_the_student(run) -> None:
    out, logs, hint = run
    assert hint == f"hopforge student --out {out}"
    assert "stage 'eval' needs the output of stage 'sft'" in logs["eval-first"]
    assert (out / "student" / "config.json").is_file() and (out / "eval" / "eval_report.json").is_file()
    # The student was made by the pipeline's sft stage (DIR/student), not `hopforge sft` (DIR/runs/<recipe>).
    assert not (out / "runs").exists()
    assert "eval: running" in logs["eval"] and "sft: unchanged" not in logs["eval"]


def test_a_printed_command_is_one_pasteable_line(tmp_path, monkeypatch) -> None:
    """`hopforge sft --accelerate-config ...` prints the accelerate launch line it runs: one line, quoted,
    however long, whatever the console width."""
    import subprocess as sp

    from typer.testing import CliRunner

    from flows.cli import app

    ran: list[list[str]] = []
    monkeypatch.setattr(sp, "call", lambda cmd: ran.append(cmd) or 0)
    monkeypatch.chdir(tmp_path)  # not the project: its recipe and accelerate config are found all the same
    out_dir = tmp_path / ("a-rather-long-folder-name-for-the-checkpoint " * 4).strip()
    res = CliRunner().invoke(app, ["sft", "--out", str(tmp_path), "--accelerate-config", "configs/accelerate/ddp.yaml",
                                   "--num-processes", "2", "--output-dir", str(out_dir)])
    assert res.exit_code == 0, res.output
    [cmd] = ran
    lines = [line for line in res.output.split("\n") if "accelerate" in line]
    assert len(lines) == 1 and len(lines[0]) > 200, res.output
    assert shlex.split(lines[0]) == cmd
    assert str(ROOT / "configs/accelerate/ddp.yaml") in cmd and str(ROOT / "configs/sft/tiny.yaml") in cmd
