"""Config machinery: the base of every section, the root model's keys, and YAML loading.

Each concern defines its own section (``synth/teacher/config.py``, ``filters/config.py``...)
from :class:`Section`; the composition root assembles them into one root model
(``flows/config.py``).  Loading is generic over that root: ``load_config(Root, path,
overrides)`` reads YAML, applies ``--set dotted.key=value`` overrides and validates, and any
unknown key or bad value raises :class:`ConfigError`, whose message names the key.

Relative input paths (the config file itself, and the fields the root lists in ``path_fields``)
are looked for in the current directory, then in the project root (:func:`project_path`), so
every command works from any directory.  Content keys hash such a field as it was written.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import reprlib
from pathlib import Path
from types import UnionType
from typing import Any, ClassVar, Iterable, Literal, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator

from synth.engine.errors import not_a_file

log = logging.getLogger("hopforge")


def project_root() -> Path | None:
    """The project's folder (the one that holds ``configs/`` beside the packages), found from where this
    module lives; None for an install without it."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "configs").is_dir() else None


def project_path(path: str | Path) -> Path:
    """Where an input path is: as given when absolute or present relative to the current directory,
    else under the project root when it is there, else as given (so its error names what was written)."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists():
        return p
    root = project_root()
    if root is not None and str(p) not in ("", ".") and (root / p).exists():
        return root / p
    return p


class ConfigError(ValueError):
    """A config file, key or value is wrong.  The message names the key; ``key`` is it (dotted) where one key is
    at fault, and ``override`` the ``dotted.key=value`` override that set it (None: the file, or the defaults),
    so the error is told as the user's ``--set`` rather than the config file's."""

    def __init__(self, message: str, key: str | None = None, override: str | None = None, names_file: bool = False):
        super().__init__(message)
        self.key, self.override, self.names_file = key, override, names_file  # names_file: the message names it

    def told(self, config: str | None, via: str = "cli") -> str:
        """The message said as where the fault lies: ``--set ITEM: ...`` (``config override 'ITEM': ...`` under the
        flow, whose overrides are a parameter) for an override's, ``config FILE: ...`` for the file's."""
        if self.override is not None:
            item = self.override if len(self.override) <= MAX_ERROR_VALUE_CHARS else \
                f"{self.override[:MAX_ERROR_VALUE_CHARS - 40]}...{self.override[-37:]}"  # a huge one, bounded
            return f"--set {item}: {self}" if via == "cli" else f"config override {item!r}: {self}"
        return str(self) if self.names_file else f"config {config or '<defaults>'}: {self}"


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, values are validated on assignment,
    and a boolean is never taken for a number (``walk.hops: true`` is not 1 hop)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_number(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, bool):
            types = _leaf_types(cls.model_fields[info.field_name].annotation)
            if types & {int, float} and bool not in types:
                raise ValueError("expected a number, got a boolean")
        return v


def _leaf_types(ann: Any) -> set:
    """The plain types an annotation allows (``int | None`` -> {int, NoneType})."""
    args = get_args(ann)
    if not args:
        return {ann}
    out: set = set()
    for a in args:
        out |= _leaf_types(a)
    return out


MAX_OVERRIDE_CHARS = 10_000
MAX_ERROR_VALUE_CHARS = 200


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without anchors and aliases: an override is one value, and aliases let a few hundred
    bytes expand into gigabytes (a 'billion laughs')."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("anchors and aliases are not allowed in an override")
        return super().compose_node(parent, index)


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = MAX_ERROR_VALUE_CHARS


def cpu_workers(requested: int) -> int:
    """``runner.cpu_workers`` as a process count: 0 means one per core this process may use (its CPU
    affinity, e.g. a container's or ``taskset``'s share, not every core of the machine)."""
    if requested > 0:
        return requested
    count = getattr(os, "process_cpu_count", None)  # Python 3.13+
    if count is not None:
        return max(1, count() or 1)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def machine_memory() -> int:
    """Bytes of memory this process may use: the machine's physical memory, or its cgroup's limit (a container's)
    when that is lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def _short(value: Any) -> str:
    """A bounded repr of a bad value, for error messages (never the whole of a huge value)."""
    return _REPR.repr(value)[:MAX_ERROR_VALUE_CHARS]


def operational(description: str, default: Any = ..., **kw: Any) -> Any:
    """A config field that does not change a stage's output (kept out of content keys)."""
    return Field(default, description=description, json_schema_extra={"operational": True}, **kw)


class RunnerConfig(Section):
    """How the stage runner spreads shards and what it accepts (``runner:``, once ``synth:``): all
    operational."""

    task_runner: Literal["threads", "dask", "ray"] = operational(
        "Where the Prefect flow runs shard tasks: `threads` (this process), `dask` (prefect-dask: a local "
        "cluster, or `dask_address`), or `ray` (prefect-ray, installed separately).", "threads")
    dask_address: str | None = operational("Scheduler address of an existing Dask cluster; None: start a local one.", None)
    dask_workers: int = operational("Workers of the local Dask cluster.", 2, ge=1)
    shard_workers: int = operational(
        "Shards run at once (threads) by `hopforge run` and the threads runner; a stage whose shards are CPU-bound "
        "Python (questions) runs them in `cpu_workers` processes instead.", 4, ge=1)
    cpu_workers: int = operational(
        "Worker processes for the CPU-bound Python of the filter, assemble and report stages and the questions "
        "stage's validators (`synth/engine/workers.py`): 0: one per core this process may use; 1: no worker "
        "processes, everything in this process.  Under the Prefect flow with `task_runner: dask` the Dask "
        "cluster's workers do this work instead.  The tables are the same whatever the count.", 0, ge=0)
    allow_empty: bool = operational(
        "Commit (and reuse) a stage whose output is empty: its input was empty, every item was dropped, or some "
        "were dropped and the teacher calls of the rest failed.  By default that stops the run with one line "
        "(exit 1): a broken prompt, endpoint or corpus must not become a finished, empty stage that later runs "
        "reuse and the stages after it 'run' on.  A stage that has nothing to do by its configuration "
        "(expand.num_subgraphs 0, rl.band_by teacher for rl_band, a pretrained tokenizer, questions.splits.eval "
        "0 for eval) is not empty in this sense.", False)
    max_failed_fraction: float = operational(
        "The share of a stage's items whose teacher call failed (a transport or server error, not a drop) above "
        "which the stage stops the run. Failed items are never committed as output; what succeeded is, and the "
        "next plain run retries exactly the failed items (the rest are call-cache hits).", 0.02, ge=0.0, le=1.0)


class RootConfig(Section):
    """Base of the root model: dotted access, input paths, and the content-key hash of sections."""

    # Dotted fields that hold input paths (a string or a list of strings), resolved by resolve_paths().
    path_fields: ClassVar[tuple[str, ...]] = ()
    # Sections renamed since a release: old name -> new.  The old name keeps working, with a warning.
    renamed_sections: ClassVar[dict[str, str]] = {}

    seed: int = Field(0, description="Run seed; every random choice derives from (seed, stage, record id).")

    _as_written: dict[str, Any] = PrivateAttr(default_factory=dict)

    def resolve_paths(self) -> None:
        """Point every relative path of ``path_fields`` that is not under the current directory at the
        project root, where it is there (:func:`project_path`); the values as written still key the stages."""
        for dotted in self.path_fields:
            value = self.get(dotted)
            if isinstance(value, str):
                new: Any = _located(value)
            elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                new = [_located(v) for v in value]
            else:
                continue
            if new != value:
                self._as_written.setdefault(dotted, value)
                *parents, leaf = dotted.split(".")
                node: Any = self
                for part in parents:
                    node = getattr(node, part)
                setattr(node, leaf, new)

    def get(self, dotted: str) -> Any:
        """The value at a dotted path, e.g. ``walk.hops``."""
        node: Any = self
        for part in dotted.split("."):
            node = getattr(node, part)
        return node

    def section_hash(self, *names: str) -> str:
        """Stable hash of the named sections or dotted fields (and the seed), used in stage content keys.

        Fields marked ``operational`` (concurrency, memory limits, batch sizes) change how a
        stage runs, not what it writes, so they are left out.
        """
        payload = {n: self._written(n) for n in names}
        payload["seed"] = self.seed
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]

    def _written(self, name: str) -> Any:
        """The dump of ``name`` with the paths :meth:`resolve_paths` moved put back as they were written, so a
        stage's key does not depend on the directory a command ran from."""
        out = _dump(self.get(name))
        for dotted, value in self._as_written.items():
            if dotted == name:
                out = value
            elif dotted.startswith(name + ".") and isinstance(out, dict):
                *parents, leaf = dotted[len(name) + 1:].split(".")
                node = out
                for part in parents:
                    node = node[part]
                node[leaf] = value
        return out


