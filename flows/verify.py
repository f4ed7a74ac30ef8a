"""``hopforge verify DIR``: re-derive a run's stages in a scratch folder and compare them with DIR's.

A content key promises that a stage's output is a function of its code, its config and its inputs, so a
published dataset can be made again.  ``verify`` checks that promise for one run folder: it runs every
stage DIR's manifest lists, in pipeline order, into a scratch folder (a fresh folder of the same name, in
a temporary folder or under ``--scratch``), and compares each stage's outputs and report with the
committed ones in ``DIR/.stages/<stage>/<key>/`` by :mod:`synth.engine.sameness` (tables by their rows,
reports without run facts, artefacts by what they hold).  It also says whether each re-derived key is
the run's (a differing key means the code, the config given here or an input is not the run's, and
names which).

Teacher calls are answered from a copy of the run's call cache (``DIR/cache/teacher.sqlite``), so the
teacher stages cost no request for a call the run completed; ``--no-call-cache`` asks the teacher again
(the offline oracle then writes everything anew, which is how its own determinism is checked).

DIR is only read: ``verify`` writes nothing there, and holds a shared lock on ``DIR/.hopforge.lock``
while it reads, so no run can change DIR under it (and it refuses a DIR that a run holds).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from synth.engine.errors import DamagedFile, InputError
from synth.engine.sameness import DAMAGED, MISSING, Digest, Roots, canonical, figures, output_digest, read_json

REPORT_FILE = "_report.json"
FIGURES = "(report)"  # the output name of a stage's report figures in the summary
KEY = "(key)"  # the output name of a stage's content key, in the summary when it differs


def _digest_of(output: str) -> Callable[[Path, Roots], Digest]:
    """How an output is compared: by its concern's digest where its files are not all data, else by
    :func:`~synth.engine.sameness.output_digest` (tables by rows, JSON without run facts, files by bytes)."""
    if output == "index":
        from synth.tools.digest import index_digest

        return lambda path, roots: index_digest(path)
    if output == "report":
        from synth.report.digest import report_file_digest

        # The report names its run's folder: under the name that folder has (roots[0]), it is no data.
        return lambda path, roots: output_digest(
            path, lambda f, rel: report_file_digest(f, rel, Path(roots[0]).name if roots else ""), roots)
    per_file = None
    if output == "student":
        from sft.digest import student_file_digest as per_file
    return lambda path, roots: output_digest(path, per_file, roots)


@dataclass
class Line:
    """One output of one stage, as committed in the run and as re-derived."""

    stage: str
    output: str
    run: Digest
    again: Digest
    detail: str = ""

    @property
    def damaged(self) -> bool:
        """Whether a file of this output cannot be read (in the run, or re-derived): ``detail`` names it."""
        return DAMAGED in (self.run, self.again)

    @property
    def equal(self) -> bool:
        return not self.damaged and self.run == self.again

    @property
    def verdict(self) -> str:
        return "DAMAGED" if self.damaged else "equal" if self.equal else "DIFFERS"


@dataclass
class Verdict:
    """What ``verify`` found: a line per output, keys that differ, a stage that could not be re-derived."""

    run: Path
    lines: list[Line] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)  # stage -> why its re-derived key is not the run's
    error: tuple[str, str] | None = None  # (stage, message) of a stage that failed to run
    teacher_calls: int = 0  # requests the re-derivation sent (the call cache had no answer)
    stages: list[str] = field(default_factory=list)
    scratch: Path | None = None  # the scratch folder, when it was kept

    @property
    def equal(self) -> bool:
        return self.error is None and not self.keys and all(line.equal for line in self.lines)

    def differing(self) -> list[Line]:
        return [line for line in self.lines if not line.equal]

    def rows(self) -> list[list[Any]]:
        """The summary table: stage, output, what the run holds, what was re-derived, the verdict, why."""
        out = [[line.stage, line.output, _shown(line.run), _shown(line.again), line.verdict, line.detail]
               for line in self.lines]
        if self.error is not None:
            out.append([self.error[0], "-", "-", "-", "ERROR", self.error[1]])
        return out


COLUMNS = ["stage", "output", "run", "re-derived", "verdict", "detail"]


def _shown(d: Digest) -> str:
    """A digest in the summary: what it holds and its first hex digits ("197 rows 3fa2c1d0", "json 0b9e2a71")."""
    return f"{d.describe()} {d.sha[:8]}" if d.sha else d.describe()


def check_run_folder(run: Path) -> dict:
    """DIR's manifest, or :class:`InputError` in one line when DIR is no run folder."""
    run = Path(run)
    if not run.exists():
        raise InputError(f"verify: {run} does not exist")
    if not run.is_dir():
        raise InputError(f"verify: {run} is a file, not a run folder")
    path = run / "manifest.json"
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"verify: {run} is not a hopforge run folder (no manifest.json): make one with "
                         f"`hopforge run --out {run}`") from None
    except (OSError, ValueError) as e:
        raise InputError(f"verify: {path} cannot be read as a manifest: {e}") from None
    stages = manifest.get("stages") if isinstance(manifest, dict) else None
    if not isinstance(stages, dict) or not stages or not all(isinstance(e, dict) and e.get("key")
                                                             for e in stages.values()):
        raise InputError(f"verify: {path} lists no committed stage: run a stage into {run} first")
    return manifest


