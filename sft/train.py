"""Warm-start SFT of a search-agent student on the ``sft`` table, in the shape of ``trl/scripts/sft.py``.

``main(script_args, training_args, model_args)`` serves ``hopforge sft``, the Prefect flow (through
:func:`accelerate_command` for multi-GPU / multi-node) and the tests::

    python -m sft.train --config configs/sft/tiny.yaml --data_dir data/demo --output_dir data/demo/student
    accelerate launch --config_file configs/accelerate/fsdp.yaml -m sft.train --config configs/sft/qwen2.5-7b-lora.yaml ...

The recipe: rows are tokenized once, exactly as TRL does it, and every row's loss mask is checked
(:mod:`sft.masking`) before any step: tool observations, user turns and the system prompt get no
loss, each assistant turn's end-of-turn token does.  Rows longer than ``max_length`` are dropped
and counted, never truncated.  ``eval_fraction`` of the *questions* (by a hash of the id) is held
out.  Packing (``bfd``, padding-free) is kept only when the attention implementation keeps packed
samples apart; otherwise batches are grouped by length.  The output folder holds a checkpoint that
``AutoModelForCausalLM.from_pretrained`` loads (LoRA merged when ``merge_lora``), the tokenizer
with the training chat template, ``train_report.json``, ``mask_report.json`` and ``loss.png``.

The trainer reports through the ``hopforge`` logger (:class:`LogLines`: one line per logging step)
instead of printing metric dicts, and outside a terminal no library draws ``\r`` progress bars.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth.engine.errors import InputError

from sft.batching import PaddingCounter, compact_lm_head_on_cpu, decide_batching, resolve_attn_implementation
from sft.prepared import Prepared
from sft.report import plot_loss, train_report

log = logging.getLogger("hopforge")


@dataclass
class HopforgeSFTArguments:
    """hopforge's own arguments; TRL's ``SFTConfig`` and ``ModelConfig`` carry the rest."""

    data_dir: str | None = field(default=None, metadata={"help": "hopforge output folder DIR: reads DIR/sft and "
                                                         "DIR/tokenizer."})
    sft_table: str | None = field(default=None, metadata={"help": "The sft table folder (default DIR/sft)."})
    tokenizer_path: str | None = field(default=None, metadata={
        "help": "Tokenizer folder or Hub id (default DIR/tokenizer if it exists, else model_name_or_path)."})
    chat_template: str = field(default="auto", metadata={
        "help": "Training chat template: qwen2.5, qwen3, llama3, gemma3, mistral, tiny, a .jinja path, or auto (keep "
                "a template with generation markers, else the shipped template of the tokenizer's family, else the "
                "tokenizer's own with masks derived from prefix renders)."})
    init_config: dict | str | None = field(default=None, metadata={
        "help": "Build a fresh model from this config (mapping or JSON with model_type and sizes) instead of "
                "loading model_name_or_path; vocab size and special-token ids come from the tokenizer."})
    reasoning: str | None = field(default=None, metadata={
        "help": "How each assistant turn's reasoning (reasoning_content) is trained: keep (the template's thinking "
                "format, e.g. qwen3's <think>), inline (as text before the turn's content, for a template without "
                "one), drop; unset: keep where the template has a thinking format, inline elsewhere.  The pipeline's "
                "sft stage passes sft.reasoning here (synth/tokenizer/reasoning.py)."})
    eval_fraction: float = field(default=0.05, metadata={"help": "Fraction of questions held out (hash of id)."})
    merge_lora: bool = field(default=True, metadata={"help": "Merge LoRA adapters into the saved checkpoint."})
    batching: str = field(default="auto", metadata={
        "help": "auto, packed, grouped or padded (see sft/batching.py); auto packs with varlen flash attention and "
                "groups rows by length otherwise."})
    compact_lm_head: bool = field(default=True, metadata={
        "help": "On CPU, score only trained positions in TRL's fused LM head (same loss, faster)."})
    validate_only: bool = field(default=False, metadata={"help": "Check the loss masks, write mask_report.json, "
                                                         "and stop."})
    max_rows: int | None = field(default=None, metadata={"help": "Use only the first N rows (trial runs)."})


class LogLines:
    """A ``transformers`` trainer callback: every ``on_log`` becomes one ``hopforge`` log line
    (``sft: step 12/40: loss 6.04, grad_norm 0.72, ...``), and the steps get a :class:`Bar` (a rich bar on
    a terminal, a line every few seconds in logs).  Only the main process reports."""

    MAX_LINE = 250  # longer metric lines are split, so a log file never holds a line of hundreds of characters

    def __init__(self, prefix: str = "sft"):
        self.prefix = prefix
        self.bar = None

    # TrainerCallback's hooks, without subclassing it (transformers is imported only when training starts):
    # each one is spelt out, so a hook transformers adds, or a misspelt one, fails loudly instead of passing
    # as a silent no-op (tests/sft/test_train_logging.py checks the names against TrainerCallback's).
    HOOKS = ("on_init_end", "on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_step_begin",
             "on_pre_optimizer_step", "on_optimizer_step", "on_substep_end", "on_step_end", "on_evaluate",
             "on_predict", "on_save", "on_log", "on_prediction_step", "on_push_begin")

    def _ignore(self, args, state, control, **kw) -> None:
        """A hook LogLines has nothing to say on."""

    on_init_end = on_epoch_begin = on_epoch_end = on_step_begin = _ignore
    on_pre_optimizer_step = on_optimizer_step = on_substep_end = on_evaluate = _ignore
    on_predict = on_save = on_prediction_step = on_push_begin = _ignore

    def __getattr__(self, name: str):
        if name.startswith("on_"):
            raise AttributeError(f"LogLines has no trainer hook {name!r}: a callback event it does not know "
                                 f"(known: {', '.join(self.HOOKS)}); add it to LogLines")
        raise AttributeError(name)

    def on_train_begin(self, args, state, control, **kw) -> None:
        from synth.engine.progress import Bar

        if state.is_world_process_zero and self.bar is None:
            self.bar = Bar(f"{self.prefix}: steps", total=state.max_steps or None, unit="steps")

    def on_step_end(self, args, state, control, **kw) -> None:
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_train_end(self, args, state, control, **kw) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def on_log(self, args, state, control, logs: dict | None = None, **kw) -> None:
        if not state.is_world_process_zero or not logs:
            return
        head = f"{self.prefix}: step {state.global_step}/{state.max_steps}:"
        for line in metric_lines(logs, self.MAX_LINE - len(head)):
            log.info("%s %s", head, line)


def metric_lines(logs: dict[str, Any], width: int = 200) -> list[str]:
    """``{"loss": 6.0371, "epoch": 0.38}`` -> ``["loss 6.037, epoch 0.38"]``, split into lines of at most
    about ``width`` characters."""
    items = [f"{k} {_metric(v)}" for k, v in logs.items()]
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + 2 + len(item) <= width:
            lines[-1] += ", " + item
        else:
            lines.append(item)
    return lines


def _metric(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    try:  # a tensor or numpy scalar
        return f"{float(v):.4g}" if not isinstance(v, (int, str)) else str(v)
    except (TypeError, ValueError):
        return str(v)


def log_to_hopforge(trainer) -> None:
    """Swap the trainer's printing callbacks (``PrinterCallback`` prints metric dicts, ``ProgressCallback``
    draws tqdm bars and writes the dicts under them) for :class:`LogLines`."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    if not any(isinstance(cb, LogLines) for cb in trainer.callback_handler.callbacks):
        trainer.add_callback(LogLines())


