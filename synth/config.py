"""Typed configuration: one pydantic model per stage, loaded from YAML.

Every field is documented once, here.  ``load_config`` reads a YAML file and
applies ``--set dotted.key=value`` overrides; any unknown key or bad value
raises :class:`ConfigError`, whose message names the key (the CLI exits 2).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator


from .config_base import ConfigError, Section, operational  # noqa: E402  (re-exported)
from .teacher_config import TeacherConfig  # noqa: E402
from .tools_config import ToolsConfig  # noqa: E402
from .publish_config import PublishConfig  # noqa: E402
from .assemble_config import AssembleConfig  # noqa: E402
from filters.config import FiltersConfig  # noqa: E402


class CorpusConfig(Section):
    source: str | None = Field(
        None,
        description="KILT source for `hopforge run`: a JSONL file (plain/.gz/.bz2), a folder or file "
        "in the Hugging Face layout (Parquet/JSONL), `hf:facebook/kilt_wikipedia`, or `demo` "
        "(the embedded demo corpus, built under DIR/source/ when missing).",
    )
    strict: bool = Field(False, description="Stop at the first bad line (exit 2) instead of skipping it.")
    hf_config: str = Field("2019-08-01", description="Config name for an `hf:` source.")
    hf_split: str = Field("full", description="Split for an `hf:` source.")
    batch_mb: int = operational("Bytes read per parse block, in MiB (bounds memory).", 16, ge=1, le=1024)
    max_pages: int | None = Field(None, ge=1, description="Stop after this many pages (for trial runs).")


class GraphConfig(Section):
    memory_limit: str = operational("DuckDB memory limit for building the edge list (spills past it).", "2GB")


class WalkConfig(Section):
    hops: int = Field(8, ge=1, le=64, description="Hops per walk; a walk has hops+1 pages.")
    num_walks: int = Field(1000, ge=1, description="Number of walks to emit.")
    max_in_degree: int | None = Field(
        None, ge=1, description="Pages with more in-links than this (hubs) are never visited. None: no limit."
    )
    exclude_patterns: list[str] = Field(
        default_factory=lambda: [r"^\d{1,4}(s| BC| AD)?$", r"^List of ", r"^Lists of ", r"\(disambiguation\)$"],
        description="Regular expressions; pages whose title matches any are never visited (dates, lists).",
    )
    chordless: bool = Field(True, description="Reject paths with a shortcut edge v_i -> v_j, j > i+1.")
    max_attempts: int = Field(
        4, ge=1, le=1000, description="Attempts per walk slot: a dead end restarts the walk from a new start page."
    )
    incremental: bool = Field(
        False, description="Keep existing walks whose pages and edges still exist; only add new ones."
    )

    @field_validator("exclude_patterns")
    @classmethod
    def _patterns_compile(cls, v: list[str]) -> list[str]:
        import re

        for p in v:
            try:
                re.compile(p)
            except re.error as e:  # pragma: no cover - message path tested via ConfigError
                raise ValueError(f"bad regular expression {p!r}: {e}") from e
        return v


class ExpandConfig(Section):
    num_subgraphs: int = Field(100, ge=0, description="Number of subgraphs to expand (0 disables the stage).")
    budget: int = Field(12, ge=2, le=256, description="K: pages per subgraph (OpenSeeker-v2 graph expansion).")
    max_attempts: int = Field(4, ge=1, le=1000, description="Seeds tried per subgraph slot before giving up.")


class QuestionsConfig(Section):
    from_walks: bool = Field(True, description="Write one question per walk (through every entity of the path).")
    from_subgraphs: bool = Field(True, description="Also write one question per expanded subgraph, when `subgraphs` exists.")
    min_subgraph_hops: int = Field(3, ge=1, description="A subgraph question must chain at least this many links.")
    min_words: int = Field(8, ge=1, description="Shorter questions are dropped (`length`).")
    max_words: int = Field(220, ge=1, description="Longer questions are dropped (`length`); also told to the teacher.")
    obfuscate: bool = Field(False, description="Rewrite pass that blurs entity names into descriptions (WebSailor/ASearcher).")
    check_closed_book: bool = Field(False, description="Drop a question the teacher answers without tools (`too_easy`).")
    check_solvable: bool = Field(False, description="Drop a question the teacher fails with the gold pages in context (`unsolvable`).")
    shard_size: int = operational("Sources per shard (a unit of work for a flow task, and of resume).", 256, ge=1)
    check_shortcut: bool = Field(True, description="Drop a question when one search for its text returns the answer page in the top `shortcut_k` (`shortcut`).")
    shortcut_k: int = Field(5, ge=1, le=100, description="Depth of the shortcut search.")


class RolloutConfig(Section):
    n: int = Field(4, ge=1, le=64, description="Samples (trajectories) per question, each with its own sample index.")
    max_turns: int = Field(40, ge=1, description="Assistant turns before a trajectory stops (`max_turns`).")
    max_tokens: int = Field(
        65536, ge=256, description="Context tokens (prompt + completion of the latest call) before it stops (`max_tokens`)."
    )
    compress_observations: bool = Field(
        False, description="Keep only the latest tool observation in full in the teacher's context; "
        "stored traces always keep every observation."
    )
    max_questions: int | None = Field(None, ge=1, description="Roll out only the first N questions (trial runs).")
    shard_size: int = operational("Questions per shard (a unit of work for a flow task, and of resume).", 32, ge=1)


class SynthConfig(Section):
    task_runner: Literal["threads", "dask", "ray"] = operational(
        "Where the Prefect flow runs shard tasks: `threads` (this process), `dask` (prefect-dask: a local "
        "cluster, or `dask_address`), or `ray` (prefect-ray, installed separately).", "threads")
    dask_address: str | None = operational("Scheduler address of an existing Dask cluster; None: start a local one.", None)
    dask_workers: int = operational("Workers of the local Dask cluster.", 2, ge=1)
    shard_workers: int = operational("Shards run at once (threads) by `hopforge run` and the threads runner.", 4, ge=1)


class SFTStageConfig(Section):
    config: str = Field("configs/sft/tiny.yaml", description="SFT recipe of the `sft` stage (TRL-style YAML: "
                        "sft/train.py arguments, trl SFTConfig, trl ModelConfig).")
    overrides: list[str] = Field(default_factory=list, description="key=value overrides of the recipe, e.g. max_steps=20.")


class EvalConfig(Section):
    n: int = Field(1, ge=1, le=64, description="Trajectories per held-out question.")
    max_turns: int = Field(8, ge=1, description="Assistant turns per trajectory (the student's budget).")
    max_new_tokens: int = Field(160, ge=1, description="Tokens the student may generate per turn.")
    temperature: float = Field(0.0, ge=0, le=2, description="0: greedy decoding.")
    max_questions: int | None = Field(None, ge=1, description="Evaluate at most this many held-out questions.")


class Config(Section):
    """The whole run.  Sections are stage configs; `seed` drives every random choice."""

    seed: int = Field(0, description="Run seed; every random choice derives from (seed, stage, record id).")
    tokenizer: str = Field(
        "demo", min_length=1,
        description="The one tokenizer every token count uses: `demo` (a byte-level BPE trained on the corpus, "
        "offline), a local folder, or a Hub id (loaded with transformers.AutoTokenizer; name the student's).")
    corpus: CorpusConfig = Field(default_factory=CorpusConfig)
    graph: GraphConfig = Field(default_factory=GraphConfig)
    walk: WalkConfig = Field(default_factory=WalkConfig)
    expand: ExpandConfig = Field(default_factory=ExpandConfig)
    teacher: TeacherConfig = Field(default_factory=TeacherConfig)
    questions: QuestionsConfig = Field(default_factory=QuestionsConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    filters: FiltersConfig = Field(default_factory=FiltersConfig)
    assemble: AssembleConfig = Field(default_factory=AssembleConfig)
    synth: SynthConfig = Field(default_factory=SynthConfig)
    publish: PublishConfig = Field(default_factory=PublishConfig)
    sft: SFTStageConfig = Field(default_factory=SFTStageConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)

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
        payload = {n: _dump(self.get(n)) for n in names}
        payload["seed"] = self.seed
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


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


def _model_at(path: list[str]) -> type[BaseModel] | None:
    """The section model that a dotted path prefix lands on, or None for a scalar."""
    model: type[BaseModel] = Config
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
        raise ConfigError(f"{prefix or 'config'}: expected a mapping, got {type(data).__name__}")
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        field = model.model_fields.get(key)
        if field is None:
            raise ConfigError(
                f"unknown config key '{dotted}' (allowed under '{prefix or '<root>'}': {', '.join(_allowed_keys(model))})"
            )
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel) and value is not None:
            _check_keys(value, ann, dotted)


def parse_override(item: str) -> tuple[list[str], Any]:
    """Split ``a.b=c`` into (['a', 'b'], value); the value is parsed as YAML (ints, bools, lists...)."""
    if "=" not in item:
        raise ConfigError(f"bad override '{item}': expected dotted.key=value")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not p for p in key.split(".")):
        raise ConfigError(f"bad override '{item}': empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply ``dotted.key=value`` overrides to a raw config mapping, checking each key exists."""
    for item in overrides:
        path, value = parse_override(item)
        model: type[BaseModel] = Config
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
            sub = _model_at(path[: i + 1])
            if sub is None:
                raise ConfigError(f"config key '{dotted}' is a value, not a section; cannot set '{'.'.join(path)}'")
            model = sub
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = {}
                node[part] = nxt
            node = nxt
    return data


def config_from_dict(data: dict) -> Config:
    """Validate a raw mapping into a :class:`Config`, turning pydantic errors into key-named ConfigErrors."""
    _check_keys(data, Config, "")
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"bad value for config key '{key}': {err['msg']} (got {err.get('input')!r})") from None


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """Load a YAML config (None: all defaults) and apply overrides."""
    data: dict = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        try:
            loaded = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {p} is not valid YAML: {e}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {p}: top level must be a mapping")
        data = loaded
    data = apply_overrides(data, list(overrides or []))
    return config_from_dict(data)
