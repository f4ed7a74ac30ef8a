"""The teachers of one stage run share the call cache's connections, the flow control and the probes (through
``ctx.shared``); the cache object follows the file at its path; a teacher outside a stage run has its own."""

from __future__ import annotations

import asyncio
import json
import shutil

from flows.config import load_config
from synth.engine.stage import Stage, StageContext
from synth.engine.store import Store
from synth.teacher.client import Teacher, cache_path, open_teacher, probes_path
from synth.teacher.config import TeacherConfig
from synth.teacher.probe import Probe, Probes, record_tools

STAGE = Stage(name="asks", entry=lambda ctx: None, sections=("teacher",), outputs=("asks",))
REPLY = {"message": {"role": "assistant", "content": "a"}}


def _ctx(root, key: str = "k1") -> StageContext:
    return StageContext(STAGE, load_config(None), Store(root), key)


def test_a_stage_run_s_teachers_share_cache_and_limits_and_another_run_gets_its_own(tmp_path):
    cfg = TeacherConfig(backend="oracle", concurrency=3)
    a, b = (open_teacher(cfg, tmp_path / "run", shared=_ctx(tmp_path / "run").shared) for _ in range(2))
    assert a.cache is b.cache and a._gate is b._gate and a._limiter is b._limiter and a.breaker is b.breaker
    assert a.stats is not b.stats  # each teacher counts its own calls
    a.close()
    a.cache.put("k1", "m", REPLY)  # closing one teacher leaves the run's cache open for the others
    assert b.cache.get("k1") is not None
    other = open_teacher(cfg, tmp_path / "run", shared=_ctx(tmp_path / "run", "k2").shared)
    assert other.cache is not b.cache and other._gate is not b._gate
    alone = Teacher(cfg, cache_path(tmp_path / "run"))
    assert alone.cache is not other.cache and alone._gate is not other._gate
    alone.close()


def test_a_deleted_and_remade_output_folder_gets_a_fresh_cache(tmp_path):
    """A long-lived process (a Prefect worker, a bench) whose output folder is deleted between runs must
    neither fail to open the cache nor write calls into the deleted file."""
    cfg, ctx = TeacherConfig(backend="oracle"), _ctx(tmp_path / "run")
    first = open_teacher(cfg, tmp_path / "run", shared=ctx.shared).cache
    first.put("k1", "m", REPLY)
    assert open_teacher(cfg, tmp_path / "run", shared=ctx.shared).cache is first and first.get("k1") is not None
    shutil.rmtree(tmp_path / "run")
    again = open_teacher(cfg, tmp_path / "run", shared=ctx.shared).cache
    assert again is not first and again.get("k1") is None
    again.put("k2", "m", REPLY)
    assert cache_path(tmp_path / "run").exists() and open_teacher(cfg, tmp_path / "run", shared=ctx.shared).cache.get("k2")


def test_probes_run_once_while_shared_and_start_from_what_the_preflight_recorded(tmp_path):
    calls = []

    async def run():
        calls.append(1)
        await asyncio.sleep(0.01)
        return Probe("native")

    async def many(probes):
        return await asyncio.gather(*(probes.once(("http://x/v1", "m"), "tools", run) for _ in range(5)))

    probes = Probes()
    assert [p.found for p in asyncio.run(many(probes))] == ["native"] * 5 and len(calls) == 1
    assert asyncio.run(many(Probes())) and len(calls) == 2  # another object knows nothing

    path = probes_path(tmp_path / "run")
    secret = ("https://user:sk-SECRET@y/v1", "m")  # a base URL may carry credentials: the file names a digest
    record_tools(path, ("http://x/v1", "m"), Probe("hermes", "writes <tool_call> text"))
    record_tools(path, secret, Probe("native"))
    record_tools(path, ("http://x/v1", "m"), Probe("native", "calls tools"))  # a later preflight's finding replaces it
    assert len(json.loads(path.read_text())["tools"]) == 2 and "SECRET" not in path.read_text()
    recorded = Probes.recorded(path, ("http://x/v1", "m"))
    assert recorded.recall(("http://x/v1", "m"), "tools") == Probe("native", "calls tools")
    assert asyncio.run(many(recorded)) and len(calls) == 2  # nothing asked again
    assert Probes.recorded(path, secret).recall(secret, "tools") == Probe("native")
    assert Probes.recorded(path, ("http://z/v1", "m")).recall(("http://z/v1", "m"), "tools") is None
    path.write_text("{not json")
    assert Probes.recorded(path, ("http://x/v1", "m")).recall(("http://x/v1", "m"), "tools") is None
