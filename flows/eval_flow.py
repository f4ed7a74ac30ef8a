"""The ``synth/eval`` deployment: a model on published benchmarks, with the table as its artifact.

``prefect deployment run synth/eval --param out=data/full --param benchmarks='["hotpotqa:/data/hotpot_dev_distractor_v1.json"]'``
runs :func:`eval_flow`, which calls :func:`sft.benchmarks.run.run_benchmarks`, the function behind
``hopforge eval --benchmark``, with the same parameters.  Its artifacts are the table of ``eval.md`` (one row per
benchmark: key ``synth-eval``), or with ``compare`` the side-by-side table (``synth-eval-compare``), and the
Markdown itself (``synth-eval-report``), which names the model, the judge and the prompt's sha256.  Endpoints
appear as scheme, host, port and path only; no API key is read here (the judge's and the model's keys stay in
the worker's environment).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from flows.runlogs import run_logger


def artifacts(report: dict[str, Any]) -> dict[str, Any]:
    """``{key: (kind, data, description)}`` of the artifacts of one report (a model's or a comparison)."""
    from sft.benchmarks.table import compare_markdown, report_markdown, table_rows

    if "rows" in report:  # a comparison
        return {"synth-eval-compare": ("table", report["rows"],
                                       "Two models side by side on the same benchmark questions, harness and judge."),
                "synth-eval-report": ("markdown", compare_markdown(report), "The comparison (compare.md).")}
    return {"synth-eval": ("table", table_rows(report),
                           "One row per benchmark: questions, accuracy by the rule and by the judge, avg@k, tool "
                           "calls, turns, evidence, calls, tokens and cost."),
            "synth-eval-report": ("markdown", report_markdown(report),
                                  "eval.md: the model, the harness, the judge and its prompt's sha256, the table.")}


@flow(name="synth", log_prints=False, persist_result=False)
def eval_flow(benchmarks: list[str], out: str = "data/demo", config: str = "configs/demo.yaml",
              overrides: list[str] = [], model: str | None = None, server: bool = False,  # noqa: B006
              limit: int | None = None, samples: int = 1, judge: str | None = None,
              judge_key_env: str | None = None, compare: list[str] | None = None) -> dict:
    """Evaluate a model (``model``: a checkpoint folder or MODEL@URL; default ``OUT/student``; ``server``: the
    configured teacher endpoint) on ``benchmarks`` (``FORMAT:FILE`` each) in the student's harness, or two
    (``compare``: [A, B]) side by side; attach the table."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    from flows.config import load_config
    from sft.benchmarks.run import run_benchmarks
    from synth.engine.config import ConfigError

    logger = run_logger()
    if compare is not None and len(compare) != 2:
        raise ConfigError(f"compare: expected two models [A, B], got {len(compare)}")
    cfg = load_config(config, list(overrides))
    report = run_benchmarks(Path(out), cfg, list(benchmarks), model=model, server=server, limit=limit,
                            samples=samples, judge=judge, judge_key_env=judge_key_env,
                            compare=tuple(compare) if compare else None, progress=False)
    for key, (kind, data, description) in artifacts(report).items():
        if kind == "table":
            create_table_artifact(data, key=key, description=description)
        else:
            create_markdown_artifact(data, key=key, description=description)
    logger.info("eval: report in %s", report["report_dir"])
    return {"report_dir": report["report_dir"]}