class UndeclaredConfig(RuntimeError):
    """A stage read a config field its ``Stage.sections`` do not declare: the field would change its output
    without changing its content key, so a later run could reuse an output made under other settings.
    (Not an AttributeError: ``getattr(x, name, default)`` must not swallow it.)"""


def _is_operational(model: Any, name: str) -> bool:
    field = type(model).model_fields.get(name) if isinstance(model, BaseModel) else None
    extra = field.json_schema_extra if field is not None and isinstance(field.json_schema_extra, dict) else {}
    return bool(extra.get("operational"))


class ConfigView:
    """What a stage sees of the config (``ctx.cfg``): the sections and dotted fields it declares (the ones its
    content key hashes), the ``seed``, and every ``operational`` field; reading anything else raises
    :class:`UndeclaredConfig`, naming the stage and the field.

    A declared section is handed out as the config's own (pydantic) object; a section the stage declares only
    part of (``filters.min_f1``), or only operational fields of (``runner``), is another view.  The view is
    read-only; ``model_copy`` and ``model_dump`` are refused on a part of the config not wholly declared, since
    they read every field.
    """

    __slots__ = ("_node", "_declared", "_stage", "_path")

    def __init__(self, node: Any, declared: Iterable[str], stage: str, path: str = ""):
        object.__setattr__(self, "_node", node)
        object.__setattr__(self, "_declared", frozenset(declared))
        object.__setattr__(self, "_stage", stage)
        object.__setattr__(self, "_path", path)

    def _covered(self, dotted: str) -> bool:
        return dotted == "seed" or any(dotted == d or dotted.startswith(d + ".") for d in self._declared)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        node = self._node
        dotted = f"{self._path}.{name}" if self._path else name
        if name not in type(node).model_fields:  # a method of the model (``get`` is the view's own)
            raise UndeclaredConfig(
                f"stage {self._stage!r} calls `{dotted}` on config it declares only in part; declare "
                f"`{self._path or 'the whole config'}` in its Stage's sections (flows/stages.py) or read fields one "
                "by one")
        value = getattr(node, name)
        if self._covered(dotted) or _is_operational(node, name):
            return value
        if isinstance(value, BaseModel):
            return ConfigView(value, self._declared, self._stage, dotted)
        raise UndeclaredConfig(
            f"stage {self._stage!r} reads config `{dotted}`, which its Stage does not declare: add "
            f"{dotted!r} (or its section) to the stage's sections in flows/stages.py, so that its content key "
            "changes with it")

    def get(self, dotted: str) -> Any:
        """The value at a dotted path, e.g. ``walk.hops`` (checked as attribute reads are)."""
        node: Any = self
        for part in dotted.split("."):
            node = getattr(node, part)
        return node

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"stage {self._stage!r}: the config is read-only (tried to set {name!r})")

    def __reduce__(self):
        return (ConfigView, (self._node, tuple(sorted(self._declared)), self._stage, self._path))

    def __repr__(self) -> str:
        return f"ConfigView({self._stage!r}, {self._path or 'config'}: {', '.join(sorted(self._declared))})"


