"""The difficulty band (LiteResearcher) and the ``rl_pool`` table in verl's RL layout.

For each question, ``n`` is its number of rollouts and ``c`` how many of them are
correct (rule or judge, see :mod:`filters.correctness`) -- whatever the other filters
said, since a correct answer reached in two steps still tells RL the question is easy.
``c = 0`` (``all_wrong``) and ``c = n`` (``all_right``) give a GRPO group no gradient;
``1 <= c <= n - 1`` goes to ``rl_pool``.

An ``rl_pool`` row is what verl's ``RLHFDataset`` and its multi-turn tool rollout read::

    data_source   "hopforge" (verl's default_compute_score does not know it: configure
                  custom_reward_function = filters/reward.py:compute_score, see README "RL with verl")
    prompt        [{role, content}]: the harness's system prompt and the question, exactly the first
                  two messages of the SFT rows (the teacher's rollout harness)
    ability       "multihop_search"
    reward_model  {style: "rule", ground_truth: {target: [answer, *aliases], other_titles: [...], min_f1}}
                  (the question's answer key, :mod:`synth.corpus.answerkeys`: the reward judges with it)
    extra_info    {question_id, index, path, titles, n, c, band_model, split,
                   tools_kwargs: {search: {create_kwargs: {exclude: [answer_page_id]}},
                                  check_answer: {create_kwargs: {target: [...], chain: titles,
                                                                 other_titles: [...]}}},
                   need_tools_kwargs: true, reference_trace_id, step_labels, guidance, guidance_k, baselines,
                   context: {policy, compress_observations, keep_observations}}
    tools         the rollout's tool schemas as a JSON string (the ``tools`` of the SFT rows)

``n`` and ``c`` are the rollouts and correct ones of the model that measured the band, and
``band_model`` names it (``teacher:<model>`` or ``student:<model>``, see ``rl.band_by``), so verl's
dynamic sampling and group filters read whose difficulty a row carries.

The prompt is the messages before the first assistant turn of the question's first
rollout (lowest ``sample_index``), so RL starts from exactly the harness the teacher
saw and the student was trained on.  verl renders the tools from its tool config, not
from ``tools``: ``configs/rl/tools.yaml`` names :class:`synth.tools.verl_tool.HopforgeTool`,
whose schemas are :func:`synth.tools.schema.tool_schemas` (the same JSON, key for key).
``tools_kwargs`` is what verl hands the tool's ``create`` per question: the search masks
the answer page, as the rollout's ``Toolbox(mask_page_ids=[answer_page_id])`` did (and,
like it, only when ``tools.mask_answer_page``).  Nested fields are Arrow structs (verl
indexes ``reward_model["ground_truth"]``); ``tools`` stays a JSON string (Arrow would
merge the keys of different schemas).

What the seeds' rewards and methods read (:mod:`filters.reward`, :mod:`filters.guidance`):

- ``titles``: the path's page titles, parallel to ``path`` (the rubric mode finds the bridge
  entities a response names by them; the ``check_answer`` tool names the hop a candidate matches).
- ``reference_trace_id`` and ``step_labels``: the question's best correct teacher rollout and its
  per-turn labels (E_t, pivot hops, grounded; :mod:`synth.rollout.labels`); null and empty when the
  teacher has no correct rollout of it.
- ``guidance`` (with ``rl.guidance``, all-wrong questions only): that rollout's tool calls as a JSON
  list of ``{"name", "arguments"}`` (ACTGUIDE-RL prefixes the first k); null otherwise.
- ``guidance_k`` (student band, guided rows only): ACTGUIDE's k*, the fewest guidance actions whose prefix let
  the student answer (:mod:`sft.rlband`); null otherwise.
- ``baselines`` (with ``rl.baselines``): ``{closed_book, rag}``, each ``{answer, acc, f1}`` (the
  ``gain`` mode's ``a_I`` and ``a_R``); null otherwise.
- ``tools_kwargs.check_answer``: the ground truth for CAPF's training-only ``check_answer`` tool
  (:class:`synth.tools.verl_tool.CheckAnswerTool`), which only a CAPF tool config instantiates.
- ``context``: the run's ``sft.context`` (:func:`context_of`): the observations the policy trained with.  verl
  0.9's tool agent loop keeps every observation of a rollout in one token sequence, which is ``full``; a row
  of an ``as_seen`` run says so, for an agent loop that compresses (README "RL with verl").
"""

