"""Record types and their Arrow schemas: the one place a table's columns are defined.

Bulk tables (pages, links) are processed as Arrow batches and only their schemas
live here.  Per-record stages use the dataclasses, whose fields are exactly the
table's columns: a column that a later stage reads is a field, never a key in a
free-form dict, and each record's Arrow schema is derived from its fields (:func:`record`), so
its columns are listed once.  A trace's conversation, stored as OpenAI-format JSON, is read
once into a :class:`~synth.engine.conversation.Conversation` (``Trace.conversation``).
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass
from enum import StrEnum
from types import UnionType
from typing import Any, ClassVar, Union, get_args, get_origin, get_type_hints

import pyarrow as pa

from synth.engine.conversation import Conversation, parse_conversation

# ---- corpus ------------------------------------------------------------------------------

class Split(StrEnum):
    """The split of a question, decided once when it is written and carried by every table."""

    SFT = "sft"  # its kept traces become SFT rows (and longctx)
    RL = "rl"  # it may enter rl_pool
    EVAL = "eval"  # held out: the student is evaluated on it, never trained


SPLITS: tuple[str, ...] = tuple(s.value for s in Split)

PAGE_SCHEMA = pa.schema(
    [
        pa.field("page_id", pa.string(), nullable=False),
        pa.field("title", pa.string(), nullable=False),
        pa.field("paragraphs", pa.list_(pa.string()), nullable=False),  # text[1:], markup kept
        pa.field("description", pa.string()),  # wikidata_info.description when present
        pa.field("aliases", pa.list_(pa.string())),  # wikidata_info.aliases
        pa.field("wikidata_id", pa.string()),
        pa.field("categories", pa.string()),
        pa.field("url", pa.string()),
        pa.field("n_chars", pa.int64()),  # total characters of the paragraphs
    ]
)

LINK_SCHEMA = pa.schema(
    [
        pa.field("src_id", pa.string(), nullable=False),
        pa.field("dst_id", pa.string(), nullable=False),
        pa.field("paragraph_id", pa.int32(), nullable=False),  # index into KILT `text` (0 is the title)
        pa.field("start", pa.int32(), nullable=False),
        pa.field("end", pa.int32(), nullable=False),
        pa.field("anchor_text", pa.string()),
    ]
)

def column(arrow_type: pa.DataType, default: Any = MISSING):
    """A record field whose Arrow type is not the default of its Python type (``int`` is int64)."""
    return field(default=default, metadata={"arrow": arrow_type})


_ARROW = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}


def arrow_type(tp: Any) -> tuple[pa.DataType, bool]:
    """The Arrow type of a record field's Python type, and whether it is nullable (``X | None``): ``str``,
    ``int``, ``float``, ``bool``, ``list[X]`` and a nested dataclass (a struct of its fields)."""
    args = get_args(tp)
    if get_origin(tp) in (UnionType, Union) and type(None) in args:
        inner = next(a for a in args if a is not type(None))
        return arrow_type(inner)[0], True
    if get_origin(tp) is list:
        return pa.list_(arrow_type(args[0])[0]), False
    if is_dataclass(tp):
        return struct_of(tp), False
    return _ARROW[tp], False


def struct_of(cls: type) -> pa.StructType:
    """The Arrow struct of a nested record (its items are nullable, as Arrow structs read back)."""
    hints = get_type_hints(cls)
    return pa.struct([pa.field(f.name, f.metadata.get("arrow") or arrow_type(hints[f.name])[0]) for f in fields(cls)])


def schema_of(cls: type) -> pa.Schema:
    """The Arrow schema of a table record, from its fields: the one place its columns are listed."""
    hints = get_type_hints(cls)
    out = []
    for f in fields(cls):
        typ, nullable = arrow_type(hints[f.name])
        out.append(pa.field(f.name, f.metadata.get("arrow") or typ, nullable=nullable))
    return pa.schema(out)


def record(cls: type) -> type:
    """Class decorator of a table record: a slotted dataclass whose ``SCHEMA`` and ``NESTED`` (its
    list-of-record columns) are derived from its fields."""
    cls = dataclass(slots=True)(cls)
    hints = get_type_hints(cls)
    cls.SCHEMA = schema_of(cls)
    cls.NESTED = {f.name: get_args(hints[f.name])[0] for f in fields(cls)
                  if get_origin(hints[f.name]) is list and is_dataclass(get_args(hints[f.name])[0])}
    return cls


@dataclass(slots=True)
class Evidence:
    """The anchor in page ``src_id`` (paragraph ``paragraph_id``) that links to ``dst_id``: one hop of evidence."""

    src_id: str
    dst_id: str
    paragraph_id: int = column(pa.int32())
    paragraph: str
    anchor_text: str


EVIDENCE_TYPE = struct_of(Evidence)


class Record:
    """Mixin: Arrow conversion for table records (:func:`record`), whose ``SCHEMA`` their fields give.

    ``NESTED`` names the list-of-record columns and the dataclass of their items, so
    :meth:`from_row` rebuilds them (:meth:`to_row` turns them back into dicts).
    """

    SCHEMA: ClassVar[pa.Schema]
    NESTED: ClassVar[dict[str, type]] = {}
    RENAMED: ClassVar[dict[str, str]] = {}  # old column name -> field: rows written before a rename still read

    def to_row(self) -> dict[str, Any]:
        """The record as a table row (nested dataclasses as dicts)."""
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_row(cls, row: dict[str, Any]):
        """The record of a table row (as ``to_pylist`` gives it)."""
        if cls.RENAMED and any(old in row for old in cls.RENAMED):
            row = {cls.RENAMED.get(k, k): v for k, v in row.items()}
        # A column a record gained later (with a default) may be missing from a row written before it.
        kw = {f.name: row[f.name] if f.name in row or (f.default is MISSING and f.default_factory is MISSING)
              else (f.default if f.default is not MISSING else f.default_factory())
              for f in fields(cls)}  # type: ignore[arg-type]
        if any(kw[name] is None for name in cls.NESTED):  # a nullable list column read back as null
            kw.update({name: [] for name in cls.NESTED if kw[name] is None})
        for name, item in cls.NESTED.items():
            kw[name] = [x if isinstance(x, item) else item(**x) for x in kw[name]]
        return cls(**kw)

    @classmethod
    def to_table(cls, records: list) -> pa.Table:
        return pa.Table.from_pylist([r.to_row() for r in records], schema=cls.SCHEMA)


@record
class Walk(Record):
    """A k-hop entity path ``P = [v0..vk]`` with the evidence of each hop."""

    RENAMED = {"start_index": "slot"}

    walk_id: str
    path: list[str]
    titles: list[str]
    hops: list[Evidence]  # k hops, hop i links path[i] -> path[i+1]
    slot: int  # walker slot that produced it (reproducibility); a subgraph's slot is the same idea


@record
class Subgraph(Record):
    """``G_sub = Expand(G, v_seed, K)``: a connected set of K pages and the evidence of its edges."""

    subgraph_id: str
    seed_id: str
    nodes: list[str]
    titles: list[str]
    edges: list[Evidence]  # every edge of the induced subgraph
    slot: int  # expansion slot that produced it (reproducibility), as a walk's


@dataclass(slots=True)
class Hop:
    """One link of a question's chain: the sub-question it answers and the entity it reaches."""

    sub_question: str
    bridge: str  # title of the entity this hop reaches
    page_id: str  # that entity's page


