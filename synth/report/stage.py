"""``hopforge report``: one readable page about a run, ``DIR/report/index.md`` with PNG figures.

It reads what the stages left in DIR -- ``reports/<stage>.json`` (input / output /
dropped, teacher stats), ``questions``, ``traces``, ``filter/verdicts`` -- and skips
whatever is missing (a run stopped before filtering still gets a report).

The teacher's cost is priced here, from the tokens the teacher stages recorded and the
config's ``teacher.price_per_mtok`` now, so a price set after those stages ran still prices
them (the price is part of the report stage's key, so changing it reruns only the report).

Definitions (evidence state, evidence recovery and calibration, with gold paths):

- **Turns** count assistant messages from 1.  ``gold_first_seen[j]`` is the turn whose
  tool observation first showed gold page j (-1: never), so at turn t the agent has
  seen the gold pages with ``0 <= gold_first_seen[j] < t``: the evidence state it
  decides in is ``E_t`` = 0 (none seen), 1 (some), 2 (all).
- **Recovery time** ``T_recover`` = min(the first turn decided at ``E_t = 2``, i.e.
  ``max_j gold_first_seen[j] + 1`` -- never when any is -1 or that turn never came; the
  turn of a correct answer, ``n_turns``), read off the step labels' own ``E_t``
  (:func:`synth.rollout.labels.full_evidence_turn`).  ``ERF(t) = (1/N) sum_i
  1[T_recover,i <= t]``, per teacher model; it ends at the fraction of traces that recovered.
- **Calibration**, per trace over its turns: ``CE_i = sum_k P(E=k) |P(answer | E=k)
  - 1[k = 2]|``, with ``P(E=k)`` the share of turns in state k and ``P(answer | E=k)``
  the share of those turns that gave the final answer.  Over-confident: the answer was
  given at ``E < 2``; over-cautious: turns spent at ``E = 2`` before answering.
"""

from __future__ import annotations

import gc
import json
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from filters.band import pass_stats
from filters.base import AFTER_CHAIN, HELD_OUT, NOT_BEST
from synth.engine.records import LEGACY_TOOL_COLUMNS, tool_counts_of_row
from synth.engine.stage import StageContext, StageResult
from synth.engine.store import MissingInput, Store
from synth.engine.tables import RowMapping, RowSequence
from synth.report.decontam import decontamination_section
from synth.report.band import band_section
from synth.report.explorer import write_explorer
from synth.report.headline import read_headline
from synth.engine.reports import (AnswerFacts, ContextFacts, FilterReport, MatchFacts, PreferenceFacts, ReasoningFacts,
                                  RolloutReasoning, RolloutReport, RunReports, StageReport)
from synth.report.runinfo import STAGE_ORDER, STAGE_UNITS, funnel_rows, read_reports, search_text
from synth.report.trust import trust_sections
from synth.rollout.labels import evidence_states, full_evidence_turn
from synth.teacher.config import Price
from synth.teacher.stats import PricedUsage, TeacherUsage
from synth.text.answers import is_correct
from synth.text.markdown import md_code, md_text
from synth.tools.registry import tool_names

TEACHER_KEYS = PricedUsage.TOKENS + PricedUsage.COSTS
# The section of index.md on what the run paid the teacher (requests sent, call-cache hits): a run fact, so
# comparisons of two runs' reports leave it out (synth.report.digest).
TEACHER_COST = "## Teacher cost"
INF = math.inf


# ---- per-trace measures ----------------------------------------------------------------------

def recovery_turn(gold_first_seen: list[int], n_turns: int, correct: bool) -> float:
    """``T_recover``: the first turn with ``E_t = 2`` (:func:`evidence_states`, so the turn after the observation
    that completed the gold pages), or the turn of a correct answer, whichever is first (inf: never)."""
    full = full_evidence_turn(gold_first_seen, n_turns)
    return min(INF if full is None else full, n_turns if correct else INF)


def erf_curve(times: list[float], t_max: int | None = None) -> tuple[list[int], list[float]]:
    """``(t, ERF(t))`` for t = 0..t_max (default: the largest finite time)."""
    finite = [t for t in times if t != INF]
    t_max = t_max if t_max is not None else int(max(finite, default=0))
    n = len(times)
    ts = list(range(0, t_max + 1))
    if not n:
        return ts, [0.0] * len(ts)
    counts = Counter(int(t) for t in finite)
    out, acc = [], 0
    for t in ts:
        acc += counts.get(t, 0)
        out.append(acc / n)
    return ts, out


def calibration_of(gold_first_seen: list[int], n_turns: int, answered: bool) -> dict[str, Any]:
    """CE of one trace, the state it answered in (None: no answer) and its over-cautious turns."""
    states = evidence_states(gold_first_seen, n_turns)
    if not states:
        return {"ce": None, "answer_state": None, "over_cautious_turns": None}
    n_k = Counter(states)
    answer_state = states[-1] if answered else None
    T = len(states)
    ce = 0.0
    for k, nk in n_k.items():
        p_answer = (1 if answer_state == k else 0) / nk
        ce += nk / T * abs(p_answer - (1.0 if k == 2 else 0.0))
    return {"ce": ce, "answer_state": answer_state,
            "over_cautious_turns": n_k[2] - 1 if answer_state == 2 else None}


