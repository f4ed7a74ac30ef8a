"""The grounded filter (reason ``ungrounded``): the agent acts only on what it has already seen.

A trace whose agent searches for words, or opens pages, that nothing shown to it had
mentioned teaches the student to act on knowledge it does not have (an oracle reading
the gold path, or a teacher's memory).  The rule, for every tool call in order:

* **Seen text** before a call is the question (every ``user`` message) and the
  observation of every tool call answered before the assistant turn that makes the
  call.  Observations are read as their JSON values (titles, snippets, page text, page
  ids), except an error observation and the echo of a ``find`` pattern, which only
  repeat the agent's own words.  The system prompt and the agent's own text do not count.
* Words are compared as the index compares them: terms of :func:`synth.tools.analysis.analyze`
  (lowercase, ASCII folding, English stemming), so "Resins" grounds "resin".
* A **search** is grounded when at least ``filters.min_grounding`` of its query's content
  terms (:func:`synth.tools.analysis.query_terms`: distinct terms, stop words dropped unless
  nothing else is left) are terms of the seen text.  A query with no terms is grounded.
* An **open** or a **find** is grounded when its page was seen: its argument is a page id
  shown in an earlier observation, or its terms (a title, or the last part of a
  ``/wiki/`` URL) occur, in order and contiguous, in the question or in one observation.
  The ``text`` of a find must pass the search rule too.
* Calls of other tools, or with arguments that are not a JSON object, are left to the
  format filter.

The analysis itself is :mod:`synth.tools.grounding`, which the step labels of every trace
(:mod:`synth.rollout.labels`) read too.  A trace with any ungrounded call is dropped; the
detail names the first one.  The
filter stage records the count of ungrounded calls of every trace (``ungrounded_steps``
in ``filter/verdicts``), also for traces another filter dropped.
"""

from __future__ import annotations

from functools import lru_cache

from synth.engine.records import Trace
from synth.engine.conversation import parse_conversation
from synth.tools.grounding import Seen, Step, grounding

from filters.base import BaseFilter, FilterContext, Verdict, register


@lru_cache(maxsize=64)
def _ungrounded(messages: str, min_grounding: float) -> tuple[Step, ...]:
    return tuple(s for s in grounding(parse_conversation(messages), min_grounding) if not s.grounded)


def ungrounded_steps(trace: Trace, min_grounding: float) -> list[Step]:
    """The ungrounded calls of ``trace`` (cached: the filter and the verdicts table share one pass)."""
    return list(_ungrounded(trace.messages, min_grounding))


@register("grounded", "ungrounded")
class GroundedFilter(BaseFilter):
    """Drops traces with a search, open or find that acts on something not yet seen (``ungrounded``)."""

    min_grounding: float

    def __call__(self, trace: Trace, ctx: FilterContext) -> Verdict:
        bad = ungrounded_steps(trace, self.min_grounding)
        if bad:
            first = bad[0]
            return False, "ungrounded", (f"{len(bad)} ungrounded call(s); first: call {first.index + 1} "
                                         f"({first.name}) {first.why}")
        return True


__all__ = ["GroundedFilter", "Seen", "Step", "grounding", "ungrounded_steps"]
