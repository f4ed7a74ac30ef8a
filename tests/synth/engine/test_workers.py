"""Worker processes for a stage's CPU-bound work: results in item order, failures that name the item,
the user's errors kept, a dead worker reported, and sharded stages whose shards run in processes."""

from __future__ import annotations

import multiprocessing as mp
import os

import pyarrow as pa
import pytest

from flows.config import load_config
from synth.engine.errors import InputError
from synth.engine.runner import run_stage
from synth.engine.stage import Shards, Stage, StageResult
from synth.engine.store import MissingInput, Store, write_parquet_atomic
from synth.engine.workers import CpuWork, WorkerFailed, cpu_map, guided_batches, limit_share, processes_for

PARENT = os.getpid()


def _setup(offset: int) -> dict:
    if offset == 4:
        raise MissingInput("tokenizer not found in DIR (run `hopforge tokenizer --out DIR` first)")
    return {"offset": offset, "pid": os.getpid()}


def _step(state: dict, item: int) -> tuple[int, int, int]:
    if item == 7 and state["offset"] == 1:
        raise ValueError("a bad item")
    if item == 5 and state["offset"] == 2:
        raise InputError("line 5: not JSON")
    if item == 3 and state["offset"] == 3:
        os._exit(1)  # a worker killed mid-item
    return item + state["offset"], state["pid"], os.getpid()


def _work(offset: int) -> CpuWork:
    return CpuWork("toy", f"toy-{offset}", _setup, (offset,), _step, lambda i, item: f"item {item} (number {i})")


def test_results_come_in_item_order_from_worker_processes() -> None:
    out = list(cpu_map(_work(100), range(40), workers=3))
    assert [v for v, _, _ in out] == [i + 100 for i in range(40)]
    assert PARENT not in {pid for _, _, pid in out}  # the items ran in the workers
    if "fork" in mp.get_all_start_methods():
        # The state was built once, in this process, and the forked workers inherited it.
        assert {state_pid for _, state_pid, _ in out} == {PARENT}
    here = list(cpu_map(_work(100), range(5), workers=1))
    assert here == [(i + 100, PARENT, PARENT) for i in range(5)]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failed_item_is_named_and_what_came_before_is_kept(workers: int) -> None:
    got = []
    with pytest.raises(WorkerFailed, match=r"stage toy: item 7 \(number 7\) failed: ValueError: a bad item"):
        for v, _, _ in cpu_map(_work(1), range(20), workers=workers):
            got.append(v)
    assert got == list(range(1, 8))  # items 0..6, in order, before the failure


@pytest.mark.parametrize("workers", [1, 2])
def test_the_users_own_errors_keep_their_type(workers: int) -> None:
    with pytest.raises(InputError, match="line 5: not JSON") as info:
        list(cpu_map(_work(2), range(10), workers=workers))
    assert "(in stage toy: item 5 (number 5))" in info.value.__notes__


@pytest.mark.parametrize("workers", [1, 2])
def test_a_setup_that_fails_in_a_worker_says_why(workers: int) -> None:
    with pytest.raises(MissingInput, match="run `hopforge tokenizer"):
        list(cpu_map(_work(4), range(10), workers=workers))


def test_a_worker_that_dies_is_reported_with_its_item() -> None:
    with pytest.raises(WorkerFailed, match=r"a worker process died .* one of: .*item 3 \(number 3\)"):
        list(cpu_map(_work(3), range(10), workers=2))


def test_process_count(monkeypatch) -> None:
    import multiprocessing
    from types import SimpleNamespace

    assert processes_for(3, 10) == 3 and processes_for(3, 2) == 2 and processes_for(1, 10) == 1
    assert processes_for(0, None) >= 1
    monkeypatch.setattr(multiprocessing, "current_process", lambda: SimpleNamespace(daemon=True))
    assert processes_for(4, 10) == 1  # a Dask worker may not start processes of its own


def test_a_process_teacher_takes_its_share_of_the_global_limits(monkeypatch) -> None:
    from synth.engine import workers
    from synth.teacher.client import Teacher, per_process
    from synth.teacher.config import TeacherConfig

    cfg = TeacherConfig(concurrency=16, rpm=600, tpm=None)
    monkeypatch.setattr(workers, "_LIMIT_SHARE", 1)
    assert per_process(cfg) is cfg
    workers.set_limit_share(3)
    split = per_process(cfg)
    assert (split.concurrency, split.rpm, split.tpm) == (5, 200, None) and cfg.concurrency == 16
    assert Teacher(cfg).cfg.concurrency == 5  # what the teacher's gate and pool are sized by
    workers.set_limit_share(64)
    assert per_process(cfg).concurrency == 1 and per_process(cfg).rpm == 9


