"""The stage reports (``DIR/reports/<stage>.json``) as types: what a reader may rely on, named once.

The runner writes a stage's report from its :class:`~synth.engine.stage.StageResult` (the funnel, the seconds,
the failed items) and the stage's ``extra`` facts; the report, the dataset card and the flow's artifacts read
them back here, by attribute, instead of through string keys spread over every reader.

:class:`StageReport` holds what every report has; a stage whose extra facts are read downstream has a subclass
(:class:`FilterReport`, :class:`QuestionsReport`, ...), and a nested fact read field by field is a small
:class:`Facts` of its own.  Every type reads tolerantly (:meth:`Facts.from_dict`): a missing key, or a value of
the wrong kind, gives the field's default (None where absence means something), so a report written by an older
hopforge, or a partial one, still reads.  The dict a fact was read from is kept (``raw``): :meth:`Facts.to_dict`
gives it back as it was, so a reader that passes a fact on (into the report's summary) writes what it read.

:func:`read_reports` reads a run folder's reports into :class:`RunReports`, the one way in.  The teacher's usage
stays the mapping the stage wrote (``teacher``); :meth:`synth.teacher.stats.TeacherUsage.from_report` reads it.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from pathlib import Path
from types import UnionType
from typing import Any, Mapping, TypeVar, Union, get_args, get_origin, get_type_hints

F = TypeVar("F", bound="Facts")

_BAD = object()  # a value of the wrong kind: the field keeps its default


def _key(name: str, default: Any = None) -> Any:
    """A field read from the report key ``name`` (one that is not a Python name: ``pass``, ``pass@1_from``)."""
    return field(default=default, metadata={"key": name})


@cache  # a class's resolved annotations never change: a memo of a pure function, not run state
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _coerce(tp: Any, v: Any) -> Any:
    """``v`` as a value of type ``tp``, or ``_BAD``.  Leaves are kept as written (an int stays an int in a float
    field), so what a reader shows of them does not change."""
    origin, args = get_origin(tp), get_args(tp)
    if origin in (UnionType, Union):
        if v is None and type(None) in args:
            return None
        for a in args:
            if a is not type(None) and (out := _coerce(a, v)) is not _BAD:
                return out
        return _BAD
    if isinstance(tp, type) and issubclass(tp, Facts):
        return tp.from_dict(v) if isinstance(v, Mapping) else _BAD
    if origin is dict or tp is dict:
        if not isinstance(v, Mapping):
            return _BAD
        item = args[1] if len(args) == 2 else Any
        if isinstance(item, type) and issubclass(item, Facts):
            return {k: item.from_dict(x) for k, x in v.items() if isinstance(x, Mapping)}
        return dict(v)
    if origin is list or tp is list:
        return list(v) if isinstance(v, (list, tuple)) else _BAD
    if tp is bool:
        return v if isinstance(v, bool) else _BAD
    if tp is int:
        return v if isinstance(v, int) and not isinstance(v, bool) else _BAD
    if tp is float:
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else _BAD
    if tp is str:
        return v if isinstance(v, str) else _BAD
    return v  # Any


def _plain(v: Any) -> Any:
    if isinstance(v, Facts):
        return v.to_dict()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _default(f: Any) -> Any:
    return f.default_factory() if f.default_factory is not MISSING else f.default


class Facts:
    """Mixin of the report types: a frozen dataclass read from (and back to) the JSON a stage wrote."""

    raw: dict

    @classmethod
    def from_dict(cls: type[F], d: Mapping[str, Any] | None) -> F:
        """The facts of ``d``; a missing or malformed key gives its field's default (``d`` None: all defaults)."""
        d = d if isinstance(d, Mapping) else {}
        hints = _hints(cls)
        kw: dict[str, Any] = {}
        for f in fields(cls):  # type: ignore[arg-type]
            k = f.metadata.get("key", f.name)
            if f.name == "raw" or k is None or k not in d:
                continue
            v = _coerce(hints[f.name], d[k])
            if v is not _BAD:
                kw[f.name] = v
        return cls(**kw, raw=dict(d))

    @classmethod
    def of(cls: type[F], d: "F | Mapping[str, Any] | None") -> F:
        """``d`` itself when it is already of this type, else :meth:`from_dict`."""
        return d if isinstance(d, cls) else cls.from_dict(d)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the dict the facts were read from, as written, with the fields set since (or set apart
        from a default) over it."""
        out = dict(self.raw)
        hints = _hints(type(self))
        for f in fields(self):  # type: ignore[arg-type]
            k = f.metadata.get("key", f.name)
            if f.name == "raw" or k is None:
                continue
            v = getattr(self, f.name)
            if k in self.raw:  # kept as written unless the field was changed since
                was = _coerce(hints[f.name], self.raw[k])
                if (was is _BAD and v == _default(f)) or (was is not _BAD and was == v):
                    continue
            elif v == _default(f):
                continue
            out[k] = _plain(v)
        return out

    def __bool__(self) -> bool:
        """False for facts that hold nothing (an empty ``{}``, as ``x.get(k) or {}`` was)."""
        if self.raw:
            return True
        return any(getattr(self, f.name) != _default(f) for f in fields(self) if f.name != "raw")  # type: ignore[arg-type]


def _raw() -> Any:
    return field(default_factory=dict, repr=False, compare=False)


# ---- every stage -----------------------------------------------------------------------------

@dataclass(frozen=True)
class StageReport(Facts):
    """What every stage report holds: the funnel (``input == output + dropped + failed``), the stage's key and
    seconds, why it was idle, and the teacher's usage as the stage recorded it (``teacher``, read by
    ``TeacherUsage.from_report``).  ``input`` and ``output`` are None when a report lacks them."""

    stage: str | None = None
    key: str | None = None
    input: int | None = None
    output: int | None = None
    dropped: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    seconds: float | None = None
    idle: str | None = None
    teacher: dict | None = None
    raw: dict = _raw()


# ---- filter and rl_band: the RL band --------------------------------------------------------------

@dataclass(frozen=True)
class BandCounts(Facts):
    """Questions by correct rollouts c of n: none right, the band (1 <= c <= n-1), all right."""

    all_wrong: int = 0
    rl_pool: int = 0
    all_right: int = 0
    raw: dict = _raw()


@dataclass(frozen=True)
class BandedReport(StageReport):
    """A stage that measures the RL band (the filter for the teacher, ``rl_band`` for the student)."""

    band_by: str | None = None
    band_model: str | None = None
    bands_by_split: dict[str, BandCounts] = field(default_factory=dict)
    bands_of_splits: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ContextFacts(Facts):
    """The SFT rows' context (``sft.context``)."""

    policy: str | None = None
    keep_observations: int | None = None
    compress_observations: bool | None = None
    raw: dict = _raw()