HOP_TYPE = struct_of(Hop)


@record
class Question(Record):
    """A verified multi-hop question through every entity of ``path``, with its provenance."""

    RENAMED = {"walk_id": "source_id"}

    question_id: str
    kind: str  # "walk" or "subgraph"
    source_id: str  # the walk_id or subgraph_id the question was written from
    path: list[str]  # page ids of the gold chain, in order; the last one is the answer page
    titles: list[str]
    question: str
    answer: str  # title of the answer page
    answer_aliases: list[str]
    answer_page_id: str  # masked from search during rollouts
    hops: list[Hop]  # one per link of the chain
    teacher_model: str
    prompt_sha: str
    seed: int
    split: str  # sft | rl | eval: decided once, by a stable hash of the answer page (a group split)
    # Hops a solver with a search tool must walk (synth.questions.depth); None when not measured (no index).
    effective_depth: int | None = None
    entry: str | None = None  # the search that lets a solver enter the chain later than its start, in words
    entered_by: str | None = None  # the adversary whose search that was (synth.questions.depth.ADVERSARIES)

    @property
    def golds(self) -> list[str]:
        """The answer and its aliases (empty ones left out): what a final answer is matched against."""
        return [g for g in [self.answer, *(self.answer_aliases or [])] if g]


@dataclass(slots=True)
class StepLabel:
    """Labels of one assistant turn of a trace, for process rewards (PiCA's pivot steps); computed by
    :func:`synth.rollout.labels.step_labels`, which says how."""

    turn: int = column(pa.int32())  # the assistant turn, from 1
    evidence_state: int = column(pa.int8())  # E_t: gold pages seen before the turn: 0 none, 1 some, 2 all
    pivot_hops: list[int] = column(pa.list_(pa.int32()))  # path positions whose page this turn first revealed
    grounded: bool | None = None  # every tool call of the turn acted on what was seen; None: no judged call