@dataclass(slots=True)
class TraceFacts:
    """The few columns of a trace the report needs (no conversation text)."""

    trace_id: str
    question_id: str
    teacher_model: str
    n_turns: int
    n_tool_calls: int
    gold_first_seen: list[int]
    answered: bool
    correct: bool
    completion_tokens: int
    n_tokens: int | None = None
    tool_counts: dict[str, int] = field(default_factory=dict)  # calls per tool (Trace.tool_counts)
    n_tool_errors: int = 0
    kept: bool | None = None  # from filter/verdicts; None: not filtered yet
    sample_index: int = 0


def calibration_by_teacher(facts: Iterable[TraceFacts]) -> dict[str, dict[str, Any]]:
    """Per teacher model: over-confident rate (and at E=0 / E=1), over-cautious turns, mean CE."""
    acc: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for f in facts:
        c = calibration_of(f.gold_first_seen, f.n_turns, f.answered)
        a = acc[f.teacher_model]
        a["n"].append(1)
        if c["ce"] is not None:
            a["ce"].append(c["ce"])
        if f.answered and c["answer_state"] is not None:
            a["answer_state"].append(c["answer_state"])
        if c["over_cautious_turns"] is not None:
            a["cautious"].append(c["over_cautious_turns"])
    out = {}
    for teacher, a in sorted(acc.items()):
        states = a["answer_state"]
        answered = len(states)
        out[teacher] = {
            "traces": len(a["n"]),
            "answered": answered,
            "over_confident_rate": _ratio(sum(1 for s in states if s < 2), answered),
            "answered_at_E0": _ratio(sum(1 for s in states if s == 0), answered),
            "answered_at_E1": _ratio(sum(1 for s in states if s == 1), answered),
            "over_cautious_mean_turns": _mean(a["cautious"]),
            "over_cautious_rate": _ratio(sum(1 for t in a["cautious"] if t > 0), len(a["cautious"])),
            "ce": _mean(a["ce"]),
        }
    return out


def erf_by_teacher(facts: Iterable[TraceFacts]) -> dict[str, dict[str, Any]]:
    """Per teacher model: the ERF curve and the fraction of traces that ever recovered."""
    times: dict[str, list[float]] = defaultdict(list)
    for f in facts:
        times[f.teacher_model].append(recovery_turn(f.gold_first_seen, f.n_turns, f.correct))
    t_max = int(max((t for ts in times.values() for t in ts if t != INF), default=0))
    out = {}
    for teacher, ts in sorted(times.items()):
        grid, vals = erf_curve(ts, t_max)
        finite = [t for t in ts if t != INF]
        out[teacher] = {"t": grid, "erf": vals, "recovered": _ratio(len(finite), len(ts)),
                        "median_recovery_turn": _median(finite)}
    return out


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 6) if b else None


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 6) if xs else None