@contextmanager
def reading(run: Path) -> Iterator[None]:
    """Hold a shared lock on DIR's run lock while DIR is read: a run (which takes it exclusively) cannot
    start meanwhile, and a run that holds it makes this raise :class:`InputError`.  The lock file is opened
    read-only and nothing in DIR is written."""
    lock = Path(run) / ".hopforge.lock"
    try:
        fd = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:  # a folder no run has locked (made by hand, or copied without its lock file)
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise InputError(f"verify: {run} is in use by a run: wait for it to finish, then verify it") from None
        yield
    finally:
        os.close(fd)


def _scratch_folder(run: Path, scratch: Path | None) -> tuple[Path, Path | None]:
    """The folder to re-derive into (named like DIR, so what a stage writes of its folder's name matches) and
    the temporary folder to remove afterwards (None: the user's ``--scratch``, kept)."""
    run = Path(run).resolve()
    if scratch is None:
        base = Path(tempfile.mkdtemp(prefix="hopforge-verify-"))
        return base / run.name, base
    scratch = Path(scratch).absolute()
    if scratch.resolve() == run or run in scratch.resolve().parents:
        raise InputError(f"verify: --scratch {scratch} lies inside {run}, which verify never writes to")
    target = scratch / run.name
    if target.exists() and any(target.iterdir()):
        raise InputError(f"verify: {target} is not empty: pass a new or empty --scratch folder")
    return target, None


def copy_call_cache(run: Path, work: Path) -> bool:
    """Copy DIR's call cache (the SQLite file and its write-ahead log) into the scratch folder; whether there
    was one.  Copying, not opening, leaves DIR's files as they are."""
    from synth.teacher.client import cache_path

    src = cache_path(run)
    if not src.is_file():
        return False
    dst = cache_path(work)
    dst.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal"):
        f = Path(str(src) + suffix)
        if f.is_file():
            shutil.copyfile(f, Path(str(dst) + suffix))
    return True


def _key_difference(parts: dict, entry: dict) -> str:
    """Which parts of a re-derived key differ from those the run's manifest recorded."""
    names = {"code": "code", "config": "config", "extra": "external files (source, tokenizer, benchmarks)",
             "content": "input tables", "version": "hopforge version"}
    why = [label for part, label in names.items() if parts.get(part) != entry.get(part)]
    base = {k: str(v).split("~")[0] for k, v in (parts.get("inputs") or {}).items()}  # "~": failed items' digest
    if base != {k: str(v).split("~")[0] for k, v in (entry.get("inputs") or {}).items()}:
        why.append("the keys of its inputs")
    return ", ".join(why) or "key"


