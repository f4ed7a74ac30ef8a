"""The repeats filter (reason ``repeated_calls``): no tool call made over and over.

Two calls are identical when they name the same tool with the same arguments after
canonicalisation (parsed JSON, keys sorted), so ``{"query": "a", "k": 5}`` and
``{"k": 5, "query": "a"}`` are one call.  A trace making any call more than
``filters.max_repeats`` times is dropped: repeating a call teaches the student to loop.
"""

from __future__ import annotations

import json
from collections import Counter

from synth.engine.records import Trace
from synth.engine.conversation import Conversation, ToolCall

from filters.base import BaseFilter, FilterContext, Verdict, register


def canonical_call(tc: ToolCall) -> tuple[str, str]:
    """``(tool name, canonical arguments)``; unparsable arguments are kept as their raw text."""
    args = tc.args()
    canon = json.dumps(args, sort_keys=True, ensure_ascii=False) if args is not None else tc.arguments
    return tc.name, canon


def repeated_calls(conv: Conversation) -> Counter:
    """How many times each distinct call was made."""
    return Counter(canonical_call(tc) for _, tc in conv.tool_calls())


@register("repeats", "repeated_calls")
class RepeatsFilter(BaseFilter):
    """Drops traces that make one tool call more than ``max_repeats`` times."""

    max_repeats: int

    def __call__(self, trace: Trace, ctx: FilterContext) -> Verdict:
        counts = repeated_calls(trace.conversation)
        if not counts:
            return True
        (name, args), n = counts.most_common(1)[0]
        if n > self.max_repeats:
            return False, "repeated_calls", f"{name}({args}) made {n} times (> {self.max_repeats})"
        return True


__all__ = ["RepeatsFilter", "canonical_call", "repeated_calls"]
