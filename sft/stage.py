"""The ``sft`` stage, and the one way to run a training recipe.

The pipeline's ``sft`` stage trains the student on ``DIR/sft`` with the recipe ``sft.config``
and publishes the checkpoint as ``DIR/student``.  ``hopforge sft`` and the ``sft`` flow train
a recipe into ``DIR/runs/<recipe name>``: in this process through :func:`run_recipe`, or in a
process of their own through :func:`training_command` (``accelerate launch`` for many GPUs).
Every path ends in :func:`sft.train.main`.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

from synth.engine.errors import InputError, not_a_file

DEFAULT_RECIPE = "configs/sft/tiny.yaml"


def recipe_path(spec: str | Path) -> Path:
    """A recipe YAML named relative to the working directory or, failing that, to the project root."""
    from synth.engine.config import project_path

    p = project_path(spec)
    if (why := not_a_file(p)) is None:
        return p
    raise InputError(f"SFT config file {spec}: {why}" if p.exists() else f"SFT config file not found: {spec}")


def build_args(recipe: str | Path, data_dir: str | Path, output_dir: str | Path | None,
               overrides: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Arguments for :func:`sft.train.parse_args`; ``output_dir`` defaults to ``DIR/runs/<recipe name>``
    (``DIR/student`` belongs to the pipeline's ``sft`` stage)."""
    from sft.train import overrides_to_args

    out = output_dir if output_dir is not None else default_output_dir(data_dir, recipe)
    args = ["--config", str(recipe_path(recipe)), "--data_dir", str(data_dir), "--output_dir", str(out)]
    return args + overrides_to_args(list(overrides))


def default_output_dir(data_dir: str | Path, recipe: str | Path) -> Path:
    """Where ``hopforge sft`` and the ``sft`` flow put a checkpoint by default: ``DIR/runs/<recipe stem>``."""
    return Path(data_dir) / "runs" / Path(recipe).stem


def run_recipe(recipe: str | Path, data_dir: str | Path, output_dir: str | Path | None = None,
               overrides: list[str] | tuple[str, ...] = ()) -> dict:
    """Parse a recipe plus overrides and run :func:`sft.train.main` in this process."""
    from sft.train import main, parse_args

    argv = build_args(recipe, data_dir, output_dir, overrides)
    try:
        parsed = parse_args(argv)
    except ValueError as e:  # TrlParser: unknown keys in the YAML
        raise InputError(f"{recipe}: {e}") from None
    return main(*parsed)


def summary_rows(report: dict) -> list[list[Any]]:
    """The end-of-training table: funnel, loss, throughput, checkpoint (or the mask check alone)."""
    if report.get("validate_only"):
        m = report["mask_report"]
        return [["rows checked", m["rows_checked"]], ["trained tokens", m["trained_tokens"]],
                ["tool tokens trained", m["tool_tokens_trained"]], ["untrained end-of-turn", m["eot_untrained_turns"]]]
    f = report["funnel"]
    return [["rows in", f["input"]], ["rows trained", f["output"]],
            *[[f"dropped: {k}", v] for k, v in sorted(f["dropped"].items())],
            ["held-out questions", report["n_held_out_questions"]],
            ["loss first -> final", f"{report['first_loss']:.4f} -> {report['final_loss']:.4f}"
             if report["first_loss"] is not None else "-"],
            ["eval loss", report["eval_loss"]], ["tokens/s", report["tokens_per_second"]],
            ["padding", report["padding_fraction"]], ["batching", report["batching"]["mode"]],
            ["trained-token fraction", report["trained_token_fraction"]], ["checkpoint", report["checkpoint"]["path"]]]


def output_dir_of(data_dir: str | Path, overrides: list[str] | tuple[str, ...], recipe: str | Path,
                  output_dir: str | Path | None = None) -> tuple[str, list[str]]:
    """(checkpoint folder, the other overrides): ``output_dir`` if given, else an ``output_dir=`` override,
    else ``DIR/runs/<recipe name>`` (``DIR/student`` belongs to the pipeline's ``sft`` stage)."""
    rest = [o for o in overrides if o.partition("=")[0].strip().lstrip("-") != "output_dir"]
    named = [o.partition("=")[2] for o in overrides if o.partition("=")[0].strip().lstrip("-") == "output_dir"]
    chosen = output_dir if output_dir is not None else (named[-1] if named else default_output_dir(data_dir, recipe))
    return str(chosen), rest


