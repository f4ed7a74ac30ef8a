"""Errors a user can act on, as opposed to bugs.

The CLI prints each as one line: :class:`InputError` and the config and missing-input
errors exit 2 (the message names the record, field or setting); :class:`StageFailed`
exits 1 (the message says what outside hopforge failed and how to fix it).  Neither is
ever committed as a finished stage.  :class:`MachineError` (a full disk, a read-only folder, a
permission denied while a stage writes) exits 1 too: :func:`machine_error` finds one behind any
exception, naming the path and what was being written.  :func:`damaged_table` finds a Parquet
file hopforge cannot read (truncated, overwritten) behind an exception and names it, and the stage
that wrote it.
"""

from __future__ import annotations

import errno as _errno
import os as _os
import re as _re
from pathlib import Path as _Path


class InputError(ValueError):
    """Bad input data, e.g. a malformed line in strict mode (``line N: why``)."""


class StageFailed(RuntimeError):
    """A stage cannot finish for a reason outside its code: the teacher's endpoint is down or
    rejects the key, or every item failed.  Finished shards are kept for the rerun."""


# ---- errors of the machine ----------------------------------------------------------------------

# errno -> (what the machine said, what the user can do)
MACHINE_ERRNOS: dict[int, tuple[str, str]] = {
    _errno.ENOSPC: ("no space left on device", "free some space (or use --out on a bigger disk)"),
    _errno.EDQUOT: ("disk quota exceeded", "free some space (or use --out on another disk)"),
    _errno.EROFS: ("read-only file system", "make the folder writable (or use --out elsewhere)"),
    _errno.EACCES: ("permission denied", "make the folder writable for this user (or use --out elsewhere)"),
    _errno.EPERM: ("operation not permitted", "make the folder writable for this user (or use --out elsewhere)"),
}
# Locals that hold the file being written, in the frames of hopforge's own code, most telling first.
_PATH_LOCALS = ("path", "dest", "final", "partial", "tmp", "target", "folder")
_PROJECT = _Path(__file__).resolve().parents[2]


class MachineError(RuntimeError):
    """The machine refused a write: the disk is full, the folder is read-only, or permission is denied.
    One line names the path and what was being written; finished stages and shards stay as they were,
    so the same command resumes once the cause is fixed."""

    def __init__(self, code: int, path: str | None, what: str | None = None):
        self.errno, self.path, self.what = code, path, what
        reason, fix = MACHINE_ERRNOS[code]
        verb = "cannot access" if code in (_errno.EACCES, _errno.EPERM) else "cannot write"  # a read, maybe
        where = f"{verb} {path}" if path else verb
        super().__init__(f"{where}{f' ({what})' if what else ''}: {reason} [Errno {code}]; finished stages and "
                         f"shards are kept: {fix}, then run the same command again to resume")


def _chain(exc: BaseException):
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)


def _path_from_frames(exc: BaseException) -> str | None:
    """The file hopforge's innermost frame was writing when ``exc`` was raised (a local such as ``path``)."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        try:
            inside = _Path(frame.f_code.co_filename).resolve().is_relative_to(_PROJECT) and \
                ".venv" not in frame.f_code.co_filename
        except (OSError, ValueError):
            inside = False
        if not inside:
            continue
        for name in _PATH_LOCALS:
            value = frame.f_locals.get(name)
            if isinstance(value, _os.PathLike) or (isinstance(value, str) and _os.sep in value):
                return str(value)
    return None


def _what(path: str) -> str | None:
    """``stage S, table T`` for a file of a stage's output (``DIR/.stages/S/KEY[.partial]/T/...``)."""
    parts = _Path(path).parts
    if ".stages" not in parts:
        return None
    i = parts.index(".stages")
    if len(parts) <= i + 1:
        return None
    stage, rest = parts[i + 1], [p for p in parts[i + 3:-1] if not p.startswith(".")]
    return f"stage {stage}" + (f", table {'/'.join(rest)}" if rest else "")


