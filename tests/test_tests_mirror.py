"""``tests/`` mirrors the packages: each test folder is the test folder of a package folder."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_A_PACKAGE = {"helpers"}  # test doubles and shared worlds, not tests of one package


def unmirrored(root: Path = ROOT) -> list[str]:
    """Test folders under ``tests/`` with no package folder of the same path in the project."""
    out = []
    for d in sorted(p for p in (root / "tests").rglob("*") if p.is_dir()):
        rel = d.relative_to(root / "tests")
        if rel.parts[0] in NOT_A_PACKAGE or "__pycache__" in rel.parts:
            continue
        if not (root / rel / "__init__.py").is_file():
            out.append(f"tests/{rel.as_posix()}")
    return out


def test_every_test_folder_mirrors_a_package() -> None:
    assert unmirrored() == []


def test_the_guard_sees_a_folder_of_its_own(tmp_path) -> None:
    (tmp_path / "synth" / "tools").mkdir(parents=True)
    (tmp_path / "synth" / "tools" / "__init__.py").write_text("")
    (tmp_path / "tests" / "synth" / "tools").mkdir(parents=True)
    (tmp_path / "tests" / "rl").mkdir()
    assert unmirrored(tmp_path) == ["tests/rl", "tests/synth"]  # synth has no __init__.py here
