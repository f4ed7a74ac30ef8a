"""Serve hopforge's six deployments from one process: ``hopforge serve``.

::

    prefect server start &                                   # SQLite under PREFECT_HOME
    hopforge serve &                                         # from the repo root
    prefect deployment run synth/demo --watch

The deployments are declared once, in ``prefect.yaml`` (which ``prefect deploy --all`` reads
for a work pool); :data:`DEPLOYMENTS` is that file read.  Their relative path parameters
(``config``, ``out``, ``accelerate_config``) are the project's: :func:`runner_deployments`
makes them absolute under the project root, so ``hopforge serve`` works from any directory.
Flow runs start in subprocesses of this process, with its environment (``OPENAI_API_KEY``,
``HF_TOKEN``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


PREFECT_YAML = Path(__file__).resolve().parents[1] / "prefect.yaml"
# Deployment parameters that name a path: relative ones are under the project root (the folder of prefect.yaml).
PATH_PARAMETERS = ("config", "out", "accelerate_config")


@dataclass(frozen=True)
class DeploymentSpec:
    """One deployment of ``prefect.yaml``: ``<flow name>/<name>`` running ``entrypoint`` with default
    ``parameters``."""

    name: str
    entrypoint: str  # "flows/synth_flow.py:synth_flow"
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ("hopforge",)

    @property
    def flow_name(self) -> str:
        """The name of the flow the entrypoint runs (``@flow(name=...)``)."""
        return self.load_flow().name

    @property
    def full_name(self) -> str:
        return f"{self.flow_name}/{self.name}"

    def load_flow(self):
        """The flow object, imported as a module (``flows.synth_flow``) so relative paths do not matter."""
        path, _, attr = self.entrypoint.partition(":")
        module = path.removesuffix(".py").replace("/", ".")
        return getattr(importlib.import_module(module), attr)


def load_deployments(path: Path = PREFECT_YAML) -> list[DeploymentSpec]:
    """The deployments ``prefect.yaml`` declares (the one list of them)."""
    raw = yaml.safe_load(path.read_text()) or {}
    return [DeploymentSpec(d["name"], d["entrypoint"], " ".join(str(d.get("description", "")).split()),
                           dict(d.get("parameters") or {}), tuple(d.get("tags") or ("hopforge",)))
            for d in raw.get("deployments") or []]


DEPLOYMENTS: list[DeploymentSpec] = load_deployments()


def project_parameters(parameters: dict[str, Any], root: Path = PREFECT_YAML.parent) -> dict[str, Any]:
    """``parameters`` with the relative paths of :data:`PATH_PARAMETERS` made absolute under ``root``."""
    out = dict(parameters)
    for name in PATH_PARAMETERS:
        value = out.get(name)
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            out[name] = str(root / value)
    return out


def runner_deployments(specs: list[DeploymentSpec] | None = None) -> list:
    """``flow.to_deployment(...)`` for every spec (entrypoints as module paths, path parameters the project's)."""
    from prefect.deployments.runner import EntrypointType

    out = []
    for spec in specs or DEPLOYMENTS:
        flow = spec.load_flow()
        out.append(flow.to_deployment(name=spec.name, parameters=project_parameters(spec.parameters),
                                      description=spec.description, tags=list(spec.tags),
                                      entrypoint_type=EntrypointType.MODULE_PATH))
    return out


def api_url() -> str | None:
    """The Prefect API this process talks to (None: none configured, so runs would go to a throwaway server)."""
    from prefect.settings import get_current_settings

    return get_current_settings().api.url


def serve(limit: int | None = None, poll_seconds: float | None = None) -> None:
    """Serve every deployment until interrupted (Ctrl-C)."""
    import prefect

    from synth.engine.progress import quiet_library_progress

    # Flow runs are read as logs (in Prefect's UI, or piped): their processes inherit the switches that keep
    # tqdm, datasets and transformers from drawing \r progress bars, even when this one runs in a terminal.
    quiet_library_progress(force=True)
    kwargs: dict[str, Any] = {}
    if poll_seconds is not None:
        kwargs["query_seconds"] = poll_seconds
    prefect.serve(*runner_deployments(), limit=limit, **kwargs)