def _median(xs: list[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    m = len(s) // 2
    return float(s[m]) if len(s) % 2 else (s[m - 1] + s[m]) / 2


# ---- reading the run -------------------------------------------------------------------------

def _arrow(store: Store, rel: str, columns: list[str]) -> pa.Table | None:
    """The columns of ``rel`` it has, in Arrow; None when the table is missing."""
    try:
        ds_ = store.dataset(rel)
    except MissingInput:
        return None
    return ds_.to_table(columns=[c for c in columns if c in ds_.schema.names])


TRACE_COLUMNS = ["trace_id", "question_id", "teacher_model", "n_turns", "n_tool_calls", "gold_first_seen",
                 "final_answer", "completion_tokens", "tool_counts", *LEGACY_TOOL_COLUMNS, "n_tool_errors", "sample_index"]


def load_facts(store: Store, min_f1: float) -> tuple[list[TraceFacts], Mapping[str, dict], Sequence[dict] | None]:
    """Trace facts (correctness from ``filter/verdicts``, else the answer rule), questions, verdicts.

    Memory grows with the run only by a :class:`TraceFacts` per trace: traces are read a batch at a time, and
    the questions (id -> ``question_id, hops, answer, answer_aliases, split``) and the verdicts stay in Arrow
    (:mod:`synth.engine.tables`); at 40,000 traces the dicts of every row were 140 MB, growing with the run."""
    qt = _arrow(store, "questions", ["question_id", "path", "answer", "answer_aliases", "split"])
    questions: Mapping[str, dict] = {}
    if qt is not None:
        if "path" in qt.column_names:
            hops = pc.subtract(pc.fill_null(pc.list_value_length(qt.column("path")), 0), 1)
            qt = qt.drop_columns(["path"]).append_column("hops", hops)
        questions = RowMapping(qt, "question_id", cache=0)
    vt = _arrow(store, "filter/verdicts", ["trace_id", "correct", "n_tokens", "kept", "reason", "ungrounded_steps"])
    verdicts = RowSequence(vt) if vt is not None else None
    by_id: dict[str, tuple] = {}  # trace id -> (correct, n_tokens, kept); for a repeated id the last row stands
    if vt is not None and vt.num_rows:
        by_id = dict(zip(vt.column("trace_id").to_pylist(), zip(
            *(vt.column(c).to_pylist() if c in vt.column_names else [None] * vt.num_rows
              for c in ("correct", "n_tokens", "kept")))))
    facts: list[TraceFacts] = []
    try:
        traces = store.dataset("traces")
    except MissingInput:
        return facts, questions, verdicts
    cols = [c for c in TRACE_COLUMNS if c in traces.schema.names]
    models: dict[str, str] = {}  # one string per teacher, not one per trace
    for batch in traces.to_batches(columns=cols, batch_size=4096):
        for t in batch.to_pylist():
            v = by_id.get(t["trace_id"])
            if v is not None:
                correct = bool(v[0])
            else:
                q = questions.get(t["question_id"])
                golds = [q["answer"], *(q["answer_aliases"] or [])] if q else []
                correct = bool(golds) and is_correct(t["final_answer"], golds, min_f1)
            teacher = models.setdefault(t["teacher_model"], t["teacher_model"])
            facts.append(TraceFacts(
                trace_id=t["trace_id"], question_id=t["question_id"], teacher_model=teacher,
                n_turns=int(t["n_turns"]), n_tool_calls=int(t["n_tool_calls"]),
                gold_first_seen=list(t["gold_first_seen"] or []),
                answered=bool(t["final_answer"] and str(t["final_answer"]).strip()), correct=correct,
                completion_tokens=int(t["completion_tokens"] or 0), n_tokens=v[1] if v else None,
                tool_counts={c["name"]: int(c["calls"] or 0) for c in tool_counts_of_row(t)},
                n_tool_errors=int(t.get("n_tool_errors") or 0), kept=bool(v[2]) if v else None,
                sample_index=int(t.get("sample_index") or 0)))
    return facts, questions, verdicts


def _reasons(dropped: dict[str, int]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in sorted(dropped.items(), key=lambda kv: (-kv[1], kv[0])) if v)


def _step(label: str, count: int, unit: str, kind: str, dropped: int | None = None, note: str = "") -> dict:
    return {"label": label, "count": int(count), "unit": unit, "kind": kind, "dropped": dropped, "note": note}


def filter_drops(report: StageReport, verdicts: list[dict] | None) -> dict[str, int]:
    """Traces the filter stage dropped, by reason: its report, else each trace's verdict (first failing reason)."""
    dropped = {k: int(v) for k, v in report.dropped.items()}
    if not dropped and verdicts:
        dropped = dict(Counter(v["reason"] for v in verdicts if not v.get("kept") and v.get("reason")))
    return dropped


def funnel_steps(reports: RunReports, verdicts: list[dict] | None = None) -> list[dict]:
    """The funnel in stage order, each step one unit: questions drafted and accepted; traces; the traces
    left after each drop reason of the filter chain (chain order), after setting aside the traces of
    questions outside the sft split (``held_out``); the kept SFT rows (best of n, ``not_best``).

    Each step is a dict: ``label``, ``count``, ``unit``, ``kind`` (questions / traces / kept),
    ``dropped`` (what the step removed from the step before it; None for a step that starts a unit)
    and ``note`` (the reasons).  Per-reason counts of the filter come from ``reports/filter.json``
    (``dropped`` and ``reason_order``, the reasons in chain order), else from ``filter/verdicts``.
    """
    reports = RunReports.of(reports)
    steps: list[dict] = []
    q = reports.questions
    if q:
        drafted, accepted = int(q.input or 0), int(q.output or 0)
        steps.append(_step("drafted", drafted, "questions", "questions"))
        steps.append(_step("accepted by the validators", accepted, "questions", "questions",
                           dropped=drafted - accepted, note=_reasons(dict(q.dropped))))
    r, f = reports.rollout, reports.filter
    traces = int(r.output or 0) if r else (int(f.input or 0) if f else None)
    if traces is not None:
        n = r.n if r else None
        rdrop = {k: int(v) for k, v in (r.dropped if r else {}).items()}
        steps.append(_step(f"rollouts (n = {n} per question)" if n else "rollouts", traces, "traces", "traces",
                           dropped=sum(rdrop.values()) or None, note=_reasons(rdrop)))
    if f:
        dropped = filter_drops(f, verdicts)
        order = [x for x in f.reason_order if x not in AFTER_CHAIN]
        order += sorted(x for x in dropped if x not in order and x not in AFTER_CHAIN)
        remaining = int(f.input if f.input is not None else traces or 0)
        for reason in order:
            d = dropped.get(reason, 0)
            remaining -= d
            steps.append(_step(f"after {reason}", remaining, "traces", "traces", dropped=d))
        remaining -= dropped.get(HELD_OUT, 0)
        steps.append(_step(f"after {HELD_OUT} (sft-split questions only)", remaining, "traces", "traces",
                           dropped=dropped.get(HELD_OUT, 0)))
        kept = int(f.output or 0)
        steps.append(_step("kept: best of n (SFT rows)", kept, "SFT rows", "kept", dropped=remaining - kept,
                           note=NOT_BEST if remaining - kept else ""))
    return steps


def teacher_totals(reports: RunReports, price: Price | None = None) -> dict[str, dict[str, float]]:
    """Teacher usage per stage (``teacher`` key of questions / rollout / filter) and in total, priced by
    :meth:`~synth.teacher.stats.TeacherUsage.priced`.  ``total`` has a cost only when every stage has one."""
    reports = RunReports.of(reports)
    per: dict[str, PricedUsage] = {}
    for name in STAGE_ORDER:
        usage = TeacherUsage.from_report(reports.teacher(name))
        if usage is not None:
            per[name] = usage.priced(price)
    out = {name: p.as_dict() for name, p in per.items()}
    if per:
        out["total"] = PricedUsage.total(per.values()).as_dict()
    return out


def pass_triples(facts: list[TraceFacts]) -> list[tuple[int, int, bool | None]]:
    """``(n, c, first)`` for every question with rollouts: samples, correct ones, and whether sample 0 was."""
    by_q: dict[str, list[TraceFacts]] = defaultdict(list)
    for f in facts:
        by_q[f.question_id].append(f)
    return [(len(v), sum(f.correct for f in v), next((f.correct for f in v if f.sample_index == 0), None))
            for _, v in sorted(by_q.items())]


def pass_counts(facts: list[TraceFacts]) -> dict[int, dict[int, int]]:
    """Questions by their number of rollouts n, then by correct rollouts c: ``{n: {c: questions}}``."""
    by_q: dict[str, list[bool]] = defaultdict(list)
    for f in facts:
        by_q[f.question_id].append(f.correct)
    out: dict[int, Counter] = defaultdict(Counter)
    for v in by_q.values():
        out[len(v)][sum(v)] += 1
    return {n: dict(sorted(c.items())) for n, c in sorted(out.items())}


def main_n(counts: dict[int, dict[int, int]]) -> int | None:
    """The n most questions have (ties: the larger n)."""
    return max(counts, key=lambda n: (sum(counts[n].values()), n)) if counts else None


# ---- the report ------------------------------------------------------------------------------

@dataclass
class Report:
    """What :func:`build_report` produced: the summary numbers and the files written."""

    summary: dict[str, Any] = field(default_factory=dict)
    figures: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    explorer: dict[str, Any] = field(default_factory=dict)


class Figures:
    """The report's figures as they are made: ``figs(name, caption)`` lists a drawn figure and shows it in the
    Markdown with its caption; :meth:`histogram` draws one, unless its data holds a single value: a histogram
    of that is one bar over an empty axis, so one line of the report says the value instead, and no PNG is
    written (``summary["one_value_figures"]``)."""

    def __init__(self, md: list[str], out: Path, rep: Report, plots: Any):
        self.md, self.out, self.rep, self.plots = md, out, rep, plots

    def __call__(self, name: str, caption: str) -> None:
        self.rep.figures.append(name)
        self.md.extend([f"![{caption}]({name})", "", f"*{caption}*", ""])

    def histogram(self, name: str, caption: str, values: Sequence[float], title: str, xlabel: str,
                  what: tuple[str, str], **kw: Any) -> None:
        """``plots.histogram`` of ``values`` (and ``kw["extra"]``, a labelled second series) as ``name``, or,
        when every value is one value, a line naming it and how many ``what`` (one, many: ``("trace",
        "traces")``) have it."""
        extra = kw.get("extra")
        value = self.plots.one_value(values, *([extra[1]] if extra else []))
        if value is None:
            self.plots.histogram(values, self.out / name, title, xlabel, **kw)
            self(name, caption)
            return
        (self.out / name).unlink(missing_ok=True)  # an earlier report's figure would be stale
        shown = f"{value:g}" if isinstance(value, float) else f"{value:,}"
        n = len(values)
        said = f"the only {what[0]}" if n == 1 else f"all {n:,} {what[1]}"
        self.md.extend([f"{title}: one value, {shown}, for {said}; no histogram is drawn.", ""])
        self.rep.summary.setdefault("one_value_figures", {})[name] = {"value": value, "count": len(values)}


def build_report(store: Store, out: Path, min_f1: float = 0.8, *, min_tool_calls: int | None = None,
                 max_tool_calls: int | None = None, price: Price | None = None, explorer: bool = True,
                 ctx: StageContext | None = None) -> Report:
    """Write ``out/index.md`` and its PNG figures from the run in ``store``, and (``explorer``) the
    browsable ``out/index.html`` (:mod:`synth.report.explorer`).

    ``min_tool_calls`` / ``max_tool_calls`` (T_min, T_max of the low-step filter) are marked on the
    tool-call histogram; ``price`` (``teacher.price_per_mtok``) prices the recorded teacher tokens.
    With ``ctx`` (the report stage's) the explorer's per-trace work runs in its worker processes.
    """
    import synth.report.plots as plots

    out.mkdir(parents=True, exist_ok=True)
    rep = Report()
    reports = read_reports(store.root)
    facts, questions, verdicts = load_facts(store, min_f1)
    md: list[str] = [f"# hopforge report: {md_code(store.root.name)}", "",
                     "Everything below is read from the run folder; sections whose inputs are missing are skipped.", ""]
    fig = Figures(md, out, rep, plots)

    _funnel_section(md, reports, verdicts, out, rep, plots, fig)

    # Questions.
    if questions:
        hops = questions.column("hops")
        md += ["## Questions", "", f"{len(questions):,} questions, {sum(hops) / len(hops):.2f} hops on average.", ""]
        fig.histogram("hops.png", "How many links each question's gold path chains (its entities minus one).",
                      hops, "Hops per question", "hops (path length - 1)", ("question", "questions"), discrete=True)
    else:
        rep.skipped.append("questions")
    if (decon := decontamination_section(md, reports.questions)) is not None:
        rep.summary["decontamination"] = decon
    rep.skipped += trust_sections(md, store.root, reports, verdicts, rep.summary, fig)
    rep.skipped += band_section(md, reports, store.root, rep.summary, plots, out, fig)

    if facts:
        # The per-question success figure shows the questions rl_pool draws from (the split(s) the filter banded),
        # all of them sampled n times, so its band bars are the band of the table; other splits are sampled
        # adaptively (sft) or once (eval) and would only blur it.
        pooled = set(reports.filter.bands_of_splits if reports.filter else [])
        pool_ids = ({qid for qid, split in zip(questions, questions.column("split")) if split in pooled}
                    if questions else set())
        _trace_sections(md, facts, reports, out, rep, plots, fig, min_tool_calls, max_tool_calls,
                        pool=(sorted(pooled), pool_ids))
        _evidence_sections(md, facts, out, rep, plots, fig)
    else:
        rep.skipped.append("traces")

    distillation_section(md, reports.filter, rep.summary, reports.rollout)
    _cost_section(md, reports, rep, price)
    if (headline := read_headline(store.root, price)) is not None:
        md += ["## Per kept SFT row", ""] + headline.markdown()
        rep.summary["headline"] = headline.as_dict()
    if rep.skipped:
        md += ["## Skipped", "", "Missing inputs: " + ", ".join(rep.skipped) + ".", ""]
    md[2:2] = ["Browse every question, its path and evidence, and every trace with its filter verdicts in "
               "[index.html](index.html) (a static page: open it from disk).", ""]
    (out / "index.md").write_text("\n".join(md).rstrip() + "\n")
    # The explorer reads the tables again in its own batches, and its worker processes are forked from this
    # one: they should not start holding (and counting in their RSS) every trace's facts.
    del facts, questions, verdicts
    gc.collect()
    if explorer:
        rep.explorer = write_explorer(store, out, rep.figures, rep.summary, min_f1=min_f1, ctx=ctx)
    return rep


def _funnel_section(md: list[str], reports: RunReports, verdicts: list[dict] | None, out: Path, rep: Report,
                    plots: Any, fig: Any) -> None:
    reports = RunReports.of(reports)
    rows = funnel_rows(reports)
    steps = funnel_steps(reports, verdicts)
    md += ["## Funnel", ""]
    if not rows and not steps:
        rep.skipped.append("funnel (no reports/*.json)")
        md += ["No stage reports yet.", ""]
        return
    if steps:
        plots.funnel(steps, out / "funnel.png")
        parts = []
        if any(s["kind"] == "questions" for s in steps):
            parts.append("questions drafted (one per walk or subgraph) and accepted by the validators (upper "
                         "panel, counted in questions)")
        chain = reports.filter.chain if reports.filter else None
        trace_part = "traces (lower panel, counted in traces): every rollout"
        if reports.filter:
            trace_part += (", then the traces left after each drop reason of the filter chain in chain order"
                           + (f" ({' -> '.join(md_text(x) for x in chain)})" if chain else "")
                           + ", after setting aside traces of rl and eval questions (held_out), and the kept SFT "
                             "rows (best of n; one kept trace is one row)")
        if any(s["kind"] != "questions" for s in steps):
            parts.append(trace_part)
        fig("funnel.png", "Funnel, top to bottom in stage order: " + "; ".join(parts) + ". Linear scale; each bar "
                          "says its count, its unit and how many its step dropped (-N).")
        md += ["| step | count | dropped by the step | reasons |", "| --- | ---: | ---: | --- |"]
        for s in steps:
            md.append(f"| {md_text(s['label'])} | {s['count']:,} {md_text(s['unit'])} | "
                      f"{'-' if s['dropped'] is None else format(s['dropped'], ',')} | {md_text(s['note'] or '-')} |")
        md.append("")
        rep.summary["funnel_steps"] = steps
    if rows:
        md += ["Every stage's input and output, each in its own unit:", "",
               "| stage | unit | input | output | dropped | drop reasons |", "| --- | --- | ---: | ---: | ---: | --- |"]
        for r in rows:
            md.append(f"| {md_text(r['stage'])} | {md_text(r['unit'])} | {r['input']:,} | {r['output']:,} | "
                      f"{sum(r['dropped'].values()):,} | {md_text(_reasons(r['dropped']) or '-')} |")
        md.append("")
        drop_list = [(f"{r['stage']}: {k} ({r['unit']})", v) for r in rows for k, v in sorted(r["dropped"].items())
                     if v]
        plots.drops(drop_list, out / "drops.png")
        fig("drops.png", "Every dropped record, by the stage and the reason that dropped it; each bar counts its "
                         "stage's unit (in brackets).")
        rep.summary["funnel"] = rows


def _trace_sections(md: list[str], facts: list[TraceFacts], reports: RunReports, out: Path, rep: Report,
                    plots: Any, fig: Any, t_min: int | None, t_max: int | None,
                    pool: tuple[list[str], set[str]] = ([], set())) -> None:
    one_per_turn = sum(1 for f in facts if f.n_turns == f.n_tool_calls + 1)
    reports = RunReports.of(reports)
    search = reports.rollout.search if reports.rollout else {}
    rep.summary["search"] = dict(search or {"ranker": "bm25"})
    md += ["## Traces", "", f"{len(facts):,} traces from {len({f.question_id for f in facts}):,} questions; "
           f"{sum(f.correct for f in facts):,} correct. Turns per trace: mean "
           f"{sum(f.n_turns for f in facts) / len(facts):.1f}; {one_per_turn:,} traces make one tool call a turn "
           "and answer in one more (turns = tool calls + 1), so turns are not plotted apart from tool calls.", "",
           f"The agents' search: {search_text(search)}.", ""]
    kept = [f.kept for f in facts]
    known = all(k is not None for k in kept)
    chain = reports.filter.chain if reports.filter else None
    in_chain = chain is None or "low_step" in chain
    plots.tool_calls([f.n_tool_calls for f in facts], kept if known else None, t_min, t_max, out / "tool_calls.png",
                     low_step_in_chain=in_chain)
    marks = []
    if t_min is not None:
        marks.append(f"the dashed line at {t_min - 0.5:g} is T_min = {t_min} (filters.min_tool_calls): the low-step "
                     "filter drops traces left of it")
    if t_max is not None:
        marks.append(f"T_max = {t_max} (filters.max_tool_calls) drops traces with more calls")
    fig("tool_calls.png", "Tool calls per trace, one bar per count"
        + (", split into traces kept as SFT rows and the others" if known else "")
        + ("; " + "; ".join(marks) if marks else "")
        + ("" if in_chain else " (low_step is not in this run's filter chain)") + ".")
    groups: dict[str, list[TraceFacts]] = {"correct answer": [f for f in facts if f.correct],
                                           "wrong or no answer": [f for f in facts if not f.correct]}
    tools = list(dict.fromkeys([*tool_names(), *(name for f in facts for name in f.tool_counts)]))
    mix = {f"{name} ({len(fs):,})": {**{tool: _mean([f.tool_counts.get(tool, 0) for f in fs]) or 0.0 for tool in tools},
                                      "errors": _mean([f.n_tool_errors for f in fs]) or 0.0}
           for name, fs in groups.items() if fs}
    plots.tool_mix(mix, out / "tools.png", tools)
    fig("tools.png", f"Mean calls of each tool ({', '.join(tools)}) per trace, and tool calls that returned an "
                     "error, for traces with a correct answer and the others.")
    rendered = [f.n_tokens for f in facts if f.n_tokens is not None]
    fig.histogram("tokens.png", "Tokens per trace: what the teacher generated, and (when measured) the full rendered "
                                "conversation in the student's tokenizer.",
                  [f.completion_tokens for f in facts], "Tokens per trace", "tokens",
                  tuple(w + (" (completion and rendered tokens alike)" if rendered else "") for w in ("trace", "traces")),
                  label="teacher completion tokens",
                  extra=("rendered SFT tokens (length filter)", rendered) if rendered else None)
    splits, pool_ids = pool
    pooled = [f for f in facts if f.question_id in pool_ids]
    whose = (f"The {' and '.join(splits)} questions (those rl_pool draws from: the teacher's band)" if pooled
             else "Questions")
    counts = pass_counts(pooled or facts)
    n = main_n(counts)
    if n is not None:
        plots.pass_at_n(counts[n], n, out / "pass_at_n.png")
        others = {m: sum(c.values()) for m, c in counts.items() if m != n}
        left_out = ("" if not others else " Left out: " + ", ".join(
            f"{q:,} question{'s' if q != 1 else ''} with n = {m}" for m, q in others.items())
                    + f" (the plot shows the most common n, {n}).")
        fig("pass_at_n.png", f"{whose} by c, the number of their n = {n} rollouts that answered correctly: one "
                             f"bar at each c/n (0/{n} ... {n}/{n}). 1 <= c <= n-1 is the RL band (a GRPO group with "
                             f"a gradient); c = 0 and c = n are all wrong and all right." + left_out)
    stats = pass_stats(pass_triples(facts))
    rep.summary["traces"] = len(facts)
    rep.summary["pass_counts"] = {str(m): {str(c): q for c, q in cs.items()} for m, cs in counts.items()}
    rep.summary["pass@1"] = stats.get("pass@1")
    rep.summary["pass@n"] = stats.get("pass@n")
    md += [f"pass@1 ({stats.get('pass@1_from', 'mean c/n')}) = {rep.summary['pass@1']}, pass@n (any correct) = "
           f"{rep.summary['pass@n']}.", ""]


def _evidence_sections(md: list[str], facts: list[TraceFacts], out: Path, rep: Report, plots: Any, fig: Any) -> None:
    curves = erf_by_teacher(facts)
    md += ["## Evidence recovery", "",
           "T_recover is the first turn whose observation completed the gold evidence (E = 2), or the turn of a "
           "correct answer; ERF(t) is the share of traces recovered by turn t (steeper is better).", "",
           "| teacher | traces | recovered | median recovery turn |", "| --- | ---: | ---: | ---: |"]
    n_by = Counter(f.teacher_model for f in facts)
    for t, c in curves.items():
        md.append(f"| {md_code(t, table=True)} | {n_by[t]:,} | {c['recovered']} | {c['median_recovery_turn']} |")
    md.append("")
    plots.erf({t: (c["t"], c["erf"]) for t, c in curves.items()}, out / "erf.png")
    fig("erf.png", "ERF(t) per teacher: fraction of traces with all gold pages seen or a correct answer by turn t.")
    cal = calibration_by_teacher(facts)
    md += ["## Calibration", "",
           "E_t is the evidence a turn was decided with (0 no gold page seen, 1 some, 2 all). Over-confident: answered "
           "at E < 2. Over-cautious: turns spent at E = 2 before answering. CE = sum_k P(E=k)|P(answer|E=k) - "
           "1[k=2]|, averaged over traces (0 is ideal).", "",
           "| teacher | answered | over-confident | at E=0 | at E=1 | over-cautious turns (mean) | "
           "over-cautious rate | CE |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for t, c in cal.items():
        md.append(f"| {md_code(t, table=True)} | {c['answered']:,} | {c['over_confident_rate']} | {c['answered_at_E0']} | "
                  f"{c['answered_at_E1']} | {c['over_cautious_mean_turns']} | {c['over_cautious_rate']} | {c['ce']} |")
    md.append("")
    plots.calibration(cal, out / "calibration.png")
    fig("calibration.png", "Per teacher: answers given before all evidence, calibration error, and turns wasted "
                           "after full evidence.")
    rep.summary["erf"] = {t: {"recovered": c["recovered"], "final": c["erf"][-1] if c["erf"] else None}
                          for t, c in curves.items()}
    rep.summary["calibration"] = cal


def distillation_section(md: list[str], filter_report: FilterReport | None, summary: dict,
                         rollout_report: RolloutReport | None = None) -> None:
    """What the student learns from the teacher (``reports/filter.json``): the SFT rows' context (``sft.context``),
    the reasoning they carry and its share of what the assistant writes, how answers were judged (page identity
    first) and the teacher aliases the corpus did not support, and the preference pairs.  The scalars also go to
    ``summary``, which the explorer shows.  ``rollout_report`` says where the teacher's server put its reasoning
    (and so where it was sent back)."""
    fr = FilterReport.of(filter_report)
    if all(x is None for x in (fr.context, fr.reasoning, fr.match, fr.preference)):
        return
    md += ["## Distillation", ""]
    ctx, r = fr.context or ContextFacts(), fr.reasoning or ReasoningFacts()
    if ctx:
        summary["sft_context"] = ctx.policy
        summary["sft_rows"] = fr.sft_rows
        md += [f"Context `{ctx.policy}`: {fr.sft_rows or 0:,} SFT rows from {fr.output or 0:,} kept "
               "traces (" + ("every observation in full, every assistant turn trained" if ctx.policy == "full"
                             else "one row per assistant turn, the context the teacher saw for it, that turn trained")
               + "); the student's eval and band see the same context.", ""]
    if r:
        share = r.share_of_assistant_tokens
        summary["sft_rows_with_reasoning"] = r.traces_with_reasoning
        if share is not None:
            summary["reasoning_share_of_assistant_tokens"] = share
        md += [f"Reasoning: {r.traces_with_reasoning or 0:,} of {r.traces or 0:,} kept traces carry the "
               f"teacher's reasoning (`sft.reasoning`: {r.mode})"
               + (f"; it is {share:.1%} of the tokens the assistant writes (the trained part; the sft stage's "
                  "mask_report.json gives its exact share of the trained tokens)" if share is not None else "")
               + ".", ""]
    seen = RolloutReport.of(rollout_report).reasoning or RolloutReasoning()
    if seen.where:
        where = "in `<think>` blocks of its content" if seen.where == "think" else f"under `{seen.where}`"
        summary["teacher_reasoning_field"] = seen.where
        md += [f"The teacher's server returned its reasoning {where} ({seen.traces or 0:,} traces), and every "
               "earlier turn's reasoning was sent back to it there.", ""]
    m, a = fr.match or MatchFacts(), fr.answers or AnswerFacts()
    if m:
        aliases, others = a.aliases, a.other_titles
        summary["answers_other_page"] = (m.other_page or 0) + (m.qualified or 0)
        md += ["Answers are judged by page identity first (`synth/text/answers.py`): "
               f"{m.page or 0:,} named the answer page (its title or an alias the corpus supports, Unicode "
               f"folded), {m.f1 or 0:,} were free text within token F1 of it, {m.other_page or 0:,} named "
               f"another page of the corpus, {m.qualified or 0:,} a qualified sibling page (\"X (...)\"), and "
               f"{m.none or 0:,} matched nothing.", ""]
        if a.corpus:
            ex = aliases.dropped_examples
            summary["aliases_dropped"] = aliases.dropped or 0
            md += [f"{others.questions or 0:,} questions have other pages within F1 {others.min_f1} of "
                   f"their answer ({others.titles or 0:,} titles), which never count as right. Of "
                   f"{aliases.teacher or 0:,} teacher-written aliases, {aliases.dropped or 0:,} have no "
                   "support in the corpus (not a name of the page, nor the text of a link to it) and are not accepted"
                   + (f", e.g. {ex[0]['alias']!r} for {ex[0]['answer']!r}" if ex else "") + ".", ""]
    p = fr.preference or PreferenceFacts()
    if p:
        b = p.by_rejected
        summary["preference_pairs"] = p.pairs
        md += [f"Preference pairs (`preference`, DPO): {p.pairs or 0:,}; the rejected rollout by why it lost: "
               + ", ".join(f"`{k}` {v:,}" for k, v in b.items())
               + f"; {p.without_rejected or 0:,} kept traces had no other rollout to pair.", ""]


def _cost_section(md: list[str], reports: RunReports, rep: Report, price: Price | None = None) -> None:
    reports = RunReports.of(reports)
    per = teacher_totals(reports, price)
    if not per:
        rep.skipped.append("teacher usage (no `teacher` key in the reports)")
        return
    kept = reports.filter.output if reports.filter else None
    cols = [k for k in TEACHER_KEYS if any(k in v for v in per.values())]
    if price is not None:
        how = (f"USD at teacher.price_per_mtok of the current config ({price.describe()}), applied to the tokens "
               "each stage recorded")
    elif any("cost_usd" in v for v in per.values()):
        how = "USD as the stages recorded it when they ran (no teacher.price_per_mtok is set now)"
    else:
        how = ("no USD cost: teacher.price_per_mtok is not set (set it and rerun; the report prices the recorded "
               "tokens without calling the teacher)")
    md += [TEACHER_COST, "",
           "Teacher usage by stage. prompt_tokens, server_cached_prompt_tokens and completion_tokens are the "
           "tokens sent; server_cached_prompt_tokens are the part of prompt_tokens the server served from its own "
           "prefix cache (billed at the cached rate). cached_* tokens were answered by hopforge's call cache, not "
           "paid again: cost_usd prices the tokens sent, cost_with_cache_usd adds the cached ones (what the data "
           "took to make); "
           + how + (f". The last row divides the total by the {kept:,} kept SFT samples." if kept else "."), "",
           "| stage | " + " | ".join(cols) + " |", "| --- |" + " ---: |" * len(cols)]
    for stage, vals in per.items():
        md.append(f"| {md_text(stage)} | " + " | ".join(_fmt(vals.get(k)) for k in cols) + " |")
    if kept:
        each = {k: per["total"][k] / kept for k in cols if k in per["total"]}
        md.append("| per kept sample | " + " | ".join(_fmt(each.get(k)) for k in cols) + " |")
        rep.summary["per_kept_sample"] = {k: round(v, 6) for k, v in each.items()}
    md.append("")
    rep.summary["teacher"] = per
    rep.summary["price_per_mtok"] = None if price is None else price.model_dump()


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and not v.is_integer():
        return f"{v:,.4f}" if abs(v) < 100 else f"{v:,.1f}"
    return f"{int(v):,}"


def run_report(ctx: StageContext) -> StageResult:
    """The ``report`` stage: every trace is reported; writes ``report/index.md``, its figures and the explorer."""
    fcfg = ctx.cfg.filters
    rep = build_report(ctx.store, ctx.out("report"), fcfg.min_f1, min_tool_calls=fcfg.min_tool_calls,
                       max_tool_calls=fcfg.max_tool_calls, price=ctx.cfg.teacher.price_per_mtok, ctx=ctx)
    n = rep.summary.get("traces", 0)
    return StageResult(input=n, output=n, extra={"figures": rep.figures, "skipped": rep.skipped,
                                                 "explorer": {k: rep.explorer.get(k) for k in ("questions", "traces",
                                                                                              "shards", "bytes")},
                                                 "summary": {k: v for k, v in rep.summary.items() if k != "funnel"}})


__all__ = ["TEACHER_COST", "Report", "TraceFacts", "build_report", "calibration_by_teacher", "calibration_of", "erf_by_teacher",
           "erf_curve", "evidence_states", "filter_drops", "funnel_rows", "funnel_steps", "load_facts", "main_n",
           "pass_counts", "pass_triples", "read_reports", "recovery_turn", "run_report", "teacher_totals"]