def machine_error(exc: BaseException, where: str | _os.PathLike | None = None) -> MachineError | None:
    """The :class:`MachineError` behind ``exc`` (itself, or an ``OSError`` with one of
    :data:`MACHINE_ERRNOS` anywhere in its chain), else None.  The path is the error's own filename,
    else the file hopforge was writing, else ``where`` (the output folder)."""
    for e in _chain(exc):
        if isinstance(e, MachineError):
            return e
        if isinstance(e, OSError) and e.errno in MACHINE_ERRNOS:
            path = next((p for p in (e.filename, _path_from_frames(e), e.filename2)
                         if isinstance(p, (str, bytes, _os.PathLike))), None)
            if path is None:
                return MachineError(e.errno, f"under {where}" if where is not None else None)
            path = _os.fsdecode(path)
            return MachineError(e.errno, path, _what(path))
    return None


# ---- what is wrong with a path or a text the user gave ----------------------------------------------

def not_a_file(path: str | _os.PathLike) -> str | None:
    """Why ``path`` cannot be read as a file, in words ("no such file", "a folder, not a file", "a FIFO (named
    pipe), not a regular file"...), or None when it is a regular file (or a link to one)."""
    import stat as _stat

    try:
        mode = _os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except NotADirectoryError:
        return "no such file (a folder on its path is a file)"
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if _stat.S_ISDIR(mode):
        return "a folder, not a file"
    if _stat.S_ISFIFO(mode):
        return "a FIFO (named pipe), not a regular file"
    if _stat.S_ISSOCK(mode):
        return "a socket, not a regular file"
    if _stat.S_ISCHR(mode) or _stat.S_ISBLK(mode):
        return "a device, not a regular file"
    return None


def json_problem(e: ValueError, at: str = "column") -> str:
    """A JSON parse error in words, its position included: ``json``'s ``msg`` alone stops mid-phrase ("Invalid
    control character at").  ``at``: "column" (of ``e.lineno``) or "character" (``e.pos``)."""
    msg = getattr(e, "msg", None)
    if msg is None:
        return str(e)
    where = f"column {e.colno}" if at == "column" else f"character {e.pos}"
    return f"{msg} {where}" if msg.endswith(" at") else f"{msg} at {where}"


_PARQUET_PATH = _re.compile(r"'([^']+\.parquet)'")


class DamagedFile(InputError):
    """A file hopforge wrote that can no longer be read as what it is (a truncated or overwritten Parquet file, a
    report that is no JSON): one line names the file (``path``), why it cannot be read (``why``) and the stage
    whose rerun restores it."""

    def __init__(self, path: str | _os.PathLike, why: str, kind: str = "Parquet file"):
        self.path, self.why = str(path), why
        what = _what(_os.path.realpath(path))
        fix = f"it belongs to {what}: run that stage again with --force" if what else "restore or remove it"
        super().__init__(f"{path}: cannot read this {kind} ({why}); {fix}")


def first_sentence(message: str) -> str:
    """The first sentence of an error message (Arrow's add a second one of advice: "Either the file is ...")."""
    return message.strip().split(". ")[0].rstrip(".") or message.strip()


def damaged_table(exc: BaseException) -> InputError | None:
    """A :class:`DamagedFile` naming the Parquet file behind ``exc`` that Arrow could not read (a truncated or
    overwritten file: no footer, bad magic bytes), and the stage that wrote it; None for any other error."""
    for e in _chain(exc):
        if isinstance(e, DamagedFile):
            return e
        if not type(e).__module__.startswith("pyarrow") or "Parquet" not in str(e):
            continue
        m = _PARQUET_PATH.search(str(e))
        if m is None:
            continue
        path = m.group(1)
        return DamagedFile(path, first_sentence(str(e).split(f"'{path}'", 1)[1].strip(": ")) or str(e).strip())
    return None