STEP_LABEL_TYPE = struct_of(StepLabel)


# The stop reason of a trajectory whose teacher call failed for good (its ``error`` says why, as
# ``"reason: detail"``).  The rollout stage never commits one: it lists it as failed, and the next
# run retries it; a filter that meets one anyway says so rather than calling it malformed.
TEACHER_FAILED = "teacher_failed"


@dataclass(slots=True)
class ToolCount:
    """How many calls a trace made to one tool (a tool the registry names: ``synth.tools.registry``)."""

    name: str
    calls: int = column(pa.int32())


LEGACY_TOOL_COLUMNS = ("n_search", "n_open", "n_find")  # a trace's tool counts before ``tool_counts``


def tool_counts_of_row(row: dict[str, Any]) -> list[dict]:
    """A ``traces`` row's tool counts as ``{"name", "calls"}`` dicts: its ``tool_counts``, or the
    ``n_search``/``n_open``/``n_find`` columns of a table written before them."""
    if row.get("tool_counts") is not None:
        return [c if isinstance(c, dict) else {"name": c.name, "calls": c.calls} for c in row["tool_counts"]]
    return [{"name": c[2:], "calls": int(row.get(c) or 0)} for c in LEGACY_TOOL_COLUMNS if c in row]


def tool_calls_of(counts: list, tool: str) -> int:
    """The calls to ``tool`` in a ``tool_counts`` value (records or their dicts); 0 when it is not counted."""
    for c in counts or ():
        name, calls = (c.name, c.calls) if isinstance(c, ToolCount) else (c["name"], c["calls"])
        if name == tool:
            return int(calls or 0)
    return 0


@record
class Trace(Record):
    """One teacher rollout: the full ReAct conversation plus the measurements filters and RL read.

    ``messages`` and ``tools`` are JSON strings (OpenAI format, with ``tool_call_id``s and
    tool-call ``arguments`` as JSON strings) because Arrow would merge dict keys across rows.
    Turns count assistant messages from 1.  ``gold_first_seen[j]`` is the turn whose tool
    observation first showed gold page ``path[j]`` (in a search result, an opened or a found
    page), -1 if never; the evidence state E_t and the evidence-recovery time derive from it.
    """

    trace_id: str
    question_id: str
    sample_index: int = column(pa.int32())
    messages: str
    tools: str
    final_answer: str | None
    stop_reason: str  # answer | max_turns | max_tokens | truncated | teacher_failed | no_answer
    n_turns: int = column(pa.int32())
    n_tool_calls: int = column(pa.int32())
    tool_counts: list[ToolCount]  # calls of each registered tool, in registration order (zeros included)
    n_tool_errors: int = column(pa.int32())  # malformed or failed tool calls (the observation was an error)
    searched_page_ids: list[str]
    opened_page_ids: list[str]
    gold_page_ids: list[str]  # the question's path, in order
    gold_first_seen: list[int] = column(pa.list_(pa.int32()))
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    teacher_model: str
    error: str | None  # teacher failure reason when stop_reason == teacher_failed
    split: str  # the question's split, carried so no table needs a join to know it
    # How tool calls travelled: native (the server's tool_calls) or a text protocol (hermes, llama3,
    # mistral, react) parsed back into the same shape; see synth/teacher/protocols.py.
    tool_protocol: str = "native"
    # Of prompt_tokens, those the server said it served from its own prefix cache
    # (usage.prompt_tokens_details.cached_tokens), which a provider bills at a lower rate; 0 when it said none.
    server_cached_prompt_tokens: int = 0
    # One per assistant turn (synth.rollout.labels); empty in tables written before labels existed.
    step_labels: list[StepLabel] = field(default_factory=list)
    # Where the teacher's server put its reasoning (reasoning, reasoning_content, think, or teacher.reasoning_field),
    # and so where earlier turns' reasoning was sent back; None when no turn carried any.  Whatever the field,
    # the conversation keeps it as each assistant message's reasoning_content.
    reasoning_field: str | None = None

    @property
    def conversation(self) -> Conversation:
        """``messages`` parsed (see :class:`~synth.engine.conversation.Conversation`); parsed once however
        often it is read."""
        return parse_conversation(self.messages)

    def calls_of(self, tool: str) -> int:
        """The calls this trace made to ``tool`` (0 for a tool it has no count of)."""
        return tool_calls_of(self.tool_counts, tool)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "Trace":
        """As :meth:`Record.from_row`; a row written before ``tool_counts`` has ``n_search``/``n_open``/``n_find``."""
        if "tool_counts" not in row:
            row = {**{k: v for k, v in row.items() if k not in LEGACY_TOOL_COLUMNS}, "tool_counts": tool_counts_of_row(row)}
        return Record.from_row.__func__(cls, row)


