"""The stage store and runner: atomic commits, content keys, reuse, and funnel checks."""

import json

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from flows.config import load_config
from synth.engine.runner import run_stage
from synth.engine.stage import Stage, StageResult
from synth.engine.store import MissingInput, ShardWriter, Store

SCHEMA = pa.schema([("x", pa.int64())])
calls = []


def _make(n):
    def run(ctx):
        calls.append(ctx.stage.name)
        w = ctx.writer("nums", SCHEMA, rows_per_shard=3)
        for i in range(n):
            w.write([{"x": i}])
        w.close()
        return StageResult(input=n + 1, output=n, dropped={"odd_one": 1})

    return Stage(name="nums", entry=run, sections=("walk",), outputs=("nums",))


def _double(ctx):
    calls.append("double")
    t = ctx.store.read("nums")
    w = ctx.writer("doubled", SCHEMA)
    w.write(pa.table({"x": pa.compute.multiply(t["x"], 2)}))
    w.close()
    return StageResult(input=t.num_rows, output=t.num_rows)


DOUBLE = Stage(name="double", entry=_double, reads=("nums",), outputs=("doubled",))


def test_shards_and_reuse(tmp_path):
    calls.clear()
    store, cfg = Store(tmp_path), load_config(None)
    o = run_stage(_make(7), cfg, store)
    assert not o.reused
    files = sorted(p.name for p in (tmp_path / "nums").iterdir())
    assert files == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert sorted(ds.dataset(tmp_path / "nums").to_table()["x"].to_pylist()) == list(range(7))
    rep = json.loads((tmp_path / "reports" / "nums.json").read_text())
    assert rep["input"] == rep["output"] + sum(rep["dropped"].values())
    o2 = run_stage(_make(7), cfg, store)
    assert o2.reused and calls == ["nums"] and o2.report["output"] == 7


def test_downstream_key_follows_upstream(tmp_path):
    calls.clear()
    store = Store(tmp_path)
    run_stage(_make(3), load_config(None), store)
    run_stage(DOUBLE, load_config(None), store)
    run_stage(DOUBLE, load_config(None), store)
    assert calls == ["nums", "double"]
    # A config change in the upstream's section changes its key, so the downstream reruns.
    run_stage(_make(3), load_config(None, ["walk.hops=3"]), store)
    run_stage(DOUBLE, load_config(None, ["walk.hops=3"]), store)
    assert calls == ["nums", "double", "nums", "double"]
    # A section the stage does not read leaves its key alone.
    run_stage(_make(3), load_config(None, ["walk.hops=3", "expand.budget=5"]), store)
    assert calls[-1] == "double"


def test_missing_input_names_the_command(tmp_path):
    with pytest.raises(MissingInput, match="nums"):
        run_stage(DOUBLE, load_config(None), Store(tmp_path))


def test_bad_funnel_is_refused(tmp_path):
    def bad(ctx):
        return StageResult(input=5, output=3, dropped={"x": 1})

    with pytest.raises(AssertionError, match="funnel"):
        run_stage(Stage(name="bad", entry=bad), load_config(None), Store(tmp_path))
    assert Store(tmp_path).stage_entry("bad") is None


def test_crash_leaves_previous_output_visible(tmp_path):
    store = Store(tmp_path)
    run_stage(_make(2), load_config(None), store)

    def crash(ctx):
        w = ctx.writer("nums", SCHEMA, rows_per_shard=1)
        w.write([{"x": 100}])
        w.write([{"x": 101}])
        raise RuntimeError("killed")

    stage = Stage(name="nums", entry=crash, sections=("walk",), outputs=("nums",))
    with pytest.raises(RuntimeError):
        run_stage(stage, load_config(None, ["walk.hops=2"]), store)
    # The old committed output is still what DIR/nums shows; the crash's shards stay in .partial.
    assert sorted(ds.dataset(tmp_path / "nums").to_table()["x"].to_pylist()) == [0, 1]
    assert store.stage_entry("nums")["config"] == load_config(None).section_hash("walk")


