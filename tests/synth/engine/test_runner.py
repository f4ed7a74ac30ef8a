"""The runner's rule for an empty stage: nothing it made is a failure, never a finished, reusable result.

Whether its input was empty, every item was dropped, or some were dropped and the rest failed, a stage that
outputs nothing stops the run in one line and commits nothing, unless ``runner.allow_empty`` is set; a stage
that had nothing to do by its configuration (``StageResult.idle``) commits its empty output as a result.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from flows.config import load_config
from synth.engine.errors import StageFailed
from synth.engine.runner import run_stage
from synth.engine.stage import Stage, StageResult, failed_item
from synth.engine.store import Store

SCHEMA = pa.schema([("x", pa.int64())])


def _stage(result: StageResult, name: str = "things", reads: tuple[str, ...] = ()) -> Stage:
    """A stage that writes an empty table and returns ``result``."""

    def run(ctx):
        w = ctx.writer(name, SCHEMA)
        w.close()
        return result

    return Stage(name=name, entry=run, reads=reads, sections=("walk",), outputs=(name,))


def _failed(n: int) -> dict:
    return {"failed": {"http_500": n},
            "failed_items": [failed_item(f"i{k}", "http_500", "the server broke") for k in range(n)]}


EMPTY = {
    "input empty": (StageResult(input=0, output=0), "its input was empty"),
    "all dropped": (StageResult(input=3, output=0, dropped={"no_path": 3}),
                    r"every one of its 3 items was dropped \(no_path 3\)"),
    # The demo corpus against a server that never answers usefully: 118 dropped, 1 failed, under
    # runner.max_failed_fraction (0.02 of 119 is 2.38), so the all-failed rule cannot fire.
    "dropped and failed": (StageResult(input=119, output=0, dropped={"prose": 100, "invalid_json": 18}, **_failed(1)),
                           r"none of its 119 items made it: 118 were dropped \(prose 100, invalid_json 18\) and the "
                           r"teacher call of 1 failed \(http_500 1: the server broke\)"),
    "dropped and too many failed": (StageResult(input=10, output=0, dropped={"prose": 4}, **_failed(6)),
                                    r"none of its 10 items made it: 4 were dropped \(prose 4\) and the teacher call "
                                    r"of 6 failed"),
}


@pytest.mark.parametrize("case", list(EMPTY))
def test_an_empty_output_stops_the_run_and_commits_nothing(tmp_path, case):
    result, said = EMPTY[case]
    store = Store(tmp_path)
    with pytest.raises(StageFailed, match=said) as e:
        run_stage(_stage(result), load_config(None), store)
    assert "runner.allow_empty=true" in str(e.value) and "\n" not in str(e.value)
    assert store.stage_entry("things") is None and not (tmp_path / "things").exists()


def test_an_empty_input_names_what_the_stage_said_or_the_stages_it_reads(tmp_path):
    store, cfg = Store(tmp_path), load_config(None)
    run_stage(_stage(StageResult(2, 2), "walks"), cfg, store)
    with pytest.raises(StageFailed, match=r"stage questions: its input was empty \(it reads walks\), so its output "):
        run_stage(_stage(StageResult(0, 0), "questions", reads=("walks",)), cfg, store)
    said = StageResult(0, 0, extra={"skipped": "DIR/questions has no question of the eval split"})
    with pytest.raises(StageFailed, match=r"stage eval: its input was empty: DIR/questions has no question of the "
                                          r"eval split, so its output is empty"):
        run_stage(_stage(said, "eval", reads=("walks",)), cfg, store)


@pytest.mark.parametrize("case", [c for c in EMPTY if c != "dropped and too many failed"])
def test_allow_empty_commits_the_empty_output_and_the_next_stage_runs(tmp_path, case):
    result, _ = EMPTY[case]
    store, cfg = Store(tmp_path), load_config(None, ["runner.allow_empty=true"])
    o = run_stage(_stage(result), cfg, store)
    assert not o.reused and o.report["output"] == 0 and store.stage_entry("things") is not None
    after = run_stage(_stage(StageResult(0, 0), "after", reads=("things",)), cfg, store)
    assert after.report["output"] == 0


def test_an_idle_stage_commits_its_empty_output_as_a_result(tmp_path):
    store = Store(tmp_path)
    o = run_stage(_stage(StageResult(0, 0, idle="expand.num_subgraphs is 0: no subgraph is asked for")),
                  load_config(None), store)
    assert o.report["idle"].startswith("expand.num_subgraphs is 0") and store.stage_entry("things") is not None
    assert run_stage(_stage(StageResult(0, 0, idle="unchanged")), load_config(None), store).reused


def test_an_empty_output_committed_under_allow_empty_is_not_reused_without_it(tmp_path):
    store = Store(tmp_path)
    dropped = StageResult(input=3, output=0, dropped={"no_path": 3})
    run_stage(_stage(dropped), load_config(None, ["runner.allow_empty=true"]), store)
    with pytest.raises(StageFailed, match=r"its committed output \(key \w+\) is empty \(every one of its 3 items "
                                          r"was dropped \(no_path 3\)\).*runner.allow_empty=true to use it"):
        run_stage(_stage(dropped), load_config(None), store)
    assert run_stage(_stage(dropped), load_config(None, ["runner.allow_empty=true"]), store).reused


def test_a_stage_with_output_is_committed_as_before(tmp_path):
    o = run_stage(_stage(StageResult(input=5, output=1, dropped={"prose": 4})), load_config(None), Store(tmp_path))
    assert o.report["output"] == 1 and "idle" not in o.report


def test_failed_items_are_typed_and_survive_a_shard_summary_written_as_json(tmp_path):
    """A shard's summary is JSON on disk (a resumed shard's is read back): the failed items it lists come back
    as the same FailedItem records, and a detail is cut to 300 characters."""
    import json

    from synth.engine.stage import FailedItem, summary_failed_items
    from synth.engine.store import atomic_write_json

    items = [failed_item("q1", "http_503", "busy"), failed_item("q2", "timeout", "x" * 1000)]
    assert isinstance(items[0], FailedItem) and len(items[1].detail) == 300
    atomic_write_json(tmp_path / "00000.json", {"failed_items": [f.as_dict() for f in items]})
    resumed = json.loads((tmp_path / "00000.json").read_text())
    fresh = {"failed_items": [failed_item("q3", "http_500").as_dict()]}
    assert summary_failed_items([resumed, fresh, {}]) == [*items, FailedItem("q3", "http_500", "")]
