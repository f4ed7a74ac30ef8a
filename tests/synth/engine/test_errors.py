"""machine_error: the one line for a full disk, a read-only folder or a permission error, found behind
any exception, naming the path and what was being written."""

from __future__ import annotations

import errno
from pathlib import Path

from synth.engine.errors import MachineError, machine_error


def _write_shard(path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")  # noqa: F841  (the frame's locals name the file)
    raise OSError(errno.ENOSPC, "No space left on device")  # as pyarrow raises it: no filename


def test_a_full_disk_without_a_filename_names_the_file_being_written(tmp_path):
    path = tmp_path / ".stages" / "rollout" / "abc123.partial" / "traces" / "part-00003.parquet"
    try:
        _write_shard(path)
    except OSError as e:
        m = machine_error(e)
    assert isinstance(m, MachineError) and m.errno == errno.ENOSPC and m.path == str(path)
    assert str(m) == (f"cannot write {path} (stage rollout, table traces): no space left on device [Errno 28]; "
                      "finished stages and shards are kept: free some space (or use --out on a bigger disk), then "
                      "run the same command again to resume")


def test_the_error_is_found_behind_a_wrapper_and_uses_its_own_filename(tmp_path):
    try:
        try:
            raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "reports" / "run.json"))
        except OSError as inner:
            raise RuntimeError("stage failed") from inner
    except RuntimeError as e:
        m = machine_error(e)
    assert m is not None and m.path == str(tmp_path / "reports" / "run.json") and m.what is None
    assert str(m).startswith(f"cannot access {tmp_path / 'reports' / 'run.json'}: permission denied [Errno 13]; ")
    assert "\n" not in str(m)


def test_other_errors_are_not_the_machine_and_no_path_falls_back_to_the_folder(tmp_path):
    assert machine_error(ConnectionRefusedError(errno.ECONNREFUSED, "refused")) is None
    assert machine_error(FileNotFoundError(errno.ENOENT, "no such file", "x")) is None
    assert machine_error(ValueError("bad")) is None
    m = machine_error(OSError(errno.EROFS, "Read-only file system"), tmp_path)
    assert str(m).startswith(f"cannot write under {tmp_path}: read-only file system [Errno 30]")


def test_a_damaged_parquet_file_is_named_with_the_stage_that_wrote_it(tmp_path):
    """A truncated table file: the error names the file as the user reaches it (the folder's link) and the stage
    whose rerun restores it; a damaged file outside the stages, and every other error, are told apart."""
    import os

    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from synth.engine.errors import InputError, damaged_table

    table_dir = tmp_path / ".stages" / "rollout" / "0123abcd" / "traces"
    table_dir.mkdir(parents=True)
    part = table_dir / "part-00000.parquet"
    pq.write_table(pa.table({"trace_id": [f"t{i}" for i in range(1000)]}), part)
    (tmp_path / "traces").symlink_to(table_dir)
    os.truncate(part, part.stat().st_size // 2)
    try:
        ds.dataset(tmp_path / "traces", format="parquet").count_rows()
    except Exception as e:  # noqa: BLE001 - whatever Arrow raises for it
        err = damaged_table(e)
    else:
        raise AssertionError("a truncated Parquet file was read")
    assert isinstance(err, InputError)
    msg = str(err)
    assert msg.startswith(str(tmp_path / "traces" / "part-00000.parquet") + ": cannot read this Parquet file (")
    assert "stage rollout, table traces" in msg and "--force" in msg and "\n" not in msg

    loose = tmp_path / "loose.parquet"
    loose.write_bytes(b"not parquet at all")
    try:
        pq.read_table(loose)
    except Exception as e:  # noqa: BLE001
        outside = damaged_table(e)
    else:
        raise AssertionError("a file that is not Parquet was read")
    assert str(outside).startswith(f"{loose}: ") and "restore or remove it" in str(outside)
    assert damaged_table(ValueError("'x.parquet' is fine")) is None
    assert damaged_table(OSError(errno.ENOSPC, "No space left")) is None


def test_what_is_not_a_file_is_said_for_what_it_is(tmp_path):
    """Every FILE hopforge reads (a config, a benchmark, an n-gram file, an SFT recipe) is checked by not_a_file:
    "file not found" for a folder or a FIFO told the user nothing about what they typed."""
    import os
    import socket

    from synth.engine.errors import not_a_file

    f = tmp_path / "f.json"
    f.write_text("{}")
    (tmp_path / "link").symlink_to(f)
    os.mkfifo(tmp_path / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    try:
        assert not_a_file(f) is None and not_a_file(tmp_path / "link") is None
        assert not_a_file(tmp_path) == "a folder, not a file"
        assert not_a_file(tmp_path / "fifo") == "a FIFO (named pipe), not a regular file"
        assert not_a_file(tmp_path / "sock") == "a socket, not a regular file"
        assert not_a_file("/dev/null") == "a device, not a regular file"
        assert not_a_file(tmp_path / "absent") == "no such file"
        assert not_a_file(f / "inside") == "no such file (a folder on its path is a file)"
    finally:
        sock.close()


def test_a_json_error_says_where_without_a_half_phrase():
    import json

    from synth.engine.errors import json_problem

    for text, said in [('{"a": "x\ty"}', "Invalid control character at column 9"),
                       ('{"a": }', "Expecting value at column 7"), ('{"a": "x', "Unterminated string starting at column 7")]:
        try:
            json.loads(text)
        except json.JSONDecodeError as e:
            assert json_problem(e) == said
    try:
        json.loads('{"a": "x\ty"}')
    except json.JSONDecodeError as e:
        assert json_problem(e, at="character") == "Invalid control character at character 8"
