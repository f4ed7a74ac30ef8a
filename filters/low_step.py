"""The low-step filter (OpenSeeker-v2): keep a trace only if ``T_min <= T(tau) <= T_max``.

``T(tau)`` is the trace's ``n_tool_calls``, the count RL step penalties read too.
Fewer than ``filters.min_tool_calls`` calls is ``too_few_steps`` (lookups and shallow
keyword matches); more than ``filters.max_tool_calls`` is ``too_many_steps`` (flailing).
"""

from __future__ import annotations

from dataclasses import dataclass

from synth.engine.records import Trace

from filters.base import BaseFilter, FilterContext, Verdict, register
from filters.config import FiltersConfig


@register
@dataclass(frozen=True)
class LowStepFilter(BaseFilter):
    """Drops traces with too few (``too_few_steps``) or too many (``too_many_steps``) tool calls."""

    min_tool_calls: int
    max_tool_calls: int

    name = "low_step"
    reasons = ("too_few_steps", "too_many_steps")

    @classmethod
    def from_config(cls, cfg: FiltersConfig) -> "LowStepFilter":
        """T_min and T_max from ``filters.min_tool_calls`` / ``filters.max_tool_calls``."""
        return cls(cfg.min_tool_calls, cfg.max_tool_calls)

    def __call__(self, trace: Trace, ctx: FilterContext) -> Verdict:
        n = int(trace.n_tool_calls)
        if n < self.min_tool_calls:
            return False, "too_few_steps", f"{n} tool calls < {self.min_tool_calls}"
        if n > self.max_tool_calls:
            return False, "too_many_steps", f"{n} tool calls > {self.max_tool_calls}"
        return True


__all__ = ["LowStepFilter"]
