"""What a local publish may touch: never the output folder it reads, and in its target only the files
it wrote itself.

``PATH/.hopforge-publish.json`` (:data:`OWNED_FILE`) lists every file publish wrote into a local target
with its sha256.  A file there is publish's own when it is listed with the bytes it holds now; any other
file that a publish would replace or remove (the user's ``README.md``, a file edited since, a
shard-named file of the user's) stops it before anything is written, unless ``overwrite``.  The list is
written atomically twice: before the files (the new hashes as ``pending``, the current ones kept) and
after them, so a publish cut short in between still knows every file it left as its own.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from synth.publish.errors import PublishError

OWNED_FILE = ".hopforge-publish.json"


def sha256_file(path: Path) -> str:
    """The sha256 of a file's bytes, read in blocks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_atomic(dest: Path, data: bytes) -> None:
    """Write ``data`` to a temporary name beside ``dest``, then rename it over ``dest``."""
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def check_outside_run(run: Path, target: Path) -> None:
    """:class:`PublishError` when a local target would write into the output folder ``run``: the
    target is ``run`` or lies inside it, or ``run`` lies inside the target's ``data/`` (symlinks resolved)."""
    r, t = Path(run).resolve(), Path(target).expanduser().absolute().resolve()
    if t == r or r in t.parents:
        raise PublishError(f"refusing to publish to local:{target}: it is inside the output folder {r}, whose "
                           "committed stages it would overwrite; publish to a folder outside it")
    if r == t / "data" or (t / "data") in r.parents:
        raise PublishError(f"refusing to publish to local:{target}: the output folder {r} lies inside its data/ "
                           "folder, where the shards go; publish to a folder outside it")


class OwnedFiles:
    """The files of a local target that publish wrote, read from (and written to) :data:`OWNED_FILE`."""

    def __init__(self, root: Path, overwrite: bool = False):
        self.root, self.overwrite = root, overwrite
        self.listed = self._read()  # path -> the hashes it may hold and still be publish's own
        self._hashes: dict[str, str | None] = {}

    def _read(self) -> dict[str, set[str]]:
        path = self.root / OWNED_FILE
        if not path.is_file():
            return {}
        try:
            data = json.loads(path.read_text())
            listed: dict[str, set[str]] = {}
            for part in ("files", "pending"):
                for rel, sha in (data.get(part) or {}).items():
                    listed.setdefault(str(rel), set()).add(str(sha))
            return listed
        except (OSError, ValueError, AttributeError) as e:
            if self.overwrite:
                return {}
            raise PublishError(f"local:{self.root}: cannot read {path}, the list of files publish wrote there "
                               f"({e}); pass --overwrite to publish anyway") from None

    def current(self, rel: str) -> str | None:
        """The sha256 of the file at ``rel`` now (None when there is none), hashed once."""
        if rel not in self._hashes:
            path = self.root / rel
            self._hashes[rel] = sha256_file(path) if path.is_file() else None
        return self._hashes[rel]

    def ours(self, rel: str) -> bool:
        """Nothing is at ``rel``, or what is there is what publish wrote."""
        path = self.root / rel
        return not path.exists() or (path.is_file() and self.current(rel) in self.listed.get(rel, ()))

    def check(self, replaced: list[str], removed: list[str]) -> None:
        """:class:`PublishError` naming the files that would be replaced or removed though publish did
        not write them (or they changed since), unless ``overwrite``."""
        if self.overwrite:
            return
        theirs = sorted({r for r in [*replaced, *removed] if not self.ours(r)})
        if theirs:
            shown = ", ".join(theirs[:5]) + (f" and {len(theirs) - 5} more" if len(theirs) > 5 else "")
            raise PublishError(f"refusing to publish to local:{self.root}: {len(theirs)} file(s) there were not "
                               f"written by hopforge publish (or changed since) and would be replaced or removed: "
                               f"{shown}; pass --overwrite to replace them, or publish to another folder")

    def before(self, layout: dict[str, str], replaced: list[str], removed: list[str]) -> None:
        """The list while files are replaced and removed: the layout's unchanged files, what the
        replaced and removed paths hold now, and the replacements' hashes as ``pending``."""
        touched = {*replaced, *removed}
        now = {r: sha for r in touched if (sha := self.current(r)) is not None}
        self.write({**{r: h for r, h in layout.items() if r not in touched}, **now},
                   {r: layout[r] for r in replaced})

    def write(self, files: dict[str, str], pending: dict[str, str] | None = None) -> None:
        """Write the list (atomically); a list that would not change is left as it is."""
        body = json.dumps({"written_by": "hopforge publish", "files": dict(sorted(files.items())),
                           "pending": dict(sorted((pending or {}).items()))}, indent=1).encode("utf-8")
        path = self.root / OWNED_FILE
        if not (path.is_file() and path.read_bytes() == body):
            self.root.mkdir(parents=True, exist_ok=True)
            write_atomic(path, body)


__all__ = ["OWNED_FILE", "OwnedFiles", "check_outside_run", "sha256_file", "write_atomic"]
