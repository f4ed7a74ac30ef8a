"""How tests run the ``hopforge`` command as a user would: the venv's console script, else ``python -m flows.cli``."""

from __future__ import annotations

import sys
from pathlib import Path


def hopforge_command() -> list[str]:
    """The argv prefix that runs ``hopforge`` with this interpreter's environment."""
    script = Path(sys.executable).parent / "hopforge"
    return [str(script)] if script.exists() else [sys.executable, "-m", "flows.cli"]


__all__ = ["hopforge_command"]
