"""The filter protocol, the registry of filters by name, and the shared runner.

A filter is a small class with a ``name`` and ``__call__(trace, ctx)`` that returns
``True`` (keep) or ``(False, reason)`` -- optionally ``(False, reason, detail)`` with
a human-readable detail for the rejects table (datatrove's ``BaseFilter`` shape).
``trace`` is a :class:`synth.engine.records.Trace` (its conversation parsed once, see
``Trace.conversation``); ``ctx`` is a :class:`FilterContext` holding what filters share:
the questions, the tokenizer, the correctness grades.  A filter is declared with
``@register(name, *reasons)``, which makes it a frozen dataclass; its fields are its thresholds,
each named as its key in the ``filters`` section, which is where the default ``from_config``
reads them (a filter whose settings are not plain thresholds overrides ``from_config``).

:class:`FilterRunner` applies a chain in order, stops a trace at the first filter that
drops it, counts drops by reason and keeps each rejected trace with its reason, so
every drop is counted and can be inspected.
"""

from __future__ import annotations

import importlib
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping, Protocol, Union, runtime_checkable

from synth.engine.records import Question, Trace

Verdict = Union[bool, tuple]

# The modules that define filter families; imported on first use of the registry.
FAMILIES = ("filters.format", "filters.correctness", "filters.low_step", "filters.repeats", "filters.grounded",
            "filters.length", "filters.decontaminate")

REGISTRY: dict[str, type] = {}

# The drops that come after the chain, in the order they act, and the step that makes each: a trace of a
# question outside the sft split is set aside (the filter stage), and best-of-n keeps the best correct ones.
HELD_OUT = "held_out"
NOT_BEST = "not_best"
AFTER_CHAIN: dict[str, str] = {HELD_OUT: "split", NOT_BEST: "best_of_n"}


@runtime_checkable
class Filter(Protocol):
    """What the runner calls.  ``reasons`` lists every reason the filter can return."""

    name: str
    reasons: tuple[str, ...]

    def __call__(self, trace: Trace, ctx: "FilterContext") -> Verdict:
        ...


class BaseFilter:
    """Convenience base: :func:`register` sets ``name``/``reasons``; subclasses define ``__call__``."""

    name: ClassVar[str] = ""
    reasons: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_config(cls, cfg: Any) -> "BaseFilter":
        """The filter with its thresholds from the ``filters`` section ``cfg``: each init field of the
        dataclass is read from the key of the same name."""
        return cls(**{f.name: getattr(cfg, f.name) for f in fields(cls) if f.init})

    def __call__(self, trace: Trace, ctx: "FilterContext") -> Verdict:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def register(name: str, *reasons: str) -> Callable[[type], type]:
    """Class decorator: the filter ``name``, which drops for ``reasons``, as a frozen dataclass made
    available by its name (used by ``filters.chain``)."""
    if not name or not reasons:
        raise ValueError(f"a filter needs a name and at least one drop reason (got {name!r}, {reasons!r})")

    def make(cls: type) -> type:
        if name in REGISTRY:
            raise ValueError(f"two filters are named {name!r}: {REGISTRY[name].__name__} and {cls.__name__}")
        cls.name, cls.reasons = name, tuple(reasons)
        cls = dataclass(frozen=True)(cls)
        REGISTRY[name] = cls
        return cls

    return make


def available() -> dict[str, type]:
    """Every registered filter by name (imports the family modules first)."""
    for m in FAMILIES:
        importlib.import_module(m)
    return dict(REGISTRY)


def reason_filters() -> dict[str, str]:
    """Every drop reason a filter of the chain can give, and the name of that filter (the ``reasons`` each
    filter class declares): the one place the report and the explorer learn them from."""
    return {reason: name for name, cls in available().items() for reason in cls.reasons}


def build_chain(names: Iterable[str], cfg: Any) -> list[Filter]:
    """The named filters, in order, each with its thresholds from the ``filters`` section ``cfg``."""
    registry = available()
    return [registry[n].from_config(cfg) for n in names]


