"""`hopforge --help`, a command's help and an argument error answer without loading the heavy libraries.

The CLI is meant to answer at once: a command imports torch, transformers, pandas, Prefect, DuckDB,
the datasets library, the openai client or pyarrow's dataset layer only when it runs work that needs
them.  These tests run the CLI in a fresh interpreter as a user would and look at what it imported
(not at how long it took: timings are measured in ``bench/cli.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "pandas", "prefect", "duckdb", "datasets", "openai", "pyarrow.dataset",
         "tokenizers", "networkx", "trl", "peft", "huggingface_hub", "matplotlib", "bm25s", "tantivy")

_PROBE = """
import json, sys
from flows.cli import main
sys.argv = ["hopforge", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as e:
    code = e.code
else:
    code = 0
sys.stdout.flush()
print("\\n@@" + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _probe(args: list[str]) -> tuple[int, set[str], str]:
    r = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(args)], capture_output=True, text=True,
                       env={"COLUMNS": "120", "NO_COLOR": "1", "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    out, _, tail = r.stdout.rpartition("\n@@")
    assert tail, f"the probe printed no result: {r.stdout[-2000:]} {r.stderr[-2000:]}"
    data = json.loads(tail)
    return int(data["code"] or 0), set(data["modules"]), out + r.stderr


@pytest.mark.parametrize("args, code, says", [
    (["--help"], 0, "Commands"),
    (["filter", "--help"], 0, "--config"),
    (["publish", "--help"], 0, "--overwrite"),
    (["run", "--bogus"], 2, "No such option"),
    (["walk", "--set"], 2, "requires an argument"),
    (["report", "--out", "/nonexistent-hopforge-out"], 2, "needs the output of stage"),
])
def test_cli_answers_without_heavy_imports(args, code, says):
    got, modules, text = _probe(args)
    assert got == code, text[-2000:]
    assert says in text, text[-2000:]
    heavy = sorted(m for m in HEAVY if m in modules)
    assert not heavy, f"hopforge {' '.join(args)} imported {heavy} before answering"


def test_the_probe_sees_a_heavy_import(tmp_path):
    """The check above can fail: a command that does its work (`check` looks at the machine the student
    trains on) imports what it needs, and the probe sees it."""
    code, modules, text = _probe(["check", "--out", str(tmp_path / "run")])
    assert code == 0, text[-2000:]
    assert "torch" in modules, text[-2000:]
