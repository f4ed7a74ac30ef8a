"""The ``preference`` table: DPO pairs from the rollouts the filter already has (ToolBrain's DPO), no extra call.

Each kept SFT trace is a ``chosen`` trajectory.  Its ``rejected`` one is another rollout of the same
question that the teacher made anyway:

1. a **wrong-answer** trace (it passed the format filter and answered wrong: ``wrong_answer``), the one of
   lowest sample index not yet paired; else
2. a **correct trace with a lower rubric** (a best-of-n loser, ``not_best``): the lowest rubric below the
   chosen's.

A kept trace with neither gives no pair (``without_rejected``).  A rejected trace the length filter
measured over ``filters.max_tokens`` is not used.  Rows are in TRL's conversational preference format
with tools, as ``DPOTrainer`` reads them::

    prompt    [system, user]: the messages before the first assistant turn, the same for both
    chosen    the kept trace's turns after the prompt (assistant, tool, ..., the final answer)
    rejected  the other trace's turns after the prompt
    tools     the tool schemas as a JSON string (TRL json.loads it, as for SFT)

plus ``question_id``, ``chosen_trace_id``, ``rejected_trace_id``, ``rejected_reason`` (``wrong_answer`` or
``lower_rubric``), the two rubrics, the rejected answer, ``teacher_model`` and ``split`` (always ``sft``).
Messages are the SFT rows' (:func:`filters.sftrows.sft_message`: reasoning kept) and whole, whatever
``sft.context`` says: a pair compares two whole trajectories.  TRL's ``DPOTrainer`` scores every
completion token, the tool observations inside ``chosen`` and ``rejected`` included (it has no
assistant-only mask for conversational completions); a trainer that masks them needs the rows' roles.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.dataset as ds

from synth.engine.records import PREFERENCE_SCHEMA, Trace

from filters.bestofn import Candidate
from filters.correctness import CorrectnessFilter
from filters.sftrows import sft_messages

WRONG_ANSWER = CorrectnessFilter.reasons[0]  # the correctness filter's drop reason
LOWER_RUBRIC = "lower_rubric"
BATCH_ROWS = 512
ROW_GROUP = 128


@dataclass(frozen=True, slots=True)
class Loser:
    """A trace that may be rejected: its question, sample index, id, and (a best-of-n loser) its rubric."""

    question_id: str
    sample_index: int
    trace_id: str
    rubric_raw: float | None = None


@dataclass
class Pairs:
    """``chosen trace id -> (rejected trace id, reason)``, and the figures the filter's report gives."""

    pairs: dict[str, tuple[str, str]] = field(default_factory=dict)
    without_rejected: int = 0

    def report(self, rows: int, prompt_mismatch: int) -> dict[str, Any]:
        by = defaultdict(int)
        for _, reason in self.pairs.values():
            by[reason] += 1
        return {"pairs": rows, "by_rejected": {WRONG_ANSWER: by[WRONG_ANSWER], LOWER_RUBRIC: by[LOWER_RUBRIC]},
                "without_rejected": self.without_rejected, "prompt_mismatch": prompt_mismatch}


def pair(kept: Iterable[Candidate], wrong: Iterable[Loser], losers: Iterable[Candidate]) -> Pairs:
    """Choose each kept trace's rejected trace (see the module docstring); deterministic whatever the order of
    the inputs (each question's traces are sorted first)."""
    wrong_by: dict[str, list[Loser]] = defaultdict(list)
    for w in wrong:
        wrong_by[w.question_id].append(w)
    lose_by: dict[str, list[Candidate]] = defaultdict(list)
    for c in losers:
        lose_by[c.question_id].append(c)
    kept_by: dict[str, list[Candidate]] = defaultdict(list)
    for c in kept:
        kept_by[c.question_id].append(c)
    out = Pairs()
    for qid in sorted(kept_by):
        chosen = sorted(kept_by[qid], key=lambda c: (-c.rubric_raw, c.trace_id))
        wrongs = sorted(wrong_by.get(qid, []), key=lambda w: (w.sample_index, w.trace_id))
        lower = sorted(lose_by.get(qid, []), key=lambda c: (c.rubric_raw, c.trace_id))
        for i, c in enumerate(chosen):
            if wrongs:
                out.pairs[c.trace_id] = (wrongs[i % len(wrongs)].trace_id, WRONG_ANSWER)
                continue
            below = [x for x in lower if x.rubric_raw < c.rubric_raw]
            if below:
                out.pairs[c.trace_id] = (below[0].trace_id, LOWER_RUBRIC)
            else:
                out.without_rejected += 1
    return out


