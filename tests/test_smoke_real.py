"""scripts/smoke_real.py says when the llama.cpp server it started has died (its exit status and the end
of its log), instead of letting hopforge report that nothing answers at the teacher endpoint."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def smoke():
    spec = importlib.util.spec_from_file_location("smoke_real", ROOT / "scripts" / "smoke_real.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _server(tmp_path: Path, code: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / "llama_server.log"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=log.open("w"), stderr=subprocess.STDOUT)
    proc.wait(60)
    return proc, log


def test_a_server_killed_by_sigill_is_named_with_its_status_and_log(smoke, tmp_path):
    proc, log = _server(tmp_path, "import os, signal\nprint('llama_model_loader: loaded', flush=True)\n"
                                  "print('ggml_graph_compute: first completion', flush=True)\n"
                                  "os.kill(os.getpid(), signal.SIGILL)")
    msg = smoke.server_exited(proc, log)
    assert "server this smoke run started has exited: killed by SIGILL (exit 132)" in msg
    assert str(log) in msg and "ggml_graph_compute: first completion" in msg
    assert "nothing answers" not in msg


def test_exit_status_words(smoke):
    assert smoke.exit_status(-signal.SIGILL) == "killed by SIGILL (exit 132)"
    assert smoke.exit_status(132) == "killed by SIGILL (exit 132)"  # through a shell
    assert smoke.exit_status(1) == "exit 1"


def test_a_running_server_is_not_reported_and_an_empty_log_is_said(smoke, tmp_path):
    log = tmp_path / "log"
    log.write_text("")
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert smoke.server_exited(alive, log) is None
    finally:
        alive.kill()
        alive.wait()
    assert "(its log" in smoke.server_exited(alive, log) and "is empty" in smoke.server_exited(alive, log)


def test_a_dead_server_stops_the_hopforge_command_it_serves(smoke, tmp_path):
    """The command waiting on the dead teacher is stopped and the smoke run ends with the server's message."""
    calls = []

    def watch():
        calls.append(1)
        return "smoke: the llama.cpp server this smoke run started has exited: exit 1" if len(calls) > 1 else None

    with pytest.raises(SystemExit) as e:
        smoke.run_watched([sys.executable, "-c", "import time; time.sleep(120)"], watch, poll_s=0.05)
    assert "has exited: exit 1" in str(e.value)
    # A command that ends while the server runs returns its own exit code.
    assert smoke.run_watched([sys.executable, "-c", "raise SystemExit(3)"], lambda: None, poll_s=0.05) == 3
