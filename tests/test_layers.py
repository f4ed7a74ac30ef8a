"""The project's layers: every import points down, and no import cycle exists.

The layer order is written once, here.  A module may import modules of its own layer or of
a layer below; the test parses every import in the project (function-local ones included)
and fails on an upward import or on any cycle between modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("synth", "filters", "sft", "flows")

# Lowest first.  Within synth, a concern may use the concerns above it in this list.
LAYERS = [
    "synth.engine",
    "synth.text",
    "synth.corpus",
    "synth.graph",
    "synth.decontam",
    "synth.tools",
    "synth.tokenizer",
    "synth.teacher",
    "synth.questions",
    "synth.rollout",
    "filters",
    "synth.assemble",
    "synth.report",
    "synth.publish",
    "sft",
    "flows",
]


def _modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for top in PACKAGES:
        for p in (root / top).rglob("*.py"):
            name = ".".join(p.relative_to(root).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = p
    return out


def layer_of(module: str) -> int | None:
    """Index in LAYERS of the layer that holds ``module`` (None: a package root such as ``synth``)."""
    found = None
    for i, layer in enumerate(LAYERS):
        if module == layer or module.startswith(layer + "."):
            found = i
    return found


def import_graph(root: Path = ROOT) -> nx.DiGraph:
    """Module -> imported project module, for every import statement in the project."""
    mods = _modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    g = nx.DiGraph()
    for name, path in mods.items():
        g.add_node(name)
        pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for t in targets:
                r = resolve(t)
                if r is not None and r != name:
                    g.add_edge(name, r)
    return g


def upward_imports(g: nx.DiGraph) -> list[str]:
    """Every edge that goes from a lower layer to a higher one."""
    bad = []
    for a, b in g.edges:
        la, lb = layer_of(a), layer_of(b)
        if la is None or lb is None or lb > la:
            bad.append(f"{a} -> {b}")
    return sorted(bad)


def test_every_module_has_a_layer():
    unplaced = [m for m in _modules() if layer_of(m) is None and m not in PACKAGES]
    assert unplaced == []


def test_imports_only_point_down():
    assert upward_imports(import_graph()) == []


def test_no_import_cycles():
    cycles = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert cycles == []


def test_the_checks_catch_a_violation(tmp_path):
    # A copy of two packages with an engine module that reaches up into the teacher, and back.
    for top in ("synth", "filters", "sft", "flows"):
        (tmp_path / top).mkdir()
        (tmp_path / top / "__init__.py").write_text("")
    for pkg in ("engine", "teacher"):
        (tmp_path / "synth" / pkg).mkdir()
        (tmp_path / "synth" / pkg / "__init__.py").write_text("")
    (tmp_path / "synth" / "engine" / "store.py").write_text("def f():\n    from synth.teacher.client import x\n")
    (tmp_path / "synth" / "teacher" / "client.py").write_text("from synth.engine import store\nx = 1\n")
    g = import_graph(tmp_path)
    assert upward_imports(g) == ["synth.engine.store -> synth.teacher.client"]
    assert [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1] == [
        ["synth.engine.store", "synth.teacher.client"]]


def test_the_architecture_diagram_draws_these_layers() -> None:
    """docs/ARCHITECTURE.md's diagram lists the layers top-down; it must be LAYERS, reversed, so the picture a
    newcomer reads is the rule this test enforces."""
    import re

    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    drawn = [m.group(1).rstrip("/").replace("/", ".") for m in re.finditer(r"^ (\w+(?:/\w+)?/?)\s", block, re.M)]
    assert drawn[::-1] == LAYERS