def split_prompt(messages: list[dict]) -> tuple[list[dict], list[dict]]:
    """``(prompt, rest)``: the messages before the first assistant turn, and the others."""
    first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
    return messages[:first], messages[first:]


def write_preference(ctx: Any, traces: ds.Dataset, pairs: Pairs, rubrics: dict[str, float]) -> dict[str, Any]:
    """Write the ``preference`` table from ``pairs`` in one pass over ``traces`` (only the paired ones are read):
    a pair is written when its second trace arrives, and a trace is let go once its pairs are written; a
    question's rollouts sit together in the table, so few wait.  ``rubrics``: trace id -> raw rubric (of the
    chosen and the losers).  Returns the report's figures."""
    pairs_of: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for chosen, (rejected, _) in sorted(pairs.pairs.items()):
        pairs_of[chosen].append((chosen, rejected))
        pairs_of[rejected].append((chosen, rejected))
    left = {tid: len(ps) for tid, ps in pairs_of.items()}
    writer = ctx.writer("preference", PREFERENCE_SCHEMA, row_group_rows=ROW_GROUP)
    seen: dict[str, Trace] = {}
    written = mismatch = 0
    wanted = pa.array(sorted(pairs_of), pa.string())
    for batch in (traces.to_batches(filter=ds.field("trace_id").isin(wanted), batch_size=BATCH_ROWS,
                                    use_threads=False) if len(wanted) else []):
        rows = []
        for t in (Trace.from_row(r) for r in batch.to_pylist()):
            if t.trace_id in seen:
                continue  # a repeated id: the first row stands
            seen[t.trace_id] = t
            for chosen, rejected in pairs_of[t.trace_id]:
                other = rejected if t.trace_id == chosen else chosen
                if other not in seen:
                    continue  # written when the other arrives
                row = preference_row(seen[chosen], seen[rejected], pairs.pairs[chosen][1], rubrics)
                if row is None:
                    mismatch += 1
                else:
                    rows.append(row)
                for tid in (chosen, rejected):
                    left[tid] -= 1
                    if left[tid] == 0:
                        seen.pop(tid, None)
        writer.write(rows)
        written += len(rows)
    writer.close()
    return pairs.report(written, mismatch)


def preference_row(chosen: Trace, rejected: Trace, reason: str, rubrics: dict[str, float]) -> dict | None:
    """One row of ``preference`` (:data:`synth.engine.records.PREFERENCE_SCHEMA`); None when the two traces were
    not asked the same prompt (another harness or tools)."""
    c_prompt, c_rest = split_prompt(sft_messages(chosen))
    r_prompt, r_rest = split_prompt(sft_messages(rejected))
    if c_prompt != r_prompt or chosen.tools != rejected.tools or not c_rest or not r_rest:
        return None
    return {"prompt": c_prompt, "chosen": c_rest, "rejected": r_rest, "tools": chosen.tools,
            "question_id": chosen.question_id, "chosen_trace_id": chosen.trace_id,
            "rejected_trace_id": rejected.trace_id, "rejected_reason": reason,
            "chosen_rubric": float(rubrics.get(chosen.trace_id, 0.0)),
            "rejected_rubric": rubrics.get(rejected.trace_id) if reason == LOWER_RUBRIC else None,
            "rejected_answer": rejected.final_answer, "teacher_model": chosen.teacher_model, "split": chosen.split}


__all__ = ["LOWER_RUBRIC", "Loser", "Pairs", "WRONG_ANSWER", "pair", "preference_row", "split_prompt",
           "write_preference"]
