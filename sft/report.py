"""The SFT run's report (``train_report.json``) and its loss plot (``loss.png``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sft.prepared import Prepared


def loss_curve(log_history: list[dict]) -> tuple[list[dict], list[dict]]:
    """Train and eval loss points ``{step, epoch, loss[, learning_rate]}`` from the trainer's log."""
    train, evals = [], []
    for e in log_history:
        if "loss" in e:
            train.append({k: e[k] for k in ("step", "epoch", "loss", "learning_rate", "grad_norm") if k in e})
        if "eval_loss" in e:
            evals.append({"step": e.get("step"), "epoch": e.get("epoch"), "loss": e["eval_loss"]})
    return train, evals


def train_report(prep: Prepared, trainer, result, eval_metrics: dict, counts: dict, batching: dict, attn: str,
                 saved: dict, seconds: float) -> dict[str, Any]:
    """Everything a reader needs to judge the run: funnel, masks, loss, speed, batching, held-out ids."""
    train, evals = loss_curve(trainer.state.log_history)
    runtime = float(result.metrics.get("train_runtime") or 0.0)
    world = trainer.accelerator.num_processes
    real = counts["real_tokens"] * world
    padding: float | None = counts["padding_fraction"]
    if counts["batches"] == 0:  # collated in dataloader workers: fall back on TRL's own token count
        seen = [e["num_tokens"] for e in trainer.state.log_history if "num_tokens" in e]
        real, padding = (int(seen[-1]) if seen else 0), None
    mask = prep.mask_report
    return {
        "funnel": prep.funnel,
        "rows": {"input": prep.funnel["input"], "trained": prep.funnel["output"],
                 "dropped": prep.funnel["dropped"]},
        "held_out_question_ids": prep.held_out,
        "n_held_out_questions": len(prep.held_out),
        "loss": train, "eval": evals,
        "first_loss": train[0]["loss"] if train else None, "final_loss": train[-1]["loss"] if train else None,
        "eval_loss": eval_metrics.get("eval_loss"),
        "train_runtime_s": round(runtime, 3), "global_steps": trainer.state.global_step,
        "tokens_seen": real, "tokens_per_second": round(real / runtime, 1) if runtime else None,
        "padding_fraction": padding, "batch_tokens": counts["batch_tokens"] * world,
        "trained_token_fraction": round(prep.train_trained / prep.train_tokens, 6)
        if prep.train_tokens else 0.0,
        "train_tokens_per_epoch": prep.train_tokens, "trained_tokens_per_epoch": prep.train_trained,
        "mask": {k: mask[k] for k in ("trained_tokens", "masked_tokens", "tool_tokens_trained", "eot_untrained_turns",
                                       "prompt_tokens_trained", "template", "eot_token")},
        "batching": batching, "attn_implementation": attn, "world_size": world,
        "parameters": counts.get("parameters"), "trainable_parameters": counts.get("trainable_parameters"),
        "checkpoint": saved, "tokenizer": prep.tokenizer_path, "sft_table": prep.table,
        "template": prep.template_name, "seconds": round(seconds, 3),
    }


def plot_loss(report: dict, path: str | Path) -> Path:
    """Plot train (and eval) loss against the step into a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    tr = report["loss"]
    if tr:
        ax.plot([p["step"] for p in tr], [p["loss"] for p in tr], label="train", lw=1.5)
    ev = [p for p in report["eval"] if p.get("step") is not None]
    if ev:
        ax.plot([p["step"] for p in ev], [p["loss"] for p in ev], "o-", label="eval (held-out questions)")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (assistant tokens)")
    ax.set_title(f"SFT loss: {report['rows']['trained']} rows, {report['batching']['mode']}")
    ax.grid(alpha=0.3)
    if tr or ev:
        ax.legend()
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p)
    plt.close(fig)
    return p


__all__ = ["loss_curve", "plot_loss", "train_report"]