def make_parser(prog: str | None = None):
    """A ``TrlParser`` over (HopforgeSFTArguments, SFTConfig, ModelConfig); it also reads ``--config x.yaml``."""
    from trl import ModelConfig, SFTConfig, TrlParser

    return TrlParser((HopforgeSFTArguments, SFTConfig, ModelConfig), prog=prog)


def parse_args(argv: list[str] | None = None):
    """``(script_args, training_args, model_args)`` from command-line style arguments.

    A key in the ``--config`` YAML that no argument class knows is an :class:`InputError` naming it.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--config" in argv:
        check_recipe_keys(argv[argv.index("--config") + 1])
    return make_parser().parse_args_and_config(args=argv)


def check_recipe_keys(path: str | Path) -> None:
    """Fail on a recipe key that is not an argument of this script, TRL's SFTConfig or ModelConfig."""
    import dataclasses

    import yaml
    from trl import ModelConfig, SFTConfig

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"SFT config {path}: {e}") from None
    if not isinstance(data, dict):
        raise InputError(f"SFT config {path}: top level must be a mapping")
    known = {"env"} | {f.name for cls in (HopforgeSFTArguments, SFTConfig, ModelConfig)
                       for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InputError(f"SFT config {path}: unknown key(s) {', '.join(unknown)} (not an argument of "
                         "sft/train.py, trl.SFTConfig or trl.ModelConfig)")


def _init_config(spec: dict | str | None) -> dict | None:
    if spec is None or spec == "":
        return None
    if isinstance(spec, dict):
        return dict(spec)
    if spec.lstrip().startswith("{"):
        try:
            return json.loads(spec)
        except json.JSONDecodeError as e:
            raise InputError(f"init_config is not valid JSON: {e}") from None
    from synth.engine.config import project_path

    p = project_path(spec)
    if p.is_file():
        import yaml

        return yaml.safe_load(p.read_text())
    try:
        return json.loads(spec)
    except json.JSONDecodeError:
        raise InputError(f"init_config is neither a mapping, a file nor JSON: {spec!r}") from None


def build_model(init: dict, tokenizer, attn: str, seed: int, dtype: str | None = None):
    """A freshly initialised causal LM from a config mapping (``model_type`` plus sizes).

    ``dtype`` (``bfloat16``, ``float16``; default ``float32``) is the weights' dtype.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, set_seed

    init = dict(init)
    model_type = init.pop("model_type", None)
    if not model_type:
        raise InputError("init_config needs a model_type (e.g. qwen2, llama)")
    eot_id = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    init.setdefault("vocab_size", len(tokenizer))
    init.update(eos_token_id=eot_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id)
    config = AutoConfig.for_model(model_type, **init)
    set_seed(seed)
    torch_dtype = getattr(torch, dtype) if dtype in ("bfloat16", "float16", "float32") else torch.float32
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn, dtype=torch_dtype)
    model.generation_config.eos_token_id = eot_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def _paths(script_args, model_args) -> tuple[Path, str]:
    """The sft table and the tokenizer to train with.

    A pretrained model trains with its own tokenizer (``tokenizer_path`` overrides); a model built
    from ``init_config`` with the run's pinned ``DIR/tokenizer``.  Token ids must match the embeddings.
    """
    root = Path(script_args.data_dir) if script_args.data_dir else None
    table = script_args.sft_table or (str(root / "sft") if root else None)
    if table is None:
        raise InputError("no sft table: set data_dir (DIR with DIR/sft) or sft_table")
    pinned = str(root / "tokenizer") if root is not None and (root / "tokenizer").is_dir() else None
    fresh = script_args.init_config not in (None, "")
    tok = script_args.tokenizer_path or (pinned if fresh else model_args.model_name_or_path) or pinned
    if tok is None:
        raise InputError("no tokenizer: set tokenizer_path, data_dir (with DIR/tokenizer) or model_name_or_path")
    return Path(table), tok


def _check_pinned(tokenizer, script_args) -> None:
    """Warn when the run's pinned tokenizer (which counted the pipeline's tokens) is not the one trained with."""
    root = Path(script_args.data_dir) if script_args.data_dir else None
    if root is None or not (root / "tokenizer").is_dir():
        return
    from synth.tokenizer.tokens import load_tokenizer

    pinned = load_tokenizer(root / "tokenizer")
    if pinned.get_vocab() != tokenizer.get_vocab():
        log.warning("DIR/tokenizer (%s, %d tokens) is not the tokenizer trained with (%s, %d tokens): the "
                    "pipeline's token counts came from another tokenizer; set `tokenizer:` in the hopforge "
                    "config to the student's", pinned.name_or_path, len(pinned), tokenizer.name_or_path,
                    len(tokenizer))


def prepare(script_args, training_args, model_args) -> Prepared:
    """Load the tokenizer, template and rows; check masks; split.  Returns what :func:`main` trains on and
    changes none of its arguments (:meth:`Prepared.configure` applies what the trainer needs)."""
    from synth.tokenizer.tokens import load_tokenizer

    from synth.tokenizer.chat_templates import resolve_template
    from synth.tokenizer.losspolicy import LossPolicy
    from sft.masking import mapped_folder, raise_on_failure, release_mapped_pages, validate, write_report
    from sft.rows import held_out_questions, load_sft_dataset

    table, tok_path = _paths(script_args, model_args)
    if Path(training_args.output_dir).is_symlink():
        raise InputError(f"{training_args.output_dir} is a published stage output (a link into .stages); train into "
                         "another output_dir, or rerun the `student` stage")
    tokenizer = load_tokenizer(tok_path)
    _check_pinned(tokenizer, script_args)
    spec = script_args.chat_template
    if spec and spec not in ("auto",) and spec.endswith((".jinja", ".jinja2", ".j2")):
        from synth.engine.config import project_path

        spec = str(project_path(spec))  # a template file: the working directory's, else the project's
    template_name, template = resolve_template(spec, tokenizer)
    if spec != script_args.chat_template:
        template_name = script_args.chat_template  # reported as written
    tokenizer.chat_template = template
    from synth.engine.config import ConfigError

    data = load_sft_dataset(table)  # an empty or missing table is said first, whatever the template
    if script_args.max_rows:
        data = data.select(range(min(script_args.max_rows, len(data))))
    try:
        policy = LossPolicy.resolve(tokenizer, template, template_name, script_args.reasoning,
                                    training_args.eos_token, key="reasoning (sft.reasoning)")
    except ConfigError as e:
        raise InputError(str(e)) from None
    eot, eos = policy.eot, policy.eos
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if eos != eot:
        log.warning("eos_token %r is not the end-of-turn token %r of chat template %s: the model learns to end "
                    "turns with %r, so generation that stops only at %r runs on", eos, eot, template_name, eot, eos)
    # Generation must stop at the turn's end, not the document's; the tokenizer carries it too, so a model
    # built from init_config starts with it.
    new_eos = eos if tokenizer.eos_token != eos else None
    tokenizer.eos_token = eos
    assistant_only_loss = bool(training_args.assistant_only_loss)
    if not policy.markers and assistant_only_loss:
        log.info("chat template %s has no {%% generation %%} markers: training on masks derived from prefix "
                 "renders", template_name)
        assistant_only_loss = False
    held = held_out_questions(data["question_id"], script_args.eval_fraction)
    counts, digests, known = _cached_lengths(data, tokenizer, script_args.data_dir, policy)
    release_mapped_pages(mapped_folder(data))  # the digests read every row: their pages are not ours to keep
    if any(n is not None for n in known):
        data = data.add_column("known_n_tokens", known)
    with training_args.main_process_first(desc="loss-mask check"):
        processed, mask_report = validate(data, tokenizer, policy, training_args.max_length,
                                          num_proc=training_args.dataset_num_proc)
    mask_report["token_counts"] = _record_lengths(counts, digests, known, processed["n_tokens"],
                                                  training_args.process_index == 0)
    out = Path(training_args.output_dir)
    if training_args.process_index == 0:
        write_report(mask_report, out / "mask_report.json")
    raise_on_failure(mask_report)
    held_set = set(held)
    qids, too_long = processed["question_id"], processed["too_long"]
    train_idx = [i for i, (q, t) in enumerate(zip(qids, too_long)) if q not in held_set and not t]
    eval_idx = [i for i, (q, t) in enumerate(zip(qids, too_long)) if q in held_set and not t]
    n_held_rows = sum(1 for q in qids if q in held_set)
    funnel = {"input": len(processed), "output": len(train_idx),
              "dropped": {"held_out": n_held_rows, "too_long": sum(1 for q, t in zip(qids, too_long)
                                                                  if t and q not in held_set)}}
    if not train_idx and not script_args.validate_only:
        raise InputError(f"no rows left to train in {table}: {funnel['dropped']} (max_length "
                         f"{training_args.max_length})")
    cols = ["messages", "input_ids", "assistant_masks"]
    n_tok, n_tr = processed["n_tokens"], processed["n_trained"]
    return Prepared(
        tokenizer=tokenizer, policy=policy, table=str(table), tokenizer_path=str(tok_path),
        mask_report=mask_report, held_out=held, funnel=funnel,
        train=processed.select(train_idx).select_columns(cols),
        eval=processed.select(eval_idx).select_columns(cols) if eval_idx else None,
        train_tokens=sum(n_tok[i] for i in train_idx), train_trained=sum(n_tr[i] for i in train_idx),
        eos_token=new_eos, assistant_only_loss=assistant_only_loss,
    )


def _cached_lengths(data, tokenizer, data_dir: str | None, policy
                    ) -> tuple[Any, list[bytes], list[int | None]]:
    """Each row's rendered length as an earlier stage counted it (the length filter), from the run's token-count
    cache: ``(TokenCounts or None, digests, counts or None)``.

    The cache is keyed by the tokenizer's serialisation and its chat template, here the training template, so a
    count is found only where the filter rendered with the very template trained on: the same number as
    ``len(apply_chat_template(messages, tools=tools, tokenize=True))``.  A row counted longer than
    ``max_length`` is then dropped without being tokenized again.  Rows are looked up as rendered, their
    reasoning as the loss policy says (:meth:`synth.tokenizer.losspolicy.LossPolicy.render`), as the filter
    counted them.
    """
    if not data_dir:
        return None, [], [None] * len(data)
    from synth.tokenizer.counts import TokenCounts, conversation_digest

    from sft.rows import parse_tools

    counts = TokenCounts(tokenizer, data_dir)
    digests = [conversation_digest(policy.render(m), parse_tools(t)) for batch in
               data.select_columns(["messages", "tools"]).iter(batch_size=1_000)
               for m, t in zip(batch["messages"], batch["tools"])]
    return counts, digests, counts.known(digests)


def _record_lengths(counts, digests: list[bytes], known: list[int | None], n_tokens: list[int], write: bool) -> dict:
    """Add the lengths this stage tokenized to the cache (the main process writes them); check the cached ones
    it tokenized again against what it counted.  Returns the figures for ``mask_report.json``."""
    if counts is None:
        return {"cached": 0, "recorded": 0}
    # A too-long row dropped on its cached count carries that count, so any difference is a tokenized row.
    wrong = [(d.hex(), k, n) for d, k, n in zip(digests, known, n_tokens) if k is not None and n != k]
    if wrong:
        log.warning("%d cached token count(s) differ from the sft stage's own tokenization (first: digest %s, "
                    "cached %d, tokenized %d); the tokenized lengths are used", len(wrong), *wrong[0])
    counts.add(digests, [n if k is None else None for k, n in zip(known, n_tokens)])
    recorded = counts.flush() if write else 0
    return {"cached": sum(k is not None for k in known), "recorded": recorded}


def main(script_args, training_args, model_args, collator_wrapper=PaddingCounter) -> dict:
    """Check, train, save; returns the train report (also written to ``OUT/train_report.json``).

    ``collator_wrapper`` wraps TRL's data collator to count real and padded tokens; benchmarks
    pass a subclass of :class:`~sft.batching.PaddingCounter` that counts more.
    """
    from trl import SFTTrainer, get_peft_config

    from synth.engine.progress import quiet_library_progress

    t_start = time.time()
    if quiet_library_progress():  # not a terminal: datasets' map and the trainer log lines, no \r bars
        training_args.disable_tqdm = True
    prep = prepare(script_args, training_args, model_args)
    out = Path(training_args.output_dir)
    if script_args.validate_only:
        return {"funnel": prep.funnel, "mask_report": prep.mask_report, "validate_only": True}
    prep.configure(training_args)
    tokenizer = prep.tokenizer
    attn = resolve_attn_implementation(model_args.attn_implementation)
    init = _init_config(script_args.init_config)
    if init is not None:
        model: Any = build_model(init, tokenizer, attn, training_args.seed, model_args.dtype)
    else:
        if not model_args.model_name_or_path:
            raise InputError("set model_name_or_path (a checkpoint) or init_config (a fresh model)")
        model = model_args.model_name_or_path
        kwargs = dict(revision=model_args.model_revision, attn_implementation=attn, dtype=model_args.dtype)
        training_args.model_init_kwargs = {**kwargs, **(training_args.model_init_kwargs or {})}
    probe = model if init is not None and training_args.world_size == 1 else None
    batching = decide_batching(script_args.batching, training_args, attn, probe)
    if script_args.compact_lm_head and training_args.device.type == "cpu":
        batching["compact_lm_head"] = compact_lm_head_on_cpu()
    trainer = SFTTrainer(model=model, args=training_args, train_dataset=prep.train, eval_dataset=prep.eval,
                         processing_class=tokenizer, peft_config=get_peft_config(model_args))
    counter = collator_wrapper(trainer.data_collator)
    trainer.data_collator = counter
    log_to_hopforge(trainer)
    result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    train_counts = counter.snapshot()
    train_counts["parameters"] = sum(p.numel() for p in trainer.model.parameters())
    train_counts["trainable_parameters"] = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    eval_metrics = trainer.evaluate() if prep.eval is not None else {}
    saved = save(trainer, tokenizer, out, merge_lora=script_args.merge_lora, base=model_args.model_name_or_path)
    report = train_report(prep, trainer, result, eval_metrics, train_counts, batching, attn, saved,
                          seconds=time.time() - t_start)
    if trainer.accelerator.is_main_process:
        from synth.engine.store import atomic_write_json

        atomic_write_json(out / "train_report.json", report)
        plot_loss(report, out / "loss.png")
    if hasattr(trainer, "end"):
        trainer.end()
    return report


def save(trainer, tokenizer, out: Path, merge_lora: bool, base: str | None) -> dict:
    """Save a checkpoint ``AutoModelForCausalLM.from_pretrained`` loads; LoRA merged when asked."""
    from peft import PeftModel

    is_peft = isinstance(trainer.model, PeftModel)
    if is_peft and merge_lora and trainer.accelerator.num_processes == 1:
        merged = trainer.model.merge_and_unload()
        merged.save_pretrained(str(out))
        kind = "merged_lora"
    elif is_peft and merge_lora:
        adapter = out / "adapter"
        trainer.save_model(str(adapter))  # gathers sharded (FSDP / ZeRO-3) adapter weights
        trainer.accelerator.wait_for_everyone()
        if trainer.accelerator.is_main_process:
            merge_adapter(base, adapter, out)
        kind = "merged_lora"
    else:
        trainer.save_model(str(out))
        kind = "lora_adapter" if is_peft else "full"
    if trainer.accelerator.is_main_process:
        from synth.tokenizer.tokens import save_tokenizer

        save_tokenizer(tokenizer, out)
    trainer.accelerator.wait_for_everyone()
    return {"kind": kind, "path": str(out)}


def merge_adapter(base: str | None, adapter: Path, out: Path) -> None:
    """Load ``base`` on the CPU, merge the LoRA ``adapter`` into it and save the result to ``out``."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    if not base:
        raise InputError("merging a LoRA adapter needs model_name_or_path (the base checkpoint)")
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.bfloat16, device_map=None)
    model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    model.save_pretrained(str(out))


