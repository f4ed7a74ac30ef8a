"""The RL reward for ``rl_pool``: verl's ``compute_score`` over the correctness filter's answer matching.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info)`` once per
rollout (``reward.custom_reward_function.path: filters/reward.py``, ``name: compute_score``;
see README "RL with verl").  ``solution_str`` is the rollout's response decoded with
``skip_special_tokens=True``: every assistant turn as the student wrote it, with the tool
observations verl inserted between them as the chat template renders them.  For the Qwen2.5
template (hermes tool calls)::

    I will search first.
    <tool_call>
    {"name": "search", "arguments": {"query": "Alpha Station"}}
    </tool_call>
    user
    <tool_response>
    [{"page_id": "12", "title": "Alpha Station", "snippet": "..."}]
    </tool_response>
    assistant
    ... <answer>Delta City</answer>

The score, in this order:

1. **Format** (``format_ok``).  The observations (``<tool_response>...</tool_response>``) are
   set aside: the student did not write them.  Every ``<tool_call>...</tool_call>`` the
   student wrote must hold a JSON object ``{"name": <a tool of synth.tools.schema>,
   "arguments": {...}}`` (what verl's hermes parser and the format filter accept: a known
   tool, arguments that are a JSON object) and no ``<tool_call>`` may be left open; the
   last turn (the text after the last observation) must make no tool call and hold the
   final ``<answer>...</answer>`` (the last one outside ``<think>``, read exactly as the
   rollouts and the format filter read it, :func:`synth.teacher.prompting.extract_answer`).
   A malformed solution scores 0 whatever its answer.
2. **Correctness** (``acc``).  The answer against ``ground_truth["target"]`` (the answer and
   its aliases) with the correctness filter's rule (:func:`filters.correctness.grade_answer`:
   SQuAD/HotpotQA normalisation, exact match or token F1 ``>= min_f1``).  ``min_f1``
   defaults to ``filters.min_f1``'s default (0.8); set ``reward_kwargs.min_f1`` to the
   run's value so RL rewards exactly what the filter called correct.
3. **Evidence** (optional, ``evidence_weight``, default 0: off).  The share of the gold
   path's pages (``extra_info["path"]``, page ids, the answer page last) the student
   *read*: a well-formed ``open`` or ``find`` call naming the page id, or an ``open`` /
   ``find`` observation of that page (which covers pages opened by title).  Search
   results do not count.  A dense term for shaping; it never outweighs the answer while
   ``evidence_weight < 1``.

``score = acc + evidence_weight * evidence`` when the format holds, else ``0.0``; so by
default a correct solution scores 1 and a wrong or malformed one 0.  The return value is
verl's dict form: ``score`` plus ``acc``, ``em``, ``f1``, ``format_ok``, ``evidence``,
``tool_calls`` and ``bad_tool_calls``, which verl logs as reward metrics.  Rows of another
``data_source`` (a mixed dataset) go to verl's own ``default_compute_score``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from synth.teacher.prompting import extract_answer
from synth.tools.schema import TOOL_NAMES

from filters.band import DATA_SOURCE
from filters.config import FiltersConfig
from filters.correctness import grade_answer

MIN_F1 = FiltersConfig.model_fields["min_f1"].default

_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)
_RESPONSE = re.compile(r"<tool_response>(.*?)(?:</tool_response>|$)", re.S)
# The head of an open or find observation (synth.tools.toolbox.run_open / run_find, as the verl tool
# writes them): {"page_id": ..., "title": ..., "offset" | "text": ...}.  Search results are a list and
# errors {"error": ...}, so neither matches.  A head survives verl's truncation of long observations.
_JSON_STR = r'"(?:[^"\\]|\\.)*"'
_READ = re.compile(r'^\s*\{\s*"page_id":\s*(' + _JSON_STR + r'),\s*"title":\s*' + _JSON_STR + r',\s*"(?:offset|text)":')


class Solution:
    """A rollout's response read back: its tool calls, final answer, pages read, and what is malformed.

    (A plain class, not a dataclass: verl may load this file by path, outside ``sys.modules``, where
    ``dataclass`` cannot resolve string annotations.)"""

    __slots__ = ("answer", "calls", "bad_calls", "problems", "read_page_ids")

    def __init__(self) -> None:
        self.answer: str | None = None
        self.calls: list[tuple[str, dict]] = []  # well-formed (name, arguments)
        self.bad_calls = 0
        self.problems: list[str] = []
        self.read_page_ids: list[str] = []

    @property
    def format_ok(self) -> bool:
        """Every tool call well formed and a final answer: see the module docstring."""
        return not self.problems


def parse_solution(text: str, tool_names: Iterable[str] = TOOL_NAMES) -> Solution:
    """Read ``solution_str`` (see the module docstring): calls, answer, pages read, format problems."""
    known = set(tool_names)
    sol = Solution()
    text = text or ""
    responses = list(_RESPONSE.finditer(text))
    for r in responses:
        m = _READ.match(r.group(1))
        if m:
            sol.read_page_ids.append(_unescape(m.group(1)[1:-1]))
    student = _RESPONSE.sub("\n", text)
    for i, body in enumerate(_CALL.findall(student)):
        name, args, problem = _read_call(body, known)
        if problem:
            sol.bad_calls += 1
            sol.problems.append(f"tool call {i + 1}: {problem}")
            continue
        sol.calls.append((name, args))
        if name in ("open", "find") and isinstance(args.get("page"), str):
            sol.read_page_ids.append(args["page"])
    # The last turn: what follows the last observation (or the last call, for a template that marks none).
    if responses:
        tail = text[responses[-1].end():]
    else:
        last_close = text.rfind("</tool_call>")
        tail = text[last_close + len("</tool_call>"):] if last_close >= 0 else text
    if tail.count("<tool_call>") > tail.count("</tool_call>"):
        sol.problems.append("a <tool_call> is never closed")
    elif "<tool_call>" in tail:
        sol.problems.append("the last turn makes a tool call: the final answer needs a turn without one")
    sol.answer = extract_answer(tail)
    if not sol.answer:
        sol.problems.append("the last turn has no <answer>...</answer>")
    return sol


def _read_call(body: str, known: set[str]) -> tuple[str, dict, str | None]:
    """``(name, arguments, problem)`` of one ``<tool_call>`` body."""
    try:
        obj = json.loads(body.strip())
    except ValueError:
        return "", {}, "not a JSON object"
    if not isinstance(obj, dict):
        return "", {}, "not a JSON object"
    name, args = obj.get("name"), obj.get("arguments")
    if not isinstance(name, str) or name not in known:
        return "", {}, f"unknown tool {name!r}"
    if not isinstance(args, dict):
        return name, {}, f"{name}: arguments are not a JSON object"
    return name, args, None


def _unescape(s: str) -> str:
    try:
        return json.loads(f'"{s}"')
    except ValueError:
        return s


def evidence_share(read_page_ids: Iterable[str], path: Iterable[str] | None) -> float:
    """The share of the gold path's pages among the pages read (0.0 without a path)."""
    gold = set(_as_list(path))
    if not gold:
        return 0.0
    return len(gold & set(read_page_ids)) / len(gold)