def _readable(digest: Callable[[], Digest], base: Path, where: str, damage: list[str]) -> Digest:
    """``digest()``, or :data:`DAMAGED` when a file of it cannot be read (truncated, overwritten), whose name
    (relative to ``base``, the stage's folder) and why go to ``damage``, said as ``where`` it lies."""
    try:
        return digest()
    except DamagedFile as e:
        try:
            name = Path(e.path).relative_to(base).as_posix()
        except ValueError:
            name = e.path
        damage.append(f"{name} in {where} cannot be read ({e.why})")
        return DAMAGED


def _compare(stage, committed: Path, again: Path, roots: tuple[Roots, Roots]) -> list[Line]:
    """The lines of one stage: each output it declares (present in either folder), then its report's figures.
    ``roots`` are the run's folder and the scratch folder, as paths inside each are written.  An output a file
    of which cannot be read is a DAMAGED line naming the file; the stage's other outputs are compared still."""
    lines = []
    for out in stage.outputs:
        digest, damage = _digest_of(out), []
        a = _readable(lambda: digest(committed / out, roots[0]), committed, "the run", damage)
        b = _readable(lambda: digest(again / out, roots[1]), again, "the re-derived output", damage)
        if a is not MISSING or b is not MISSING:
            lines.append(Line(stage.name, out, a, b, "; ".join(damage) or _detail(a, b)))
    damage = []
    a = _readable(lambda: _figures_digest(committed / REPORT_FILE, roots[0], stage.name), committed, "the run", damage)
    b = _readable(lambda: _figures_digest(again / REPORT_FILE, roots[1], stage.name), again, "the re-derived output",
                  damage)
    if a is not MISSING or b is not MISSING:
        lines.append(Line(stage.name, FIGURES, a, b,
                          "; ".join(damage) or ("" if a == b else "its figures differ (run facts aside)")))
    return lines


def _figures_digest(path: Path, roots: Roots, stage: str = "") -> Digest:
    """A stage report's figures: without run facts, and without its key (keys are compared on their own);
    the report stage's without the explorer's bytes, which count the folder's name."""
    if not path.is_file():
        return MISSING
    report = read_json(path)
    if isinstance(report, dict):
        report.pop("key", None)
        if stage == "report":
            from synth.report.digest import report_figures

            report = report_figures(report)
    return Digest("json", hashlib.sha256(canonical(figures(report, roots))).hexdigest()[:20])


def roots_of(folder: Path) -> Roots:
    """How paths inside ``folder`` are written in what it holds: as the store writes its root (absolute), and
    resolved."""
    return tuple(dict.fromkeys((str(Path(folder).absolute()), str(Path(folder).resolve()))))


def _detail(a: Digest, b: Digest) -> str:
    """Why two digests differ, in words (empty when they do not)."""
    if a == b:
        return ""
    if a is MISSING or b is MISSING:
        return "only in the " + ("re-derived output" if a is MISSING else "run")
    if a.rows is not None and b.rows is not None and a.rows != b.rows:
        return f"{a.rows:,} rows in the run, {b.rows:,} re-derived"
    names = a.differing(b)
    if names:
        return "differs in " + ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return "same row count, other rows" if a.rows is not None else "other content"


@contextmanager
def _quiet(drawn: bool) -> Iterator[None]:
    """While verify's bar is drawn (a terminal), the stages' progress lines are left out: a log line written
    under a drawn bar would break it.  In a log file both are lines, and the stages' are kept."""
    import logging

    from synth.engine.progress import log

    if not drawn:
        yield
        return
    level = log.level
    log.setLevel(logging.WARNING)
    try:
        yield
    finally:
        log.setLevel(level)


