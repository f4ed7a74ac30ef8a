"""A verl rollout's response read back: its tool calls, final answer, pages read, and format problems.

``solution_str`` is what verl's reward managers hand the reward: the rollout's response decoded with
``skip_special_tokens=True``, every assistant turn as the student wrote it with the tool observations
verl inserted between them (``<tool_response>...</tool_response>`` under the Qwen2.5/hermes template).
:func:`parse_solution` reads it once for every reward mode of :mod:`filters.reward`: the observations
are set aside (the student did not write them), every ``<tool_call>`` must be a JSON object naming a
known tool with object arguments, and the last turn must make no call and hold the final
``<answer>...</answer>``.  ``check_answer`` (CAPF's training-only feedback action,
:mod:`synth.tools.feedback`) is a known tool here, counted apart (``check_calls``) so the reward can
attenuate by ``rho_pf`` per call.
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
from typing import Any, Iterable

from synth.teacher.prompting import extract_answer
from synth.tools.feedback import CHECK_ANSWER
from synth.tools.registry import find_tool, registered_names as registered_tools


def known_tools() -> tuple[str, ...]:
    """The tools a rollout may call: the registered ones (the optional ones too: the tool config, not the
    reward, decides what a run offers), and CAPF's check_answer (only a CAPF tool config offers it)."""
    return (*registered_tools(), CHECK_ANSWER)

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

    __slots__ = ("answer", "calls", "call_turns", "bad_calls", "problems", "read_page_ids", "student_text")

    def __init__(self) -> None:
        self.answer: str | None = None
        self.calls: list[tuple[str, dict]] = []  # well-formed (name, arguments)
        # the step of each well-formed call: the student's text between two observations (calls of one
        # assistant turn share it; a turn's parallel observations leave empty steps between them)
        self.call_turns: list[int] = []
        self.bad_calls = 0
        self.problems: list[str] = []
        self.read_page_ids: list[str] = []
        self.student_text = ""  # what the student wrote: the response without the observations

    @property
    def tool_calls(self) -> int:
        """Every tool call the student wrote, well formed or not (the step penalty counts these)."""
        return len(self.calls) + self.bad_calls

    @property
    def check_calls(self) -> int:
        """Well-formed calls of CAPF's ``check_answer`` (each attenuates the reward by ``rho_pf``)."""
        return sum(1 for name, _ in self.calls if name == CHECK_ANSWER)

    @property
    def format_ok(self) -> bool:
        """Every tool call well formed and a final answer: see the module docstring."""
        return not self.problems


def parse_solution(text: str, tool_names: Iterable[str] | None = None) -> Solution:
    """Read ``solution_str`` (see the module docstring): calls, answer, pages read, format problems;
    ``tool_names``: the tools it may call (default: :func:`known_tools`)."""
    known = set(known_tools() if tool_names is None else tool_names)
    sol = Solution()
    text = text or ""
    responses = list(_RESPONSE.finditer(text))
    for r in responses:
        m = _READ.match(r.group(1))
        if m:
            sol.read_page_ids.append(_unescape(m.group(1)[1:-1]))
    # what the student wrote, one part per step (the text between observations); joined, the text without them
    parts, last = [], 0
    for r in responses:
        parts.append(text[last:r.start()])
        last = r.end()
    parts.append(text[last:])
    sol.student_text = student = "\n".join(parts)
    starts = list(itertools.accumulate((len(p) + 1 for p in parts[:-1]), initial=0))  # each part's offset
    for i, m in enumerate(_CALL.finditer(student)):
        name, args, problem = _read_call(m.group(1), known)
        if problem:
            sol.bad_calls += 1
            sol.problems.append(f"tool call {i + 1}: {problem}")
            continue
        sol.calls.append((name, args))
        sol.call_turns.append(bisect.bisect_right(starts, m.start()) - 1)
        spec = find_tool(name)
        if spec is not None and spec.page_arg and isinstance(args.get(spec.page_arg), str):
            sol.read_page_ids.append(args[spec.page_arg])
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


__all__ = ["known_tools", "Solution", "evidence_share", "gold_answers", "parse_solution"]
