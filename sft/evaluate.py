"""Student evaluation in the same rollout harness, tools and questions that made the data.

The student answers the questions of the ``eval`` split, which no training table holds
(each question's split is decided once, when it is written), through
:func:`synth.rollout.loop.rollout_one` with the real search/open/find tools and source
masking.  It runs as a local ``transformers`` model (``teacher.backend: hf``) or behind any
OpenAI-compatible server (e.g. vLLM serving the checkpoint).  ``eval_report.json`` holds,
for the student and for the teacher on the same questions: the answer rate, accuracy,
the format-valid tool-call rate, tool calls per question, and the evidence-recovery curve;
for the student also ``truncation``: how many of its turns were cut at ``eval.max_new_tokens``.
The student sees the context it trained in (``sft.context``, :func:`harness_settings`).
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

from synth.corpus.answerkeys import answer_keys
from synth.text.answers import AnswerKey, is_correct
from synth.engine.errors import InputError
from synth.engine.records import Question, Split, Trace
from synth.report.stage import INF, erf_curve, recovery_turn
from synth.rollout.loop import RolloutSettings, rollout_one
from synth.tools.rank import open_search, search_facts
from synth.teacher.client import Teacher
from synth.tools.toolbox import Toolbox

log = logging.getLogger("hopforge")


class TurnCounter:
    """Counts the turns a model was cut at its token budget (``max_new_tokens``).

    A turn is cut when the server says ``finish_reason == "length"``, or when it used the whole
    budget without ending on a stop (the ``hf`` backend reports ``tool_calls`` for a turn whose
    complete tool call was followed by text up to the budget).
    """

    def __init__(self, max_new_tokens: int):
        self.max_new_tokens = max_new_tokens
        self.turns = 0
        self.cut = 0

    def note(self, resp: Any) -> None:
        """Count one assistant turn (a :class:`~synth.teacher.types.ChatResponse`)."""
        self.turns += 1
        used = (resp.usage or {}).get("completion_tokens", 0)
        if resp.finish_reason == "length" or (resp.finish_reason != "stop" and used >= self.max_new_tokens):
            self.cut += 1

    def report(self) -> dict[str, Any]:
        """``max_new_tokens``, ``turns``, ``cut_turns`` and ``cut_rate`` (None with no turn)."""
        return {"max_new_tokens": self.max_new_tokens, "turns": self.turns, "cut_turns": self.cut,
                "cut_rate": round(self.cut / self.turns, 4) if self.turns else None}


class CountedTurns:
    """A teacher whose every answered turn is noted by a :class:`TurnCounter`; all else is the teacher's."""

    def __init__(self, teacher: Teacher, counter: TurnCounter):
        self._teacher, self._counter = teacher, counter

    async def chat(self, *args: Any, **kw: Any):
        resp = await self._teacher.chat(*args, **kw)
        self._counter.note(resp)
        return resp

    def __getattr__(self, name: str) -> Any:
        return getattr(self._teacher, name)


def harness_settings(cfg: Any) -> RolloutSettings:
    """How the student rolls out (eval and the student band): ``eval.max_turns`` turns, the teacher's context
    limit, and the context it trained in (``sft.context``): ``full``, every observation in full; ``as_seen``,
    compressed as the teacher's was (``rollout.compress_observations``, ``keep_observations``), so the student
    meets the placeholders its rows showed it, at the same turns."""
    compress = cfg.sft.context == "as_seen" and cfg.rollout.compress_observations
    return RolloutSettings(max_turns=cfg.eval.max_turns, max_tokens=cfg.rollout.max_tokens,
                           compress_observations=compress, keep_observations=cfg.rollout.keep_observations,
                           seed=cfg.seed, min_grounding=cfg.filters.min_grounding)


def eval_questions(store) -> list[Question]:
    """The questions of the ``eval`` split, in question-id order."""
    from synth.rollout.stage import load_questions

    held = sorted((q for q in load_questions(store) if q.split == Split.EVAL), key=lambda q: q.question_id)
    if not held:
        raise InputError(f"{store.root}/questions has no question of the eval split (questions.splits.eval is 0, "
                         "or too few questions were written)")
    return held


def metrics(traces: Iterable[Trace], golds: Mapping[str, AnswerKey | list[str]], min_f1: float,
            t_max: int) -> dict[str, Any]:
    """Answer rate, accuracy, format-valid tool-call rate, tool calls per question and ERF(t), t = 0..t_max;
    ``golds`` maps each question to its answer key (or its answer and aliases)."""
    traces = list(traces)
    n = len(traces)
    if n == 0:
        return {"traces": 0}
    answered = [t for t in traces if t.final_answer is not None]
    correct = [is_correct(t.final_answer, golds[t.question_id], min_f1) for t in traces]
    attempted = valid = 0
    for t in traces:
        # A tool call the harness could not read stays in the text of a turn without calls.
        malformed = sum(1 for m in t.conversation.messages
                        if m.role == "assistant" and not m.tool_calls and "<tool_call>" in (m.content or ""))
        attempted += t.n_tool_calls + malformed
        valid += t.n_tool_calls - t.n_tool_errors
    questions = {t.question_id for t in traces}
    times = [recovery_turn(t.gold_first_seen, t.n_turns, c) for t, c in zip(traces, correct)]
    ts, erf = erf_curve(times, t_max)
    return {
        "traces": n,
        "questions": len(questions),
        "answer_rate": round(len(answered) / n, 4),
        "accuracy": round(sum(correct) / n, 4),
        "format_valid_tool_call_rate": round(valid / attempted, 4) if attempted else None,
        # Per attempt at a question (one trajectory), so n samples per question compare with one.
        "tool_calls_per_question": round(sum(t.n_tool_calls for t in traces) / n, 3),
        "turns_mean": round(sum(t.n_turns for t in traces) / n, 3),
        # Trajectories that ended on a turn cut at the token budget with no complete tool call in it.
        "truncated_traces": sum(t.stop_reason == "truncated" for t in traces),
        "stop_reasons": dict(sorted(Counter(t.stop_reason for t in traces).items())),
        "recovered": round(sum(x != INF for x in times) / n, 4),
        "erf": {"t": ts, "fraction": [round(x, 4) for x in erf]},
    }


