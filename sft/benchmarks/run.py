"""``hopforge eval --benchmark FORMAT:FILE``: a model on published benchmarks, in the student's own harness.

The model (the pipeline's student, a checkpoint folder, or any OpenAI-compatible ``MODEL@URL``) answers each
question through :func:`synth.rollout.loop.rollout_one` with the run's tools over ``DIR/index``, the turn limit
and the context policy it trained with (:func:`sft.evaluate.harness_settings`), ``--samples k`` times per
question.  Each answer is graded by the rule (page identity first, then token F1: :func:`synth.text.answers.judge`
against the keys of :mod:`sft.benchmarks.questions`) and, with ``--judge``, by the pinned judge
(:mod:`sft.benchmarks.judge`) beside it.  The figures of :func:`sft.evaluate.metrics` (answer rate, tool calls,
turns, ERF) are reused as they are; the evidence figures are taken over the questions whose benchmark names
supporting pages the corpus holds.

``eval_report.json`` and ``eval.md`` (:mod:`sft.benchmarks.table`) hold one row per benchmark file; each file's
traces and per-answer verdicts (rule and judge side by side) sit in a folder of their own.
"""

from __future__ import annotations

import logging
import os
import shutil
import statistics
from pathlib import Path
from typing import Any

import pyarrow as pa

from sft.benchmarks.judge import (PROMPT, Verdict, endpoint_config, judge_answers, judge_config, parse_endpoint,
                                   prompt_sha256)
from sft.benchmarks.questions import EVAL_SPLIT, BenchSet, eval_split_set, load_set, resolve
from sft.evaluate import CountedTurns, TurnCounter, harness_settings, metrics
from synth.engine.errors import InputError, StageFailed
from synth.engine.records import TEACHER_FAILED, Question, Trace
from synth.engine.store import atomic_write_bytes, atomic_write_json, write_parquet_atomic
from synth.report.stage import calibration_of
from synth.rollout.loop import rollout_one
from synth.teacher.client import Teacher
from synth.text.answers import judge as rule_judge
from synth.tools.rank import open_search, search_facts
from synth.tools.toolbox import Toolbox

log = logging.getLogger("hopforge")
REPORT, TABLE = "eval_report.json", "eval.md"


def model_config(cfg: Any, root: Path, spec: str | None, server: bool = False) -> tuple[str, Any]:
    """(label, teacher config) of the model to evaluate: ``MODEL@URL`` (served), a checkpoint folder, the
    configured teacher endpoint (``server``), or by default the pipeline's student ``DIR/student``."""
    ecfg = cfg.eval
    sampling = {"temperature": ecfg.temperature, "max_tokens": ecfg.max_new_tokens}
    if server:
        return cfg.teacher.model, cfg.teacher.model_copy(update=sampling)
    if spec is not None and "@http" in spec:
        model, url = parse_endpoint(spec, "model")
        return model, endpoint_config(cfg.teacher, {**sampling, "backend": "openai", "model": model, "base_url": url},
                                      "--model")
    path = Path(spec) if spec is not None else root / "student"
    if not (path / "config.json").exists():
        raise InputError(f"{path} is not a transformers checkpoint (no config.json); give a checkpoint folder or "
                         "MODEL@URL for a served model")
    label = "student" if spec is None else path.name
    return label, cfg.teacher.model_copy(update={**sampling, "backend": "hf", "model": str(path), "concurrency": 1})


def load_benchmarks(store: Any, cfg: Any, specs: list[str], limit: int | None) -> list[BenchSet]:
    """Every ``FORMAT:FILE``, read, sampled and resolved against the run's corpus."""
    if not specs:
        raise InputError("--benchmark: give at least one FORMAT:FILE")
    benches = [eval_split_set(store, cfg, limit) if s == EVAL_SPLIT else load_set(s, limit, cfg.seed) for s in specs]
    resolve(store, benches, cfg.filters.min_f1)
    return benches


class Judge:
    """The pinned judge: its teacher and what the report records of it."""

    def __init__(self, cfg: Any, spec: str, key_env: str | None = None):
        model, url = parse_endpoint(spec, "--judge")
        self.cfg = judge_config(cfg.teacher, model, url, key_env)
        self.teacher = Teacher(self.cfg, None)

    def describe(self) -> dict[str, Any]:
        """What the report records of the judge: model, endpoint (no userinfo or query), prompt and its sha256."""
        return {"model": self.cfg.model, "endpoint": self.cfg.display_url(),
                "prompt": f"synth/teacher/prompts/{PROMPT}", "prompt_sha256": prompt_sha256(), "temperature": 0.0}

    def close(self) -> None:
        """Close the judge's client."""
        self.teacher.close()


