"""The reward's judge terms: RLTR's tool-use completeness, and the dual reward's process score and Pareto cost.

:func:`filters.reward.compute_score` hands every scored response to :func:`apply`, which adds three reward
components (:data:`filters.reward.REWARD_KEYS`) and their diagnostics to verl's dict, each 0 unless its option is
set in ``reward_kwargs``, so no mode's ``score`` moves by default:

- ``rltr`` (RLTR, ``rltr_weight`` > 0): a tool-use completeness reward from an LLM checker,

  ``r_rltr = −1`` for a malformed response (the format gate), else
  ``clip(c̄ − repeat_penalty·n_repeat − error_penalty·n_error, −1, 1)``, where

  - ``c̄ = (1/N) Σ_i v_i`` over ``N = rltr_samples`` samples of the judge (``v_i = 1`` when sample i says the tool
    use was complete, 0 when not; prompt ``synth/teacher/prompts/tool_use_judge.jinja2``), averaged over the
    samples that answered;
  - ``n_repeat``: well-formed calls that repeat an earlier call, same tool and same arguments (as canonical JSON);
  - ``n_error``: calls the parser marks malformed plus calls whose observation is an error (``{"error": ...}``).

  ``score += rltr_weight · r_rltr``.  RLTR rewards the planning, so it is a process reward and is *not* gated on
  the answer's correctness (a complete search that ends in a wrong answer still earns it; the outcome term says
  the answer was wrong); it is the one component that is not 0 for a malformed response: RLTR gives it −1, and a
  malformed response's score is then ``−rltr_weight`` rather than 0.
- ``process`` (the dual reward's ``R_process``, ``process_max`` > 0, 0.5 in the planner/answerer work): a frozen
  judge scores the trajectory's steps from 0 to 10 (``process_judge.jinja2``);
  ``R_process = process_max · s/10 ∈ [0, process_max]``, gated on the format (0 for a malformed response),
  not on correctness (it grades the process, as the outcome gain grades the answer).  ``score += R_process``.
- ``cost`` (the dual reward's Pareto cost ``α·R_cost``, ``cost_alpha`` = α > 0), no judge needed:

  ``R_cost = ½·min(T / cost_max_turns, 1) + ½·min(W / cost_max_words, 1) ∈ [0, 1]``,

  ``T`` the turns that made a well-formed tool call and ``W`` the words (whitespace-separated) of every query the
  response sent to a search tool (``search``'s ``query``, each of ``multi_search``'s ``queries``).  The component is
  ``α·R_cost`` for a well-formed response, 0 for a malformed one, and ``score −= α·R_cost``.

These terms are added after the others, outside CAPF's ``ρ_PF^N`` factor.

The judge is any OpenAI-compatible endpoint, reached through the project's teacher client
(:class:`synth.teacher.client.Teacher`): its call cache (``judge.cache``, a SQLite file; default
``cache/judge.sqlite`` under the working directory) answers a trajectory scored before without a request, and its
retries, timeout and in-flight gate apply.  ``reward_kwargs.judge``::

    judge: {base_url: http://127.0.0.1:8000/v1, model: Qwen/Qwen2.5-7B-Instruct, api_key_env: JUDGE_API_KEY,
            timeout_s: 30, max_retries: 1, temperature: 0.7, cache: /path/judge.sqlite}

The key is read from the environment variable ``api_key_env`` names, never from the config, and is never
logged or returned.  A judge that fails (nothing listening, a timeout, an error status, a reply that is not the
JSON asked for, which is then not kept in the cache) never stops training: the response gets ``raw_judge_failed``
1 and its judge terms are left out, so its score is the rule's alone (the cost term, which needs no judge, stays).
After the teacher's breaker trips on a dead endpoint, calls fail at once (cached answers still replay) until
``judge.cooldown_s`` has passed; then the endpoint is tried again.

Diagnostics (ungated, ``raw_*``): ``raw_completeness`` (``c̄``, 0 without the judge), ``raw_repeat_calls``,
``raw_error_calls``, ``raw_process`` (the judge's ``s/10``), ``raw_cost`` (``R_cost``) and ``raw_judge_failed``.
The judge sees the question when the row carries ``extra_info.question``, else the trajectory alone.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from typing import Any, Sequence

from synth.teacher.prompting import extract_json, render
from synth.tools.registry import find_tool

from filters.solution import Solution

log = logging.getLogger("hopforge")

JUDGE_KEYS = ("rltr", "process", "cost")
JUDGE_DIAGNOSTIC_KEYS = ("raw_completeness", "raw_repeat_calls", "raw_error_calls", "raw_process", "raw_cost",
                         "raw_judge_failed")
RLTR_PROMPT, PROCESS_PROMPT = "tool_use_judge", "process_judge"
PROCESS_SCALE = 10  # the process judge's scale: an integer 0..10

_RESPONSE = re.compile(r"<tool_response>(.*?)(?:</tool_response>|$)", re.S)
_ERROR = re.compile(r'^\s*\{\s*"error"\s*:')
DEFAULT_CACHE = "cache/judge.sqlite"  # under the working directory, when judge.cache is not set
_JUDGE_FIELDS = {"base_url", "model", "api_key_env", "timeout_s", "max_retries", "temperature", "max_tokens",
                 "concurrency", "cache", "cooldown_s", "obs_chars", "max_chars"}


class Settings:
    """The judge terms' options, read from ``reward_kwargs`` (see the module docstring)."""

    __slots__ = ("rltr_weight", "rltr_samples", "repeat_penalty", "error_penalty", "process_max", "cost_alpha",
                 "cost_max_turns", "cost_max_words", "judge")

    def __init__(self, rltr_weight: float = 0.0, rltr_samples: int = 4, repeat_penalty: float = 0.1,
                 error_penalty: float = 0.1, process_max: float = 0.0, cost_alpha: float = 0.0,
                 cost_max_turns: int = 10, cost_max_words: int = 60, judge: dict | None = None) -> None:
        self.rltr_weight, self.rltr_samples = float(rltr_weight), int(rltr_samples)
        self.repeat_penalty, self.error_penalty = float(repeat_penalty), float(error_penalty)
        self.process_max, self.cost_alpha = float(process_max), float(cost_alpha)
        self.cost_max_turns, self.cost_max_words = int(cost_max_turns), int(cost_max_words)
        self.judge = dict(judge or {})
        if self.rltr_samples < 1:
            raise ValueError(f"rltr_samples must be at least 1 (got {self.rltr_samples})")
        if not 0 <= self.process_max <= 1:
            raise ValueError(f"process_max must be in [0, 1] (got {self.process_max}; the dual reward uses 0.5)")
        if min(self.rltr_weight, self.cost_alpha, self.repeat_penalty, self.error_penalty) < 0:
            raise ValueError("rltr_weight, cost_alpha, repeat_penalty and error_penalty must be >= 0")
        if self.cost_max_turns < 1 or self.cost_max_words < 1:
            raise ValueError("cost_max_turns and cost_max_words must be >= 1")
        unknown = sorted(set(self.judge) - _JUDGE_FIELDS)
        if unknown:
            raise ValueError(f"unknown reward_kwargs.judge key(s) {unknown} "
                             f"(allowed: {', '.join(sorted(_JUDGE_FIELDS))})")
        if self.needs_judge and not self.judge.get("model"):
            raise ValueError("rltr_weight or process_max needs a judge: set reward_kwargs.judge.model "
                             "(and judge.base_url, judge.api_key_env)")

    @property
    def needs_judge(self) -> bool:
        """Whether a term asks the judge."""
        return self.rltr_weight > 0 or self.process_max > 0

    @property
    def enabled(self) -> bool:
        """Whether any judge term changes the score."""
        return self.needs_judge or self.cost_alpha > 0