# Chat messages as TRL's SFTTrainer reads them (conversational, with tool calls).
# Tool-call arguments stay JSON strings: Arrow would otherwise merge argument keys across rows.
# An assistant turn's reasoning is `reasoning_content` (the key Qwen3's and DeepSeek's templates read), whatever
# field the teacher's server used; how a template without a thinking format trains it is `sft.reasoning`.
TOOL_CALL_TYPE = pa.struct(
    [
        pa.field("id", pa.string()),
        pa.field("type", pa.string()),
        pa.field("function", pa.struct([pa.field("name", pa.string()), pa.field("arguments", pa.string())])),
    ]
)
MESSAGE_TYPE = pa.struct(
    [
        pa.field("role", pa.string()),
        pa.field("content", pa.string()),
        pa.field("tool_calls", pa.list_(TOOL_CALL_TYPE)),
        pa.field("tool_call_id", pa.string()),
        pa.field("name", pa.string()),
        pa.field("reasoning_content", pa.string()),
    ]
)

SFT_SCHEMA = pa.schema(
    [
        pa.field("messages", pa.list_(MESSAGE_TYPE), nullable=False),
        pa.field("tools", pa.string(), nullable=False),  # JSON list of OpenAI function schemas (TRL json.loads it)
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("trace_id", pa.string(), nullable=False),
        pa.field("rubric", pa.float64(), nullable=False),
        pa.field("n_tool_calls", pa.int32(), nullable=False),
        pa.field("teacher_model", pa.string(), nullable=False),
        pa.field("split", pa.string(), nullable=False),  # always sft
        pa.field("step_labels", pa.list_(STEP_LABEL_TYPE)),  # the trace's, one per assistant turn
        # sft.context as_seen: the assistant turn (from 1) this row trains, its last message; the messages before it
        # are the context the teacher saw then.  Null (context full): the whole trace, every assistant turn trained.
        pa.field("turn", pa.int32()),
    ]
)


# DPO pairs from the same rollouts (filters/preference.py), in TRL's conversational preference format with tools.
PREFERENCE_SCHEMA = pa.schema(
    [
        pa.field("prompt", pa.list_(MESSAGE_TYPE), nullable=False),  # system + user: before the first assistant turn
        pa.field("chosen", pa.list_(MESSAGE_TYPE), nullable=False),  # the kept trace after the prompt
        pa.field("rejected", pa.list_(MESSAGE_TYPE), nullable=False),  # another rollout of the question, after it
        pa.field("tools", pa.string(), nullable=False),  # JSON list of OpenAI function schemas (TRL json.loads it)
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("chosen_trace_id", pa.string(), nullable=False),
        pa.field("rejected_trace_id", pa.string(), nullable=False),
        pa.field("rejected_reason", pa.string(), nullable=False),  # wrong_answer | lower_rubric
        pa.field("chosen_rubric", pa.float64(), nullable=False),  # raw entity rubric
        pa.field("rejected_rubric", pa.float64()),  # lower_rubric only
        pa.field("rejected_answer", pa.string()),
        pa.field("teacher_model", pa.string(), nullable=False),
        pa.field("split", pa.string(), nullable=False),  # always sft
    ]
)


# Rejected rows of per-record stages (questions, assemble) keep the raw model output and the reason.
@record
class Reject(Record):
    """A record a stage dropped (``rejects/questions``, ``rejects/assemble``): its id, the source it was made
    from, why, and what the teacher wrote when there was something (``raw``)."""

    record_id: str
    source_id: str | None
    reason: str
    detail: str | None = None
    raw: str | None = None


REJECT_SCHEMA = Reject.SCHEMA

# ---- downstream tables -----------------------------------------------------------------------