def evaluate_model(store: Any, cfg: Any, label: str, teacher_cfg: Any, benches: list[BenchSet], out_dir: Path,
                   samples: int = 1, judge: Judge | None = None, limit: int | None = None,
                   progress: bool | None = None) -> dict[str, Any]:
    """Roll ``teacher_cfg``'s model out on every benchmark, grade, and write ``out_dir/eval_report.json``,
    ``out_dir/eval.md`` and each benchmark's traces and verdicts; returns the report."""
    from sft.benchmarks.table import report_markdown
    from synth.engine.progress import Bar

    settings = harness_settings(cfg)
    index = open_search(store, cfg.tools)  # the agents' search under tools.ranker
    teacher = Teacher(teacher_cfg, None)  # no call cache: a retrained checkpoint must never be answered from old calls
    final, out_dir = out_dir, _staging(out_dir)  # written aside, then put in the place of an earlier run's whole
    price = cfg.teacher.price_per_mtok
    rows, failures = [], []
    try:
        for i, bench in enumerate(benches):
            counter = TurnCounter(cfg.eval.max_new_tokens)
            counted = CountedTurns(teacher, counter)
            toolbox = Toolbox(index, cfg.tools)  # nothing masked but on the run's own split: sft.benchmarks.questions

            async def one(item: tuple[Question, int], bench: BenchSet = bench) -> Trace:
                q, s = item
                box = Toolbox(index, cfg.tools, mask_page_ids=[q.answer_page_id]) if bench.own else toolbox
                return await rollout_one(counted, box, q, s, settings)

            items = [(q, s) for q in bench.questions for s in range(samples)]
            before = teacher.stats.snapshot()
            with Bar(f"{label} on {bench.name}", len(items), "trajectories", enabled=progress) as bar:
                traces = list(teacher.map(one, items, progress=bar))
            used = teacher.stats.snapshot().minus(before)
            failures += [t.error for t in traces if isinstance(t, Trace) and t.stop_reason == TEACHER_FAILED]
            verdicts, judged_usage = _judge(judge, bench, traces, progress)
            row = benchmark_row(bench, traces, verdicts, cfg, samples)
            row["truncation"] = counter.report()
            row["cost"] = {"model": used.priced(price).as_dict(),
                           "judge": judged_usage.priced(price).as_dict() if judged_usage is not None else None}
            folder = out_dir / f"{i:02d}-{bench.format}-{_slug(bench.path.name)}"
            row["folder"] = folder.name
            write_parquet_atomic(Trace.to_table(traces), folder / "traces.parquet")
            write_parquet_atomic(pa.Table.from_pylist(_verdict_rows(bench, traces, verdicts, cfg)),
                                 folder / "verdicts.parquet")
            rows.append(row)
    finally:
        teacher.close()
    report = {
        "model": label, "backend": teacher_cfg.backend,
        "endpoint": teacher_cfg.display_url() if teacher_cfg.backend == "openai" else None,
        "harness": {"max_turns": settings.max_turns, "max_new_tokens": cfg.eval.max_new_tokens,
                    "temperature": cfg.eval.temperature, "context": cfg.sft.context,
                    "compress_observations": settings.compress_observations,
                    "keep_observations": settings.keep_observations,
                    "answer_page_masked": [b.name for b in benches if b.own],
                    "search": search_facts(cfg.tools)},  # tools.ranker and its embedding model
        "samples": samples, "limit": limit, "seed": cfg.seed,
        "grading": {"rule": "page identity first (the answer resolved to a corpus page by title or alias), then "
                            "token F1 >= min_f1", "min_f1": cfg.filters.min_f1},
        "judge": judge.describe() if judge is not None else None,
        "price_per_mtok": price.model_dump() if price is not None else None,
        "benchmarks": rows,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out_dir / REPORT, report)
    atomic_write_bytes(out_dir / TABLE, report_markdown(report).encode())
    _replace(out_dir, final)
    out_dir = final
    total = sum(r["traces"] for r in rows)
    if total and len(failures) == total:
        # A dead endpoint or a refused key: a table of zeros would read as a weak model.
        why = next((e for e in failures if e), "no reason given")
        where = f" at {report['endpoint']}" if report["endpoint"] else ""
        raise StageFailed(f"model {label}{where}: every one of its {total} trajectories ended on a model call that "
                          f"failed ({why}), so nothing was measured; the report is kept in {out_dir}; check the "
                          "endpoint and the key, then run again")
    return report


