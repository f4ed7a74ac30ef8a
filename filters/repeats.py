"""The repeats filter (reason ``repeated_calls``): no tool call made over and over.

Two calls are identical when they name the same tool with the same arguments after
canonicalisation (parsed JSON, keys sorted), so ``{"query": "a", "k": 5}`` and
``{"k": 5, "query": "a"}`` are one call.  A trace making any call more than
``filters.max_repeats`` times is dropped: repeating a call teaches the student to loop.
"""

from __future__ import annotations

import json
from collections import Counter

from filters.base import BaseFilter, FilterContext, Verdict, call_arguments, messages_of, register, tool_calls_of


def canonical_call(tc: dict) -> tuple[str, str]:
    """``(tool name, canonical arguments)``; unparsable arguments are kept as their raw text."""
    fn = tc.get("function") or {}
    args = call_arguments(tc)
    canon = json.dumps(args, sort_keys=True, ensure_ascii=False) if args is not None else str(fn.get("arguments"))
    return str(fn.get("name")), canon


def repeated_calls(messages: list[dict]) -> Counter:
    """How many times each distinct call was made."""
    return Counter(canonical_call(tc) for _, tc in tool_calls_of(messages))


@register
class RepeatsFilter(BaseFilter):
    """Drops traces that make one tool call more than ``max_repeats`` times."""

    name = "repeats"
    reasons = ("repeated_calls",)

    def __call__(self, row: dict, ctx: FilterContext) -> Verdict:
        counts = repeated_calls(messages_of(row))
        if not counts:
            return True
        (name, args), n = counts.most_common(1)[0]
        if n > self.cfg.max_repeats:
            return False, "repeated_calls", f"{name}({args}) made {n} times (> {self.cfg.max_repeats})"
        return True


__all__ = ["RepeatsFilter", "canonical_call", "repeated_calls"]