def accelerate_command(sft_config: str, data_dir: str, output_dir: str, accelerate_config: str | None = None, *,
                       num_processes: int | None = None, num_machines: int = 1, machine_rank: int = 0,
                       main_process_ip: str | None = None, main_process_port: int = 29500,
                       overrides: list[str] | tuple[str, ...] = (), python: str | None = None) -> list[str]:
    """The ``accelerate launch`` command line that runs this script on one or many GPUs / machines.

    ``overrides`` are ``key=value`` pairs passed on as ``--key value`` (they win over the YAML).
    The Prefect flow runs it as a subprocess on every machine, changing only ``machine_rank``.
    """
    cmd = [python or sys.executable, "-m", "accelerate.commands.launch"]
    if accelerate_config:
        cmd += ["--config_file", accelerate_config]
    if num_processes is not None:
        cmd += ["--num_processes", str(num_processes)]
    if num_machines > 1:
        if not main_process_ip:
            raise InputError("multi-node training needs main_process_ip")
        cmd += ["--num_machines", str(num_machines), "--machine_rank", str(machine_rank),
                "--main_process_ip", main_process_ip, "--main_process_port", str(main_process_port)]
    cmd += ["-m", "sft.train", "--config", sft_config, "--data_dir", data_dir, "--output_dir", output_dir]
    return cmd + overrides_to_args(overrides)


def overrides_to_args(overrides: list[str] | tuple[str, ...]) -> list[str]:
    """``["learning_rate=1e-4", "use_peft=true"]`` -> ``["--learning_rate", "1e-4", "--use_peft", "true"]``."""
    args: list[str] = []
    for item in overrides:
        if "=" not in item:
            raise InputError(f"bad override {item!r}: expected key=value")
        key, value = item.split("=", 1)
        key = key.strip().lstrip("-")
        if not key:
            raise InputError(f"bad override {item!r}: empty key")
        args += [f"--{key}", value]
    return args


def cli(argv: list[str] | None = None) -> int:
    """``python -m sft.train``: exit 2 with a message on bad input."""
    from synth.engine.progress import quiet_library_progress, setup_logging

    setup_logging()  # a process of its own: the trainer's log lines need the hopforge handler here too
    quiet_library_progress()
    try:
        script_args, training_args, model_args = parse_args(argv)
        main(script_args, training_args, model_args)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(cli())