def unwrap(cfg: Any) -> Any:
    """The config object under a :class:`ConfigView` (the view itself for anything else)."""
    return object.__getattribute__(cfg, "_node") if isinstance(cfg, ConfigView) else cfg


def _located(value: str) -> str:
    p = project_path(value)
    return str(p) if p != Path(value).expanduser() else value


M = TypeVar("M", bound=BaseModel)


def _dump(v: Any) -> Any:
    if isinstance(v, BaseModel):
        out = {}
        for name, f in type(v).model_fields.items():
            extra = f.json_schema_extra if isinstance(f.json_schema_extra, dict) else {}
            if extra.get("operational"):
                continue
            out[name] = _dump(getattr(v, name))
        return out
    if isinstance(v, list):
        return [_dump(x) for x in v]
    return v


def _allowed_keys(model: type[BaseModel]) -> list[str]:
    return sorted(model.model_fields)


def _model_at(root: type[BaseModel], path: list[str]) -> type[BaseModel] | None:
    """The section model that a dotted path prefix lands on, or None for a scalar."""
    model: type[BaseModel] = root
    for part in path:
        field = model.model_fields.get(part)
        if field is None:
            return None
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        else:
            return None
    return model


def _check_keys(data: Any, model: type[BaseModel], prefix: str) -> None:
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping, got {type(data).__name__}", key=prefix or None)
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        field = model.model_fields.get(key)
        if field is None:
            raise ConfigError(
                f"unknown config key '{dotted}' (allowed under '{prefix or '<root>'}': {', '.join(_allowed_keys(model))})",
                key=dotted)
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel) and value is not None:
            _check_keys(value, ann, dotted)