@dataclass(frozen=True)
class ReasoningFacts(Facts):
    """The teacher's reasoning in the kept traces, and its share of what the assistant writes."""

    mode: str | None = None
    traces: int | None = None
    traces_with_reasoning: int | None = None
    share_of_assistant_tokens: float | None = None
    assistant_tokens: int | None = None
    reasoning_tokens: int | None = None
    raw: dict = _raw()


@dataclass(frozen=True)
class MatchFacts(Facts):
    """How the final answers were judged (page identity first)."""

    page: int | None = None
    f1: int | None = None
    other_page: int | None = None
    qualified: int | None = None
    none: int | None = None
    raw: dict = _raw()


@dataclass(frozen=True)
class AliasFacts(Facts):
    """The teacher-written aliases, and those the corpus did not support (with examples)."""

    teacher: int | None = None
    kept: int | None = None
    dropped: int | None = None
    dropped_examples: list[dict] = field(default_factory=list)
    raw: dict = _raw()


@dataclass(frozen=True)
class OtherTitleFacts(Facts):
    """Other pages within F1 of a question's answer (they never count as right)."""

    questions: int | None = None
    titles: int | None = None
    min_f1: float | None = None
    capped: int | None = None
    raw: dict = _raw()


@dataclass(frozen=True)
class AnswerFacts(Facts):
    """What the answer keys held: the aliases and the other titles."""

    corpus: bool | None = None
    questions: int | None = None
    aliases: AliasFacts = field(default_factory=AliasFacts)
    other_titles: OtherTitleFacts = field(default_factory=OtherTitleFacts)
    raw: dict = _raw()


