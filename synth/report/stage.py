"""``hopforge report``: one readable page about a run, ``DIR/report/index.md`` with PNG figures.

It reads what the stages left in DIR -- ``reports/<stage>.json`` (input / output /
dropped, teacher stats), ``questions``, ``traces``, ``filter/verdicts`` -- and skips
whatever is missing (a run stopped before filtering still gets a report).

Definitions (evidence state, evidence recovery and calibration, with gold paths):

- **Turns** count assistant messages from 1.  ``gold_first_seen[j]`` is the turn whose
  tool observation first showed gold page j (-1: never), so at turn t the agent has
  seen the gold pages with ``0 <= gold_first_seen[j] < t``: the evidence state it
  decides in is ``E_t`` = 0 (none seen), 1 (some), 2 (all).
- **Recovery time** ``T_recover`` = min(the turn whose observation completed the
  gold evidence, ``max_j gold_first_seen[j]`` -- never when any is -1; the turn of a
  correct answer, ``n_turns``).  ``ERF(t) = (1/N) sum_i 1[T_recover,i <= t]``, per
  teacher model; it ends at the fraction of traces that recovered.
- **Calibration**, per trace over its turns: ``CE_i = sum_k P(E=k) |P(answer | E=k)
  - 1[k = 2]|``, with ``P(E=k)`` the share of turns in state k and ``P(answer | E=k)``
  the share of those turns that gave the final answer.  Over-confident: the answer was
  given at ``E < 2``; over-cautious: turns spent at ``E = 2`` before answering.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from synth.text.answers import is_correct
from synth.engine.stage import StageContext, StageResult
from synth.engine.store import MissingInput, Store
from synth.report.trust import trust_sections

STAGE_ORDER = ("ingest", "graph", "walks", "expand", "questions", "rollout", "filter", "assemble")
TEACHER_KEYS = ("calls", "requests", "prompt_tokens", "completion_tokens", "cached_prompt_tokens",
                "cached_completion_tokens", "cost_usd")
INF = math.inf


# ---- per-trace measures ----------------------------------------------------------------------

def recovery_turn(gold_first_seen: list[int], n_turns: int, correct: bool) -> float:
    """``T_recover``: first turn with all gold pages seen, or the turn of a correct answer (inf: never)."""
    full = max(gold_first_seen) if gold_first_seen and min(gold_first_seen) >= 0 else INF
    return min(full, n_turns if correct else INF)


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


def evidence_states(gold_first_seen: list[int], n_turns: int) -> list[int]:
    """``E_t`` for t = 1..n_turns: the evidence state each turn was decided in."""
    total = len(gold_first_seen)
    states = []
    for t in range(1, n_turns + 1):
        seen = sum(1 for g in gold_first_seen if 0 <= g < t)
        states.append(2 if seen == total else (0 if seen == 0 else 1))
    return states


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


@dataclass
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

def read_reports(root: Path) -> dict[str, dict]:
    """``reports/<stage>.json`` of every stage that ran, by stage name."""
    out = {}
    for p in sorted((root / "reports").glob("*.json")):
        try:
            out[p.stem] = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
    return out


def _table(store: Store, rel: str, columns: list[str]) -> list[dict] | None:
    try:
        ds_ = store.dataset(rel)
    except MissingInput:
        return None
    cols = [c for c in columns if c in ds_.schema.names]
    return ds_.to_table(columns=cols).to_pylist()


def load_facts(store: Store, min_f1: float) -> tuple[list[TraceFacts], dict[str, dict], list[dict] | None]:
    """Trace facts (correctness from ``filter/verdicts``, else the answer rule), questions, verdicts."""
    traces = _table(store, "traces", ["trace_id", "question_id", "teacher_model", "n_turns", "n_tool_calls",
                                      "gold_first_seen", "final_answer", "completion_tokens"]) or []
    questions = {q["question_id"]: q for q in (_table(store, "questions", ["question_id", "path", "answer",
                                                                           "answer_aliases"]) or [])}
    verdicts = _table(store, "filter/verdicts", ["trace_id", "correct", "n_tokens", "kept", "ungrounded_steps"])
    by_id = {v["trace_id"]: v for v in verdicts or []}
    facts = []
    for t in traces:
        v = by_id.get(t["trace_id"])
        if v is not None:
            correct = bool(v["correct"])
        else:
            q = questions.get(t["question_id"])
            golds = [q["answer"], *(q["answer_aliases"] or [])] if q else []
            correct = bool(golds) and is_correct(t["final_answer"], golds, min_f1)
        facts.append(TraceFacts(
            trace_id=t["trace_id"], question_id=t["question_id"], teacher_model=t["teacher_model"],
            n_turns=int(t["n_turns"]), n_tool_calls=int(t["n_tool_calls"]),
            gold_first_seen=list(t["gold_first_seen"] or []),
            answered=bool(t["final_answer"] and str(t["final_answer"]).strip()), correct=correct,
            completion_tokens=int(t["completion_tokens"] or 0), n_tokens=v.get("n_tokens") if v else None))
    return facts, questions, verdicts


def funnel_rows(reports: dict[str, dict]) -> list[dict]:
    """The pipeline stages that reported, in order, with input, output and drops by reason."""
    rows = []
    for name in STAGE_ORDER:
        r = reports.get(name)
        if r is None:
            continue
        rows.append({"stage": name, "input": int(r.get("input", 0)), "output": int(r.get("output", 0)),
                     "dropped": dict(r.get("dropped") or {})})
    return rows


def teacher_totals(reports: dict[str, dict]) -> dict[str, dict[str, float]]:
    """Teacher usage per stage (``teacher`` key of questions / rollout / filter) and in total."""
    per: dict[str, dict[str, float]] = {}
    for name in STAGE_ORDER:
        t = (reports.get(name) or {}).get("teacher")
        if isinstance(t, dict):
            per[name] = {k: t[k] for k in TEACHER_KEYS if isinstance(t.get(k), (int, float))}
    total: dict[str, float] = {}
    for vals in per.values():
        for k, v in vals.items():
            total[k] = total.get(k, 0) + v
    if per:
        per["total"] = total
    return per


def pass_rates(facts: list[TraceFacts]) -> list[float]:
    """c / n for every question with rollouts."""
    by_q: dict[str, list[bool]] = defaultdict(list)
    for f in facts:
        by_q[f.question_id].append(f.correct)
    return [sum(v) / len(v) for _, v in sorted(by_q.items())]


# ---- the report ------------------------------------------------------------------------------

@dataclass
class Report:
    """What :func:`build_report` produced: the summary numbers and the files written."""

    summary: dict[str, Any] = field(default_factory=dict)
    figures: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def build_report(store: Store, out: Path, min_f1: float = 0.8) -> Report:
    """Write ``out/index.md`` and its PNG figures from the run in ``store``."""
    import synth.report.plots as plots

    out.mkdir(parents=True, exist_ok=True)
    rep = Report()
    reports = read_reports(store.root)
    facts, questions, verdicts = load_facts(store, min_f1)
    md: list[str] = [f"# hopforge report: `{store.root.name}`", "",
                     "Everything below is read from the run folder; sections whose inputs are missing are skipped.", ""]

    def fig(name: str, caption: str) -> None:
        rep.figures.append(name)
        md.extend([f"![{caption}]({name})", "", f"*{caption}*", ""])

    # Funnel.
    rows = funnel_rows(reports)
    md += ["## Funnel", ""]
    if rows:
        md += ["| stage | input | output | dropped | drop reasons |", "| --- | ---: | ---: | ---: | --- |"]
        for r in rows:
            reasons = ", ".join(f"{k} {v:,}" for k, v in sorted(r["dropped"].items(), key=lambda kv: -kv[1]) if v)
            md.append(f"| {r['stage']} | {r['input']:,} | {r['output']:,} | {sum(r['dropped'].values()):,} | "
                      f"{reasons or '-'} |")
        md.append("")
        plots.funnel([(r["stage"], r["input"], r["output"]) for r in rows], out / "funnel.png")
        fig("funnel.png", "Records into and out of each stage, in pipeline order (walks -> questions -> traces -> "
                          "kept SFT samples; log scale).")
        drop_list = [(f"{r['stage']}: {k}", v) for r in rows for k, v in sorted(r["dropped"].items()) if v]
        plots.drops(drop_list, out / "drops.png")
        fig("drops.png", "Every dropped record, by the stage and the reason that dropped it.")
        rep.summary["funnel"] = rows
    else:
        rep.skipped.append("funnel (no reports/*.json)")
        md += ["No stage reports yet.", ""]

    # Questions.
    if questions:
        hops = [len(q["path"]) - 1 for q in questions.values()]
        md += ["## Questions", "", f"{len(questions):,} questions, {sum(hops) / len(hops):.2f} hops on average.", ""]
        plots.histogram(hops, out / "hops.png", "Hops per question", "hops (path length - 1)", discrete=True)
        fig("hops.png", "How many links each question's gold path chains (its entities minus one).")
    else:
        rep.skipped.append("questions")
    rep.skipped += trust_sections(md, store.root, reports, verdicts, out, rep.summary, plots, fig)

    # Traces.
    if facts:
        md += ["## Traces", "", f"{len(facts):,} traces from {len({f.question_id for f in facts}):,} questions; "
               f"{sum(f.correct for f in facts):,} correct.", ""]
        plots.histogram([f.n_tool_calls for f in facts], out / "tool_calls.png", "Tool calls per trace",
                        "tool calls", discrete=True)
        fig("tool_calls.png", "Tool calls per trace: the T of the low-step filter (T >= T_min is kept).")
        plots.histogram([f.n_turns for f in facts], out / "turns.png", "Turns per trace", "assistant turns",
                        discrete=True)
        fig("turns.png", "Assistant turns per trace (tool-calling turns plus the answer).")
        rendered = [f.n_tokens for f in facts if f.n_tokens is not None]
        plots.histogram([f.completion_tokens for f in facts], out / "tokens.png", "Tokens per trace", "tokens",
                        label="teacher completion tokens",
                        extra=("rendered SFT tokens (length filter)", rendered) if rendered else None)
        fig("tokens.png", "Tokens per trace: what the teacher generated, and (when measured) the full rendered "
                          "conversation in the student's tokenizer.")
        rates = pass_rates(facts)
        plots.histogram(rates, out / "pass_at_n.png", "Per-question success rate c/n", "c / n")
        fig("pass_at_n.png", "Share of correct rollouts per question; questions strictly between 0 and 1 form the "
                             "RL pool (1 <= c <= n-1).")
        rep.summary["traces"] = len(facts)
        rep.summary["pass@1"] = _mean(rates)
        rep.summary["pass@n"] = _ratio(sum(1 for r in rates if r > 0), len(rates))
        md += [f"pass@1 (mean c/n) = {rep.summary['pass@1']}, pass@n (any correct) = {rep.summary['pass@n']}.", ""]
        _evidence_sections(md, facts, out, rep, plots, fig)
    else:
        rep.skipped.append("traces")

    _cost_section(md, reports, rep)
    if rep.skipped:
        md += ["## Skipped", "", "Missing inputs: " + ", ".join(rep.skipped) + ".", ""]
    (out / "index.md").write_text("\n".join(md).rstrip() + "\n")
    return rep


def _evidence_sections(md: list[str], facts: list[TraceFacts], out: Path, rep: Report, plots: Any, fig: Any) -> None:
    curves = erf_by_teacher(facts)
    md += ["## Evidence recovery", "",
           "T_recover is the first turn whose observation completed the gold evidence (E = 2), or the turn of a "
           "correct answer; ERF(t) is the share of traces recovered by turn t (steeper is better).", "",
           "| teacher | traces | recovered | median recovery turn |", "| --- | ---: | ---: | ---: |"]
    n_by = Counter(f.teacher_model for f in facts)
    for t, c in curves.items():
        md.append(f"| {t} | {n_by[t]:,} | {c['recovered']} | {c['median_recovery_turn']} |")
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
        md.append(f"| {t} | {c['answered']:,} | {c['over_confident_rate']} | {c['answered_at_E0']} | "
                  f"{c['answered_at_E1']} | {c['over_cautious_mean_turns']} | {c['over_cautious_rate']} | {c['ce']} |")
    md.append("")
    plots.calibration(cal, out / "calibration.png")
    fig("calibration.png", "Per teacher: answers given before all evidence, calibration error, and turns wasted "
                           "after full evidence.")
    rep.summary["erf"] = {t: {"recovered": c["recovered"], "final": c["erf"][-1] if c["erf"] else None}
                          for t, c in curves.items()}
    rep.summary["calibration"] = cal


def _cost_section(md: list[str], reports: dict[str, dict], rep: Report) -> None:
    per = teacher_totals(reports)
    if not per:
        rep.skipped.append("teacher usage (no `teacher` key in the reports)")
        return
    kept = (reports.get("filter") or {}).get("output")
    cols = [k for k in TEACHER_KEYS if any(k in v for v in per.values())]
    md += ["## Teacher cost", "", "Teacher usage by stage (cached_* tokens were served from the call cache, "
           "not paid again)" + (f"; the last row divides the total by the {kept:,} kept SFT samples." if kept else
                                 "."), "",
           "| stage | " + " | ".join(cols) + " |", "| --- |" + " ---: |" * len(cols)]
    for stage, vals in per.items():
        md.append(f"| {stage} | " + " | ".join(_fmt(vals.get(k)) for k in cols) + " |")
    if kept:
        each = {k: per["total"].get(k, 0) / kept for k in cols}
        md.append("| per kept sample | " + " | ".join(_fmt(each[k]) for k in cols) + " |")
        rep.summary["per_kept_sample"] = {k: round(v, 6) for k, v in each.items()}
    md.append("")
    rep.summary["teacher"] = per


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and not v.is_integer():
        return f"{v:,.4f}" if abs(v) < 100 else f"{v:,.1f}"
    return f"{int(v):,}"


def run_report(ctx: StageContext) -> StageResult:
    """The ``report`` stage: every trace is reported; writes ``report/index.md`` and its figures."""
    rep = build_report(ctx.store, ctx.out("report"), ctx.cfg.filters.min_f1)
    n = rep.summary.get("traces", 0)
    return StageResult(input=n, output=n, extra={"figures": rep.figures, "skipped": rep.skipped,
                                                 "summary": {k: v for k, v in rep.summary.items() if k != "funnel"}})


__all__ = ["Report", "TraceFacts", "build_report", "calibration_by_teacher", "calibration_of", "erf_by_teacher",
           "erf_curve", "evidence_states", "funnel_rows", "load_facts", "read_reports", "recovery_turn",
           "run_report", "teacher_totals"]
