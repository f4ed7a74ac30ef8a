"""One home for each piece of knowledge: split names and the filter chain's drop reasons are spelled once.

The split names live in ``synth/engine/records.py`` (``Split``); every other module compares with
``Split`` and iterates ``SPLITS``.  The drop reasons of the filter chain are declared by the filter
classes (``reasons``) and the drops after the chain by ``filters/base.py``; the modules that read
filter results (the report, the dataset card, the flows) learn them from there.  The test parses every
module (docstrings aside) and fails on a string literal that spells one of them out of its home.
"""

from __future__ import annotations

import ast
from pathlib import Path

from filters.base import AFTER_CHAIN, reason_filters
from synth.engine.records import SPLITS

ROOT = Path(__file__).resolve().parents[1]
SPLIT_HOME = "synth/engine/records.py"
READERS = ("synth/report", "synth/publish", "flows")  # read filter results; declare no reason of their own


def _modules(root: Path, *tops: str):
    for top in tops:
        for p in sorted((root / top).rglob("*.py")):
            yield p.relative_to(root).as_posix(), ast.parse(p.read_text(encoding="utf-8"))


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _mentions_split(node: ast.AST) -> bool:
    return any(isinstance(n, (ast.Name, ast.Attribute)) and "split" in (getattr(n, "id", None) or
                                                                          getattr(n, "attr", "")).lower()
               for n in ast.walk(node))


def split_literals(root: Path = ROOT) -> list[str]:
    """Split names spelled out of their home: compared with something named ``split``, or listed together."""
    found = []
    for rel, tree in _modules(root, "synth", "filters", "sft", "flows"):
        if rel == SPLIT_HOME:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                consts = [c for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
                if any(c.value in SPLITS for c in consts) and _mentions_split(node):
                    found.append(f"{rel}:{node.lineno}: compares a split with a literal")
            elif isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
                items = node.keys if isinstance(node, ast.Dict) else node.elts
                names = {c.value for c in items if isinstance(c, ast.Constant) and c.value in SPLITS}
                if names == set(SPLITS):
                    found.append(f"{rel}:{node.lineno}: lists the split names")
            elif isinstance(node, ast.keyword) and node.arg == "split" and isinstance(node.value, ast.Constant) \
                    and node.value.value in SPLITS:
                found.append(f"{rel}:{node.lineno}: split={node.value.value!r}")
    return found


def reason_literals(root: Path = ROOT) -> list[str]:
    """Filter drop reasons spelled in a module that reads filter results."""
    reasons = set(reason_filters()) | set(AFTER_CHAIN)
    found = []
    for rel, tree in _modules(root, *READERS):
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in reasons and id(node) not in docs:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    return found


def test_split_names_are_spelled_only_in_their_home() -> None:
    assert split_literals() == []


def test_filter_reasons_are_spelled_only_by_the_filters() -> None:
    assert reason_literals() == []


def test_the_guards_see_a_spelled_out_name(tmp_path) -> None:
    # The checks find what they look for: a module that compares a split with a literal, lists the split
    # names, and spells a reason.
    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "planted.py").write_text(
        'def f(q):\n    return q.split == "rl" or "not_best"\n\n\nNAMES = ("sft", "rl", "eval")\n', encoding="utf-8")
    assert sorted(split_literals(tmp_path)) == ["flows/planted.py:2: compares a split with a literal",
                                        "flows/planted.py:5: lists the split names"]
    assert reason_literals(tmp_path) == ["flows/planted.py:2: 'not_best'"]