def _as_list(value: Any) -> list:
    """A list from what verl hands over (lists, tuples, numpy arrays, or None)."""
    if value is None:
        return []
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, str):
        return [value]
    return list(value)


def gold_answers(ground_truth: Any) -> list[str]:
    """The answer and aliases of ``reward_model.ground_truth`` (``{"target": [...]}``; a bare list or string too)."""
    if isinstance(ground_truth, dict):
        ground_truth = ground_truth.get("target")
    return [g for g in _as_list(ground_truth) if isinstance(g, str) and g]


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None, *,
                  min_f1: float = MIN_F1, evidence_weight: float = 0.0, **kwargs: Any) -> dict | float:
    """verl's reward function for ``rl_pool`` rows (see the module docstring); ``min_f1`` and
    ``evidence_weight`` come from ``reward.custom_reward_function.reward_kwargs``."""
    if data_source != DATA_SOURCE:
        from verl.utils.reward_score import default_compute_score

        return default_compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
    sol = parse_solution(solution_str)
    g = grade_answer(sol.answer, gold_answers(ground_truth), min_f1)
    evidence = evidence_share(sol.read_page_ids, (extra_info or {}).get("path"))
    acc = float(sol.format_ok and g.rule_correct)
    score = acc + evidence_weight * evidence if sol.format_ok else 0.0
    return {"score": float(score), "acc": acc, "em": float(g.em), "f1": float(g.f1),
            "format_ok": float(sol.format_ok), "evidence": float(evidence),
            "tool_calls": len(sol.calls) + sol.bad_calls, "bad_tool_calls": sol.bad_calls}


__all__ = ["MIN_F1", "Solution", "compute_score", "evidence_share", "gold_answers", "parse_solution"]
