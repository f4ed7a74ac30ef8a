"""The ``publish`` flow: a finished output folder -> Parquet + dataset card, locally or on the Hub.

``prefect deployment run publish/hub --param out=data/full --param to=hub:ORG/NAME`` runs
:func:`publish_flow`, which calls :func:`synth.publish.publisher.publish` (``publish(out_dir, target,
cfg)``).  Targets are ``local:PATH`` or ``hub:ORG/NAME``; a Hub upload needs ``HF_TOKEN``
in the environment of the worker that runs the flow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from flows.runlogs import run_logger

from synth.engine.config import ConfigError


def check_target(to: str) -> tuple[str, str]:
    """``("local", PATH)`` or ``("hub", "ORG/NAME")`` from a target string; a bad one is a ConfigError."""
    kind, sep, rest = (to or "").partition(":")
    if not sep or kind not in ("local", "hub") or not rest:
        raise ConfigError(f"publish target {to!r}: expected local:PATH or hub:ORG/NAME "
                          "(e.g. --param to=hub:my-org/hopforge-kilt)")
    if kind == "hub" and rest.count("/") != 1:
        raise ConfigError(f"publish target {to!r}: a Hub dataset is named ORG/NAME")
    return kind, rest


def _publish_fn():
    try:
        from synth.publish.publisher import publish
    except ImportError as e:
        raise RuntimeError(f"publishing is not available in this install: synth.publish.publisher.publish cannot be "
                           f"imported ({e})") from None
    return publish


@flow(name="publish", log_prints=False, persist_result=False)
def publish_flow(to: str, out: str = "data/demo", config: str = "configs/demo.yaml",
                 overrides: list[str] = [], overwrite: bool = False) -> Any:  # noqa: B006
    """Publish the tables of ``out`` (sft, rl_pool, questions, traces...) with a dataset card to ``to``;
    ``overwrite`` lets a local target's files that publish did not write be replaced."""
    from flows.config import load_config

    logger = run_logger()
    kind, where = check_target(to)
    if not (Path(out) / "manifest.json").exists():
        raise ConfigError(f"out: {Path(out).absolute()} holds no hopforge run (no manifest.json); run "
                          f"`prefect deployment run synth/demo --param out={out}` first")
    if kind == "hub":
        import os

        if not (os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")):
            logger.warning("HF_TOKEN is not set in this worker's environment; the upload relies on a "
                           "cached `huggingface-cli login`")
    cfg = load_config(config, list(overrides))
    publish = _publish_fn()
    logger.info("publish: %s -> %s", Path(out).absolute(), to)
    result = publish(out, to, cfg, overwrite=overwrite)
    if isinstance(result, dict):
        rows = result.get("rows") or {}
        logger.info("publish: %s; rows %s; skipped %s", to, rows, result.get("skipped") or {})
        _artifacts(kind, where, result)
    return result


def _artifacts(kind: str, where: str, result: dict) -> None:
    """Rows per published config, and a link to the Hub dataset (skipped outside a flow run)."""
    from prefect.context import FlowRunContext

    if FlowRunContext.get() is None:
        return
    from prefect.artifacts import create_link_artifact, create_table_artifact

    from synth.text.markdown import md_code

    shards = result.get("shards") or {}
    table = [{"config": name, "rows": n, "shards": shards.get(name)} for name, n in (result.get("rows") or {}).items()]
    create_table_artifact(table, key="publish-rows", description=f"What was published to {md_code(f'{kind}:{where}')}.")
    if kind == "hub":
        url = result.get("commit_url") or f"https://huggingface.co/datasets/{where}"
        create_link_artifact(url, link_text=where, key="publish-hub", description="The published dataset.")
