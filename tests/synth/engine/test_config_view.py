"""A stage sees only the config it declares: reading anything else raises, naming the stage and the field, so a
setting can never change a stage's output without changing its content key."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from flows.config import load_config
from flows.stages import PIPELINE
from synth.engine.config import ConfigView, UndeclaredConfig
from synth.engine.runner import Pipeline, run_stage
from synth.engine.stage import Stage, StageContext, StageResult
from synth.engine.store import Store

SCHEMA = pa.schema([("x", pa.int64())])


def _reading(*paths: str, sections: tuple[str, ...] = ("walk.hops",), more=None) -> Stage:
    """A stage that reads ``paths`` of its config and writes one row holding how many it read."""

    def run(ctx):
        for p in paths:
            ctx.cfg.get(p)
        w = ctx.writer("things", SCHEMA)
        w.write([{"x": len(paths)}])
        w.close()
        return StageResult(input=1, output=1)

    return Stage(name="things", entry=run, sections=sections, more_sections=more, outputs=("things",))


def test_a_stage_reads_what_it_declares_the_seed_and_operational_fields(tmp_path):
    cfg = load_config(None)
    out = run_stage(_reading("walk.hops", "seed", "runner.cpu_workers", "teacher.concurrency"), cfg, Store(tmp_path))
    assert not out.reused and out.report["output"] == 1


@pytest.mark.parametrize("path", ["walk.max_in_degree", "filters.min_f1", "teacher.model", "rollout.max_turns"])
def test_reading_an_undeclared_field_raises_and_names_it(tmp_path, path):
    with pytest.raises(UndeclaredConfig, match=rf"stage 'things' reads config `{path}`.*flows/stages.py"):
        run_stage(_reading("walk.hops", path), load_config(None), Store(tmp_path))
    assert not (tmp_path / "things").exists()  # nothing committed


def test_a_partly_declared_section_is_not_read_whole():
    stage = _reading(sections=("filters.min_f1",))
    cfg = StageContext(stage, load_config(None), Store("/tmp/unused-config-view"), "k").cfg
    assert cfg.filters.min_f1 == load_config(None).filters.min_f1
    with pytest.raises(UndeclaredConfig, match="model_dump"):
        cfg.filters.model_dump()
    with pytest.raises(UndeclaredConfig, match="model_copy"):
        cfg.model_copy(update={"seed": 3})
    with pytest.raises(AttributeError, match="read-only"):
        cfg.seed = 3
    # A wholly declared section is the config's own object, with all of pydantic.
    whole = StageContext(_reading(sections=("filters",)), load_config(None), Store("/tmp/unused-config-view"), "k").cfg
    assert whole.filters.model_dump() == load_config(None).filters.model_dump()
    # The view travels to worker processes as itself.
    again = pickle.loads(pickle.dumps(cfg))
    assert again.filters.min_f1 == cfg.filters.min_f1
    with pytest.raises(UndeclaredConfig):
        again.filters.min_grounding


def test_a_conditional_section_is_read_and_keyed_only_under_its_condition(tmp_path):
    more = (lambda c: ("teacher.model",) if c.walk.hops > 4 else ())
    pipeline = Pipeline([_reading("teacher.model", more=more)])
    short, long_ = load_config(None, ["walk.hops=3"]), load_config(None, ["walk.hops=6"])
    with pytest.raises(UndeclaredConfig, match="teacher.model"):
        pipeline.run_stage(pipeline.stages[0], short, Store(tmp_path / "a"))
    assert pipeline.run_stage(pipeline.stages[0], long_, Store(tmp_path / "b")).reused is False
    # The key follows the conditional field only while the condition holds.
    other_model = load_config(None, ["walk.hops=6", "teacher.model=another"])
    store = Store(tmp_path / "c")
    assert pipeline.stage_key(pipeline.stages[0], long_, store)[0] != \
        pipeline.stage_key(pipeline.stages[0], other_model, store)[0]
    assert pipeline.stage_key(pipeline.stages[0], short, store)[0] == \
        pipeline.stage_key(pipeline.stages[0], load_config(None, ["walk.hops=3", "teacher.model=another"]), store)[0]


def test_every_stage_declares_fields_that_exist():
    """A declared path that names no field would silently hash nothing: each must resolve on the config."""
    cfg = load_config(None)
    for stage in PIPELINE.stages:
        for dotted in stage.declared(cfg):
            cfg.get(dotted)  # raises AttributeError on a path that is not in the config
        view = ConfigView(cfg, stage.declared(cfg), stage.name)
        assert view.seed == cfg.seed


def test_the_manifest_names_every_section_the_key_hashed(tmp_path):
    """The dataset card checks a config against an output by re-hashing the manifest's ``sections``: they must be
    what the key hashed, conditional ones included."""
    more = (lambda c: ("teacher.model",) if c.walk.hops > 4 else ())
    pipeline = Pipeline([_reading("teacher.model", more=more)])
    cfg, store = load_config(None, ["walk.hops=6"]), Store(tmp_path)
    pipeline.run_stage(pipeline.stages[0], cfg, store)
    entry = store.stage_entry("things")
    assert entry["sections"] == ["walk.hops", "teacher.model"]
    assert cfg.section_hash(*entry["sections"]) == entry["config"]
