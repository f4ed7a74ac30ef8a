"""Errors of the machine, through the real command line: a full disk, a read-only folder or a permission
error while a stage writes is one line naming the path and what was being written (not ~160 lines of
chained tracebacks), exit 1; the stages committed before it are kept and the same command resumes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli import hopforge_command

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--set", "questions.route=false", "--set", "walk.num_walks=12", "--set", "walk.hops=3", "--set", "expand.num_subgraphs=0",
         "--set", "runner.shard_workers=2"]

# Runs the hopforge command line with one write of the walks stage made to fail as the machine would:
# pyarrow's own ENOSPC (an OSError without a filename), or a read-only folder at the commit rename.
DRIVER = '''
import errno, os, sys
mode = os.environ["HOPFORGE_TEST_FAIL"]
if mode == "enospc":
    import pyarrow.parquet as pq
    real = pq.write_table
    def write_table(table, where, *a, **kw):
        if "/.stages/walks/" in str(where):
            raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")
        return real(table, where, *a, **kw)
    pq.write_table = write_table
elif mode == "erofs":
    real_replace = os.replace
    def replace(src, dst, *a, **kw):
        if str(src).endswith(".partial") and "/.stages/walks/" in str(src):
            raise OSError(errno.EROFS, "Read-only file system", str(dst))
        return real_replace(src, dst, *a, **kw)
    os.replace = replace
from flows.cli import app
sys.argv[0] = "hopforge"
app()
'''


def _run(args: list[str], fail: str | None, driver: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="400", NO_COLOR="1", TERM="dumb")
    cmd = [sys.executable, str(driver), *args] if fail else [*hopforge_command(), *args]
    if fail:
        env["HOPFORGE_TEST_FAIL"] = fail
    return subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("source")
    r = subprocess.run([*hopforge_command(), "corpus", "demo", "--out", str(d / "kilt.jsonl")], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert r.returncode == 0, r.stdout
    return d / "kilt.jsonl"


@pytest.mark.parametrize("fail, reason, what", [
    ("enospc", "no space left on device [Errno 28]", r"walks/part-\d{5}\.parquet \(stage walks, table walks\)"),
    ("erofs", "read-only file system [Errno 30]", r"\.stages/walks/[0-9a-f]+ \(stage walks\)"),
])
def test_a_failed_write_is_one_line_and_the_same_command_resumes(tmp_path, source, fail, reason, what):
    import re

    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    out = tmp_path / "run"
    args = ["run", "--out", str(out), "--set", f"corpus.source={source}", *SMALL, "--until", "walks"]
    r = _run(args, fail, driver)
    assert r.returncode == 1, r.stdout[-3000:]
    assert "Traceback" not in r.stdout and "╭" not in r.stdout, r.stdout[-3000:]
    errors = [line for line in r.stdout.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, r.stdout[-3000:]
    line = errors[0]
    assert re.search(rf"^error: cannot write {re.escape(str(out))}/\S*{what}: {re.escape(reason)}; finished "
                     r"stages and shards are kept: .*, then run the same command again to resume$", line), line
    assert r.stdout.rstrip().splitlines()[-1] == line  # the last thing printed, nothing after it
    # nothing committed is lost: ingest and graph stand, and the same command (the write now succeeds) resumes
    again = _run(args, None, driver)
    assert again.returncode == 0, again.stdout[-3000:]
    assert re.search(r"ingest: unchanged \(key \w+\), reused", again.stdout), again.stdout[-3000:]
    assert re.search(r"graph: unchanged \(key \w+\), reused", again.stdout), again.stdout[-3000:]
    import pyarrow.dataset as ds

    assert ds.dataset(out / "walks").count_rows() == 12
