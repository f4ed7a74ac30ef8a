"""The report's trustworthiness sections: splits, question validators, grounding, repeats.

They answer what a researcher asks before training on the data: can an evaluation
question reach a training table (the split counts of every table), what did each
question validator drop and how often did a repair save a question, do kept traces act
only on what the agent had seen (the ungrounded-step histogram), and how often does one
page come back as an answer or a bridge (the repeat histograms of the walks).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds

from synth.engine.records import SPLITS
from synth.engine.reports import AdversaryCount, DepthFacts, DepthSummary, RunReports, StyleFacts
from synth.text.markdown import md_code, md_text


def split_counts(root: Path) -> dict[str, dict[str, int]]:
    """Rows per split of every table that carries one (``rl_pool`` keeps it in ``extra_info``)."""
    out: dict[str, dict[str, int]] = {}
    for table in ("questions", "traces", "sft", "preference", "rl_pool", "longctx"):
        path = root / table
        if not path.exists():
            continue
        data = ds.dataset(path, format="parquet")
        if table == "rl_pool":
            col = data.to_table(columns={"s": ds.field("extra_info", "split")})["s"]
        elif "split" in data.schema.names:
            col = data.to_table(columns=["split"])["split"]
        else:
            continue
        counts = {str(v["values"]): int(v["counts"]) for v in pc.value_counts(col.combine_chunks()).to_pylist()}
        out[table] = {s: counts.get(s, 0) for s in SPLITS} | {k: v for k, v in counts.items() if k not in SPLITS}
    return out


def _values(hist: dict[str, int] | None) -> list[int]:
    """A ``{value: count}`` histogram back as its values."""
    return [int(v) for v, n in (hist or {}).items() for _ in range(n)]


def trust_sections(md: list[str], root: Path, reports: RunReports, verdicts: list[dict] | None,
                   summary: dict[str, Any], fig: Any) -> list[str]:
    """Append the sections to ``md``, their figures through ``fig`` (:class:`synth.report.stage.Figures`);
    returns the names of those skipped for want of inputs."""
    skipped = []
    splits = split_counts(root)
    if splits:
        md += ["## Splits", "",
               "Each question's split is decided once, when it is written, by a hash of its answer page (a group "
               "split: questions that share an answer share a split, so no eval answer is a training answer), and "
               "every table carries it: only sft "
               "questions train the student (sft, longctx), rl questions form rl_pool, eval questions are held out.",
               "", "| table | " + " | ".join(SPLITS) + " |", "| --- |" + " ---: |" * len(SPLITS)]
        for table, counts in splits.items():
            md.append(f"| {md_text(table)} | " + " | ".join(f"{counts.get(s, 0):,}" for s in SPLITS) + " |")
        md.append("")
        summary["splits"] = splits
    else:
        skipped.append("splits")

    reports = RunReports.of(reports)
    q = reports.questions
    if q:
        md += ["## Question validators", "",
               "Every question any teacher writes is checked; a failed check is a named drop (after one repair "
               "request, where the stage makes one).", "", "| reason | dropped |", "| --- | ---: |"]
        for reason, n in sorted(q.dropped.items(), key=lambda kv: -kv[1]):
            md.append(f"| {md_code(reason, table=True)} | {n:,} |")
        md.append("")
        if q.repairs:
            md += ["| repaired reason | attempted | repaired |", "| --- | ---: | ---: |"]
            for reason, r in sorted(q.repairs.items()):
                md.append(f"| {md_code(reason, table=True)} | {r.attempted or 0:,} | {r.repaired or 0:,} |")
            md.append("")
        summary["question_drops"] = dict(q.dropped)
    else:
        skipped.append("question validators")

    depth = (q.depth if q else None) or DepthFacts()
    if depth.checked.questions:
        md += ["## Effective depth", "",
               "How many hops a solver with a search tool must walk: the hops left from the latest page of the chain "
               "that one search for a hop's sub-question, a quoted span, a hop's sentence or the whole question "
               "returns in the top `tools.search_max_k` (the most results one search of the agents' tool returns) of the "
               "unmasked index.  Questions the validators checked "
               "(repairs included) and those kept; `enterable_hop` drops a question below "
               "`questions.min_effective_depth` of its hops.", "",
               "| questions | count | mean nominal | mean effective | effective / nominal | every hop needed |",
               "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for name, d in (("checked", depth.checked), ("kept", depth.kept)):
            if d.questions:
                md.append(f"| {name} | {d.questions:,} | {d.mean_nominal:.2f} | {d.mean_effective:.2f} | "
                          f"{d.ratio:.3f} | {d.full_depth_share:.1%} |")
        md.append("")
        md += by_source_table(depth.by_source)
        style = q.style if q else None
        if style is not None and style.questions:
            md += style_table(style)
            summary["style"] = style.to_dict()
        adv = depth.adversaries
        if adv.names:
            md += ["Per adversary (each search is made by each of them, at the same k): `tool` is the agents' search, "
                   "`body` a plain BM25 over page text without titles, `keywords` a text's content words alone with "
                   "both rankings.", "",
                   "| adversary | drafts entered | hops caught | kept questions at full depth |",
                   "| --- | ---: | ---: | ---: |"]
            for name in adv.names:
                c, k = adv.checked.get(name) or AdversaryCount(), adv.kept.get(name) or AdversaryCount()
                share = k.full_depth_share
                md.append(f"| {md_code(name)} | {c.entered or 0:,} | {c.hops_caught or 0:,} | "
                          + (f"{share:.1%} |" if share is not None else "- |"))
            md.append("")
            summary["depth_adversaries"] = adv.to_dict()
        checked = depth.checked
        fig.histogram("effective_depth.png", "Effective depth (hops a solver must walk) against nominal depth (hops "
                      "in the chain), of every question the validators checked.", _values(checked.effective),
                      "Effective against nominal depth (questions checked)", "hops",
                      ("question checked (effective and nominal depth alike)",
                       "questions checked (effective and nominal depth alike)"), discrete=True,
                      extra=("nominal depth", _values(checked.nominal)), label="effective depth")
        summary["effective_depth"] = {name: {k: v for k, v in d.to_dict().items() if k not in ("effective", "nominal")}
                                      for name, d in (("checked", depth.checked), ("kept", depth.kept))}
    else:
        skipped.append("effective depth (no depth in the questions report)")

    steps = [v["ungrounded_steps"] for v in verdicts or [] if v.get("ungrounded_steps") is not None]
    if steps:
        kept = [v["ungrounded_steps"] for v in verdicts if v.get("kept") and v.get("ungrounded_steps") is not None]
        md += ["## Grounding", "",
               f"Steps (searches, opens, finds) whose words or page the agent had not yet seen in the question or an "
               f"observation: {sum(1 for s in steps if s):,} of {len(steps):,} traces have at least one; "
               f"{sum(1 for s in kept if s):,} of {len(kept):,} kept traces do.", ""]
        fig.histogram("ungrounded.png", "Ungrounded steps per trace (the grounded filter drops every trace with one).",
                      steps, "Ungrounded steps per trace", "ungrounded steps", ("trace", "traces"), discrete=True)
        summary["ungrounded_traces"] = sum(1 for s in steps if s)
    else:
        skipped.append("grounding (no ungrounded_steps in filter/verdicts)")

    repeats = reports.walks.repeats if reports.walks else None
    if repeats:
        md += ["## Repeated pages", "",
               f"How many walks end on the same page (answer, cap {repeats.max_answer_repeats}) and pass "
               f"through it (bridge, cap {repeats.max_bridge_repeats}).", "",
               "| times | answer pages | bridge pages |", "| ---: | ---: | ---: |"]
        answer, bridge = repeats.answer, repeats.bridge
        for t in sorted({*answer, *bridge}, key=int):
            md.append(f"| {t} | {answer.get(t, 0):,} | {bridge.get(t, 0):,} |")
        md.append("")
        fig.histogram("answer_repeats.png", "How often one page is the answer of, or a bridge in, a walk.",
                      [int(t) for t, n in answer.items() for _ in range(n)], "Walks per answer page",
                      "walks ending on the page", ("answer page (and bridge pages alike)",
                                                   "answer pages (and bridge pages alike)"), discrete=True,
                      extra=("bridge pages", [int(t) for t, n in bridge.items() for _ in range(n)]),
                      label="answer pages")
        summary["max_answer_repeat"] = max((int(t) for t in answer), default=0)
    else:
        skipped.append("repeated pages (no walk report)")
    return skipped


__all__ = ["split_counts", "trust_sections"]


def style_table(style: StyleFacts) -> list[str]:
    """The kept questions' form as Markdown (the report's and the dataset card's one rendering of it)."""
    if not style.questions:
        return []
    md = ["Form of the kept questions: facts between entities, as the benchmarks ask them.", "",
          "| figure | value |", "| --- | ---: |",
          f"| questions with navigation language (link, page, article, follow...) | {style.navigation_questions:,} |",
          f"| hops that state a relation read in the previous entity's text | {style.relation_hops:,} of "
          f"{style.clues_read:,} ({style.relation_share or 0:.1%}) |",
          f"| clues that parse as whole noun phrases | {style.noun_phrase_clues:,} of {style.clues_read:,} "
          f"({style.noun_phrase_share or 0:.1%}) |",
          f"| answers that are named entities | {style.named_answers:,} of {style.questions:,} "
          f"({style.named_answer_share or 0:.1%}) |", "",
          "| answer type (spaCy NER) | questions |", "| --- | ---: |"]
    md += [f"| {md_text(t)} | {n:,} |" for t, n in style.answer_types.items()]
    return md + [""]


def by_source_table(by_source: dict[str, DepthSummary]) -> list[str]:
    """The kept questions' depth per source kind as Markdown (the report's and the card's one rendering)."""
    rows = [(kind, d) for kind, d in sorted(by_source.items()) if d.questions]
    if not rows:
        return []
    md = ["| kept questions from | count | mean nominal | mean effective | at >= 6 effective hops |",
          "| --- | ---: | ---: | ---: | ---: |"]
    for kind, d in rows:
        deep = sum(n for e, n in d.effective.items() if int(e) >= 6)
        md.append(f"| {md_text(kind)}s | {d.questions:,} | {d.mean_nominal:.2f} | {d.mean_effective:.2f} | {deep:,} |")
    return md + [""]
