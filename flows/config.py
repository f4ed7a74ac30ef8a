"""The run's whole configuration: every concern's section under one root model.

Each field is documented once, in the section's own module; this is where they meet.
``load_config(path, overrides)`` reads a YAML file and applies ``--set dotted.key=value``
overrides; any unknown key or bad value raises :class:`ConfigError`, whose message names
the key (the CLI exits 2).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from filters.config import FiltersConfig
from filters.rlconfig import RLConfig
from sft.config import EvalConfig, SFTStageConfig
from synth.assemble.config import AssembleConfig
from synth.corpus.config import CorpusConfig
from synth.engine import config as base
from synth.engine.config import ConfigError, RootConfig, RunnerConfig
from synth.graph.config import ExpandConfig, GraphConfig, WalkConfig
from synth.publish.config import PublishConfig
from synth.questions.config import QuestionsConfig
from synth.rollout.config import RolloutConfig
from synth.teacher.config import TeacherConfig
from synth.tools.config import ToolsConfig

__all__ = ["Config", "ConfigError", "load_config", "apply_overrides", "config_from_dict", "parse_override"]

parse_override = base.parse_override


class Config(RootConfig):
    """The whole run.  Sections are stage configs; `seed` drives every random choice.

    A relative path in these fields (written in a config file or set with ``--set``) is looked for in
    the current directory, then in the project root, so a command works from any directory.
    """

    path_fields = ("corpus.source", "filters.decontaminate", "tokenizer", "sft.config")
    renamed_sections = {"synth": "runner"}

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
    rl: RLConfig = Field(default_factory=RLConfig)
    assemble: AssembleConfig = Field(default_factory=AssembleConfig)
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    publish: PublishConfig = Field(default_factory=PublishConfig)
    sft: SFTStageConfig = Field(default_factory=SFTStageConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)

    @model_validator(mode="after")
    def _checks_see_what_agents_see(self) -> "Config":
        # Effective depth is a property of the agents' tool: a solver who asks `search` for more results than
        # the validators looked at could enter a chain through a page they never checked.
        k = self.questions.shortcut_k
        if k is not None and k < self.tools.search_max_k:
            raise ValueError(
                f"questions.shortcut_k ({k}) is below tools.search_max_k ({self.tools.search_max_k}): an agent's "
                "search could return pages the question checks never looked at; raise questions.shortcut_k, lower "
                "tools.search_max_k, or unset questions.shortcut_k (it then follows tools.search_max_k)")
        # The tools section cannot name the registry (the registry's tool modules import it): checked here.
        if self.tools.extra_tools:  # only then: the registry imports the tools (tantivy, pyarrow), slow for a CLI
            from synth.tools.registry import tools

            tools(self.tools)  # a ValueError names an unknown tools.extra_tools entry and the optional tools
        return self


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply ``dotted.key=value`` overrides to a raw config mapping, checking each key exists."""
    return base.apply_overrides(Config, data, overrides)


def config_from_dict(data: dict) -> Config:
    """Validate a raw mapping into a :class:`Config`, turning pydantic errors into key-named ConfigErrors."""
    return base.config_from_dict(Config, data)


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """Load a YAML config (None: all defaults) and apply overrides."""
    return base.load_config(Config, path, overrides)