def settings(kwargs: dict) -> Settings:
    """The options of :class:`Settings` taken out of ``kwargs`` (what is left is verl's and the other terms')."""
    return Settings(**{k: kwargs.pop(k) for k in list(kwargs) if k in Settings.__slots__})


# ---- the rule's parts ------------------------------------------------------------------------------------------


def repeated_calls(sol: Solution) -> int:
    """Well-formed calls that repeat an earlier one: the same tool with the same arguments (canonical JSON)."""
    seen: set[str] = set()
    repeats = 0
    for name, args in sol.calls:
        key = name + json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
        repeats += key in seen
        seen.add(key)
    return repeats


def error_calls(sol: Solution, solution_str: str) -> int:
    """Erroneous calls: those the parser marks malformed plus those whose observation is ``{"error": ...}``."""
    return sol.bad_calls + sum(1 for m in _RESPONSE.finditer(solution_str or "") if _ERROR.match(m.group(1)))


def cost_parts(sol: Solution) -> tuple[int, int]:
    """``(T, W)``: the turns that made a well-formed tool call, and the words of every query sent to a search tool."""
    words = 0
    for name, args in sol.calls:
        spec = find_tool(name)
        if spec is None or not spec.masked or spec.text_arg is None:
            continue
        value = args.get(spec.text_arg)
        for q in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
            if isinstance(q, str):
                words += len(q.split())
    return len(set(sol.call_turns)), words