def evaluate(store, cfg, model: str | None, out_dir: Path, progress: Any = None) -> dict[str, Any]:
    """Roll the student out on the eval questions and write ``out_dir/eval_report.json`` (+ traces)."""
    ecfg = cfg.eval
    if model is not None:  # a local checkpoint, run with transformers
        if not (Path(model) / "config.json").exists():
            raise InputError(f"--model {model} is not a transformers checkpoint (no config.json)")
        teacher_cfg = cfg.teacher.model_copy(update={"backend": "hf", "model": str(model), "max_tokens": ecfg.max_new_tokens,
                                                     "temperature": ecfg.temperature, "concurrency": 1})
    else:  # a server already serving the checkpoint named by teacher.model
        teacher_cfg = cfg.teacher.model_copy(update={"temperature": ecfg.temperature, "max_tokens": ecfg.max_new_tokens})
    held = eval_questions(store)
    questions = held[: ecfg.max_questions]
    run_cfg = harness_settings(cfg)
    index = open_search(store, cfg.tools)  # the agents' search under tools.ranker
    # No call cache: a checkpoint retrained at the same path must never be answered from stale calls.
    teacher = Teacher(teacher_cfg, None)
    cut = TurnCounter(ecfg.max_new_tokens)
    counted = CountedTurns(teacher, cut)

    async def one(item: tuple[Question, int]) -> Trace:
        q, s = item
        return await rollout_one(counted, Toolbox(index, cfg.tools, mask_page_ids=[q.answer_page_id]), q, s, run_cfg)

    items = [(q, s) for q in questions for s in range(ecfg.n)]
    student = list(teacher.map(one, items, progress=progress))
    keys = answer_keys(store, cfg.filters.min_f1)  # the filter's rule: the student is judged as the teacher was
    golds = {q.question_id: keys.key_for(q) for q in questions}
    teacher_traces = [Trace.from_row(r) for r in store.read("traces").to_pylist() if r["question_id"] in golds]
    t_max = max([ecfg.max_turns] + [t.n_turns for t in teacher_traces])
    min_f1 = cfg.filters.min_f1
    report = {
        "model": str(model) if model is not None else teacher_cfg.model,
        "backend": teacher_cfg.backend,
        "held_out_questions": len(held),
        "evaluated_questions": len(questions),
        "samples_per_question": ecfg.n,
        "max_turns": ecfg.max_turns,
        # the agents' search the student had: tools.ranker and, dense or hybrid, the embedding model (as the rollout
        # report names the teacher's)
        "search": search_facts(cfg.tools),
        "context": {"policy": cfg.sft.context, "compress_observations": run_cfg.compress_observations,
                    "keep_observations": run_cfg.keep_observations},
        "student": {**metrics(student, golds, min_f1, t_max), "truncation": cut.report()},
        "teacher": metrics(teacher_traces, golds, min_f1, t_max),
        "teacher_model": sorted({t.teacher_model for t in teacher_traces}),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    from synth.engine.store import atomic_write_json, write_parquet_atomic

    write_parquet_atomic(Trace.to_table(student), out_dir / "traces.parquet")
    atomic_write_json(out_dir / "eval_report.json", report)
    return report


def run_eval(ctx) -> Any:
    """Stage ``eval``: the pipeline's student (``DIR/student``) on the eval questions -> ``DIR/eval``."""
    from synth.engine.stage import StageResult

    try:
        held = eval_questions(ctx.store)
    except InputError as e:
        # Held out by configuration (questions.splits.eval 0), there is nothing to evaluate, and that is a result;
        # a run that wrote too few questions to hold one out has an empty eval, which fails unless runner.allow_empty.
        log.warning("eval: %s; nothing to evaluate", e)
        idle = "questions.splits.eval is 0: no question is held out" if ctx.cfg.questions.splits.eval == 0 else ""
        return StageResult(input=0, output=0, idle=idle, extra={"skipped": str(e)})
    bar = ctx.bar("eval trajectories", len(held) * ctx.cfg.eval.n, "traces")
    with bar:
        report = evaluate(ctx.store, ctx.cfg, str(ctx.store.path("student").resolve()), ctx.out("eval"), progress=bar)
    n = report["student"]["traces"]
    skipped = len(held) * ctx.cfg.eval.n - n
    return StageResult(input=len(held) * ctx.cfg.eval.n, output=n,
                       dropped={"over_max_questions": skipped} if skipped else {},
                       extra={"student": report["student"], "teacher_on_same_questions": report["teacher"],
                              "evaluated_questions": report["evaluated_questions"], "search": report["search"]})