def test_shardwriter_resumes_after_existing_shards(tmp_path):
    w = ShardWriter(tmp_path / "t", SCHEMA, rows_per_shard=2)
    w.write([{"x": 1}, {"x": 2}])
    w2 = ShardWriter(tmp_path / "t", SCHEMA, rows_per_shard=2)
    assert w2.next_index == 1
    w2.write([{"x": 3}])
    w2.close()
    assert sorted(ds.dataset(tmp_path / "t").to_table()["x"].to_pylist()) == [1, 2, 3]


def test_empty_table_is_readable(tmp_path):
    w = ShardWriter(tmp_path / "e", SCHEMA)
    w.close()
    t = ds.dataset(tmp_path / "e").to_table()
    assert t.num_rows == 0 and t.schema == SCHEMA


def test_rerun_after_crash_does_not_keep_the_crashed_attempts_rows(tmp_path):
    store = Store(tmp_path)
    cfg = load_config(None, ["walk.hops=2"])

    def crash(ctx):
        w = ctx.writer("nums", SCHEMA, rows_per_shard=1)
        w.write([{"x": 100}])
        w.write([{"x": 101}])
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        run_stage(Stage(name="nums", entry=crash, sections=("walk",), outputs=("nums",)),
                  cfg, store)
    # Same key (same code, config and inputs), a clean run: only its own rows survive.
    run_stage(Stage(name="nums", entry=_make(3).entry, sections=("walk",), outputs=("nums",)),
              cfg, store)
    assert sorted(ds.dataset(tmp_path / "nums").to_table()["x"].to_pylist()) == [0, 1, 2]


def test_a_folder_in_the_way_is_moved_aside_not_deleted(tmp_path):
    (tmp_path / "nums").mkdir()
    (tmp_path / "nums" / "mine.txt").write_text("keep me")
    run_stage(_make(2), load_config(None), Store(tmp_path))
    assert (tmp_path / "nums").is_symlink()
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("nums.moved-aside-")]
    assert len(aside) == 1 and (aside[0] / "mine.txt").read_text() == "keep me"


# ---- inputs keyed by content -------------------------------------------------------------------
def _two_tables(kept: int, side: int):
    """A stage writing `kept` (what the reader below reads) and `side` (what it does not); both depend on
    walk.* config, so any change there reruns it."""

    def run(ctx):
        calls.append("two")
        for rel, n in (("kept", kept), ("side", side)):
            w = ctx.writer(rel, SCHEMA)
            w.write([{"x": i} for i in range(n)])
            w.close()
        return StageResult(input=kept + side, output=kept + side)

    return Stage(name="two", entry=run, sections=("walk",), outputs=("kept", "side"))


def _sum(ctx):
    calls.append("sum")
    total = sum(ctx.store.read("kept")["x"].to_pylist())
    w = ctx.writer("total", SCHEMA)
    w.write([{"x": total}])
    w.close()
    return StageResult(input=1, output=1)


SUM = Stage(name="sum", entry=_sum, reads=("two",), by_content={"two": ("kept",)}, outputs=("total",))
SUM_BY_KEY = Stage(name="sum", entry=_sum, reads=("two",), outputs=("total",))


def test_an_input_keyed_by_content_reuses_when_the_table_is_unchanged(tmp_path):
    calls.clear()
    store = Store(tmp_path)
    run_stage(_two_tables(3, 2), load_config(None), store)
    first = run_stage(SUM, load_config(None), store)
    by_key = _key(SUM_BY_KEY, store)
    entry = store.stage_entry("sum")
    assert "two" not in entry["inputs"] and set(entry["content"]["two"]) == {"kept"}
    # The upstream reruns (its config changed) and rewrites `side`, but `kept` is byte for byte the same.
    cfg = load_config(None, ["walk.hops=3"])
    run_stage(_two_tables(3, 5), cfg, store)
    again = run_stage(SUM, cfg, store)
    assert calls == ["two", "sum", "two"] and again.reused and again.key == first.key
    # Keyed by the upstream's stage key instead, the same change would rerun it.
    assert _key(SUM_BY_KEY, store) != by_key
    # Now `kept` changes: the reader reruns.
    cfg = load_config(None, ["walk.hops=4"])
    run_stage(_two_tables(4, 5), cfg, store)
    third = run_stage(SUM, cfg, store)
    assert not third.reused and calls[-2:] == ["two", "sum"]
    assert ds.dataset(tmp_path / "total").to_table()["x"].to_pylist() == [6]