@dataclass(frozen=True)
class PreferenceFacts(Facts):
    """The DPO pairs, by why the rejected rollout lost."""

    pairs: int | None = None
    without_rejected: int | None = None
    prompt_mismatch: int | None = None
    by_rejected: dict[str, int] = field(default_factory=dict)
    raw: dict = _raw()


@dataclass(frozen=True)
class PassFacts(Facts):
    """The teacher's pass rates: ``at`` maps ``pass@k`` (``pass@1`` ... ``pass@n``) to its rate."""

    questions: int | None = None
    samples: int | None = None
    min_n: int | None = None
    max_n: int | None = None
    first_from: str | None = _key("pass@1_from")
    at: dict[str, float] = field(default_factory=dict, metadata={"key": None})  # the pass@k keys themselves
    raw: dict = _raw()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "PassFacts":
        base = super().from_dict(d)
        at = {k: v for k, v in base.raw.items() if k.startswith("pass@") and isinstance(v, (int, float))
              and not isinstance(v, bool)}
        return cls(**{f.name: getattr(base, f.name) for f in fields(cls) if f.name not in ("at", "raw")},
                   at=at, raw=base.raw)

    @property
    def pass_at_1(self) -> float | None:
        return self.at.get("pass@1")

    @property
    def pass_at_n(self) -> float | None:
        return self.at.get("pass@n")


@dataclass(frozen=True)
class GuidanceFacts(Facts):
    """Guided rows of ``rl_pool``, and the all-wrong questions left out for want of a correct rollout; under the
    student band (``rl_band``) also those no prefix helped, the prefix lengths probed, and the k* histogram."""

    rows: int | None = None
    without_correct_rollout: int | None = None
    no_working_prefix: int | None = None
    probes: int | None = None
    k: dict[str, int] = field(default_factory=dict)
    raw: dict = _raw()


@dataclass(frozen=True)
class FilterReport(BandedReport):
    """``reports/filter.json``: the chain and the order of its reasons, the band, and what the student learns."""

    chain: list[str] | None = None
    reason_order: list[str] = field(default_factory=list)
    sft_rows: int | None = None
    context: ContextFacts | None = None
    reasoning: ReasoningFacts | None = None
    match: MatchFacts | None = None
    answers: AnswerFacts | None = None
    preference: PreferenceFacts | None = None
    pass_: PassFacts | None = _key("pass")
    guidance: GuidanceFacts | None = None
    band_n: int | None = None  # the samples a question's band counts (rollout.n)
    short_of_n: dict[str, int] = field(default_factory=dict)  # pool-split questions refused for fewer, by split
    judge: Any = None  # present when the LLM judge ran
    baselines: Any = None  # present when the RL baselines were computed


@dataclass(frozen=True)
class RlBandReport(BandedReport):
    """``reports/rl_band.json``: the student's band (under ``rl.band_by: student``), its guided rows (``rl.guidance``)
    and the baselines it asked (``rl.baselines``)."""

    guidance: GuidanceFacts | None = None
    baselines: Any = None  # present when the RL baselines were computed


# ---- questions -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class RepairFacts(Facts):
    """Repairs of one reason: asked for, and passed."""

    attempted: int | None = None
    repaired: int | None = None
    raw: dict = _raw()


@dataclass(frozen=True)
class DepthSummary(Facts):
    """Effective against nominal depth of a set of questions (``synth.questions.depth.summary``)."""

    questions: int | None = None
    mean_nominal: float | None = None
    mean_effective: float | None = None
    ratio: float | None = None
    full_depth_share: float | None = None
    effective: dict[str, int] = field(default_factory=dict)  # histogram: depth -> questions
    nominal: dict[str, int] = field(default_factory=dict)
    raw: dict = _raw()


