"""The low-step filter (OpenSeeker-v2): keep a trace only if ``T_min <= T(tau) <= T_max``.

``T(tau)`` is the trace's ``n_tool_calls``, the count RL step penalties read too.
Fewer than ``filters.min_tool_calls`` calls is ``too_few_steps`` (lookups and shallow
keyword matches); more than ``filters.max_tool_calls`` is ``too_many_steps`` (flailing).
"""

from __future__ import annotations


from synth.engine.records import Trace

from filters.base import BaseFilter, FilterContext, Verdict, register


@register("low_step", "too_few_steps", "too_many_steps")
class LowStepFilter(BaseFilter):
    """Drops traces with too few (``too_few_steps``) or too many (``too_many_steps``) tool calls."""

    min_tool_calls: int
    max_tool_calls: int

    def __call__(self, trace: Trace, ctx: FilterContext) -> Verdict:
        n = int(trace.n_tool_calls)
        if n < self.min_tool_calls:
            return False, "too_few_steps", f"{n} tool calls < {self.min_tool_calls}"
        if n > self.max_tool_calls:
            return False, "too_many_steps", f"{n} tool calls > {self.max_tool_calls}"
        return True


__all__ = ["LowStepFilter"]