def run_digests(run: Path, until: str | None = None) -> dict[tuple[str, str], Digest]:
    """The digest of every output and report figures of a run folder's committed stages, by (stage, output),
    in pipeline order: what two runs are compared by, without re-deriving anything."""
    from flows.stages import PIPELINE

    manifest = check_run_folder(run)
    roots = roots_of(run)
    out: dict[tuple[str, str], Digest] = {}
    with reading(run):
        for stage in PIPELINE.upto(until):
            entry = manifest["stages"].get(stage.name)
            if entry is None:
                continue
            committed = Path(run) / ".stages" / stage.name / entry["key"]
            out[(stage.name, KEY)] = Digest("key", entry["key"])
            for output in stage.outputs:
                d = _readable(lambda: _digest_of(output)(committed / output, roots), committed, "the run", [])
                if d is not MISSING:
                    out[(stage.name, output)] = d
            out[(stage.name, FIGURES)] = _readable(
                lambda: _figures_digest(committed / REPORT_FILE, roots, stage.name), committed, "the run", [])
    return out


def verify(run: Path, cfg: Any, scratch: Path | None = None, keep: bool = False, call_cache: bool = True,
           until: str | None = None, progress: bool | None = None) -> Verdict:
    """Re-derive the stages of the run in ``run`` with ``cfg`` and compare them (module docstring)."""
    from flows.stages import PIPELINE
    from synth.engine.errors import StageFailed
    from synth.engine.progress import Bar, interactive
    from synth.engine.store import MissingInput, Store

    run = Path(run)
    manifest = check_run_folder(run)
    names = [s.name for s in PIPELINE]
    if until is not None and until not in names:
        raise InputError(f"verify: --until: unknown stage '{until}' (stages: {', '.join(names)})")
    todo = [s for s in PIPELINE.upto(until) if s.name in manifest["stages"]]
    work, temporary = _scratch_folder(run, scratch)
    verdict = Verdict(run, stages=[s.name for s in todo])
    roots = (roots_of(run), roots_of(work))
    try:
        with reading(run):
            if call_cache:
                copy_call_cache(run, work)
            store = Store(work)
            # One bar, verify's own: the stages log their progress instead (two bars cannot be drawn at once).
            run_one = lambda s: PIPELINE.run_stage(s, cfg, store, progress=False)  # noqa: E731
            drawn = interactive() if progress is None else progress
            with Bar("verify", total=len(todo), unit="stages", enabled=drawn) as bar, _quiet(drawn), \
                    PIPELINE.start(cfg, store, run_one=run_one) as session:
                for stage in todo:
                    bar.set_postfix(stage.name)
                    entry = manifest["stages"][stage.name]
                    committed = run / ".stages" / stage.name / entry["key"]
                    if not committed.is_dir():
                        verdict.error = (stage.name, f"the run's committed output {committed} is missing")
                        break
                    try:
                        key, parts = PIPELINE.stage_key(stage, cfg, store)
                        outcome = session(stage)
                    except (StageFailed, MissingInput, InputError) as e:
                        verdict.error = (stage.name, str(e))
                        break
                    verdict.teacher_calls += outcome.teacher_calls
                    if key != entry["key"]:
                        verdict.keys[stage.name] = _key_difference(parts, entry)
                        verdict.lines.append(Line(stage.name, KEY, Digest("key", entry["key"]), Digest("key", key),
                                                  f"differs in: {verdict.keys[stage.name]}"))
                    verdict.lines += _compare(stage, committed, store.stage_dir(stage.name, key), roots)
                    bar.update(1)
    finally:
        if temporary is not None and not keep:
            shutil.rmtree(temporary, ignore_errors=True)
    verdict.scratch = work if temporary is None or keep else None
    return verdict


__all__ = ["COLUMNS", "Line", "Verdict", "check_run_folder", "copy_call_cache", "reading", "roots_of", "run_digests",
           "verify"]