def _judge(judge: Judge | None, bench: BenchSet, traces: list[Trace], progress: bool | None
           ) -> tuple[list[Verdict] | None, Any]:
    if judge is None:
        return None, None
    from synth.engine.progress import Bar

    qs = {q.question_id: q for q in bench.questions}
    items = [(qs[t.question_id].question, qs[t.question_id].golds, t.final_answer) for t in traces]
    before = judge.teacher.stats.snapshot()
    with Bar(f"judge on {bench.name}", len(items), "answers", enabled=progress) as bar:
        verdicts = judge_answers(judge.teacher, items, progress=bar)
    return verdicts, judge.teacher.stats.snapshot().minus(before)


def _verdict_rows(bench: BenchSet, traces: list[Trace], verdicts: list[Verdict] | None, cfg: Any) -> list[dict]:
    qs = {q.question_id: q for q in bench.questions}
    rows = []
    for i, t in enumerate(traces):
        j = rule_judge(t.final_answer, bench.keys[t.question_id], cfg.filters.min_f1)
        v = verdicts[i] if verdicts is not None else None
        rows.append({"question_id": t.question_id, "sample_index": t.sample_index, "question": qs[t.question_id].question,
                     "gold": qs[t.question_id].answer, "prediction": t.final_answer, "rule_correct": j.correct,
                     "rule_basis": j.basis, "f1": round(j.f1, 4),
                     "judge_correct": v.correct if v is not None else None,
                     "judge_error": v.error if v is not None and v.correct is None and v.error != "no_answer" else None,
                     "judged_correct": (v.correct if v is not None and v.correct is not None else j.correct)})
    return rows


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"mean": round(statistics.fmean(values), 4), "std": round(statistics.pstdev(values), 4),
            "min": round(min(values), 4), "max": round(max(values), 4)}


def benchmark_row(bench: BenchSet, traces: list[Trace], verdicts: list[Verdict] | None, cfg: Any,
                  samples: int) -> dict[str, Any]:
    """One benchmark's row: accuracy by the rule and by the judge (the rule's verdict where the judge gave
    none), their agreement, avg@k, answer rate, tool calls, turns, and the evidence figures where the benchmark
    names supporting pages the corpus holds."""
    min_f1 = cfg.filters.min_f1
    rows = _verdict_rows(bench, traces, verdicts, cfg)
    t_max = max([cfg.eval.max_turns] + [t.n_turns for t in traces])
    m = metrics(traces, bench.keys, min_f1, t_max)
    n = len(traces)
    rule = [r["rule_correct"] for r in rows]
    judged = [r["judged_correct"] for r in rows]
    per_sample = lambda flags: [sum(f for f, t in zip(flags, traces) if t.sample_index == s)  # noqa: E731
                                / max(1, sum(1 for t in traces if t.sample_index == s)) for s in range(samples)]
    row: dict[str, Any] = {
        **bench.summary(), "samples": samples, "traces": n,
        "accuracy": {"rule": round(sum(rule) / n, 4), "judge": round(sum(judged) / n, 4) if verdicts is not None else None},
        "avg_at_k": {"k": samples, "rule": _spread(per_sample(rule)),
                     "judge": _spread(per_sample(judged)) if verdicts is not None else None},
        "answer_rate": m["answer_rate"], "format_valid_tool_call_rate": m["format_valid_tool_call_rate"],
        "tool_calls_per_question": m["tool_calls_per_question"], "turns_mean": m["turns_mean"],
        "stop_reasons": m["stop_reasons"], "evidence": _evidence(bench, traces, rule, min_f1, t_max),
    }
    if verdicts is not None:
        asked = [v for v in verdicts if v.error != "no_answer"]
        both = [(r["rule_correct"], v.correct) for r, v in zip(rows, verdicts) if v.correct is not None]
        row["judge"] = {"asked": len(asked), "verdicts": len(both),
                        "failed": sum(1 for v in asked if (v.error or "").startswith("failed")),
                        "unparsed": sum(1 for v in asked if (v.error or "").startswith("unparsed")),
                        "agreement": round(sum(a == b for a, b in both) / len(both), 4) if both else None,
                        "rule_only": sum(1 for a, b in both if a and not b),
                        "judge_only": sum(1 for a, b in both if b and not a)}
    return row