# Rejected traces of the filter stage: the whole trace plus why it was dropped.
TRACE_REJECT_SCHEMA = pa.schema(list(Trace.SCHEMA) + [pa.field("reason", pa.string(), nullable=False),
                                                pa.field("detail", pa.string())])

@record
class Verdict(Record):
    """One trace's verdict in the filter stage (``filter/verdicts``): how it was graded, and whether it was kept.

    Pass one writes it (:mod:`filters.stage`); a trace that passed the chain waits for best-of-n, which sets
    ``rubric`` and ``kept`` (or its ``reason``, ``not_best``).  The report reads the table's columns."""

    trace_id: str
    question_id: str
    teacher_model: str
    split: str
    rule_correct: bool  # exact match or F1 >= min_f1
    em: bool
    f1: float
    match: str | None  # how the answer rule decided: page, f1, other_page, qualified or none (synth.text.answers.BASES)
    judge_correct: bool | None  # null: judge off, not asked (no answer) or failed
    correct: bool  # rule_correct or (judge_correct and f1 > 0)
    rubric_raw: float | None  # only for traces that passed the chain (positive-only)
    rubric: float | None  # rubric_raw / group max
    n_tokens: int | None  # rendered length, when the length filter measured it
    ungrounded_steps: int  # tool calls acting on what was not yet seen
    kept: bool
    reason: str | None  # drop reason; null when kept


VERDICT_SCHEMA = Verdict.SCHEMA


# The `rl_pool` table in the verl / Search-R1 layout.
PROMPT_MESSAGE_TYPE = pa.struct([pa.field("role", pa.string()), pa.field("content", pa.string())])
# extra_info.tools_kwargs: {tool name: {"create_kwargs": {...}}}.  Every masked search tool (`search`, and the optional
# `multi_search`, which a run may offer) gets the pages it never returns: verl hands a tool only its own entry.
_EXCLUDE_KWARGS = pa.struct([pa.field("create_kwargs", pa.struct([pa.field("exclude", pa.list_(pa.string()))]))])
RL_TOOLS_KWARGS_TYPE = pa.struct([
    pa.field("search", _EXCLUDE_KWARGS),
    pa.field("multi_search", _EXCLUDE_KWARGS),
    # CAPF's training-only check_answer: the ground truth and the chain's titles (synth/tools/feedback.py).
    pa.field("check_answer", pa.struct([
        pa.field("create_kwargs", pa.struct([pa.field("target", pa.list_(pa.string())),
                                             pa.field("chain", pa.list_(pa.string())),
                                             pa.field("other_titles", pa.list_(pa.string()))])),
    ])),
])
# extra_info.baselines: the dual reward's closed-book and naive-RAG answers of a question, with their scores.
BASELINE_TYPE = pa.struct([pa.field("answer", pa.string()), pa.field("acc", pa.float64()),
                           pa.field("f1", pa.float64())])
CONTEXT_TYPE = pa.struct([pa.field("policy", pa.string()), pa.field("compress_observations", pa.bool_()),
                          pa.field("keep_observations", pa.int32())])
# A question's best correct teacher rollout (:class:`filters.guidance.Reference`), one row per question of the
# pool's splits that has one: the filter stage writes it (``filter/references``) and the student band reads it.
REFERENCE_SCHEMA = pa.schema([
    pa.field("question_id", pa.string(), nullable=False),
    pa.field("trace_id", pa.string(), nullable=False),
    pa.field("passed_chain", pa.bool_()),
    pa.field("rubric_raw", pa.float64()),
    pa.field("n_tool_calls", pa.int32()),
    pa.field("calls", pa.string()),  # JSON [{"name", "arguments"}]: the guidance
    pa.field("step_labels", pa.list_(STEP_LABEL_TYPE)),
])

