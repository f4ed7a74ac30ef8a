"""Each test's limit is on the work it does, not on the clock (``tests/helpers/worklimit.py``): a test that burns
CPU, in its own process or in one it started, fails past its budget; one that waits without working past its
wall-clock ``timeout`` passes; one that does nothing at all for the stall window fails as stalled.  Each case
runs in a pytest of its own, on a planted test file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PLANTED = '''
import subprocess, sys, time

def test_burns_cpu_here():
    while True:
        sum(range(10_000))

def test_burns_cpu_in_a_child():
    subprocess.run([sys.executable, "-c", "while True: pass"])

def test_waits_with_work_between():
    for _ in range(6):  # three times its `timeout` of wall seconds, working a little every half second
        time.sleep(0.5)
        sum(range(300_000))

def test_does_nothing():
    time.sleep(3600)
'''


def run(tmp_path: Path, test: str, *options: str, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_planted.py").write_text(PLANTED)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "helpers.worklimit",
           "--rootdir", str(tmp_path), "-o", "timeout=1", *options, f"{tmp_path / 'test_planted.py'}::{test}"]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "tests"), HOPFORGE_TEST_WORK_POLL_S="0.2",
                                   **env))


def test_cpu_burnt_here_or_in_a_child_fails_past_the_budget(tmp_path):
    from helpers.worklimit import cores

    for test in ("test_burns_cpu_here", "test_burns_cpu_in_a_child"):
        p = run(tmp_path, test)
        assert p.returncode == 1 and "Work limit from tests/helpers/worklimit.py: the test used" in p.stdout, \
            p.stdout[-3000:]
        assert f"more than its budget of {cores()} (pytest-timeout's timeout, 1 s, on each of the {cores()}" in p.stdout


def test_waiting_is_no_work_and_doing_nothing_is_a_stall(tmp_path):
    p = run(tmp_path, "test_waits_with_work_between")
    assert p.returncode == 0, p.stdout[-3000:]
    p = run(tmp_path, "test_does_nothing", HOPFORGE_TEST_STALL_S="1")
    assert p.returncode == 1 and "did less than 2 CPU seconds of work in 1 s: it is stalled" in p.stdout, \
        p.stdout[-3000:]
