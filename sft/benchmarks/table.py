"""The table a paper can quote: one row per benchmark file, and two models side by side.

:func:`table_rows` is the one list of rows (``eval.md``, the ``synth-eval`` Prefect artifact and the CLI's
summary all show it); :func:`report_markdown` adds what the numbers rest on (model, harness, judge and its
prompt's sha256, samples).  Every string read from a file or a server (file names, model names, endpoints)
enters the Markdown through :mod:`synth.text.markdown`.
"""

from __future__ import annotations

from typing import Any

from synth.engine.errors import InputError
from synth.text.markdown import md_code, md_text

COLUMNS = ["benchmark", "file", "questions", "accuracy (rule)", "accuracy (judge)", "rule/judge agreement",
           "avg@k (rule)", "answer rate", "tool calls/question", "turns", "answered before all evidence",
           "evidence recovered", "calls", "prompt tokens", "completion tokens", "cost USD", "judge calls",
           "judge cost USD"]


def _pct(v: Any) -> str:
    return "–" if v is None else f"{100 * v:.1f}%"


def _spread(s: dict | None, k: int) -> str:
    if not s:
        return "–"
    return f"{100 * s['mean']:.1f} ± {100 * s['std']:.1f} (k={k})" if k > 1 else f"{100 * s['mean']:.1f} (k=1)"


def _questions(row: dict) -> str:
    s = row.get("sample")
    return f"{row['asked']} (sample of {s['of']}, seed {s['seed']})" if s else str(row["asked"])


def table_rows(report: dict) -> list[dict[str, Any]]:
    """One dict per benchmark, keyed by :data:`COLUMNS`, values as shown (strings and numbers)."""
    out = []
    for r in report["benchmarks"]:
        ev = r.get("evidence") or {}
        model, judge = r["cost"]["model"], r["cost"].get("judge") or {}
        out.append({
            "benchmark": r["benchmark"], "file": r["file"], "questions": _questions(r),
            "accuracy (rule)": _pct(r["accuracy"]["rule"]), "accuracy (judge)": _pct(r["accuracy"]["judge"]),
            "rule/judge agreement": _pct((r.get("judge") or {}).get("agreement")),
            "avg@k (rule)": _spread(r["avg_at_k"]["rule"], r["avg_at_k"]["k"]),
            "answer rate": _pct(r["answer_rate"]), "tool calls/question": r["tool_calls_per_question"],
            "turns": r["turns_mean"], "answered before all evidence": _pct(ev.get("answered_before_all_evidence")),
            "evidence recovered": _pct(ev.get("recovered")), "calls": model.get("calls"),
            "prompt tokens": model.get("prompt_tokens"), "completion tokens": model.get("completion_tokens"),
            "cost USD": model.get("cost_usd", "–"), "judge calls": judge.get("calls", "–"),
            "judge cost USD": judge.get("cost_usd", "–"),
        })
    return out


def judge_without_verdict(report: dict) -> int:
    """How many answers of a benchmark eval the judge gave no verdict on (its call failed, or its reply was
    unreadable), over every benchmark of ``report``; the rule's verdict stands for each of them."""
    return sum(int((r.get("judge") or {}).get("failed", 0)) + int((r.get("judge") or {}).get("unparsed", 0))
               for r in report["benchmarks"])


def _md_table(columns: list[str], rows: list[dict]) -> list[str]:
    lines = ["| " + " | ".join(md_text(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(md_text(r[c]) for c in columns) + " |" for r in rows]
    return lines


def report_markdown(report: dict) -> str:
    """``eval.md``: what was evaluated and how, then the table."""
    h = report["harness"]
    lines = [f"# Benchmarks: {md_text(report['model'])}", "",
             f"- model: {md_code(report['model'])} ({md_text(report['backend'])}"
             + (f", {md_code(report['endpoint'])}" if report.get("endpoint") else "") + ")",
             f"- harness: {h['max_turns']} turns, {h['max_new_tokens']} new tokens a turn, temperature "
             f"{h['temperature']}, context {md_code(h['context'])}; the answer page is not masked"
             + (" (but on the run's own eval split, as in training)" if h.get("answer_page_masked") else ""),
             f"- grading: the rule (page identity first, then token F1 >= {report['grading']['min_f1']})"]
    j = report.get("judge")
    if j:
        lines.append(f"- judge: {md_code(j['model'])} at {md_code(j['endpoint'])}, prompt {md_code(j['prompt'])} "
                     f"sha256 {md_code(j['prompt_sha256'])}; where the judge gave no verdict the rule's stands")
    else:
        lines.append("- judge: none (accuracy by the rule alone)")
    samples = [r for r in report["benchmarks"] if r.get("sample")]
    lines.append(f"- samples per question: {report['samples']}"
                 + ("; **a seeded sample** of " + ", ".join(f"{md_text(r['file'])} ({r['asked']} of "
                                                             f"{r['sample']['of']})" for r in samples)
                    if samples else "; every question with a published answer"))
    if report.get("price_per_mtok"):
        p = report["price_per_mtok"]
        lines.append(f"- priced at {p['prompt']} / {p['completion']} USD per million prompt / completion tokens "
                     "(teacher.price_per_mtok), model and judge alike")
    lines += ["", *_md_table(COLUMNS, table_rows(report)), ""]
    return "\n".join(lines)


COMPARE = ["accuracy (rule)", "accuracy (judge)", "avg@k (rule)", "tool calls/question", "turns", "calls",
           "prompt tokens", "completion tokens", "cost USD"]


def compare_reports(a: dict, b: dict) -> dict[str, Any]:
    """Two reports on the same questions and judge, side by side: per benchmark, each figure for A and B and
    the difference in rule accuracy (B - A)."""
    rows = []
    for ra, rb, ta, tb in zip(a["benchmarks"], b["benchmarks"], table_rows(a), table_rows(b)):
        if ra["sha256"] != rb["sha256"] or ra["asked"] != rb["asked"]:
            raise InputError(f"compare: {ra['file']} and {rb['file']} were not asked the same questions")
        row = {"benchmark": ra["benchmark"], "file": ra["file"], "questions": ta["questions"]}
        for c in COMPARE:
            row[f"{c} A"], row[f"{c} B"] = ta[c], tb[c]
        row["rule accuracy B - A"] = round(rb["accuracy"]["rule"] - ra["accuracy"]["rule"], 4)
        rows.append(row)
    return {"A": {"model": a["model"], "report": a}, "B": {"model": b["model"], "report": b},
            "judge": a.get("judge"), "samples": a["samples"], "rows": rows}


def compare_markdown(both: dict) -> str:
    """``compare.md``: A and B on the same questions and judge."""
    a, b = both["A"]["model"], both["B"]["model"]
    j = both.get("judge")
    lines = [f"# {md_text(a)} (A) against {md_text(b)} (B)", "",
             "Same questions, same harness, same judge" + (f" ({md_code(j['model'])}, prompt sha256 "
                                                            f"{md_code(j['prompt_sha256'])})" if j else " (none)")
             + f"; {both['samples']} sample(s) per question.", ""]
    cols = ["benchmark", "file", "questions"] + [f"{c} {s}" for c in COMPARE for s in "AB"] + ["rule accuracy B - A"]
    lines += [*_md_table(cols, both["rows"]), ""]
    return "\n".join(lines)


__all__ = ["COLUMNS", "compare_markdown", "compare_reports", "report_markdown", "table_rows"]
