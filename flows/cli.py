"""The ``hopforge`` command line (typer).

Every command takes ``--config FILE`` (default ``configs/demo.yaml``), any number of
``--set dotted.key=value`` overrides, and ``--out DIR``.  Bad config or input exits 2
with a message naming the key or record.  Commands work from any directory: a relative
input path (``--config``, and the paths in a config) is looked for in the current
directory, then in the project root; ``--out`` is relative to the current directory.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Optional

import typer

from flows.cli_common import (DEFAULT_CONFIG, ConfigOpt, ForceOpt, OutOpt, SetOpt, UsageError, app, corpus_app, fail,
                              guard, load, run_stages, stop_on_sigterm)


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False) -> None:
    import signal

    from synth.engine.progress import quiet_library_progress, setup_logging

    setup_logging(logging.DEBUG if verbose else logging.INFO)
    # In a log file (a piped run, CI) no library draws \r progress bars; hopforge logs progress lines instead.
    quiet_library_progress()
    # A process started in the background by a shell inherits SIGINT ignored, and Python then keeps
    # ignoring it: Ctrl-C (or `kill -INT`) must stop a run or `hopforge serve` wherever it started.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # SIGTERM (`kill`, a scheduler, a container's stop) stops a run as Ctrl-C does, with the same resume message.
    stop_on_sigterm()


@app.command()
@guard
def run(config: ConfigOpt = Path(DEFAULT_CONFIG), set_: SetOpt = None, out: OutOpt = Path("data/demo"),
        force: ForceOpt = False,
        until: Annotated[Optional[str], typer.Option("--until", help="Stop after this stage.")] = None) -> None:
    """Run every stage in order, reusing the ones whose inputs, config and code are unchanged."""
    from flows.stages import PIPELINE

    names = [s.name for s in PIPELINE]
    if until is not None and until not in names:
        raise UsageError(f"--until: unknown stage '{until}' (stages: {', '.join(names)})")
    from flows.preflight import load_checked

    # Fail in the first seconds, naming the missing setting, rather than an hour in.
    todo = names[: names.index(until) + 1] if until else names
    cfg = load_checked(config, list(set_ or []), out, via="cli", stages=todo)
    run_stages(todo, cfg, out, force)


@app.command()
@guard
def ingest(kilt: Annotated[Optional[str], typer.Option("--kilt", help="KILT source: JSONL(.gz/.bz2), HF-layout Parquet/JSONL, hf:facebook/kilt_wikipedia, or demo.")] = None,
           strict: Annotated[bool, typer.Option("--strict", help="Exit 2 at the first bad line.")] = False,
           config: ConfigOpt = Path(DEFAULT_CONFIG), set_: SetOpt = None, out: OutOpt = Path("data/demo"),
           force: ForceOpt = False) -> None:
    """Ingest a KILT Wikipedia snapshot into corpus/pages and corpus/links."""
    extra = list(set_ or [])
    if kilt is not None:
        extra.append(f"corpus.source={kilt}")
    if strict:
        extra.append("corpus.strict=true")
    cfg = load(config, extra)
    run_stages(["ingest"], cfg, out, force)


def _stage_command(stage: str, doc: str, build_graph: bool = False, then: str | None = None) -> None:
    """Register `hopforge <command>` running one stage (and the graph first, when it is missing)."""

    def command(config: ConfigOpt = Path(DEFAULT_CONFIG), set_: SetOpt = None, out: OutOpt = Path("data/demo"),
                force: ForceOpt = False) -> None:
        names = [stage]
        from flows.preflight import PreflightError, calls_teacher, load_checked, memory_problems

        # A stage that calls the teacher gets the same preflight as `hopforge run` (key, endpoint, model,
        # tool-call format), so a misconfigured endpoint fails in seconds instead of becoming data.
        cfg = load_checked(config, list(set_ or []), out, via="cli", stages=names) if calls_teacher(names) \
            else load(config, set_)
        if problems := memory_problems(cfg, str(config), "cli", names):  # a size this machine cannot hold
            raise PreflightError(problems)
        if build_graph:
            from synth.engine.store import Store

            if not Store(out).stage_entry("graph"):
                names.insert(0, "graph")
        run_stages(names, cfg, out, force)
        if then:
            from synth.engine.progress import print_line

            print_line(then.format(out=out))

    command.__doc__ = doc
    from flows.stages import BY_NAME

    app.command(BY_NAME[stage].command)(guard(command))


for _stage, _doc, *_rest in [
    ("graph", "Build the CSR link graph from corpus/links and print its stats."),
    ("walks", "Walk k-hop entity paths over the link graph (builds the graph first if needed).", True),
    ("expand", "Expand connected subgraphs of K pages around seed pages (OpenSeeker-v2).", True),
    ("index", "Build the local BM25 search index (DIR/index) over corpus/pages."),
    ("embed", "Embed every page (tools.dense: its title and description, or lead) into DIR/embed, the vectors the "
              "dense retriever searches."),
    ("questions", "Write verified multi-hop questions from walks (and subgraphs) through the teacher; sources and "
                  "questions that retrace a benchmark of questions.decontaminate are dropped first."),
    ("rollout", "Roll out rollout.n teacher ReAct trajectories per question over the local tools (writes traces)."),
    ("tokenizer", "Write DIR/tokenizer: the demo BPE trained on the corpus, or a pinned copy of the configured one."),
    ("filter", "Filter traces (format, correctness, low-step, repeats, grounding, length, decontamination), keep the best of n "
               "per question as `sft`, and put questions with 1 <= c <= n-1 correct rollouts in `rl_pool`."),
    ("assemble", "Assemble long-context rows (gold + tier-1 + tier-2 documents to each length L) into DIR/longctx."),
    ("report", "Write DIR/report/index.md: the funnel with every drop reason, trace histograms, pass@n, the "
               "evidence-recovery curve, calibration and teacher cost per kept sample.", False,
     "report: {out}/report/index.md"),
    ("sft", "Train the pipeline's student on DIR/sft with the sft.config recipe into DIR/student (what `hopforge "
            "eval` evaluates); reused while DIR/sft, the recipe and the code are unchanged.", False,
     "student: {out}/student"),
    ("rl_band", "Under rl.band_by=student, roll the warm-start student (DIR/student, or the server at rl.base_url) "
                "out rl.n times on every rl question through the eval harness and write rl_pool with the questions "
                "it answers 1 <= c <= n-1 times (under rl.band_by=teacher the filter writes rl_pool).", False,
     "rl_pool: {out}/rl_pool"),
]:
    _stage_command(_stage, _doc, *_rest)


@corpus_app.command("demo")
@guard
def corpus_demo(out: Annotated[Path, typer.Option("--out", "-o", help="KILT-format JSONL file to write.")] = Path("data/source/kilt_demo.jsonl")) -> None:
    """Write the demo corpus: ~10k real Wikipedia summaries as KILT JSONL, links from title mentions."""
    from synth.corpus.demo import build_demo_corpus

    stats = build_demo_corpus(out)
    from synth.engine.progress import print_table

    print_table(f"demo corpus: {out}", ["what", "count"], [[k, v] for k, v in stats.items()])


@app.command("eval")
@guard
def eval_(model: Annotated[Optional[str], typer.Option("--model", help="Checkpoint folder to evaluate (local "
                                                            "transformers), or MODEL@URL for a model an "
                                                            "OpenAI-compatible server serves; default: the "
                                                            "pipeline's DIR/student.")] = None,
          server: Annotated[bool, typer.Option("--server", help="Evaluate the model a server already serves "
                                                                "(teacher.backend=openai, teacher.base_url, teacher.model).")] = False,
          benchmark: Annotated[Optional[list[str]], typer.Option(
              "--benchmark", "-b", help="FORMAT:FILE of a published benchmark (hotpotqa, 2wiki, musique, frames, "
                                        "browsecomp, gaia, jsonl), repeatable: run the model on it in the student's "
                                        "harness; `eval` adds the run's own eval split as a row of the same table.")] = None,
          limit: Annotated[Optional[int], typer.Option("--limit", help="A seeded sample of N questions per "
                                                                       "benchmark (the report says so).")] = None,
          samples: Annotated[int, typer.Option("--samples", help="Trajectories per benchmark question: avg@k "
                                                                 "with its spread.")] = 1,
          judge: Annotated[Optional[str], typer.Option("--judge", help="MODEL@URL of an OpenAI-compatible LLM judge "
                                                                       "graded beside the answer rule (prompt "
                                                                       "synth/teacher/prompts/bench_judge.jinja2).")] = None,
          judge_key_env: Annotated[Optional[str], typer.Option("--judge-key-env", help="Variable holding the judge's "
                                                                                       "API key (default: "
                                                                                       "teacher.api_key_env).")] = None,
          compare: Annotated[Optional[tuple[str, str]], typer.Option("--compare", help="A B: two models (checkpoint "
                                                                                       "folder, MODEL@URL or student) "
                                                                                       "side by side on the same "
                                                                                       "benchmark questions and judge.")] = None,
          config: ConfigOpt = Path(DEFAULT_CONFIG), set_: SetOpt = None, out: OutOpt = Path("data/demo"),
          force: ForceOpt = False) -> None:
    """Run the student in the rollout harness on the eval questions, or any model on published benchmarks
    (--benchmark); write eval_report.json (and eval.md for benchmarks)."""
    cfg = load(config, set_)
    if benchmark or compare:
        from sft.benchmarks.run import run_benchmarks
        from sft.benchmarks.table import COMPARE, judge_without_verdict, table_rows
        from synth.engine.progress import print_line, print_table

        if not benchmark:
            raise UsageError("--compare needs at least one --benchmark FORMAT:FILE")
        report = run_benchmarks(out, cfg, list(benchmark), model=model, server=server, limit=limit, samples=samples,
                                judge=judge, judge_key_env=judge_key_env, compare=compare)
        where = report["report_dir"]
        if compare:
            cols = ["benchmark", "questions"] + [f"{c} {s}" for c in COMPARE[:3] for s in "AB"] + ["rule accuracy B - A"]
            print_table(f"eval: {report['A']['model']} (A) vs {report['B']['model']} (B) -> {where}/compare.md", cols,
                        [[r[c] for c in cols] for r in report["rows"]])
        else:
            cols = ["benchmark", "questions", "accuracy (rule)", "accuracy (judge)", "avg@k (rule)",
                    "tool calls/question", "turns", "calls", "cost USD"]
            print_table(f"eval: {report['model']} -> {where}/eval_report.json", cols,
                        [[r[c] for c in cols] for r in table_rows(report)])
            failed = judge_without_verdict(report)
            if failed:
                print_line(f"judge: {failed} answer(s) got no verdict (recorded per answer in verdicts.parquet); "
                           "the rule's verdict stands for them")
            from synth.engine.records import TEACHER_FAILED

            lost = sum(r["stop_reasons"].get(TEACHER_FAILED, 0) for r in report["benchmarks"])
            if lost:
                print_line(f"model: {lost} trajectory(ies) ended on a model call that failed for good (counted as "
                           f"wrong; stop_reasons.{TEACHER_FAILED} in eval_report.json)")
        return
    if model is None and not server:
        run_stages(["eval"], cfg, out, force)
        return
    if model is not None and "@http" in model:  # a served model named on the command line: the eval split too
        from sft.benchmarks.judge import parse_endpoint

        served, url = parse_endpoint(model, "--model")
        cfg.teacher = cfg.teacher.model_copy(update={"backend": "openai", "model": served, "base_url": url})
        model = None
    from sft.evaluate import evaluate
    from synth.engine.progress import print_table
    from synth.engine.store import Store

    name = Path(model).name if model is not None else cfg.teacher.model.replace("/", "_")
    target = out / "evals" / name
    report = evaluate(Store(out), cfg, str(model) if model is not None else None, target)
    rows = [[k, report["student"].get(k), report["teacher"].get(k)] for k in
            ("traces", "answer_rate", "accuracy", "format_valid_tool_call_rate", "tool_calls_per_question", "recovered")]
    print_table(f"eval: {name} -> {target}/eval_report.json", ["metric", "student", "teacher"], rows)


@app.command("sft")
@guard
def sft_(
    config: Annotated[Path, typer.Option("--config", "-c", help="SFT recipe YAML (configs/sft/*.yaml).")] = Path("configs/sft/tiny.yaml"),
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder DIR with DIR/sft and DIR/tokenizer.")] = Path("data/demo"),
    set_: Annotated[Optional[list[str]], typer.Option("--set", "-s", help="Override a recipe key: key=value (repeatable).")] = None,
    output_dir: Annotated[Optional[Path], typer.Option("--output-dir", help="Checkpoint folder (default DIR/runs/<recipe name>).")] = None,
    validate_only: Annotated[bool, typer.Option("--validate-only", help="Only check the loss masks (mask_report.json).")] = False,
    accelerate_config: Annotated[Optional[Path], typer.Option("--accelerate-config", help="Run under accelerate launch with this config (configs/accelerate/*.yaml).")] = None,
    num_processes: Annotated[Optional[int], typer.Option("--num-processes", help="Processes (GPUs) for accelerate launch.")] = None,
) -> None:
    """Warm-start SFT on DIR/sft with TRL (assistant-only loss, masks checked first) into DIR/runs/<recipe name>;
    `hopforge student` trains the pipeline's own DIR/student, which `hopforge eval` reads."""
    import shlex
    import subprocess

    from sft.stage import recipe_path, run_recipe, summary_rows, training_command
    from synth.engine.progress import print_line, print_table

    overrides = list(set_ or []) + (["validate_only=true"] if validate_only else [])
    if accelerate_config is not None or (num_processes or 1) > 1:
        cmd = training_command(recipe_path(config), out, overrides, output_dir, num_processes, accelerate_config)
        print_line(shlex.join(cmd))  # one line, quoted: it can be pasted into a shell as is
        raise typer.Exit(subprocess.call(cmd))
    report = run_recipe(config, out, output_dir, overrides)
    print_table(f"hopforge sft: {config}", ["what", "value"], summary_rows(report))

import flows.cli_publish  # noqa: E402,F401  (registers `hopforge publish`)
import flows.cli_serve  # noqa: E402,F401  (registers `hopforge serve` and `hopforge check`)
import flows.cli_tools  # noqa: E402,F401  (registers `hopforge tools`)
import flows.cli_verify  # noqa: E402,F401  (registers `hopforge verify`)


def main() -> None:
    """Console entry point."""
    app()


if __name__ == "__main__":
    main()
