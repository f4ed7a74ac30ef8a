"""The ``rl_pool`` table the filter stage writes when the teacher measures the band (``rl.band_by: teacher``).

:func:`write_rl_pool` bands every question by its rollouts (``n`` of them, ``c`` correct; see
:mod:`filters.band`), writes the rows of the band (and, with ``rl.guidance``, the all-wrong questions that
have a correct rollout to prefix: ACTGUIDE-RL), asks the teacher the dual reward's baselines with
``rl.baselines``, splits the pool into ``rl.curriculum`` stages, and returns the figures the filter's
report and the dataset card read.  ``per_q`` holds, per question, the filter's running tally: ``n``, ``c``,
``prompt`` and ``tools`` of its first rollout, ``models`` (the teacher models that rolled it out).

A question of the pool's splits is banded only on all ``rollout.n`` of its samples: the rollout gives every
one of them that many (:class:`synth.rollout.stage.SamplePlan` stops no pooled question early), and a band
over fewer would carry a biased c/n into the row and the curriculum's pass-rate bounds.  One with fewer
(a sample whose teacher call failed and was left out, a traces table from another plan) is refused:
neither banded nor written, counted as ``short_of_n`` (:data:`SHORT_OF_N`) and named in the log.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

from synth.engine.records import RL_SCHEMA, Question, Split
from synth.engine.stage import StageContext
from synth.text.answers import AnswerKey

from filters.band import BANDS, band, band_counts, band_model_name, context_of, rl_row
from filters.curriculum import write_curriculum
from filters.guidance import Reference
from filters.rlconfig import TEACHER

log = logging.getLogger("hopforge")

# Why a question of the pool's splits is left out of the band: fewer than rollout.n samples to count.
SHORT_OF_N = "short_of_n"


def write_rl_pool(ctx: StageContext, questions: Mapping[str, Question], per_q: dict[str, Any],
                  share_sft: bool, band_by: str, references: dict[str, Reference],
                  teacher: Callable[[], Any], keys: Mapping[str, AnswerKey] | None = None) -> dict[str, Any]:
    """Band every question with rollouts and, when the teacher measures the band (``rl.band_by``), write
    the ``rl_pool`` rows: rl questions in the band, and sft ones too when ``share_sft``; with ``rl.guidance``
    also the all-wrong ones that have a correct rollout (ACTGUIDE-RL).  Each row carries its question's
    answer key (``keys``, :mod:`synth.corpus.answerkeys`) for the reward.  A question of those splits with fewer
    than ``rollout.n`` rollouts is refused (``short_of_n``, see the module docstring).

    Returns the report's band figures, each counted over exactly what its name says, so none disagrees
    with the table: ``bands`` over the questions ``rl_pool`` draws from, ``bands_by_split`` over every
    split, ``band_model`` the teacher model(s) that measured them, ``rl_pool_rows`` the rows written (0
    under ``band_by: student``, whose pool the ``rl_band`` stage writes; ``bands["rl_pool"]`` plus the
    guided rows otherwise), ``guidance`` (and, with ``rl.baselines``, ``baselines``) counts, ``band_n`` the
    samples a band counts and ``short_of_n`` the questions refused for fewer (by split; in no other figure).
    """
    pool_splits = {Split.RL, Split.SFT} if share_sft else {Split.RL}
    need = ctx.cfg.rollout.n
    short: dict[str, list[str]] = {}
    counts = {b: 0 for b in BANDS}
    facts: list[tuple[str, int, int]] = []
    models: set[str] = set()
    unknown = 0
    guided = {"rows": 0, "without_correct_rollout": 0}
    rl_cfg = ctx.cfg.rl
    rows = []
    for qid in sorted(per_q):
        p, q = per_q[qid], questions.get(qid)
        if q is None:
            unknown += 1
            continue
        if q.split in pool_splits and p.n < need:
            short.setdefault(str(q.split), []).append(qid)
            continue
        facts.append((q.split, p.n, p.c))
        if q.split not in pool_splits:
            continue
        b = band(p.c, p.n)
        counts[b] += 1
        models |= p.models
        if band_by != TEACHER:
            continue
        ref = references.get(qid)
        guidance = None
        if b == "all_wrong" and rl_cfg.guidance:
            if ref is None:
                guided["without_correct_rollout"] += 1
                continue
            guidance = ref.calls
            guided["rows"] += 1
        elif b != "rl_pool":
            continue
        prompt = p.prompt or [{"role": "user", "content": q.question}]
        # Each row names the teacher model(s) of its own rollouts; the report names them all.
        rows.append(rl_row(q, prompt, p.tools or "[]", p.n, p.c, index=len(rows),
                           band_model=band_model_name(TEACHER, p.models),
                           reference=ref.as_reference() if ref else None, guidance=guidance,
                           key=(keys or {}).get(qid), context=context_of(ctx.cfg)))
    out: dict[str, Any] = {"band_by": band_by, "band_model": band_model_name(TEACHER, models), "bands": counts,
                           "bands_of_splits": sorted(str(x) for x in pool_splits), "bands_by_split": band_counts(facts),
                           "rl_pool_rows": len(rows), "guidance": guided, "band_n": need,
                           SHORT_OF_N: {sp: len(ids) for sp, ids in sorted(short.items())}}
    if short and band_by == TEACHER:  # under band_by: student the teacher's band is only the report's figure
        ids = sorted(i for v in short.values() for i in v)
        log.warning("filter: %d question(s) of the pool's splits have fewer than rollout.n = %d samples and are left "
                    "out of the band (%s): %s%s", len(ids), need, SHORT_OF_N, ", ".join(ids[:5]),
                    f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    if band_by == TEACHER:
        if rl_cfg.baselines and rows:
            out["baselines"] = add_baselines(ctx, questions, rows, teacher(), keys)
        w = ctx.writer("rl_pool", RL_SCHEMA)
        w.write(rows)
        w.close()
        curriculum = write_curriculum(ctx, rows, {q.question_id: len(q.hops) for q in questions.values()},
                                      rl_cfg.curriculum, RL_SCHEMA)
        if curriculum:
            out["curriculum"] = curriculum
    if unknown:
        out["unknown_question"] = unknown
    return out


def add_baselines(ctx: StageContext, questions: Mapping[str, Question], rows: list[dict], teacher: Any,
                  keys: Mapping[str, AnswerKey] | None = None) -> dict[str, int]:
    """Ask the teacher each row's closed-book and naive-RAG answers (:mod:`filters.baselines`) into its
    ``extra_info.baselines``; returns the counts.  The filter calls it for the teacher's band, the ``rl_band``
    stage for the student's (it reads ``rl.rag_k``, ``tools`` and ``filters.min_f1``)."""
    from filters.baselines import compute_baselines
    from synth.tools.search import SearchIndex

    cfg = ctx.cfg
    index = SearchIndex.open(ctx.store.path("index"), snippet_chars=cfg.tools.snippet_chars)
    asked = [questions[r["extra_info"]["question_id"]] for r in rows]
    found, counts = compute_baselines(teacher, asked, index, cfg.tools, cfg.rl.rag_k, cfg.filters.min_f1, keys)
    for r in rows:
        r["extra_info"]["baselines"] = found.get(r["extra_info"]["question_id"])
    return counts


__all__ = ["SHORT_OF_N", "add_baselines", "write_rl_pool"]