def training_command(recipe: str | Path, data_dir: str | Path, overrides: list[str] | tuple[str, ...] = (),
                     output_dir: str | Path | None = None, num_processes: int | None = None,
                     accelerate_config: str | Path | None = None) -> list[str]:
    """The one command line that trains in a process of its own: ``accelerate launch`` for several
    processes or an accelerate config (whose ``num_processes`` rules when none is given), else
    ``python -m sft.train``.  ``hopforge sft`` and the ``sft`` flow both run it."""
    from sft.train import accelerate_command, overrides_to_args
    from synth.engine.config import project_path

    out, rest = output_dir_of(data_dir, overrides, recipe, output_dir)
    # The process may start elsewhere: inputs named relative to the project are passed as found.
    recipe = recipe_path(recipe) if project_path(recipe).is_file() else Path(recipe)
    if (num_processes or 1) > 1 or accelerate_config:
        accel = str(project_path(accelerate_config)) if accelerate_config else None
        return accelerate_command(str(recipe), str(data_dir), out, accel,
                                  num_processes=num_processes if (num_processes or 1) > 1 else None, overrides=rest)
    return [sys.executable, "-m", "sft.train", "--config", str(recipe), "--data_dir", str(data_dir), "--output_dir", out,
            *overrides_to_args(rest)]


def hardware_problems(recipe: str | Path, overrides: list[str] | tuple[str, ...] = (),
                      num_processes: int | None = None) -> list[str]:
    """What this machine lacks for ``recipe`` (+ ``overrides``): bf16 or fp16 without a GPU that does
    it, or more processes than GPUs.  One line each, naming the setting; ``[]`` when it can train."""
    import torch
    import yaml

    try:
        values = yaml.safe_load(recipe_path(recipe).read_text()) or {}
    except (InputError, yaml.YAMLError, OSError) as e:
        return [f"sft recipe {recipe}: {e}"]
    for item in overrides:
        key, sep, raw = item.partition("=")
        if sep:
            values[key.strip().lstrip("-")] = yaml.safe_load(raw) if raw.strip() else raw
    cuda = torch.cuda.is_available()
    gpus = torch.cuda.device_count() if cuda else 0
    problems = []
    if values.get("bf16") is True and not (cuda and torch.cuda.is_bf16_supported()):
        problems.append(f"sft recipe {recipe} trains in bf16 but this machine has no GPU with bf16 "
                        "(set bf16=false, or run on a machine with one)")
    if values.get("fp16") is True and not cuda:
        problems.append(f"sft recipe {recipe} trains in fp16 but this machine has no GPU (set fp16=false)")
    if (num_processes or 1) > 1 and cuda and num_processes > gpus:
        problems.append(f"num_processes is {num_processes} but this machine has {gpus} GPU(s)")
    if (num_processes or 1) > 1 and not cuda:
        problems.append(f"num_processes is {num_processes} but this machine has no GPU (use 1 on CPU)")
    return problems


def recipe_identity(cfg: Any, store: Any = None) -> str:
    """Stage ``key_extra``: a hash of the recipe file's bytes and its overrides."""
    recipe, overrides = _stage_recipe(cfg)
    h = hashlib.sha256(recipe_path(recipe).read_bytes())
    h.update(repr(list(overrides)).encode())
    return h.hexdigest()[:16]


def _stage_recipe(cfg: Any) -> tuple[str, list[str]]:
    """The recipe and its overrides; ``sft.reasoning``, when set, is the recipe's ``reasoning`` (after the
    user's overrides, so the pipeline's one setting rules the filter's count and the training alike)."""
    extra = [f"reasoning={cfg.sft.reasoning}"] if cfg.sft.reasoning else []
    return cfg.sft.config, list(cfg.sft.overrides) + extra


def run_sft(ctx) -> Any:
    """Stage ``sft``: train on ``DIR/sft`` with ``DIR/tokenizer``; the checkpoint goes to ``student``.

    Funnel: input = sft rows, output = rows trained, dropped = {held_out, too_long}.
    """
    from synth.engine.stage import StageResult

    recipe, overrides = _stage_recipe(ctx.cfg)
    report = run_recipe(recipe, ctx.store.root, ctx.out("student"), overrides)
    f = report["funnel"]
    keep = ("first_loss", "final_loss", "eval_loss", "tokens_per_second", "padding_fraction",
            "trained_token_fraction", "n_held_out_questions", "global_steps")
    extra = {k: report[k] for k in keep}
    extra.update(batching=report["batching"]["mode"], recipe=str(recipe),
                 mask={k: report["mask"][k] for k in ("tool_tokens_trained", "eot_untrained_turns")})
    return StageResult(input=f["input"], output=f["output"], dropped=dict(f["dropped"]), extra=extra)


__all__ = ["build_args", "output_dir_of", "recipe_identity", "recipe_path", "run_recipe", "run_sft", "summary_rows",
           "training_command"]