def _key(stage, store):
    from synth.engine.runner import Pipeline

    return Pipeline([stage]).stage_key(stage, load_config(None), store)[0]


def test_content_hash_is_kept_and_reads_what_a_dataset_reads(tmp_path):
    from synth.engine.store import tree_hash

    store = Store(tmp_path)
    run_stage(_two_tables(3, 2), load_config(None), store)
    key = store.stage_entry("two")["key"]
    h = store.content_hash("two", key, "kept")
    assert json.loads((store.stage_dir("two", key) / "_content.json").read_text()) == {"kept": h}
    table = store.stage_dir("two", key) / "kept"
    (table / ".cache").mkdir()
    (table / ".cache" / "x").write_text("not data")
    (table / "_SUCCESS").write_text("")
    assert tree_hash(table) == h  # hidden and `_` files are not the table
    (table / "part-00001.parquet").write_bytes((table / "part-00000.parquet").read_bytes())
    assert tree_hash(table) != h
    with pytest.raises(MissingInput, match="no table 'nope'"):
        store.content_hash("two", key, "nope")


def test_the_same_rows_write_the_same_bytes(tmp_path):
    rows = [{"x": i} for i in range(1000)]
    for name, batches in (("a", [rows]), ("b", [rows[:10], rows[10:500], rows[500:]])):
        w = ShardWriter(tmp_path / name, SCHEMA)
        for b in batches:
            w.write(b)
        w.close()
    assert (tmp_path / "a" / "part-00000.parquet").read_bytes() == (tmp_path / "b" / "part-00000.parquet").read_bytes()


def test_by_content_names_a_stage_it_reads():
    with pytest.raises(ValueError, match="does not read"):
        Stage(name="x", entry=_sum, reads=("two",), by_content={"other": ("t",)})


def test_a_damaged_output_is_named_and_recomputed_not_reused(tmp_path, caplog):
    """Files written into a committed stage folder (through its public path) are seen before the stage is
    reused: the warning names the stage and what changed, and the recomputed output is whole again."""
    calls.clear()
    store, cfg = Store(tmp_path), load_config(None)
    run_stage(_make(4), cfg, store)
    (tmp_path / "nums" / "README.md").write_text("# my dataset\n")
    (tmp_path / "nums" / "data").mkdir()
    (tmp_path / "nums" / "data" / "train.parquet").write_bytes(b"PAR1")
    with caplog.at_level("WARNING", logger="hopforge"):
        o = run_stage(_make(4), cfg, store)
    assert not o.reused and calls == ["nums", "nums"]
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "nums: its committed output" in said and "not written by hopforge nums/README.md, nums/data/train.parquet" in said
    assert not (tmp_path / "nums" / "README.md").exists()
    assert sorted(ds.dataset(tmp_path / "nums").to_table()["x"].to_pylist()) == [0, 1, 2, 3]
    # A truncated part is damage too; a whole output is reused.
    part = next((tmp_path / "nums").glob("part-*.parquet"))
    part.write_bytes(part.read_bytes()[:-10])
    assert store.damage("nums", o.key).startswith("resized nums/part-")
    assert not run_stage(_make(4), cfg, store).reused
    assert run_stage(_make(4), cfg, store).reused and calls == ["nums"] * 3


def _failing(fail: set[int]):
    def run(ctx):
        calls.append("failing")
        w = ctx.writer("nums", SCHEMA)
        w.write([{"x": i} for i in range(5) if i not in fail])
        w.close()
        from synth.engine.stage import failed_item

        return StageResult(input=5, output=5 - len(fail), failed={"http_503": len(fail)} if fail else {},
                           failed_items=[failed_item(str(i), "http_503", "the server was busy") for i in sorted(fail)])

    return Stage(name="nums", entry=run, sections=("walk",), outputs=("nums",))


