"""Serve hopforge's five deployments from one process: ``hopforge serve``.

::

    prefect server start &                                   # SQLite under PREFECT_HOME
    hopforge serve &                                         # from the repo root
    prefect deployment run synth/demo --watch

:data:`DEPLOYMENTS` is the one list of deployments; ``prefect.yaml`` declares the same
five for a work pool (``prefect deploy --all``; a test keeps the two in step).  Flow
runs start in subprocesses of this process, with its working directory (relative config
paths resolve from there) and its environment (``OPENAI_API_KEY``, ``HF_TOKEN``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DeploymentSpec:
    """One deployment: ``<flow name>/<name>`` running ``entrypoint`` with default ``parameters``."""

    flow_name: str
    name: str
    entrypoint: str  # "flows/synth_flow.py:synth_flow"
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ("hopforge",)

    @property
    def full_name(self) -> str:
        return f"{self.flow_name}/{self.name}"

    def load_flow(self):
        """The flow object, imported as a module (``flows.synth_flow``) so relative paths do not matter."""
        path, _, attr = self.entrypoint.partition(":")
        module = path.removesuffix(".py").replace("/", ".")
        return getattr(importlib.import_module(module), attr)


DEPLOYMENTS: list[DeploymentSpec] = [
    DeploymentSpec(
        "synth", "full", "flows/synth_flow.py:synth_flow",
        "The real run: the KILT knowledge source and an OpenAI-compatible teacher (configs/full.yaml). Needs "
        "corpus.source (a local kilt_knowledgesource.json or hf:facebook/kilt_wikipedia) and the teacher's API key "
        "in the worker's environment; both are checked before any stage starts.",
        {"config": "configs/full.yaml", "out": "data/full", "overrides": []}),
    DeploymentSpec(
        "synth", "demo", "flows/synth_flow.py:synth_flow",
        "The offline demo: ~10k real Wikipedia summaries and the oracle teacher (configs/demo.yaml). "
        "Runs in about a minute on a laptop.",
        {"config": "configs/demo.yaml", "out": "data/demo", "overrides": []}),
    DeploymentSpec(
        "synth", "incremental", "flows/synth_flow.py:synth_flow",
        "Rebuild data/full after a change. Every hopforge run is incremental: a stage whose inputs, config "
        "section and code are unchanged is reused, a stage that died resumes from its finished shards, and the "
        "teacher's call cache (DIR/cache/teacher.sqlite) never pays for a call twice. Same flow as synth/full, "
        "same output folder.",
        {"config": "configs/full.yaml", "out": "data/full", "overrides": []}),
    DeploymentSpec(
        "publish", "hub", "flows/publish_flow.py:publish_flow",
        "Publish an output folder's tables as Parquet with a dataset card: --param to=hub:ORG/NAME (needs "
        "HF_TOKEN in the worker's environment) or to=local:PATH.",
        {"out": "data/full", "config": "configs/full.yaml", "overrides": []}),
    DeploymentSpec(
        "sft", "warm-start", "flows/sft_flow.py:sft_flow",
        "Warm-start SFT of the student on OUT/sft with accelerate (Qwen2.5-7B LoRA, FSDP); "
        "set num_processes to the number of GPUs.",
        {"config": "configs/sft/qwen2.5-7b-lora.yaml", "out": "data/full", "overrides": [],
         "num_processes": 8, "accelerate_config": "configs/accelerate/fsdp.yaml"}),
]


def runner_deployments(specs: list[DeploymentSpec] | None = None) -> list:
    """``flow.to_deployment(...)`` for every spec (entrypoints as module paths)."""
    from prefect.deployments.runner import EntrypointType

    out = []
    for spec in specs or DEPLOYMENTS:
        flow = spec.load_flow()
        out.append(flow.to_deployment(name=spec.name, parameters=dict(spec.parameters), description=spec.description,
                                      tags=list(spec.tags), entrypoint_type=EntrypointType.MODULE_PATH))
    return out


def api_url() -> str | None:
    """The Prefect API this process talks to (None: none configured, so runs would go to a throwaway server)."""
    from prefect.settings import get_current_settings

    return get_current_settings().api.url


def serve(limit: int | None = None, poll_seconds: float | None = None) -> None:
    """Serve every deployment until interrupted (Ctrl-C)."""
    import prefect

    kwargs: dict[str, Any] = {}
    if poll_seconds is not None:
        kwargs["query_seconds"] = poll_seconds
    prefect.serve(*runner_deployments(), limit=limit, **kwargs)