from __future__ import annotations

import math
from typing import Iterable

from synth.engine.records import Question
from synth.engine.conversation import Message
from synth.text.answers import AnswerKey

DATA_SOURCE = "hopforge"
ABILITY = "multihop_search"

BANDS = ("rl_pool", "all_wrong", "all_right")


def band(c: int, n: int) -> str:
    """``all_wrong`` (c = 0), ``all_right`` (c = n) or ``rl_pool`` (1 <= c <= n - 1)."""
    if n <= 0 or c < 0 or c > n:
        raise ValueError(f"bad counts c={c}, n={n}")
    if c == 0:
        return "all_wrong"
    if c == n:
        return "all_right"
    return "rl_pool"


def prompt_messages(messages: Iterable[Message]) -> list[dict]:
    """The system and user messages before the first assistant turn, as ``{role, content}``.

    Content is read as the SFT rows read it (:attr:`Message.text`: content parts joined), so the
    prompt is the SFT rows' first messages character for character."""
    out = []
    for m in messages:
        if m.role == "assistant":
            break
        if m.role in ("system", "user"):
            out.append({"role": m.role, "content": m.text or ""})
    return out


def tools_kwargs(question: Question, key: AnswerKey | None = None) -> dict:
    """``extra_info.tools_kwargs`` of a question: verl passes ``create_kwargs`` to the tool's ``create``.

    The search (and ``multi_search``, where a run offers it) never returns the answer page, as in the question's rollouts (the rollout stage builds
    ``Toolbox(index, cfg.tools, mask_page_ids=[question.answer_page_id])``); the tool server takes the
    pages as ``exclude``.  ``open`` and ``find`` take nothing: a rollout may open the answer page once it
    has found its name through the hops.  ``check_answer`` (CAPF, training only) gets the ground truth
    (the answer key's names and other titles; ``key`` None: the answer and aliases) and the chain's titles;
    the model never sees ``tools_kwargs``."""
    key = key if key is not None else AnswerKey.of(question.golds)
    masked = {"create_kwargs": {"exclude": [question.answer_page_id]}}
    return {"search": masked, "multi_search": masked,
            "check_answer": {"create_kwargs": {"target": list(key.names), "chain": list(question.titles),
                                               "other_titles": list(key.other_titles)}}}


def rl_row(question: Question, prompt: list[dict], tools: str, n: int, c: int, index: int,
           band_model: str | None = None, *, reference: dict | None = None, guidance: str | None = None,
           baselines: dict | None = None, key: AnswerKey | None = None, context: dict | None = None,
           guidance_k: int | None = None) -> dict:
    """One ``rl_pool`` row (:data:`synth.engine.records.RL_SCHEMA`); ``prompt`` is the harness of the
    question's first rollout (:func:`prompt_messages`), ``tools`` its tool schemas JSON, ``band_model``
    the model whose ``n`` rollouts (``c`` correct) put the question in the band; ``reference`` the best
    correct rollout (``{"trace_id", "step_labels"}``), ``guidance`` its tool calls (JSON), ``guidance_k`` the
    measured k* of a guided row (None when not measured), ``baselines``
    the closed-book and naive-RAG answers, ``key`` the question's answer key (None: its answer and aliases
    alone; see the module docstring), ``context`` the run's :func:`context_of`."""
    key = key if key is not None else AnswerKey.of(question.golds)
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": m["role"], "content": m["content"]} for m in prompt],
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": key.ground_truth()},
        "extra_info": {"question_id": question.question_id, "question": question.question, "index": index, "path": list(question.path),
                       "titles": list(question.titles), "n": n, "c": c, "band_model": band_model,
                       "split": question.split, "tools_kwargs": tools_kwargs(question, key),
                       "need_tools_kwargs": True,
                       "reference_trace_id": (reference or {}).get("trace_id"),
                       "step_labels": list((reference or {}).get("step_labels") or []),
                       "guidance": guidance, "guidance_k": guidance_k, "baselines": baselines,
                       "context": context},
        "tools": tools,
    }