# ---- a sharded stage whose shards are CPU-bound ---------------------------------------------------
def _plan(ctx) -> list[int]:
    return list(range(5))


def _run(ctx, i: int, desc: int) -> dict:
    rows = [{"id": f"s{desc}-{k}", "value": desc * 10 + k} for k in range(3)]
    write_parquet_atomic(pa.Table.from_pylist(rows), ctx.shard_out("toy", i))
    from synth.teacher.client import per_process

    return {"pid": os.getpid(), "concurrency": per_process(ctx.cfg.teacher).concurrency, "share": limit_share(),
            "config": ctx.cfg.teacher.concurrency, "n": len(rows)}


def _finish(ctx, summaries: list[dict]) -> StageResult:
    n = ctx.publish_parts("toy", pa.schema([("id", pa.string()), ("value", pa.int64())]))
    return StageResult(input=n, output=n, extra={"pids": sorted({s["pid"] for s in summaries}),
                                                 "concurrency": sorted({s["concurrency"] for s in summaries}),
                                                 "config": sorted({s["config"] for s in summaries})})


TOY = Stage("toy", Shards(plan=_plan, run=_run, finish=_finish), sharded=True, sections=("teacher",), outputs=("toy",),
            cpu_shards=True)


def test_cpu_bound_shards_run_in_processes_and_write_the_same_table(tmp_path) -> None:
    reports, tables = {}, {}
    for workers in (1, 2):
        store = Store(tmp_path / f"w{workers}")
        cfg = load_config(None, [f"runner.cpu_workers={workers}", "teacher.concurrency=8"])
        reports[workers] = run_stage(TOY, cfg, store, progress=False).report
        tables[workers] = store.read("toy")
    assert reports[1]["pids"] == [PARENT] and reports[1]["concurrency"] == [8]  # threads of this process
    assert PARENT not in reports[2]["pids"] and reports[2]["concurrency"] == [4]  # 2 processes, half each
    assert reports[1]["config"] == reports[2]["config"] == [8]  # the config itself is the global one
    assert tables[1].num_rows == 15 and tables[1].equals(tables[2])


PROBE = """
import os, sys, time
from synth.engine.workers import CpuWork, cpu_map


def setup():
    return None


def step(state, item):
    if item == 0:  # one worker kills the run's main process; its sibling must not outlive it
        os.kill(os.getppid(), 9)
    time.sleep(0.05)
    return os.getpid()


if __name__ == "__main__":
    for pid in cpu_map(CpuWork("toy", "t", setup, (), step), range(100), workers=2):
        print(pid, flush=True)
"""


def test_workers_end_with_the_run(tmp_path) -> None:
    """A run killed with SIGKILL leaves no worker behind holding its output pipes."""
    import subprocess
    import sys

    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    # Without PR_SET_PDEATHSIG the orphaned worker keeps stdout open, and this waits until the timeout.
    p = subprocess.run([sys.executable, str(probe)], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == -9, p.stderr[-2000:]


@pytest.mark.parametrize("workers", [1, 2, 5])
def test_guided_batches_keep_every_row_in_order_and_end_small(workers: int) -> None:
    """Batches of uneven files re-cut: the rows and their order unchanged, large batches first and small ones last,
    so no worker is left with a big last batch while the others wait."""
    sizes = [60, 46, 56, 61, 12, 0, 48, 54, 52, 93, 1]
    bounds = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    batches = [pa.record_batch({"x": list(range(a, b))}, schema=pa.schema([("x", pa.int64())]))
               for a, b in zip(bounds, bounds[1:])]
    out = list(guided_batches(iter(batches), bounds[-1], workers, least=8, most=100))
    assert [x for b in out for x in b.column("x").to_pylist()] == list(range(bounds[-1]))
    rows = [b.num_rows for b in out]
    assert max(rows) <= 100 and min(rows[:-1]) >= 8 and rows[-1] >= 1
    assert rows[0] >= rows[-2] >= 8 and rows == sorted(rows[:-1], reverse=True) + rows[-1:]
    assert rows[0] <= -(-bounds[-1] // (3 * workers)) and len(out) >= 3 * workers
    assert list(guided_batches(iter([]), 0, workers)) == []