@dataclass(frozen=True)
class AdversaryCount(Facts):
    """What one adversary's searches did to a set of questions."""

    questions: int | None = None
    entered: int | None = None
    hops_caught: int | None = None
    full_depth_share: float | None = None
    raw: dict = _raw()


@dataclass(frozen=True)
class AdversaryFacts(Facts):
    """Per adversary (``names``, in order), of the questions checked and of those kept."""

    names: list[str] = field(default_factory=list)
    checked: dict[str, AdversaryCount] = field(default_factory=dict)
    kept: dict[str, AdversaryCount] = field(default_factory=dict)
    raw: dict = _raw()


@dataclass(frozen=True)
class DepthFacts(Facts):
    """The questions stage's depth measure: of the questions kept, of those checked, and per adversary."""

    kept: DepthSummary = field(default_factory=DepthSummary)
    checked: DepthSummary = field(default_factory=DepthSummary)
    adversaries: AdversaryFacts = field(default_factory=AdversaryFacts)
    by_source: dict[str, DepthSummary] = field(default_factory=dict)  # kept questions per source kind (walk, subgraph)
    raw: dict = _raw()


@dataclass(frozen=True)
class StyleFacts(Facts):
    """The kept questions' form (``synth.questions.style``): navigation language, stated relations, noun-phrase
    clues, and the answers' types."""

    questions: int | None = None
    navigation_questions: int | None = None
    hops: int | None = None
    clues_read: int | None = None
    relation_hops: int | None = None
    relation_share: float | None = None
    noun_phrase_clues: int | None = None
    noun_phrase_share: float | None = None
    named_answers: int | None = None
    named_answer_share: float | None = None
    answer_types: dict[str, int] = field(default_factory=dict)
    raw: dict = _raw()


@dataclass(frozen=True)
class QuestionsReport(StageReport):
    """``reports/questions.json``: repairs by reason, the depth measure, and the decontamination entry (as
    :mod:`synth.decontam.tally` wrote it: its readers, the report's and the card's sections, read it whole)."""

    repairs: dict[str, RepairFacts] = field(default_factory=dict)
    depth: DepthFacts | None = None
    style: StyleFacts | None = None
    routing: dict | None = None  # what clue-aware routing did to the walks (synth.questions.route.RouteStats)
    decontamination: dict | None = None
    kinds: dict[str, int] = field(default_factory=dict)
    shards: int | None = None


# ---- rollout, walks, ingest ------------------------------------------------------------------------

@dataclass(frozen=True)
class RolloutReasoning(Facts):
    """Where the teacher's server put its reasoning (``where``: the field most traces show, or None)."""

    where: str | None = _key("field")
    traces: int | None = None
    by_field: dict[str, int] = field(default_factory=dict)
    raw: dict = _raw()


@dataclass(frozen=True)
class RolloutReport(StageReport):
    """``reports/rollout.json``: samples per question (``n``), where the teacher's reasoning was, and how the agents'
    search ranked (``search``; a report without it is of a BM25 run)."""

    n: int | None = None
    policy: str | None = None
    questions: int | None = None
    reasoning: RolloutReasoning | None = None
    samples_by_split: dict[str, int] = field(default_factory=dict)
    stop_reasons: dict[str, int] = field(default_factory=dict)
    # The agents' search: {"ranker"} and, for dense or hybrid, the embedding model (synth.tools.rank.search_facts).
    search: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RepeatFacts(Facts):
    """How many walks end on (``answer``) or pass through (``bridge``) one page: times -> pages."""

    answer: dict[str, int] = field(default_factory=dict)
    bridge: dict[str, int] = field(default_factory=dict)
    max_answer_repeats: int | None = None
    max_bridge_repeats: int | None = None
    raw: dict = _raw()


@dataclass(frozen=True)
class WalksReport(StageReport):
    """``reports/walks.json``: the repeated pages."""

    repeats: RepeatFacts | None = None