def pareto_cost(turns: int, words: int, max_turns: int, max_words: int) -> float:
    """``R_cost = ½·min(T/max_turns, 1) + ½·min(W/max_words, 1)``, in [0, 1]."""
    return 0.5 * min(turns / max_turns, 1.0) + 0.5 * min(words / max_words, 1.0)


def rltr_reward(format_ok: bool, completeness: float, repeats: int, errors: int, repeat_penalty: float,
                error_penalty: float) -> float:
    """RLTR's reward: −1 for an invalid format, else
    ``clip(c̄ − repeat_penalty·n_repeat − error_penalty·n_error, −1, 1)``."""
    if not format_ok:
        return -1.0
    return max(-1.0, min(1.0, completeness - repeat_penalty * repeats - error_penalty * errors))


# ---- the judge ----------------------------------------------------------------------------------------------


def trajectory_text(solution_str: str, obs_chars: int = 600, max_chars: int = 24000) -> str:
    """The response as the judge reads it: each observation cut to ``obs_chars`` characters, the whole to
    ``max_chars`` (its head and tail kept)."""
    def cut(m: re.Match) -> str:
        body = m.group(1)
        body = body if len(body) <= obs_chars else body[:obs_chars] + " [...]"
        return "<tool_response>" + body + "</tool_response>"

    text = _RESPONSE.sub(cut, solution_str or "")
    if len(text) > max_chars:
        half = max_chars // 2
        text = text[:half] + "\n[... trajectory cut ...]\n" + text[-half:]
    return text


def read_verdict(content: str | None, finish_reason: str | None = None) -> float | None:
    """The completeness checker's reply as 1.0 (complete) or 0.0, or None when it is not the JSON asked for."""
    obj, _ = extract_json(content, finish_reason)
    value = obj.get("complete") if obj else None
    return float(value) if isinstance(value, bool) else None


def read_process(content: str | None, finish_reason: str | None = None) -> float | None:
    """The process judge's reply as ``s/10`` in [0, 1], or None when it is not a score from 0 to 10."""
    obj, _ = extract_json(content, finish_reason)
    value = obj.get("score") if obj else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= PROCESS_SCALE:
        return None
    return float(value) / PROCESS_SCALE


class _Judge:
    """One endpoint's teacher, kept for the process's life (its cache, gate and breaker), and its breaker's
    cooldown."""

    def __init__(self, cfg: dict) -> None:
        from synth.teacher.client import Teacher, TeacherConfig

        self.cooldown_s = float(cfg.get("cooldown_s", 60.0))
        tc = TeacherConfig(backend="openai", base_url=cfg.get("base_url"), model=str(cfg["model"]),
                           api_key_env=str(cfg.get("api_key_env", "OPENAI_API_KEY")),
                           timeout_s=float(cfg.get("timeout_s", 30.0)), max_retries=int(cfg.get("max_retries", 1)),
                           temperature=float(cfg.get("temperature", 0.7)), max_tokens=int(cfg.get("max_tokens", 256)),
                           concurrency=int(cfg.get("concurrency", 32)), backoff_base_s=0.2, backoff_max_s=2.0,
                           abort_after=3, abort_grace_s=0.0, tool_protocol="native")
        self.teacher = Teacher(tc, cfg.get("cache") or DEFAULT_CACHE)
        self.tripped_at: float | None = None

    def ready(self) -> None:
        """Give a tripped breaker another chance once the cooldown has passed."""
        b = self.teacher.breaker
        if b.tripped is not None and self.tripped_at is not None:
            if time.monotonic() - self.tripped_at >= self.cooldown_s:
                with b._lock:
                    b.tripped, b.consecutive = None, 0
                self.tripped_at = None

    def ask(self, calls: list[tuple[list[dict], int, Any]]) -> list[float | None]:
        """Each ``(messages, sample_index, reader)`` answered and read, or None where the judge failed."""
        from synth.teacher.breaker import TeacherUnavailable
        from synth.teacher.client import TeacherError

        async def one(call: tuple[list[dict], int, Any]) -> float | None:
            messages, sample, reader = call
            try:
                resp = await self.teacher.chat(messages, sample_index=sample)
            except (TeacherError, TeacherUnavailable):
                return None
            value = reader(resp.content, resp.finish_reason)
            if value is None and self.teacher.cache is not None:
                # An unreadable reply is not kept: the next scoring of this trajectory asks again (a plain
                # request has no variant: no tools, no response_format).
                self.teacher.cache.discard(self.teacher.key(messages, None, sample))
            return value

        self.ready()
        try:
            out = self.teacher.map(one, calls)
        except Exception as e:  # noqa: BLE001 - a judge must never stop training; the type alone says what
            log.warning("reward judge failed (%s); its terms are left out of this batch", type(e).__name__)
            out = [None] * len(calls)
        if self.teacher.breaker.tripped is not None and self.tripped_at is None:
            self.tripped_at = time.monotonic()  # the cooldown runs from the batch that tripped it
        return [v if isinstance(v, float) else None for v in out]


