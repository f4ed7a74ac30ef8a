"""hopforge's advantage estimator for verl (``algorithm.adv_estimator: hopforge``): three of the seeds'
signals that a reward scored one response at a time cannot give, computed in verl's advantage step.

1. **Entity rubric, group-max** (the KG-walk card): ``r = r_oc + λ·r̂_rb`` when ``r_oc > 0``, else
   ``r_oc``, with ``r̂_rb`` the response's share of the path's bridge entities divided by the largest
   share among the right answers of its GRPO group.  The group is verl's ``index`` (the ``uid`` the n
   rollouts of one prompt share: one rl_pool row, one ``extra_info.question_id``).  All responses of a
   group answer the same question, so the share's denominator is common and ``r̂_rb`` is the bridge
   entities hit over the group's largest hit count.
2. **CAPF's per-step return** ``G_t = R·ρ^{N_t}``, ``N_t`` the ``check_answer`` calls made at step t or
   after: the tokens after the last feedback call keep the full R, each earlier turn is attenuated once per
   feedback call still ahead of it.
3. **PiCA's step penalty**: tool call t (t = 1 the first) costs ``λ·α^(t−3)`` from t = 3 on, a reward at
   the step that makes the call, so the turns up to that call carry it in their return and the later
   turns do not.

A token's return is ``G = R·ρ^{N_t} − Σ_{calls t' at or after its turn} λ·α^(t'−3)`` (R with the rubric
term), and its advantage GRPO's group normalisation of it: ``(G − mean_g)/(std_g + ε)`` (or ``G − mean_g``
with ``norm_adv_by_std_in_grpo: false``), ``mean_g``/``std_g`` over the group's whole-trajectory returns
(G at each response's first token).  With the three parts off this is verl's ``grpo``.

**What reaches an estimator in verl 0.9.1.**  ``compute_advantage`` (``verl.trainer.ppo.ray_trainer``) calls
a registered estimator with ``token_level_rewards``, ``response_mask``, ``index`` (``uid``) and ``config``
(``algorithm``) only: ``non_tensor_batch`` (where ``reward_extra_info`` lives) goes to ``gdpo`` alone, and
the v1 trainer's ``_compute_advantage`` reads no more than ``uid``, ``response_mask`` and ``rm_scores`` from
its transfer queue.  Neither the response's tokens nor the reward's extra keys arrive.  So:

- **Tool-call positions** come from ``response_mask``: verl's tool agent loop masks every tool observation
  (and the role tokens around it) with 0 and the policy's tokens with 1, so each maximal run of 1s is one
  assistant turn and each run of 0s after a turn is the observation of that turn's call
  (``multi_turn.max_parallel_calls: 1``, as configured, makes it one call).  Call t is the last token
  of turn t.  The response's end is the token that holds the reward (never 0, below), so an observation
  that ends a cut-off response is told apart from the padding.
- **The per-response facts** (R, the rubric's hit count, which calls were ``check_answer``) travel in the
  reward itself: with ``reward_kwargs.advantage: hopforge``, :func:`filters.reward.compute_score` returns as
  ``score`` an integer code of 2^23..2^24−1 (exact in float32, and no plain reward lies in that range; the
  estimator refuses any other value), which verl puts on the response's last token:

  ====== ============================================================================
  bits   field
  ====== ============================================================================
  0–7    ``check_answer`` calls among the last 8 calls (bit k: the k-th call before the last); a call
         further back is recorded as the 8th before the last, so its attenuation reaches a few turns too
         many (never too few)
  8–12   rubric: 0 when the answer is wrong (no credit), else 1 + bridge entities hit (at most 30)
  13–21  R, the outcome before rubric, penalty and attenuation (mode score + evidence term), in steps
         of 1/128 from 0 to 3.99
  22     format ok (a malformed response gets 0 at every token, no penalty, as in ``filters/reward.py``)
  23     always 1
  ====== ============================================================================

  The readable values (``acc``, ``f1``, ``rubric``, ``check_calls``, ...) are still the reward's extra keys,
  which verl logs; verl's ``critic/score`` shows the codes.

**Knobs**: ``algorithm.hopforge`` (a mapping; the ``+`` override form adds it on the command line), each
optional: ``rubric`` (on), ``rubric_weight`` (λ, 0.5), ``capf`` (on), ``rho_pf`` (ρ, 0.8), ``pica`` (on),
``step_weight`` (λ, 0.05), ``step_alpha`` (α, 1.2: α > 1 makes each further call dearer), and GRPO's
``algorithm.norm_adv_by_std_in_grpo``.  ``algorithm.use_kl_in_reward`` must stay false (a KL term on every
token would overwrite the codes).  ``+estimator=hopforge`` (``configs/rl/estimator/hopforge.yaml``) over the RL
config selects it.

**Registration.**  verl loads the ``verl.plugins`` entry points of installed packages on ``import verl``;
hopforge's (``pyproject.toml``) imports this module, so ``pip install --no-deps -e .`` in verl's environment
registers ``hopforge`` in the trainer.  ``VERL_USE_EXTERNAL_MODULES=filters.advantage`` does the same.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:  # torch and numpy are verl's; the reward's side (encode, call_turns) needs neither
    import numpy as np
    import torch

NAME = "hopforge"

# the transport code (see the module docstring)
CODE_BASE = 1 << 23
CHECK_WINDOW = 8
RUBRIC_SHIFT, RUBRIC_MAX_HITS = 8, 30
OUTCOME_SHIFT, OUTCOME_STEPS, OUTCOME_MAX = 13, 128, 511
VALID_BIT = 1 << 22

DEFAULTS: dict[str, Any] = {"rubric": True, "rubric_weight": 0.5, "capf": True, "rho_pf": 0.8, "pica": True,
                            "step_weight": 0.05, "step_alpha": 1.2}


# --- the reward's side: the code ------------------------------------------------------------------------------

def encode(*, format_ok: bool, outcome: float, hits: int | None, check_turns: Iterable[bool]) -> float:
    """The code :func:`filters.reward.compute_score` returns as ``score`` under ``advantage: hopforge``.

    ``outcome``: R (0 <= R < 4); ``hits``: the bridge entities a right answer hit (None: no rubric credit);
    ``check_turns``: for each tool call in order, whether it was ``check_answer``."""
    q = round(outcome * OUTCOME_STEPS)
    if not 0 <= q <= OUTCOME_MAX:
        raise ValueError(f"the hopforge estimator carries an outcome in [0, {OUTCOME_MAX / OUTCOME_STEPS}]; got "
                         f"{outcome} (lower evidence_weight)")
    rb = 0 if hits is None else 1 + min(max(int(hits), 0), RUBRIC_MAX_HITS)
    checks = 0
    flags = list(check_turns)
    for k, is_check in enumerate(reversed(flags)):
        if is_check:
            checks |= 1 << min(k, CHECK_WINDOW - 1)
    code = CODE_BASE | (VALID_BIT if format_ok else 0) | (q << OUTCOME_SHIFT) | (rb << RUBRIC_SHIFT) | checks
    return float(code)


def decode(value: float) -> dict:
    """The fields of one code (:func:`encode`); a value that is not one is refused."""
    code = int(value)
    if code != value or not CODE_BASE <= code < 2 * CODE_BASE:
        raise ValueError(f"reward {value!r} is not a hopforge code: the hopforge estimator needs "
                         "reward.custom_reward_function.reward_kwargs.advantage=hopforge (filters/advantage.py)")
    rb = (code >> RUBRIC_SHIFT) & 0x1F
    return {"format_ok": bool(code & VALID_BIT), "outcome": ((code >> OUTCOME_SHIFT) & 0x1FF) / OUTCOME_STEPS,
            "hits": rb - 1 if rb else None,
            "checks_back": [k for k in range(CHECK_WINDOW) if code >> k & 1]}


_OBS = re.compile(r"<tool_response>.*?(?:</tool_response>|$)", re.S)
_BETWEEN = re.compile(r"\s*(?:(?:user|tool|assistant)\s*)*")


def call_turns(text: str, names: Iterable[str]) -> list[bool]:
    """For each observation run of a decoded response (one per call under ``max_parallel_calls: 1``:
    consecutive ``<tool_response>`` blocks with only role words between are one run), whether the turn
    before it called one of ``names``."""
    from filters.solution import _CALL, _read_call, known_tools

    wanted, known = set(names), set(known_tools())
    out: list[bool] = []
    start = 0
    prev_end = None
    for m in _OBS.finditer(text or ""):
        if prev_end is not None and _BETWEEN.fullmatch(text[prev_end:m.start()]):
            prev_end = m.end()  # the same run
            start = m.end()
            continue
        turn = text[start:m.start()]
        out.append(any(_read_call(body, known)[0] in wanted and _read_call(body, known)[2] is None
                       for body in _CALL.findall(turn)))
        start = prev_end = m.end()
    return out


# --- the trainer's side: the estimator ------------------------------------------------------------------------

def knobs(config: Any) -> dict:
    """``algorithm.hopforge`` over :data:`DEFAULTS` (unknown keys refused)."""
    got = (config.get("hopforge") if config is not None and hasattr(config, "get") else None) or {}
    got = dict(got.items()) if hasattr(got, "items") else {}
    unknown = set(got) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"algorithm.hopforge: unknown keys {sorted(unknown)} (allowed: {', '.join(DEFAULTS)})")
    return {**DEFAULTS, **got}


def _runs(mask: list[int], end: int) -> tuple[list[tuple[int, int]], list[int]]:
    """The assistant turns ``(first, last)`` (runs of 1) in ``mask[:end]`` and the calls: the last token of
    each turn that an observation (a run of 0) follows within ``end``."""
    turns: list[tuple[int, int]] = []
    i = 0
    while i < end:
        if mask[i]:
            j = i
            while j + 1 < end and mask[j + 1]:
                j += 1
            turns.append((i, j))
            i = j + 1
        else:
            i += 1
    calls = [last for _, last in turns if last + 1 < end]
    return turns, calls


def token_returns(mask: list[int], end: int, outcome: float, checks_back: list[int], k: dict) -> list[float]:
    """Each token's return (module docstring) for one response: ``outcome`` is R with its rubric term."""
    turns, calls = _runs(mask, end)
    n = len(calls)
    is_check = [False] * n
    if k["capf"]:
        for back in checks_back:
            if n:
                is_check[max(n - 1 - back, 0)] = True
    step_cost = [k["step_weight"] * k["step_alpha"] ** (t - 3) if k["pica"] and t >= 3 else 0.0
                 for t in range(1, n + 1)]
    out = [0.0] * len(mask)
    for j, (first, last) in enumerate(turns):  # turn j+1 makes call j+1 (when one follows it)
        ahead = range(j, n)
        g = outcome * k["rho_pf"] ** sum(is_check[t] for t in ahead) - sum(step_cost[t] for t in ahead)
        for p in range(first, last + 1):
            out[p] = g
    return out