def parse_override(item: str, verbatim: bool = False) -> tuple[list[str], Any]:
    """Split ``a.b=c`` into (['a', 'b'], value).  The value is parsed as YAML (ints, bools, lists...),
    unless ``verbatim`` (a text field: a path stays the path, whatever it looks like)."""
    if "=" not in item:
        raise ConfigError(f"bad override {_short(item)}: expected dotted.key=value")
    if len(item) > MAX_OVERRIDE_CHARS:
        raise ConfigError(f"override {_short(item)} is {len(item):,} characters long (at most {MAX_OVERRIDE_CHARS:,})")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not p for p in key.split(".")):
        raise ConfigError(f"bad override {_short(item)}: empty key")
    if verbatim:
        return key.split("."), None if raw.strip() in ("null", "~") else raw
    try:
        value = yaml.load(raw, Loader=_NoAliasLoader) if raw.strip() else ""
    except yaml.YAMLError as e:
        if "alias" in str(e):
            raise ConfigError(f"override {_short(item)}: {e}") from None
        value = raw
    return key.split("."), value


def _text_field(root: type[BaseModel], path: list[str]) -> bool:
    """Whether the field at ``path`` holds text (``str`` or ``str | None``), so its value is taken verbatim."""
    model = _model_at(root, path[:-1]) if len(path) > 1 else root
    field = model.model_fields.get(path[-1]) if model is not None else None
    if field is None:
        return False
    ann = field.annotation
    return ann is str or (get_origin(ann) in (Union, UnionType) and set(get_args(ann)) == {str, type(None)})


def _renamed(root: type[BaseModel]) -> dict[str, str]:
    return getattr(root, "renamed_sections", {}) if isinstance(root, type) and issubclass(root, RootConfig) else {}


def rename_sections(root: type[BaseModel], data: dict, where: str = "config") -> dict:
    """Move sections written under an old name (``synth:``) to their new one (``runner:``), warning once per
    section with the new key; both names in one mapping is an error."""
    for old, new in _renamed(root).items():
        if old not in data:
            continue
        if new in data:
            raise ConfigError(f"{where}: both '{old}:' and '{new}:' are set; '{old}' is the old name of '{new}', "
                              f"keep only '{new}:'")
        log.warning("%s: config section '%s:' is deprecated, it is now '%s:' (%s)", where, old, new,
                    ", ".join(f"{old}.{k} -> {new}.{k}" for k in (data[old] or {})) or "rename the section")
        data = {(new if k == old else k): v for k, v in data.items()}
    return data


