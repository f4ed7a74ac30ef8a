"""The length filter (reason ``too_long``): a trace must fit the student's context, whole.

The trace is rendered the way SFT renders it -- the SFT messages (:mod:`filters.sftrows`)
through the tokenizer's chat template with the tool schemas,
``tokenizer.apply_chat_template(messages, tools=tools)`` -- and counted in tokens of
DIR/tokenizer.  Traces longer than ``filters.max_tokens`` are dropped, never truncated:
a cut trace loses its answer, or teaches the student to stop mid-search.

The filter stage counts a whole batch of traces at once beforehand
(:class:`synth.tokenizer.counts.TokenCounts`: one render each, one batched tokenizer call, the
counts cached per tokenizer), and the filter reads ``ctx.token_counts``; the same number as
:func:`rendered_length`, which counts one trace alone.
"""

from __future__ import annotations

import json
from typing import Any

from synth.engine.records import Trace

from filters.base import BaseFilter, FilterContext, Verdict, register
from filters.sftrows import sft_messages


def rendered_length(tokenizer: Any, messages: list[dict], tools: list[dict] | None) -> int:
    """Tokens of the conversation rendered through the chat template with ``tools``."""
    out = tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=True, return_dict=True)
    ids = out["input_ids"]
    if ids and isinstance(ids[0], list):  # a batch of one
        ids = ids[0]
    return len(ids)


@register("length", "too_long")
class LengthFilter(BaseFilter):
    """Drops traces whose rendering exceeds ``max_tokens`` tokens (``too_long``); records ``n_tokens``."""

    max_tokens: int

    def __call__(self, trace: Trace, ctx: FilterContext) -> Verdict:
        n = ctx.token_counts.get(trace.trace_id)
        if n is None:  # not counted for the batch beforehand: count this one trace
            if ctx.tokenizer is None:
                raise RuntimeError("the length filter needs a tokenizer in the filter context")
            n = rendered_length(ctx.tokenizer, sft_messages(trace), json.loads(trace.tools))
        ctx.measure(trace, n_tokens=n)
        if n > self.max_tokens:
            return False, "too_long", f"{n} tokens > {self.max_tokens}"
        return True


__all__ = ["LengthFilter", "rendered_length"]