def compute_hopforge_advantage(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: np.ndarray,
                               epsilon: float = 1e-6, norm_adv_by_std_in_grpo: bool = True, config: Any = None,
                               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's estimator ``hopforge`` (module docstring): ``(advantages, returns)``, both the normalised
    per-token returns, as verl's ``grpo`` returns them."""
    import torch

    if config is not None and hasattr(config, "get") and config.get("use_kl_in_reward", False):
        raise ValueError("the hopforge estimator reads the reward's code from the last token: set "
                         "algorithm.use_kl_in_reward=false (the shipped configs use the KL loss instead)")
    k = knobs(config)
    if config is not None and hasattr(config, "get"):
        norm_adv_by_std_in_grpo = config.get("norm_adv_by_std_in_grpo", norm_adv_by_std_in_grpo)
    rewards = token_level_rewards.detach().float().cpu()
    masks = response_mask.detach().cpu().to(torch.int64).tolist()
    bs, length = rewards.shape
    facts: list[tuple[int, dict]] = []
    for i in range(bs):
        nz = torch.nonzero(rewards[i]).flatten()
        if len(nz) == 0 and not any(masks[i]):  # verl's padding row (no response): a return of 0, as in grpo
            facts.append((0, {"format_ok": False, "outcome": 0.0, "hits": None, "checks_back": []}))
            continue
        if len(nz) != 1:
            raise ValueError(f"response {i}: {len(nz)} tokens hold a reward; the hopforge estimator expects the "
                             "reward's code on the last token alone")
        end = int(nz[0]) + 1
        facts.append((end, decode(float(rewards[i, end - 1]))))
    groups: dict[Any, list[int]] = defaultdict(list)
    for i in range(bs):
        groups[index[i]].append(i)
    outcome = [0.0] * bs
    for members in groups.values():
        top = max((facts[i][1]["hits"] for i in members if facts[i][1]["hits"] is not None), default=0)
        for i in members:
            f = facts[i][1]
            r = f["outcome"]
            if k["rubric"] and r > 0 and f["hits"] is not None:
                r += k["rubric_weight"] * (f["hits"] / top if top > 0 else 0.0)
            outcome[i] = r
    returns = torch.zeros(bs, length, dtype=torch.float32)
    whole = torch.zeros(bs, dtype=torch.float32)
    for i, (end, f) in enumerate(facts):
        if not f["format_ok"]:
            continue
        g = token_returns(masks[i], end, outcome[i], f["checks_back"], k)
        returns[i] = torch.tensor(g, dtype=torch.float32)
        first = next((p for p in range(end) if masks[i][p]), None)
        whole[i] = g[first] if first is not None else 0.0
    adv = torch.zeros_like(returns)
    with torch.no_grad():
        for members in groups.values():
            idx = torch.tensor(members)
            if len(members) == 1:
                mean, std = torch.tensor(0.0), torch.tensor(1.0)
            else:
                mean, std = whole[idx].mean(), whole[idx].std()
            if norm_adv_by_std_in_grpo:
                adv[idx] = (returns[idx] - mean) / (std + epsilon)
            else:
                adv[idx] = returns[idx] - mean
    adv = (adv * response_mask.detach().cpu().float()).to(token_level_rewards.device)
    return adv, adv


def register() -> None:
    """Register :func:`compute_hopforge_advantage` as verl's ``hopforge`` estimator (idempotent)."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

    if ADV_ESTIMATOR_REGISTRY.get(NAME) is not compute_hopforge_advantage:
        register_adv_est(NAME)(compute_hopforge_advantage)


try:
    register()
except ImportError:  # verl not installed: the reward's side (encode, call_turns) still works
    pass


__all__ = ["CHECK_WINDOW", "DEFAULTS", "NAME", "call_turns", "compute_hopforge_advantage", "decode", "encode",
           "knobs", "register", "token_returns"]