def apply_overrides(root: type[BaseModel], data: dict, overrides: list[str]) -> dict:
    """Apply ``dotted.key=value`` overrides to a raw config mapping, checking each key exists.  A key under a
    renamed section (``synth.shard_workers``) sets the new one (``runner.shard_workers``), with a warning."""
    for item in overrides:
        try:
            data = _apply_override(root, data, item)
        except ConfigError as e:
            e.override = item if e.override is None else e.override
            raise
    return data


def _override_key(root: type[BaseModel], item: str) -> str:
    """The dotted key an override sets, under a renamed section's new name."""
    key = item.split("=", 1)[0].strip()
    head = key.split(".", 1)
    renamed = _renamed(root)
    return f"{renamed[head[0]]}.{head[1]}" if len(head) == 2 and head[0] in renamed else key


def _set_by(root: type[BaseModel], key: str | None, overrides: list[str]) -> str | None:
    """The last override that set ``key`` (or a key inside it, or the section it is in), or None."""
    if not key:
        return None
    for item in reversed(overrides):
        k = _override_key(root, item)
        if k == key or key.startswith(k + ".") or k.startswith(key + "."):
            return item
    return None


def _apply_override(root: type[BaseModel], data: dict, item: str) -> dict:
    """Apply one ``dotted.key=value`` override to ``data`` (see :func:`apply_overrides`)."""
    renamed = _renamed(root)
    head = item.split("=", 1)[0].strip().split(".", 1)
    if len(head) == 2 and head[0] in renamed:
        new = f"{renamed[head[0]]}.{head[1]}"
        log.warning("--set %s.%s: the key is deprecated, it is now '%s'", head[0], head[1], new)
        item = new + item[item.index("="):] if "=" in item else new
    path, _ = parse_override(item, verbatim=True)
    path, value = parse_override(item, verbatim=_text_field(root, path))
    model: type[BaseModel] = root
    node = data
    for i, part in enumerate(path):
        dotted = ".".join(path[: i + 1])
        field = model.model_fields.get(part)
        if field is None:
            parent = ".".join(path[:i]) or "<root>"
            raise ConfigError(
                f"unknown config key '{dotted}' (allowed under '{parent}': {', '.join(_allowed_keys(model))})"
            )
        if i == len(path) - 1:
            node[part] = value
            break
        sub = _model_at(root, path[: i + 1])
        if sub is None:
            raise ConfigError(f"config key '{dotted}' is a value, not a section; cannot set '{'.'.join(path)}'")
        model = sub
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    return data


def config_from_dict(root: type[M], data: dict) -> M:
    """Validate a raw mapping into a :class:`Config`, turning pydantic errors into key-named ConfigErrors."""
    data = rename_sections(root, data)
    _check_keys(data, root, "")
    try:
        return root.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        if not err["loc"]:  # a rule across sections (a root validator): its message names the keys
            raise ConfigError(f"bad config: {err['msg'].removeprefix('Value error, ')}") from None
        key = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"bad value for config key '{key}': {err['msg']} (got {_short(err.get('input'))})",
                          key=key) from None


def load_config(root: type[M], path: str | Path | None, overrides: list[str] | None = None) -> M:
    """Load a YAML config (None: all defaults) and apply overrides."""
    data: dict = {}
    if path is not None:
        p = project_path(path)
        if (why := not_a_file(p)) is not None:
            if p.exists():  # a folder, a FIFO: the path is there, and is no file
                raise ConfigError(f"config file {p}: {why}", names_file=True)
            root = project_root()
            where = f" (looked in {Path.cwd()} and {root})" if root is not None and not p.is_absolute() else ""
            raise ConfigError(f"config file not found: {p}{where}", names_file=True)
        try:
            loaded = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {p} is not valid YAML: {e}", names_file=True) from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {p}: top level must be a mapping", names_file=True)
        data = rename_sections(root, loaded, str(p))
    overrides = list(overrides or [])
    data = apply_overrides(root, data, overrides)
    try:
        cfg = config_from_dict(root, data)
    except ConfigError as e:  # a value an override set is the override's fault, not the file's
        e.override = _set_by(root, e.key, overrides)
        raise
    if isinstance(cfg, RootConfig):
        cfg.resolve_paths()
    return cfg