def _evidence(bench: BenchSet, traces: list[Trace], rule: list[bool], min_f1: float, t_max: int) -> dict | None:
    """Over the traces whose question has supporting pages in the corpus: ERF(t) and the share recovered
    (:func:`sft.evaluate.metrics`), and the share of answers given before every supporting page was seen."""
    keep = [t for t in traces if t.gold_page_ids]
    if not keep:
        return None
    m = metrics(keep, bench.keys, min_f1, t_max)
    answered = [t for t in keep if t.final_answer is not None]
    early = sum(1 for t in answered if calibration_of(t.gold_first_seen, t.n_turns, True)["answer_state"] != 2)
    return {"traces": len(keep), "answered": len(answered),
            "answered_before_all_evidence": round(early / len(answered), 4) if answered else None,
            "recovered": m["recovered"], "erf": m["erf"]}


def _staging(folder: Path) -> Path:
    """An empty hidden folder beside ``folder`` that an evaluation is written into before it takes its place (a
    run stopped half way leaves the earlier run's report and folders as they were, and in agreement)."""
    work = folder.parent / f".{folder.name}.partial"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return work


def _replace(work: Path, folder: Path) -> None:
    """Put the finished ``work`` in the place of ``folder``, whose earlier run (its report and every benchmark's
    folder) goes, so the report always lists exactly the folders beside it."""
    old = folder.parent / f".{folder.name}.old"
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        os.rename(folder, old)
    os.rename(work, folder)
    shutil.rmtree(old, ignore_errors=True)


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60]


def run_benchmarks(out: Path, cfg: Any, specs: list[str], model: str | None = None, server: bool = False,
                   limit: int | None = None, samples: int = 1, judge: str | None = None,
                   judge_key_env: str | None = None, compare: tuple[str, str] | None = None,
                   report_dir: Path | None = None, progress: bool | None = None) -> dict[str, Any]:
    """The one entry of the CLI, the flow and the tests: evaluate one model (``model`` / ``server``), or two
    side by side (``compare``: each a checkpoint folder, ``MODEL@URL`` or ``student``) on the same questions
    and judge.  Returns the report (with ``compare`` the comparison, ``report_dir`` where it was written)."""
    from synth.engine.store import Store

    if samples < 1:
        raise InputError(f"--samples must be at least 1 (got {samples})")
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1 (got {limit})")
    store = Store(out)
    for need in ("index", "corpus/pages"):
        if not store.exists(need):
            raise InputError(f"{out}: no {need}; build it first (`hopforge run --until index --out {out}`)")
    benches = load_benchmarks(store, cfg, specs, limit)
    judged = Judge(cfg, judge, judge_key_env) if judge else None
    try:
        if compare is None:
            label, tcfg = model_config(cfg, Path(out), model, server)
            target = report_dir or Path(out) / "evals" / _slug(label) / "benchmarks"
            report = evaluate_model(store, cfg, label, tcfg, benches, target, samples, judged, limit, progress)
            report["report_dir"] = str(target)
            return report
        from sft.benchmarks.table import compare_markdown, compare_reports

        models = [model_config(cfg, Path(out), None if m == "student" else m) for m in compare]
        if models[0][0] == models[1][0]:
            models = [(f"{label} ({side})", c) for (label, c), side in zip(models, "AB")]
        target = report_dir or Path(out) / "evals" / f"compare-{_slug(models[0][0])}-vs-{_slug(models[1][0])}"
        reports = [evaluate_model(store, cfg, label, c, benches, target / side, samples, judged, limit, progress)
                   for (label, c), side in zip(models, "AB")]
        both = compare_reports(reports[0], reports[1])
        atomic_write_json(target / "compare.json", both)
        atomic_write_bytes(target / "compare.md", compare_markdown(both).encode())
        both["report_dir"] = str(target)
        return both
    finally:
        if judged is not None:
            judged.close()


__all__ = ["Judge", "REPORT", "TABLE", "benchmark_row", "evaluate_model", "load_benchmarks", "model_config",
           "run_benchmarks"]