def context_of(cfg) -> dict:
    """``extra_info.context``: the run's ``sft.context`` and the compression it implies for the policy's rollouts
    (``as_seen``: the teacher's ``rollout.compress_observations`` / ``keep_observations``; ``full``: none)."""
    as_seen = cfg.sft.context == "as_seen"
    return {"policy": cfg.sft.context, "compress_observations": bool(as_seen and cfg.rollout.compress_observations),
            "keep_observations": int(cfg.rollout.keep_observations)}


def band_model_name(by: str, models: Iterable[str]) -> str:
    """``by:model`` (``teacher:oracle``), the models joined by ``+`` when several rolled out (sorted)."""
    names = sorted({m for m in models if m})
    return f"{by}:{'+'.join(names) if names else 'unknown'}"


def band_counts(rows: Iterable[tuple[str, int, int]]) -> dict[str, dict[str, int]]:
    """Per split, the questions in each band, from ``(split, n, c)`` per question: ``{split: {band: count}}``.

    Every band is listed for every split seen, zeros included, so a reader never mistakes a missing key
    for a band that was not counted."""
    out: dict[str, dict[str, int]] = {}
    for split, n, c in rows:
        out.setdefault(split, {b: 0 for b in BANDS})[band(c, n)] += 1
    return {s: out[s] for s in sorted(out)}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al., 2021): ``1 - C(n-c, k) / C(n, k)``."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_stats(counts: Iterable[tuple]) -> dict:
    """Per-question ``(n, c)`` or ``(n, c, first)`` -> pass@1, pass@n, and unbiased pass@k for k = 2, 4, 8
    (when every n >= k).  ``first`` is whether the question's sample 0 answered correctly (None: it has none).

    pass@1 is the mean of c/n when every question has the same n.  When n differs by question
    (``rollout.policy: adaptive`` draws later samples only where earlier ones failed, so c/n would
    overstate it) pass@1 is the accuracy of each question's first sample, which every question has
    whatever the policy (``pass@1_from`` says which).  pass@n is the share of questions with a correct
    sample among those they have.
    """
    rows = [(int(r[0]), int(r[1]), r[2] if len(r) > 2 else None) for r in counts]
    rows = [r for r in rows if r[0] > 0]
    if not rows:
        return {"questions": 0}
    q = len(rows)
    min_n, max_n = min(n for n, _, _ in rows), max(n for n, _, _ in rows)
    firsts = [f for _, _, f in rows if f is not None]
    if min_n == max_n or not firsts:
        pass1, basis = sum(c / n for n, c, _ in rows) / q, "mean c/n"
    else:
        pass1, basis = sum(firsts) / len(firsts), "first sample"
    out = {
        "questions": q,
        "samples": sum(n for n, _, _ in rows),
        "min_n": min_n,
        "max_n": max_n,
        "pass@1": round(pass1, 6),
        "pass@1_from": basis,
        "pass@n": round(sum(1 for _, c, _ in rows if c > 0) / q, 6),
    }
    for k in (2, 4, 8):
        if k <= min_n:
            out[f"pass@{k}"] = round(sum(pass_at_k(n, c, k) for n, c, _ in rows) / q, 6)
    return out


__all__ = ["ABILITY", "BANDS", "DATA_SOURCE", "band", "band_counts", "band_model_name", "pass_at_k", "pass_stats",
           "prompt_messages", "rl_row", "tools_kwargs"]