@dataclass(frozen=True)
class LinkCounts(Facts):
    """The links ingest read and kept."""

    input: int | None = None
    output: int | None = None
    raw: dict = _raw()


@dataclass(frozen=True)
class IngestReport(StageReport):
    """``reports/ingest.json``: the source it read (as given) and its links."""

    source: str | None = None
    links: LinkCounts | None = None


# ---- a run's reports ---------------------------------------------------------------------------------

REPORT_TYPES: dict[str, type[StageReport]] = {
    "filter": FilterReport, "rl_band": RlBandReport, "questions": QuestionsReport, "rollout": RolloutReport,
    "walks": WalksReport, "ingest": IngestReport}


class RunReports:
    """The reports of one run folder by stage: each typed (:data:`REPORT_TYPES`, else :class:`StageReport`),
    None for a stage that has not reported."""

    def __init__(self, reports: Mapping[str, Mapping[str, Any]] | None = None):
        self._raw = {k: dict(v) for k, v in (reports or {}).items() if isinstance(v, Mapping)}
        self._typed: dict[str, StageReport] = {}

    @classmethod
    def of(cls, reports: "RunReports | Mapping[str, Mapping[str, Any]] | None") -> "RunReports":
        """``reports`` itself when it is a :class:`RunReports`, else the reports of the mapping."""
        return reports if isinstance(reports, RunReports) else cls(reports)

    def get(self, stage: str) -> StageReport | None:
        """The report of ``stage`` (its type's view: a :class:`FilterReport` for ``filter``), None without one."""
        if stage not in self._raw:
            return None
        if stage not in self._typed:
            self._typed[stage] = REPORT_TYPES.get(stage, StageReport).from_dict(self._raw[stage])
        return self._typed[stage]

    def teacher(self, stage: str) -> dict | None:
        """The teacher usage ``stage`` recorded (for ``TeacherUsage.from_report``), None without it."""
        r = self.get(stage)
        return None if r is None else r.teacher

    def __contains__(self, stage: object) -> bool:
        return stage in self._raw

    def __iter__(self):
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def to_dict(self) -> dict[str, dict]:
        """The reports as read, by stage."""
        return {k: dict(v) for k, v in self._raw.items()}

    @property
    def filter(self) -> FilterReport | None:
        return self.get("filter")  # type: ignore[return-value]

    @property
    def rl_band(self) -> RlBandReport | None:
        return self.get("rl_band")  # type: ignore[return-value]

    @property
    def questions(self) -> QuestionsReport | None:
        return self.get("questions")  # type: ignore[return-value]

    @property
    def rollout(self) -> RolloutReport | None:
        return self.get("rollout")  # type: ignore[return-value]

    @property
    def walks(self) -> WalksReport | None:
        return self.get("walks")  # type: ignore[return-value]

    @property
    def ingest(self) -> IngestReport | None:
        return self.get("ingest")  # type: ignore[return-value]

    @property
    def expand(self) -> StageReport | None:
        return self.get("expand")


def read_reports(root: Path) -> RunReports:
    """``reports/<stage>.json`` of every stage that ran (an unreadable one is left out)."""
    out = {}
    for p in sorted((Path(root) / "reports").glob("*.json")):
        try:
            out[p.stem] = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
    return RunReports(out)


__all__ = ["AdversaryCount", "AdversaryFacts", "AliasFacts", "AnswerFacts", "BandCounts", "BandedReport",
           "ContextFacts", "DepthFacts", "DepthSummary", "Facts", "FilterReport", "GuidanceFacts", "IngestReport",
           "LinkCounts", "MatchFacts", "OtherTitleFacts", "PassFacts", "PreferenceFacts", "QuestionsReport",
           "REPORT_TYPES", "ReasoningFacts", "RepairFacts", "RepeatFacts", "RlBandReport", "RolloutReasoning",
           "RolloutReport", "RunReports", "StageReport", "WalksReport", "read_reports"]