RL_SCHEMA = pa.schema(
    [
        pa.field("data_source", pa.string(), nullable=False),
        pa.field("prompt", pa.list_(PROMPT_MESSAGE_TYPE), nullable=False),
        pa.field("ability", pa.string(), nullable=False),
        pa.field("reward_model", pa.struct([
            pa.field("style", pa.string()),
            # The answer key (synth.text.answers.AnswerKey.ground_truth): the answer page's names, the titles of
            # other pages token F1 would mistake for it, and the min_f1 those were gathered at; the reward judges
            # with it exactly as the filter did, without the corpus.
            pa.field("ground_truth", pa.struct([pa.field("target", pa.list_(pa.string())),
                                                pa.field("other_titles", pa.list_(pa.string())),
                                                pa.field("min_f1", pa.float64())])),
        ]), nullable=False),
        pa.field("extra_info", pa.struct([
            pa.field("question_id", pa.string()),
            # The question's text, for a reward that asks a judge about it (filters/judge_reward.py).
            pa.field("question", pa.string()),
            pa.field("index", pa.int64()),
            pa.field("path", pa.list_(pa.string())),
            pa.field("n", pa.int32()),
            pa.field("c", pa.int32()),
            # Whose n rollouts measured the band: "teacher:<model>" or "student:<model>" (rl.band_by).
            pa.field("band_model", pa.string()),
            pa.field("split", pa.string()),
            # verl's multi-turn tool rollouts: per tool, the kwargs of its ``create`` (the search masks the
            # answer page, as the rollout's Toolbox did); see filters/band.py and synth/tools/verl_tool.py.
            pa.field("tools_kwargs", RL_TOOLS_KWARGS_TYPE),
            pa.field("need_tools_kwargs", pa.bool_()),
            # The seeds' RL signals (filters/band.py says what each holds).
            pa.field("titles", pa.list_(pa.string())),
            pa.field("reference_trace_id", pa.string()),
            pa.field("step_labels", pa.list_(STEP_LABEL_TYPE)),
            pa.field("guidance", pa.string()),  # JSON: tool calls' arguments differ by tool
            # ACTGUIDE-RL's k*: the fewest guidance actions whose prefix let the student answer (student band only).
            pa.field("guidance_k", pa.int32()),
            pa.field("baselines", pa.struct([pa.field("closed_book", BASELINE_TYPE), pa.field("rag", BASELINE_TYPE)])),
            # sft.context of the run: the observations the policy trained with (full, or as_seen: the teacher's
            # compression), which an RL rollout should show it too.
            pa.field("context", CONTEXT_TYPE),
        ]), nullable=False),
        pa.field("tools", pa.string(), nullable=False),
    ]
)


# Tiered long-context rows (`longctx`).
LONGCTX_SCHEMA = pa.schema(
    [
        pa.field("sample_id", pa.string(), nullable=False),  # "<question_id>-<L>"
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("target_length", pa.int32(), nullable=False),
        pa.field("prompt", pa.string(), nullable=False),
        pa.field("completion", pa.string(), nullable=False),  # the answer
        pa.field("n_tokens", pa.int32(), nullable=False),  # exact, of prompt + completion
        pa.field("doc_page_ids", pa.list_(pa.string()), nullable=False),  # in prompt order (Document [1] first)
        pa.field("doc_tiers", pa.list_(pa.int8()), nullable=False),  # 0 gold, 1 retrieved, 2 fill
        pa.field("doc_n_tokens", pa.list_(pa.int32()), nullable=False),  # each document's segment, counted alone
        pa.field("gold_positions", pa.list_(pa.int32()), nullable=False),  # 0-based, in path order
        pa.field("truncated_page_id", pa.string()),  # the one tier-2 page cut short, if any
        pa.field("n_gold", pa.int32(), nullable=False),
        pa.field("n_tier1", pa.int32(), nullable=False),
        pa.field("n_tier2", pa.int32(), nullable=False),
        pa.field("answer_aliases", pa.list_(pa.string()), nullable=False),
        pa.field("split", pa.string(), nullable=False),  # always sft
    ]
)

__all__ = [
    "Split",
    "SPLITS",
    "PAGE_SCHEMA",
    "LINK_SCHEMA",
    "EVIDENCE_TYPE",
    "Evidence",
    "Record",
    "record",
    "column",
    "schema_of",
    "Walk",
    "Subgraph",
    "Question",
    "HOP_TYPE",
    "Hop",
    "REJECT_SCHEMA",
    "Reject",
    "STEP_LABEL_TYPE",
    "StepLabel",
    "LEGACY_TOOL_COLUMNS",
    "ToolCount",
    "Trace",
    "tool_calls_of",
    "tool_counts_of_row",
    "SFT_SCHEMA",
    "PREFERENCE_SCHEMA",
    "CONTEXT_TYPE",
    "TRACE_REJECT_SCHEMA",
    "VERDICT_SCHEMA",
    "Verdict",
    "PROMPT_MESSAGE_TYPE",
    "RL_SCHEMA",
    "REFERENCE_SCHEMA",
    "LONGCTX_SCHEMA",
    "MESSAGE_TYPE",
    "TOOL_CALL_TYPE",
]
