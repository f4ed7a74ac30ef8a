"""Base pieces of the config models, apart from :mod:`synth.config` so stage modules that
define their own section (teacher, tools...) can import them without a cycle."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ConfigError(ValueError):
    """A config file, key or value is wrong.  The message names the key."""


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)


def operational(description: str, default: Any = ..., **kw: Any) -> Any:
    """A config field that does not change a stage's output (kept out of content keys)."""
    return Field(default, description=description, json_schema_extra={"operational": True}, **kw)



