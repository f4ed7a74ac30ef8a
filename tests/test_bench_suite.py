"""``bench/suite.py`` (``make bench``): every bench file is in the suite, a failing bench does not stop the
others, and the summary keeps each bench's JSON figures and says which failed."""

from __future__ import annotations

import json
from pathlib import Path

from bench.suite import SUITE, last_json, main

ROOT = Path(__file__).resolve().parents[1]


def test_every_bench_file_is_in_the_suite() -> None:
    files = {p.stem for p in (ROOT / "bench").glob("*.py")} - {"suite", "measure", "__init__"}
    assert files == {name for name, _ in SUITE}


def test_every_bench_imports_and_parses_its_arguments() -> None:
    """`--help` of each bench: an import the code under it no longer provides (a renamed function) fails here,
    not an hour into `make bench`."""
    import subprocess
    import sys

    procs = {name: subprocess.Popen([sys.executable, str(ROOT / "bench" / f"{name}.py"), "--help"], cwd=ROOT,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for name, _ in SUITE}
    failed = {name: p.communicate(timeout=300)[0][-800:] for name, p in procs.items()}
    failed = {name: out for name, out in failed.items() if procs[name].returncode != 0}
    assert not failed, failed


def test_last_json_is_the_last_object_line() -> None:
    text = 'start\n{"bench": "a", "ratio": 1}\nnoise {not json}\n{"bench": "a", "ratio": 2}\ntail\n'
    assert last_json(text) == {"bench": "a", "ratio": 2}
    assert last_json("no figures here\n[1, 2]\n") is None


def _bench(folder: Path, name: str, body: str) -> None:
    (folder / f"{name}.py").write_text(body)


def test_a_failure_does_not_stop_the_rest_and_is_named(tmp_path: Path, capsys) -> None:
    benches, logs = tmp_path / "bench", tmp_path / "logs"
    benches.mkdir()
    _bench(benches, "good", 'import sys\nprint("args", sys.argv[1:])\nprint(\'{"bench": "good", "ratio": 3.5}\')\n')
    _bench(benches, "crash", 'raise SystemExit("boom")\n')
    _bench(benches, "silent", 'print("done, but no figures")\n')
    _bench(benches, "last", 'print(\'{"bench": "last", "ratio": 1.0}\')\n')
    suite = [("good", ["--size", "7"]), ("crash", []), ("silent", []), ("last", [])]
    rc = main(["--logs", str(logs)], suite=suite, bench_dir=benches)
    assert rc == 1
    summary = json.loads((logs / "summary.json").read_text())
    by = {r["bench"]: r for r in summary["results"]}
    assert list(by) == ["good", "crash", "silent", "last"]  # the one after the failures still ran
    assert by["good"]["ok"] and by["good"]["figures"] == {"bench": "good", "ratio": 3.5}
    assert "args ['--size', '7']" in (logs / "good.log").read_text()
    assert not by["crash"]["ok"] and by["crash"]["why"] == "exit 1"
    assert "boom" in (logs / "crash.log").read_text()
    assert not by["silent"]["ok"] and by["silent"]["why"] == "no JSON line at the end"
    assert by["last"]["ok"]
    assert len(by["good"]["load_before"]) == 3
    out = capsys.readouterr().out
    assert "2 ran, 2 failed: crash, silent" in out


def test_scale_drops_the_suite_sizes_and_unknown_names_are_refused(tmp_path: Path) -> None:
    benches, logs = tmp_path / "bench", tmp_path / "logs"
    benches.mkdir()
    _bench(benches, "good", 'import json, sys\nprint(json.dumps({"bench": "good", "argv": sys.argv[1:]}))\n')
    assert main(["--logs", str(logs), "--scale"], suite=[("good", ["--size", "7"])], bench_dir=benches) == 0
    assert json.loads((logs / "summary.json").read_text())["results"][0]["figures"]["argv"] == []
    assert main(["--logs", str(logs), "--only", "nope"], suite=[("good", [])], bench_dir=benches) == 2
    _bench(benches, "orphan", 'print("{}")\n')  # a bench file the suite does not list
    assert main(["--logs", str(logs)], suite=[("good", [])], bench_dir=benches) == 2
