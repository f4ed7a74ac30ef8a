"""What "the same data" is: tables by their rows, reports without run facts, folders by their files."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from synth.engine.sameness import MISSING, figures, folder_digest, is_run_fact, is_table, output_digest, table_digest

SCHEMA = pa.schema([("id", pa.string()), ("score", pa.float64()), ("tags", pa.list_(pa.string())),
                    ("raw", pa.binary())])
ROWS = [{"id": str(i), "score": i / 3, "tags": [f"t{i}", "x"], "raw": bytes([i])} for i in range(7)]


def _table(folder, rows, parts=1, schema=SCHEMA):
    folder.mkdir(parents=True)
    step = -(-len(rows) // parts)
    for n, i in enumerate(range(0, len(rows), step)):
        pq.write_table(pa.Table.from_pylist(rows[i:i + step], schema=schema), folder / f"part-{n:05d}.parquet")
    return folder


def test_a_table_is_its_rows_whatever_their_order_and_files(tmp_path):
    a = table_digest(_table(tmp_path / "a", ROWS))
    b = table_digest(_table(tmp_path / "b", ROWS[::-1], parts=3))
    assert a == b and a.rows == 7 and a.describe() == "7 rows"


def test_one_changed_value_or_type_is_another_table(tmp_path):
    a = table_digest(_table(tmp_path / "a", ROWS))
    changed = [dict(r) for r in ROWS]
    changed[3]["score"] = 1.0000000000000002  # one ulp from 1.0
    assert table_digest(_table(tmp_path / "b", changed)) != a
    wider = pa.schema([("id", pa.large_string()), *list(SCHEMA)[1:]])
    assert table_digest(_table(tmp_path / "c", ROWS, schema=wider)) != a
    assert table_digest(_table(tmp_path / "d", ROWS[:-1])).rows == 6


def test_run_facts_leave_the_figures_at_any_depth():
    report = {"input": 5, "output": 4, "seconds": 1.5, "dropped": {"x": 1},
              "teacher": {"requests": 3, "cache_hits": 0}, "walks": {"steps": 9, "kernel_seconds": 0.1},
              "validators": {"searches": 2}, "depth": {"kept": {"ratio": 0.9, "wall_s": 2}}}
    assert figures(report) == {"input": 5, "output": 4, "dropped": {"x": 1}, "walks": {"steps": 9},
                               "depth": {"kept": {"ratio": 0.9}}}
    assert is_run_fact("seconds_enterable_hop") and is_run_fact("latency_s") and not is_run_fact("steps")


def test_a_folder_is_its_files_by_kind_hidden_and_store_files_aside(tmp_path):
    def make(root, score, seconds, extra=None):
        root.mkdir()
        (root / "notes.txt").write_text("same")
        (root / "meta.json").write_text(json.dumps({"docs": 3, "seconds": seconds}))
        pq.write_table(pa.Table.from_pylist(ROWS[:2], schema=SCHEMA), root / "nodes.parquet")
        (root / "sub").mkdir()
        (root / "sub" / "w.bin").write_bytes(bytes([score]))
        (root / ".lock").write_text(str(seconds))
        (root / "_report.json").write_text(str(seconds))
        if extra:
            (root / extra).write_text("new")
        return root

    a = folder_digest(make(tmp_path / "a", 1, 0.5))
    assert folder_digest(make(tmp_path / "b", 1, 9.0)) == a  # a timing, a hidden file, the store's files
    c = folder_digest(make(tmp_path / "c", 2, 0.5))
    assert c != a and a.differing(c) == ["sub/w.bin"]
    d = folder_digest(make(tmp_path / "d", 1, 0.5, extra="more.txt"))
    assert a.differing(d) == ["more.txt"] and d.describe() == "5 files"


def test_what_an_output_is(tmp_path):
    table = _table(tmp_path / "t", ROWS)
    assert is_table(table) and output_digest(table).kind == "table"
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "x.npy").write_bytes(b"1")
    pq.write_table(pa.Table.from_pylist(ROWS, schema=SCHEMA), tmp_path / "f" / "nodes.parquet")
    assert not is_table(tmp_path / "f") and output_digest(tmp_path / "f").kind == "folder"
    assert output_digest(tmp_path / "nothing") is MISSING


def test_paths_inside_the_run_count_relative_to_it_and_rates_are_run_facts():
    report = {"checkpoint": {"path": "/runs/a/.stages/sft/k.partial/student"}, "tokenizer": "/runs/a",
              "elsewhere": "/data/kilt.json", "tokens_per_second": 683.4, "train_runtime": 3.0, "steps": 40}
    assert figures(report, ("/runs/a",)) == {"checkpoint": {"path": "DIR/.stages/sft/k.partial/student"},
                                             "tokenizer": "DIR", "elsewhere": "/data/kilt.json", "steps": 40}
    assert figures(report, ("/runs/a",)) == figures({**report, "tokenizer": "/runs/b",
                                                     "checkpoint": {"path": "/runs/b/.stages/sft/k.partial/student"}},
                                                    ("/runs/b",))


def test_a_file_a_concern_calls_no_data_is_left_out(tmp_path):
    from synth.engine.sameness import NOT_DATA

    for name, pickle in (("a", b"/runs/a 12:00"), ("b", b"/runs/b 12:01")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "weights.bin").write_bytes(b"w")
        (tmp_path / name / "args.bin").write_bytes(pickle)
    own = lambda path, rel: NOT_DATA if rel == "args.bin" else None  # noqa: E731
    a, b = (folder_digest(tmp_path / n, own) for n in "ab")
    assert a == b and sorted(a.parts) == ["weights.bin"]
    assert folder_digest(tmp_path / "a") != folder_digest(tmp_path / "b")


def test_a_table_leaves_out_measured_latencies_and_counts_paths_inside_the_run_relative_to_it(tmp_path):
    schema = pa.schema([("trace_id", pa.string()), ("teacher_model", pa.string()), ("latency_s", pa.float64())])

    def run(root, latency):
        rows = [{"trace_id": "t1", "teacher_model": f"{root}/.stages/sft/k/student", "latency_s": latency}]
        return _table(tmp_path / root.strip("/").replace("/", "_"), rows, schema=schema)

    a = table_digest(run("/runs/a", 0.87), roots=("/runs/a",))
    b = table_digest(run("/runs/b", 1.63), roots=("/runs/b",))
    assert a == b
    assert table_digest(tmp_path / "runs_a") != table_digest(tmp_path / "runs_b")  # without the run's root


def test_a_file_that_cannot_be_read_is_named_as_damaged_not_an_arrow_traceback(tmp_path):
    """A part cut short (no footer) or a report cut mid-value: one typed error naming the file and why, so a
    caller can mark that output damaged and go on; a whole table still digests."""
    import os

    import pytest

    from synth.engine.errors import DamagedFile, InputError
    from synth.engine.sameness import json_digest

    folder = _table(tmp_path / "t", ROWS, parts=2)
    whole = table_digest(folder)
    part = sorted(folder.glob("*.parquet"))[1]
    for size in (100, part.stat().st_size // 2):
        os.truncate(part, size)
        with pytest.raises(DamagedFile) as err:
            table_digest(folder)
        assert err.value.path == str(part) and "magic bytes" in err.value.why and isinstance(err.value, InputError)
        assert str(err.value).startswith(f"{part}: cannot read this Parquet file (") and "\n" not in str(err.value)
    report = tmp_path / "r.json"
    report.write_text('{"input": 3, "outp')
    with pytest.raises(DamagedFile) as err:
        json_digest(report)
    assert err.value.path == str(report) and "JSON file" in str(err.value)
    assert table_digest(_table(tmp_path / "u", ROWS, parts=2)) == whole
