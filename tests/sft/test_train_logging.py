"""LogLines: the trainer callback that reports through the hopforge logger."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from sft.train import LogLines, metric_lines


def test_the_hooks_are_exactly_the_trainer_callback_hooks():
    from transformers import TrainerCallback

    hooks = {m for m in dir(TrainerCallback) if m.startswith("on_")}
    assert set(LogLines.HOOKS) == hooks
    defined = {m for m in vars(LogLines) if m.startswith("on_")}
    assert defined == hooks  # no misspelt hook, none left to a fallback


def test_an_unknown_hook_fails_loudly():
    cb = LogLines()
    with pytest.raises(AttributeError, match="on_stpe_end"):
        cb.on_stpe_end
    assert not hasattr(cb, "on_stpe_end")


def test_every_event_the_handler_sends_reaches_loglines(caplog):
    from transformers import TrainerControl, TrainerState, TrainingArguments
    from transformers.trainer_callback import CallbackHandler

    handler = CallbackHandler([LogLines()], model=None, processing_class=None, optimizer=None, lr_scheduler=None)
    args = TrainingArguments(output_dir="/tmp/unused", report_to="none")
    state, control = TrainerState(), TrainerControl()
    state.max_steps, state.global_step = 4, 0
    with caplog.at_level(logging.INFO, logger="hopforge"):
        handler.on_init_end(args, state, control)
        handler.on_train_begin(args, state, control)
        for step in range(1, 5):
            handler.on_step_begin(args, state, control)
            state.global_step = step
            handler.on_step_end(args, state, control)
        handler.on_log(args, state, control, logs={"loss": 6.03712, "epoch": 0.38})
        handler.on_evaluate(args, state, control, metrics={})
        handler.on_save(args, state, control)
        handler.on_epoch_end(args, state, control)
        handler.on_train_end(args, state, control)
    lines = [r.getMessage() for r in caplog.records if r.name == "hopforge"]
    assert "sft: step 4/4: loss 6.037, epoch 0.38" in lines


def test_metric_lines_split_long_logs():
    logs = {f"metric_{i}": float(i) for i in range(30)}
    lines = metric_lines(logs, width=60)
    assert len(lines) > 1 and all(len(line) <= 60 for line in lines)
    assert ", ".join(lines) == ", ".join(f"metric_{i} {float(i):.4g}" for i in range(30))


def test_only_the_main_process_logs(caplog):
    cb = LogLines()
    state = SimpleNamespace(is_world_process_zero=False, global_step=1, max_steps=2)
    with caplog.at_level(logging.INFO, logger="hopforge"):
        cb.on_log(None, state, None, logs={"loss": 1.0})
    assert not [r for r in caplog.records if r.name == "hopforge"]
