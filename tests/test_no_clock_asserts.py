"""No test asserts on a wall-clock duration: tests hold on a loaded machine.

A stall, kill or timeout test keys on progress events (a ledger line, a log line, a server's count); a
deadline that only stops a wait from hanging forever (``assert time.monotonic() < deadline``) is allowed,
a duration (``time.monotonic() - t0 < 10``, or ``elapsed`` taken that way) is not.  The test parses every
test module and fails on an ``assert`` that measures one.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLOCKS = {"time", "monotonic", "perf_counter", "monotonic_ns", "perf_counter_ns", "time_ns"}


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
    owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
    return name in CLOCKS and (owner in (None, "time") or owner.endswith("time"))


def _clock_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Names bound to a clock reading (``t0 = time.monotonic()``) and to a duration (``dt = clock() - t0``)."""
    readings: set[str] = set()
    durations: set[str] = set()
    for _ in range(2):  # a duration may be taken from a reading bound later in the walk order
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name, value = node.targets[0].id, node.value
                if _is_clock_call(value):
                    readings.add(name)
                elif _is_duration(value, readings):
                    durations.add(name)
    return readings, durations


def _is_duration(node: ast.AST, readings: set[str]) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub):
            sides = (n.left, n.right)
            if any(_is_clock_call(s) or (isinstance(s, ast.Name) and s.id in readings) for s in sides):
                return True
    return False


def clock_asserts(root: Path = ROOT) -> list[str]:
    """``path:line`` of every test assert that measures a wall-clock duration."""
    found = []
    for p in sorted((root / "tests").rglob("*.py")):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        readings, durations = _clock_names(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assert):
                continue
            if _is_duration(node.test, readings) or any(isinstance(n, ast.Name) and n.id in durations
                                                        for n in ast.walk(node.test)):
                found.append(f"{p.relative_to(root).as_posix()}:{node.lineno}")
    return found


def test_no_test_asserts_on_a_wall_clock_duration() -> None:
    assert clock_asserts() == []


def test_the_guard_sees_a_duration(tmp_path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_planted.py").write_text(
        "import time\n"
        "def test_a():\n    t0 = time.monotonic()\n    assert time.monotonic() - t0 < 10\n"
        "def test_b():\n    start = time.time()\n    elapsed = time.time() - start\n    assert elapsed >= 2.0\n"
        "def test_c(deadline):\n    assert time.monotonic() < deadline, 'a hang guard, not a duration'\n",
        encoding="utf-8")
    assert clock_asserts(tmp_path) == ["tests/test_planted.py:4", "tests/test_planted.py:8"]