def test_failed_items_are_retried_by_a_plain_rerun_and_change_what_downstream_reads(tmp_path):
    from synth.engine.errors import StageFailed

    calls.clear()
    store = Store(tmp_path)
    cfg = load_config(None, ["runner.max_failed_fraction=0.5"])
    o = run_stage(_failing({1}), cfg, store)
    assert o.report["failed"] == {"http_503": 1} and o.report["failed_items"][0]["id"] == "1"
    run_stage(DOUBLE, cfg, store)
    # The same key, but the rerun is no reuse: it retries; the downstream stage sees the new rows.
    o2 = run_stage(_failing(set()), cfg, store)
    assert not o2.reused and o2.key == o.key and "failed" not in o2.report
    assert not run_stage(DOUBLE, cfg, store).reused
    assert sorted(ds.dataset(tmp_path / "doubled").to_table()["x"].to_pylist()) == [0, 2, 4, 6, 8]
    assert run_stage(_failing(set()), cfg, store).reused and run_stage(DOUBLE, cfg, store).reused
    # Over the limit: what succeeded is committed, and the run stops with one line.
    with pytest.raises(StageFailed, match=r"3 of its 5 items failed \(http_503 3: the server was busy\), more than "
                                          r"runner.max_failed_fraction=0.5; the 2 items that succeeded are committed"):
        run_stage(_failing({0, 2, 4}), load_config(None, ["walk.hops=3", "runner.max_failed_fraction=0.5"]), store)
    assert sorted(ds.dataset(tmp_path / "nums").to_table()["x"].to_pylist()) == [1, 3]
    # Every item failed: nothing is committed, nothing is reused.
    with pytest.raises(StageFailed, match="every one of its 5 items failed"):
        run_stage(_failing({0, 1, 2, 3, 4}), load_config(None, ["walk.hops=4"]), store)
    assert store.stage_entry("nums")["failed"] == 3


def test_a_streamed_shard_holds_one_row_group_at_a_time_and_its_bytes_do_not_depend_on_the_writes(tmp_path):
    """With row_group_rows the shard is written as it fills, into a hidden file that readers skip until the
    shard is done; row groups are cut by row count, so any split of the same rows gives the same bytes."""
    import pyarrow.parquet as pq

    rows = [{"x": i} for i in range(1000)]
    for name, batches in (("a", [rows]), ("b", [rows[:10], rows[10:500], rows[500:]]),
                          ("c", [rows[i:i + 7] for i in range(0, 1000, 7)])):
        w = ShardWriter(tmp_path / name, SCHEMA, row_group_rows=64)
        for b in batches:
            w.write(b)
            assert w._rows < 64  # never more than one row group buffered
        if name == "c":  # mid-shard: the rows so far are in a hidden file no reader sees
            hidden = list((tmp_path / name).iterdir())
            assert len(hidden) == 1 and hidden[0].name.startswith(".part-00000.parquet.")
        w.close()
        assert [f.name for f in (tmp_path / name).iterdir()] == ["part-00000.parquet"]
    meta = pq.read_metadata(tmp_path / "a" / "part-00000.parquet")
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [64] * 15 + [40]
    assert ds.dataset(tmp_path / "a").to_table()["x"].to_pylist() == list(range(1000))
    first = (tmp_path / "a" / "part-00000.parquet").read_bytes()
    assert all((tmp_path / n / "part-00000.parquet").read_bytes() == first for n in ("b", "c"))


def test_a_streamed_writer_still_cuts_shards_and_resumes_after_them(tmp_path):
    w = ShardWriter(tmp_path / "t", SCHEMA, rows_per_shard=100, row_group_rows=30)
    for i in range(0, 250, 25):
        w.write([{"x": j} for j in range(i, i + 25)])
    w.close()
    assert w.rows_written == 250 and w.next_index == 3
    assert sorted(ds.dataset(tmp_path / "t").to_table()["x"].to_pylist()) == list(range(250))
    again = ShardWriter(tmp_path / "t", SCHEMA, row_group_rows=30)
    assert again.next_index == 3
    again.write([{"x": 250}])
    again.close()
    assert ds.dataset(tmp_path / "t").count_rows() == 251