_JUDGES: dict[str, _Judge] = {}
_LOCK = threading.Lock()


def judge_of(cfg: dict) -> _Judge:
    """The process's judge for ``cfg`` (one per endpoint, model and cache)."""
    key = json.dumps(cfg, sort_keys=True, default=str)
    with _LOCK:
        if key not in _JUDGES:
            _JUDGES[key] = _Judge(cfg)
        return _JUDGES[key]


# ---- the terms ----------------------------------------------------------------------------------------------


def apply(outs: Sequence[dict], sols: Sequence[Solution], solution_strs: Sequence[str],
          extras: Sequence[dict | None], opts: Settings) -> None:
    """Add the judge terms and their diagnostics to each response's dict (in place), asking the judge for every
    response of the batch at once; see the module docstring."""
    asks: list[tuple[list[dict], int, Any]] = []
    slots: list[tuple[int, str]] = []
    for i, (sol, text, extra) in enumerate(zip(sols, solution_strs, extras)):
        if not (opts.needs_judge and sol.format_ok):
            continue
        cfg = opts.judge
        inputs = {"question": str((extra or {}).get("question") or ""),
                  "trajectory": trajectory_text(text, int(cfg.get("obs_chars", 600)), int(cfg.get("max_chars", 24000)))}
        if opts.rltr_weight > 0:
            messages = render(RLTR_PROMPT, **inputs)
            for s in range(opts.rltr_samples):
                asks.append((messages, s, read_verdict))
                slots.append((i, "rltr"))
        if opts.process_max > 0:
            asks.append((render(PROCESS_PROMPT, **inputs), 0, read_process))
            slots.append((i, "process"))
    answers = judge_of(opts.judge).ask(asks) if asks else []
    verdicts: dict[tuple[int, str], list[float | None]] = {}
    for slot, value in zip(slots, answers):
        verdicts.setdefault(slot, []).append(value)
    for i, (out, sol, text) in enumerate(zip(outs, sols, solution_strs)):
        ok = bool(sol.format_ok)
        repeats, errors = repeated_calls(sol), error_calls(sol, text)
        r_cost = pareto_cost(*cost_parts(sol), opts.cost_max_turns, opts.cost_max_words)
        cost = opts.cost_alpha * r_cost if ok else 0.0
        rltr = process = completeness = process_raw = 0.0
        failed = False
        if opts.rltr_weight > 0:
            if not ok:
                rltr = -1.0
            else:
                got = [v for v in verdicts.get((i, "rltr"), []) if v is not None]
                if got:
                    completeness = sum(got) / len(got)
                    rltr = rltr_reward(ok, completeness, repeats, errors, opts.repeat_penalty, opts.error_penalty)
                else:
                    failed = True
        if opts.process_max > 0 and ok:
            got = [v for v in verdicts.get((i, "process"), []) if v is not None]
            if got:
                process_raw = got[0]
                process = opts.process_max * process_raw
            else:
                failed = True
        if opts.enabled:
            out["score"] = float(out["score"]) + opts.rltr_weight * rltr + process - cost
        out.update({"rltr": float(rltr), "process": float(process), "cost": float(cost),
                    "raw_completeness": float(completeness), "raw_repeat_calls": repeats, "raw_error_calls": errors,
                    "raw_process": float(process_raw), "raw_cost": float(r_cost), "raw_judge_failed": float(failed)})


__all__ = ["JUDGE_DIAGNOSTIC_KEYS", "JUDGE_KEYS", "PROCESS_SCALE", "Settings", "apply", "cost_parts", "error_calls",
           "judge_of", "pareto_cost", "read_process", "read_verdict", "repeated_calls", "rltr_reward", "settings",
           "trajectory_text"]
