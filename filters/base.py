"""The filter protocol, the registry of filters by name, and the shared runner.

A filter is a small class with a ``name`` and ``__call__(row, ctx)`` that returns
``True`` (keep) or ``(False, reason)`` -- optionally ``(False, reason, detail)`` with
a human-readable detail for the rejects table (datatrove's ``BaseFilter`` shape).
``row`` is one ``traces`` row as a dict (see :class:`synth.engine.records.Trace`); ``ctx``
is a :class:`FilterContext` holding what filters share: the config, the questions,
the tokenizer, the correctness grades.

:class:`FilterRunner` applies a chain in order, stops a row at the first filter that
drops it, counts drops by reason and keeps each rejected row with its reason, so
every drop is counted and can be inspected.
"""

from __future__ import annotations

import importlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable, Iterator, Protocol, Union, runtime_checkable

Verdict = Union[bool, tuple]

# The modules that define filter families; imported on first use of the registry.
FAMILIES = ("filters.format", "filters.correctness", "filters.low_step", "filters.repeats", "filters.length",
            "filters.decontaminate")

REGISTRY: dict[str, type] = {}


@runtime_checkable
class Filter(Protocol):
    """What the runner calls.  ``reasons`` lists every reason the filter can return."""

    name: str
    reasons: tuple[str, ...]

    def __call__(self, row: dict, ctx: "FilterContext") -> Verdict:
        ...


class BaseFilter:
    """Convenience base: keeps the filters config; subclasses set ``name``/``reasons`` and ``__call__``."""

    name: ClassVar[str] = ""
    reasons: ClassVar[tuple[str, ...]] = ()

    def __init__(self, cfg: Any):
        self.cfg = cfg

    def __call__(self, row: dict, ctx: "FilterContext") -> Verdict:  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def register(cls: type) -> type:
    """Class decorator: make a filter available by its ``name`` (used by ``filters.chain``)."""
    if not getattr(cls, "name", ""):
        raise ValueError(f"filter {cls.__name__} has no name")
    REGISTRY[cls.name] = cls
    return cls


def available() -> dict[str, type]:
    """Every registered filter by name (imports the family modules first)."""
    for m in FAMILIES:
        importlib.import_module(m)
    return dict(REGISTRY)


def build_chain(names: Iterable[str], cfg: Any) -> list[Filter]:
    """Instantiate the named filters, in order, with the filters config ``cfg``."""
    registry = available()
    return [registry[n](cfg) for n in names]


@dataclass
class FilterContext:
    """What filters share while a stage runs.

    ``questions`` maps question_id -> ``questions`` row (dict).  ``grades`` maps
    trace_id -> :class:`filters.correctness.Grade`, filled before the chain runs so the
    LLM judge can be batched; the correctness filter grades on the spot when absent.
    ``tokenizer`` is the DIR/tokenizer tokenizer (None when no filter needs it).
    ``measures`` collects per-trace numbers a filter computed on the way (e.g. the
    rendered token count), keyed by trace_id.
    """

    cfg: Any
    questions: dict[str, dict] = field(default_factory=dict)
    grades: dict[str, Any] = field(default_factory=dict)
    tokenizer: Any = None
    measures: dict[str, dict[str, Any]] = field(default_factory=dict)

    def measure(self, row: dict, **values: Any) -> None:
        """Record measurements of ``row`` (kept in ``measures[trace_id]``)."""
        self.measures.setdefault(row["trace_id"], {}).update(values)


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
    """Applies a chain of filters; counts drops by reason and keeps the rejected rows.

    ``on_reject(row, reason, detail)`` is called for every dropped row (a stage writes it
    out); without one, rejects accumulate in ``self.rejects`` as ``(row, reason, detail)``.
    """

    def __init__(self, chain: list[Filter], on_reject: Callable[[dict, str, str | None], None] | None = None):
        self.chain = chain
        self.dropped: Counter[str] = Counter()
        self.input = 0
        self.output = 0
        self.rejects: list[tuple[dict, str, str | None]] = []
        self._on_reject = on_reject

    def check(self, row: dict, ctx: FilterContext) -> tuple[bool, str | None, str | None]:
        """Run the chain on one row without counting: ``(keep, reason, detail)``."""
        for f in self.chain:
            keep, reason, detail = normalise_verdict(f(row, ctx), f.name)
            if not keep:
                return False, reason, detail
        return True, None, None

    def apply(self, row: dict, ctx: FilterContext) -> tuple[bool, str | None, str | None]:
        """Run the chain on one row, counting the outcome and recording a reject."""
        self.input += 1
        keep, reason, detail = self.check(row, ctx)
        if keep:
            self.output += 1
        else:
            self.reject(row, reason or "dropped", detail)
        return keep, reason, detail

    def reject(self, row: dict, reason: str, detail: str | None = None) -> None:
        """Count and keep a row dropped outside the chain (e.g. ``not_best``)."""
        self.dropped[reason] += 1
        if self._on_reject is not None:
            self._on_reject(row, reason, detail)
        else:
            self.rejects.append((row, reason, detail))

    def run(self, rows: Iterable[dict], ctx: FilterContext) -> Iterator[dict]:
        """Yield the rows that pass the whole chain."""
        for row in rows:
            if self.apply(row, ctx)[0]:
                yield row


# ---- helpers shared by the filter families -------------------------------------------------

def messages_of(row: dict) -> list[dict]:
    """The trace's messages, parsed from JSON once and cached on the row (``_messages``)."""
    cached = row.get("_messages")
    if cached is None:
        cached = json.loads(row["messages"])
        if not isinstance(cached, list):
            raise ValueError("messages is not a JSON list")
        row["_messages"] = cached
    return cached


def tool_calls_of(messages: list[dict]) -> Iterator[tuple[int, dict]]:
    """``(assistant turn, tool call)`` for every tool call, in order; turns count assistant messages from 1."""
    turn = 0
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "assistant":
            turn += 1
            for tc in m.get("tool_calls") or []:
                yield turn, tc


def call_arguments(tc: dict) -> dict | None:
    """A tool call's arguments as a dict (they are stored as a JSON string); None when not a JSON object."""
    fn = tc.get("function") or {}
    args = fn.get("arguments")
    if isinstance(args, dict):
        return args
    if not isinstance(args, str):
        return None
    try:
        obj = json.loads(args)
    except (json.JSONDecodeError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


__all__ = ["BaseFilter", "FAMILIES", "Filter", "FilterContext", "FilterRunner", "REGISTRY", "Verdict", "available",
           "build_chain", "call_arguments", "messages_of", "normalise_verdict", "register", "tool_calls_of"]
