"""``hopforge sft`` and the ``student`` pipeline stage: both call :func:`sft.train.main`.

``hopforge sft --config configs/sft/tiny.yaml --out DIR [--set key=value ...]`` reads ``DIR/sft``
and ``DIR/tokenizer`` and writes the checkpoint, reports and loss plot to ``DIR/runs/<recipe name>``
(or ``--output-dir``); the pipeline's ``sft`` stage publishes its checkpoint as ``DIR/student``.  With ``--accelerate-config`` or ``--num-processes`` it runs the same
script under ``accelerate launch`` (the command :func:`sft.train.accelerate_command` builds).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from synth.engine.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RECIPE = "configs/sft/tiny.yaml"


def recipe_path(spec: str | Path) -> Path:
    """A recipe YAML named relative to the working directory or, failing that, to the repository."""
    p = Path(spec)
    if p.is_file():
        return p
    if not p.is_absolute() and (ROOT / p).is_file():
        return ROOT / p
    raise InputError(f"SFT config file not found: {spec}")


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


def _summary(report: dict) -> list[list[Any]]:
    if report.get("validate_only"):
        m = report["mask_report"]
        return [["rows checked", m["rows_checked"]], ["trained tokens", m["trained_tokens"]],
                ["tool tokens trained", m["tool_tokens_trained"]], ["untrained end-of-turn", m["eot_untrained_turns"]]]
    f = report["funnel"]
    return [["rows in", f["input"]], ["rows trained", f["output"]],
            *[[f"dropped: {k}", v] for k, v in sorted(f["dropped"].items())],
            ["held-out questions", report["n_heldout_questions"]],
            ["loss first -> final", f"{report['first_loss']:.4f} -> {report['final_loss']:.4f}"
             if report["first_loss"] is not None else "-"],
            ["eval loss", report["eval_loss"]], ["tokens/s", report["tokens_per_second"]],
            ["padding", report["padding_fraction"]], ["batching", report["batching"]["mode"]],
            ["trained-token fraction", report["trained_token_fraction"]], ["checkpoint", report["checkpoint"]["path"]]]


def sft_command(
    config: Annotated[Path, typer.Option("--config", "-c", help="SFT recipe YAML (configs/sft/*.yaml).")] = Path(DEFAULT_RECIPE),
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder DIR with DIR/sft and DIR/tokenizer.")] = Path("data/demo"),
    set_: Annotated[Optional[list[str]], typer.Option("--set", "-s", help="Override a recipe key: key=value (repeatable).")] = None,
    output_dir: Annotated[Optional[Path], typer.Option("--output-dir", help="Checkpoint folder (default DIR/runs/<recipe name>).")] = None,
    validate_only: Annotated[bool, typer.Option("--validate-only", help="Only check the loss masks (mask_report.json).")] = False,
    accelerate_config: Annotated[Optional[Path], typer.Option("--accelerate-config", help="Run under accelerate launch with this config (configs/accelerate/*.yaml).")] = None,
    num_processes: Annotated[Optional[int], typer.Option("--num-processes", help="Processes (GPUs) for accelerate launch.")] = None,
) -> None:
    """Warm-start SFT of the student on DIR/sft with TRL (assistant-only loss, masks checked first)."""
    from synth.engine.progress import console, print_table

    overrides = list(set_ or []) + (["validate_only=true"] if validate_only else [])
    try:
        if accelerate_config is not None or (num_processes or 1) > 1:
            from sft.train import accelerate_command

            cmd = accelerate_command(str(recipe_path(config)), str(out), str(output_dir or default_output_dir(out, config)),
                                     str(accelerate_config) if accelerate_config else None,
                                     num_processes=num_processes, overrides=overrides)
            console.print(" ".join(cmd), highlight=False)
            raise typer.Exit(subprocess.call(cmd))
        report = run_recipe(config, out, output_dir, overrides)
    except InputError as e:
        console.print(f"[bold red]error:[/] {e}", highlight=False)
        raise typer.Exit(2) from None
    print_table(f"hopforge sft: {config}", ["what", "value"], _summary(report))


def recipe_identity(cfg: Any, store: Any = None) -> str:
    """Stage ``key_extra``: a hash of the recipe file's bytes and its overrides."""
    recipe, overrides = _stage_recipe(cfg)
    h = hashlib.sha256(recipe_path(recipe).read_bytes())
    h.update(repr(list(overrides)).encode())
    return h.hexdigest()[:16]


def _stage_recipe(cfg: Any) -> tuple[str, list[str]]:
    return cfg.sft.config, list(cfg.sft.overrides)


def run_sft(ctx) -> Any:
    """Stage ``sft``: train on ``DIR/sft`` with ``DIR/tokenizer``; the checkpoint goes to ``student``.

    Funnel: input = sft rows, output = rows trained, dropped = {heldout, too_long}.
    """
    from synth.engine.stage import StageResult

    recipe, overrides = _stage_recipe(ctx.cfg)
    report = run_recipe(recipe, ctx.store.root, ctx.out("student"), overrides)
    f = report["funnel"]
    keep = ("first_loss", "final_loss", "eval_loss", "tokens_per_second", "padding_fraction",
            "trained_token_fraction", "n_heldout_questions", "global_steps")
    extra = {k: report[k] for k in keep}
    extra.update(batching=report["batching"]["mode"], recipe=str(recipe),
                 mask={k: report["mask"][k] for k in ("tool_tokens_trained", "eot_untrained_turns")})
    return StageResult(input=f["input"], output=f["output"], dropped=dict(f["dropped"]), extra=extra)


__all__ = ["build_args", "recipe_identity", "recipe_path", "run_recipe", "run_sft", "sft_command"]
