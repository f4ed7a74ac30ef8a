"""The dataset card's section on step labels and the RL signals (``## Step labels and RL signals``).

A PiCA-style step reward model, a rubric or dual reward, CAPF's feedback tool and ACTGUIDE-RL's
guidance all read fields hopforge writes; the card says what each field holds, so a user can
train from the published data with no extra labelling.  The text follows the definitions of
:mod:`synth.rollout.labels` (the labels), :mod:`filters.band` and :mod:`filters.guidance` (the
``rl_pool`` fields) and :mod:`filters.reward` (the reward modes).
"""

from __future__ import annotations

from synth.engine.reports import GuidanceFacts

LABEL_FIELDS = [
    ("turn", "the assistant turn, counted from 1"),
    ("evidence_state", "E_t: how much of the gold path the agent had seen (in a search result, an opened or a "
                       "found page) when it decided the turn: 0 no gold page, 1 some, 2 all"),
    ("pivot_hops", "the positions in the question's `path` (0 the start entity, the last the answer page) whose "
                   "page this turn's observation showed first; non-empty marks a pivot step, the step that made "
                   "progress along the chain, and says which hop it reached"),
    ("grounded", "whether every tool call of the turn acted only on what the agent had been shown (the grounded "
                 "filter's analysis at the run's `filters.min_grounding`); null for a turn without a tool call"),
]

RL_FIELDS = [
    ("titles", "the titles of `path`'s pages, in order (the rubric reward finds the bridge entities a response "
               "names by them)"),
    ("reference_trace_id", "the question's best correct teacher rollout (in `traces`): the one that passed the "
                           "filter chain, then the highest entity rubric, then the fewest tool calls"),
    ("step_labels", "that rollout's step labels, as above"),
    ("guidance", "for an all-wrong question admitted with `rl.guidance`, that rollout's tool calls as a JSON list "
                 "of `{name, arguments}` (ACTGUIDE-RL: prefix the first k actions); null on band rows"),
    ("guidance_k", "on a guided row of the student's band, ACTGUIDE-RL's k*: the fewest of those actions whose prefix "
                   "let the student answer (`rl.guidance_min_correct` of `n` guided rollouts), by binary search; null "
                   "otherwise"),
    ("baselines", "with `rl.baselines`, the question's closed-book and naive-RAG (one search, then an answer) "
                  "answers by the teacher, `{closed_book, rag}` each `{answer, acc, f1}` (the dual reward's "
                  "baselines); null otherwise"),
    ("tools_kwargs.check_answer", "the ground truth (`target`) and the chain's titles (`chain`) for CAPF's "
                                  "training-only `check_answer` tool; the prompt never shows them"),
]

REWARD_MODES = [
    ("em", "1 when the answer matches the answer or an alias (SQuAD normalisation, exact or token F1 >= min_f1)"),
    ("f1", "MultiSearch's token F1, 2·n_int / (n_pred + n_truth)"),
    ("rubric", "r_oc + λ·r_rb / max_group(r_rb) when the answer is right, else r_oc (positive-only, "
               "normalised by the GRPO group's maximum; needs verl's batch reward manager)"),
    ("gain", "½ + S(a) − ½·max(S(a_closed), S(a_rag)), from `extra_info.baselines`"),
]


def signals_section(config_names: set[str], guidance: GuidanceFacts | None = None) -> list[str]:
    """The card's Markdown lines for the labels and the RL fields of the configs that are published."""
    if not config_names & {"sft", "traces", "rl_pool"}:
        return []
    where = [f"`{c}`" for c in ("traces", "sft") if c in config_names]
    if "rl_pool" in config_names:
        where.append("`rl_pool` (`extra_info.step_labels`, of the question's reference rollout)")
    md = ["## Step labels and RL signals", "",
          "Every trace carries `step_labels`, one per assistant turn, and so does every row built from a trace: "
          + ", ".join(where) + ". A step-level reward model (PiCA's pivot steps) trains from them with no extra "
          "labelling:", ""]
    md += [f"- `{name}`: {text}." for name, text in LABEL_FIELDS]
    if "rl_pool" in config_names:
        md += ["", "`rl_pool`'s `extra_info` also holds:", ""]
        md += [f"- `{name}`: {text}." for name, text in RL_FIELDS]
        if guidance and (guidance.rows or guidance.without_correct_rollout):
            md += ["", f"Guided rows: {guidance.rows or 0}; all-wrong questions left out for want of a correct "
                       f"rollout: {guidance.without_correct_rollout or 0}"
                       + (f"; for want of a prefix that let the student answer: {guidance.no_working_prefix}"
                          if guidance.no_working_prefix else "") + "."]
        md += ["", "hopforge's reward (`filters/reward.py`, `reward_kwargs.mode`) reads them:", ""]
        md += [f"- `{name}`: {text}." for name, text in REWARD_MODES]
        md += ["", "Each mode passes a format gate first (a malformed response scores 0) and takes two optional "
                   "terms: PiCA's step penalty `step_weight·step_alpha^(t−3)` per tool call from the third, and "
                   "CAPF's attenuation `rho_pf^N` for N `check_answer` calls."]
    return md + [""]


__all__ = ["LABEL_FIELDS", "REWARD_MODES", "RL_FIELDS", "signals_section"]
