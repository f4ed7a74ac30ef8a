"""The code part of a stage's content key: the source of everything the stage can run.

Starting from the stage's entry module, :func:`import_closure` follows every import of a
project module, found by parsing the source (``ast``), never by importing it:

- ``import a.b`` and ``from a.b import c`` anywhere in a module, function-local imports
  included (stages import heavy libraries lazily, and so do they the project's modules);
- ``"a.b:attr"`` string constants that name a project module (lazy references such as a
  backend registry or a stage's entry);
- the ``__init__.py`` of every package on the way, since importing a module runs them.

A module's data files enter the key too: every string constant that names a file under the
module's package folder by its file name (``"question.jinja2"``, ``"qwen3.jinja2"``).

"Project modules" are the packages beside ``synth/`` (any folder with an ``__init__.py``).
Nothing is listed by hand, so the key cannot miss a module a stage reaches indirectly.

Parsing is most of the cost (about 0.12 s for a stage's 77 files, at every command), so what each
file of the installed project yields is kept in the user's cache folder
(``$XDG_CACHE_HOME/hopforge/codekey-*.json``), keyed by the file's path, modification time and
size, the same key the in-process cache uses.  The hash itself always reads the files' bytes.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DATA_SUFFIXES = (".jinja2", ".j2", ".json", ".yaml", ".txt", ".html", ".js", ".css")
_LAZY_REF = re.compile(r"^([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*):[A-Za-z_]\w*$")


def project_packages(root: Path = ROOT) -> frozenset[str]:
    """The top-level packages of the project under ``root``."""
    return frozenset(p.parent.name for p in root.glob("*/__init__.py"))


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The source file of project module ``name`` under ``root`` (a package's ``__init__.py``), or None."""
    base = root.joinpath(*name.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


@lru_cache(maxsize=4096)
def _parse(path: Path, root: Path, mtime_ns: int, size: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(imported module names, string constants) of one source file (cached by path and stat)."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    pkg_parts = list(path.parent.relative_to(root).parts)
    names: list[str] = []
    strings: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[: len(pkg_parts) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names.append(mod)
            names += [f"{mod}.{a.name}" for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 200:
            strings.append(node.value)
    return tuple(names), tuple(strings)


def _scan(path: Path, root: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    st = path.stat()
    if root != ROOT:
        return _parse(path, root, st.st_mtime_ns, st.st_size)
    stored = _Stored.get()
    rel = str(path.relative_to(root))
    hit = stored.entries.get(rel)
    if hit is not None and hit[0] == st.st_mtime_ns and hit[1] == st.st_size:
        return tuple(hit[2]), tuple(hit[3])
    names, strings = _parse(path, root, st.st_mtime_ns, st.st_size)
    stored.entries[rel] = [st.st_mtime_ns, st.st_size, list(names), list(strings)]
    stored.dirty = True
    return names, strings


class _Stored:
    """The parse results of the installed project's files, kept between processes (module docstring)."""

    _one: "_Stored | None" = None

    def __init__(self) -> None:
        self.dirty = False
        self.entries: dict[str, list] = {}
        try:
            base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hopforge"
        except (KeyError, RuntimeError, OSError):  # no home folder to keep it in: every process parses
            self.path = None
            return
        tag = hashlib.sha256(f"{ROOT}|{sys.version_info[:2]}".encode()).hexdigest()[:12]
        self.path = base / f"codekey-{tag}.json"
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        if isinstance(data, dict):  # a damaged entry is parsed again, never trusted
            self.entries = {k: v for k, v in data.items() if _well_formed(v)}

    @classmethod
    def get(cls) -> "_Stored":
        if cls._one is None:
            cls._one = cls()
        return cls._one

    def save(self) -> None:
        """Write the entries if any changed (atomically; a folder that cannot be written only costs the parse)."""
        if not self.dirty or self.path is None:
            return
        self.dirty = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(self.entries, f)
            os.replace(tmp, self.path)
        except OSError:
            pass


def _well_formed(entry: Any) -> bool:
    """A stored entry: [mtime_ns, size, imported names, string constants]."""
    return (isinstance(entry, list) and len(entry) == 4 and all(isinstance(x, int) for x in entry[:2])
            and all(isinstance(x, list) and all(isinstance(v, str) for v in x) for x in entry[2:]))


def import_closure(module: str, root: Path = ROOT) -> tuple[list[Path], list[Path]]:
    """(source files, data files) of ``module`` and every project module it can import, sorted."""
    root = root.resolve()
    packages = project_packages(root)
    seen: set[Path] = set()
    data: set[Path] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name.split(".")[0] not in packages:
            continue
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # the packages on the way, then the module itself
            path = module_file(".".join(parts[:i]), root)
            if path is None or path in seen:
                continue
            seen.add(path)
            imported, strings = _scan(path, root)
            todo += imported
            for s in strings:
                m = _LAZY_REF.match(s)
                if m:
                    todo.append(m.group(1))
                elif s.endswith(DATA_SUFFIXES) and "/" not in s:
                    data.update(p for p in path.parent.rglob(s) if p.is_file())
    return sorted(seen), sorted(data)


def code_hash(module: str, root: Path = ROOT) -> str:
    """Hash of the source (and data files) of ``module``'s import closure."""
    root = root.resolve()
    sources, data = import_closure(module, root)
    if root == ROOT:
        _Stored.get().save()
    h = hashlib.sha256()
    for p in sources + data:
        h.update(str(p.relative_to(root)).encode())
        h.update(b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]