@dataclass
class FilterContext:
    """What filters share while a stage runs.

    ``questions`` maps question_id -> :class:`~synth.engine.records.Question`.  ``grades``
    maps trace_id -> :class:`filters.correctness.Grade`, filled before the chain runs so the
    LLM judge can be batched; the correctness filter grades on the spot when absent.
    ``tokenizer`` is the DIR/tokenizer tokenizer (None when no filter needs it).
    ``measures`` collects per-trace numbers a filter computed on the way (e.g. the
    rendered token count), keyed by trace_id.  ``token_counts`` holds the rendered lengths of
    the batch being filtered, counted together beforehand (trace_id -> tokens).  ``answer_keys`` maps
    question_id -> :class:`~synth.text.answers.AnswerKey` (:mod:`synth.corpus.answerkeys`); None, or a
    question it lacks, grades against the question's answer and aliases alone.
    """

    questions: Mapping[str, Question] = field(default_factory=dict)
    grades: dict[str, Any] = field(default_factory=dict)
    answer_keys: Mapping[str, Any] | None = None
    tokenizer: Any = None
    measures: dict[str, dict[str, Any]] = field(default_factory=dict)
    token_counts: dict[str, int] = field(default_factory=dict)

    def measure(self, trace: Trace, **values: Any) -> None:
        """Record measurements of ``trace`` (kept in ``measures[trace_id]``)."""
        self.measures.setdefault(trace.trace_id, {}).update(values)


def normalise_verdict(v: Verdict, default_reason: str) -> tuple[bool, str | None, str | None]:
    """``True`` / ``(False, reason[, detail])`` / ``False`` -> ``(keep, reason, detail)``."""
    if v is True:
        return True, None, None
    if v is False or v is None:
        return False, default_reason, None
    if isinstance(v, tuple) and v and v[0] is False:
        reason = v[1] if len(v) > 1 and v[1] else default_reason
        detail = v[2] if len(v) > 2 else None
        return False, str(reason), (None if detail is None else str(detail))
    if isinstance(v, tuple) and v and v[0] is True:
        return True, None, None
    raise TypeError(f"filter {default_reason!r} returned {v!r}; expected True or (False, reason)")


class FilterRunner:
    """Applies a chain of filters; counts drops by reason and keeps the rejected traces.

    ``on_reject(trace, reason, detail)`` is called for every dropped trace (a stage writes
    it out); without one, rejects accumulate in ``self.rejects`` as ``(trace, reason, detail)``.
    """

    def __init__(self, chain: list[Filter], on_reject: Callable[[Trace, str, str | None], None] | None = None):
        self.chain = chain
        self.dropped: Counter[str] = Counter()
        self.input = 0
        self.output = 0
        self.rejects: list[tuple[Trace, str, str | None]] = []
        self._on_reject = on_reject

    def check(self, trace: Trace, ctx: FilterContext) -> tuple[bool, str | None, str | None]:
        """Run the chain on one trace without counting: ``(keep, reason, detail)``."""
        for f in self.chain:
            keep, reason, detail = normalise_verdict(f(trace, ctx), f.name)
            if not keep:
                return False, reason, detail
        return True, None, None

    def apply(self, trace: Trace, ctx: FilterContext) -> tuple[bool, str | None, str | None]:
        """Run the chain on one trace, counting the outcome and recording a reject."""
        self.input += 1
        keep, reason, detail = self.check(trace, ctx)
        if keep:
            self.output += 1
        else:
            self.reject(trace, reason or "dropped", detail)
        return keep, reason, detail

    def reject(self, trace: Trace, reason: str, detail: str | None = None) -> None:
        """Count and keep a trace dropped outside the chain (e.g. ``not_best``)."""
        self.dropped[reason] += 1
        if self._on_reject is not None:
            self._on_reject(trace, reason, detail)
        else:
            self.rejects.append((trace, reason, detail))

    def run(self, traces: Iterable[Trace], ctx: FilterContext) -> Iterator[Trace]:
        """Yield the traces that pass the whole chain."""
        for trace in traces:
            if self.apply(trace, ctx)[0]:
                yield trace


__all__ = ["BaseFilter", "FAMILIES", "Filter", "FilterContext", "FilterRunner", "REGISTRY", "Verdict", "available",
           "build_chain", "normalise_verdict", "register"]
