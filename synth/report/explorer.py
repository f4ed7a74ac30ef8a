"""The report's data explorer: ``DIR/report/index.html``, a static page to browse every question.

The page opens from disk (file://), with no server and no network: the funnel, the report's
figures, and a filterable, paginated table of every question -- those in ``questions`` and
those the questions stage dropped (``rejects/questions``) -- with its split, hops, whether it
was kept (and where) or why it was dropped, and its pass count c/n.  Clicking a question shows
its path with the evidence of each hop and each trace as a conversation, with the observation
where each gold page was first seen marked, and each filter's verdict on the trace.

The question index (compact columns) is one script, ``explorer/index-data.js``; the detail of
each question is in shards ``explorer/shard-NNNNN.js`` of consecutive questions (at most
``shard_size`` of them and about ``shard_bytes``), which the page loads on demand with a script
tag calling a global callback (``fetch`` of a local file is refused under file://).  Data is JSON inside JS with ``<``, ``>``, ``&`` and the line
separators escaped, and the page only ever sets it as text, never as markup.  Each string of the
data is shown in a bidi isolate (``<bdi>``), and so is each path title where a question's text holds it,
so a right-to-left override (U+202E) in a title reverses that title and nothing shown after it.

Writing reads each table once, in batches, and spills every row's share of a question's detail
into a scratch file per shard, so memory holds one batch of conversations at a time.  Everything
is written into a scratch folder inside ``out`` and moved into place at the end.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from filters.base import AFTER_CHAIN, NOT_BEST, reason_filters
from synth.engine.records import SPLITS, Split
from synth.engine.conversation import Conversation
from synth.engine.store import MissingInput, Store
from synth.report.runinfo import RunReports, funnel_rows, read_reports
from synth.text.answers import is_correct

SHARD_SIZE = 200  # questions at most per detail shard
SHARD_BYTES = 1 << 20  # a shard is cut before it passes this size (a question alone may pass it)
INDEX_TEXT = 140  # characters of the question text in the index (what the table shows and searches)
MAX_TEXT = 4000  # characters kept of one message, observation or raw teacher output
MAX_EVIDENCE = 2000  # characters kept of one evidence paragraph
MAX_ARGS = 1000  # characters kept of one tool call's arguments
BATCH_ROWS = 256
SPILL_BYTES = 16 << 20  # spilled bytes buffered before they are appended to the shard files

# Which filter gives each trace drop reason (what the filter classes declare), and what drops a trace after
# the chain passed it.  Verdicts name only the first reason that dropped a trace; the chain order says which
# filters passed it.
REASON_FILTER = reason_filters()

KEPT, DROPPED, UNFILTERED = 1, 0, 2
_SEPARATORS = {"\u2028": "\\u2028", "\u2029": "\\u2029"}


# ---- escaping --------------------------------------------------------------------------------

def js_json(obj: Any) -> str:
    """``obj`` as JSON that is also safe inside a JS file or an inline ``<script>``.

    ``<``, ``>`` and ``&`` only ever occur inside JSON strings, so writing them as ``\\u003c``...
    changes no value and leaves no ``</script>`` or ``<!--`` in the text; U+2028 and U+2029 are
    escaped too (older JS engines end a string literal at them).
    """
    try:
        text = orjson.dumps(obj).decode()
    except (TypeError, orjson.JSONEncodeError):  # lone surrogates, huge ints: the stdlib writes them escaped
        text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), default=str)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    for ch, esc in _SEPARATORS.items():
        text = text.replace(ch, esc)
    return text


def js_call(fn: str, *args: Any) -> bytes:
    """The JS statement ``fn(arg, ...);`` with every argument written by :func:`js_json`."""
    return f"{fn}({','.join(js_json(a) for a in args)});\n".encode("utf-8", "replace")


def clip(text: str | None, limit: int, focus: int | None = None) -> tuple[str | None, int]:
    """``text`` cut to about ``limit`` characters, and how many were left out.

    With ``focus`` (a character offset) beyond the first half, the head and a window around
    ``focus`` are kept, so a highlighted passage survives the cut.
    """
    if text is None or len(text) <= limit:
        return text, 0
    if focus is not None and focus > limit // 2:
        head = text[: limit // 2]
        lo = max(limit // 2, focus - limit // 4)
        hi = min(len(text), lo + limit // 2)
        return f"{head} […] {text[lo:hi]}" + (" […]" if hi < len(text) else ""), len(text) - len(head) - (hi - lo)
    return text[:limit] + " […]", len(text) - limit


# ---- one trace -------------------------------------------------------------------------------

def find_page(text: str | None, page_id: str) -> int:
    """Where an observation names ``page_id`` as ``"page_id": "<id>"`` (the tools' JSON), or -1."""
    if not text:
        return -1
    for form in (f'"page_id": "{page_id}"', f'"page_id":"{page_id}"'):
        at = text.find(form)
        if at >= 0:
            return at
    return -1


def gold_marks(messages: list, gold_page_ids: list[str], gold_first_seen: list[int]) -> dict[int, list[int]]:
    """Message index -> the gold pages (indices into the path) first seen in that message.

    ``gold_first_seen[j] = t`` says a tool observation of assistant turn ``t`` (turns count from
    1) first showed gold page j: the mark goes on the observations of turn t that name the page
    (``"page_id": "<id>"``), else on the turn's first observation, else on the turn's assistant
    message.  ``t = 0`` (seen before the first turn) marks the user message.
    """
    by_turn: dict[int, list[int]] = defaultdict(list)  # turn -> message indices of its observations
    assistant_at: dict[int, int] = {}
    user_at = None
    turn = 0
    for i, m in enumerate(messages):
        if m.role == "assistant":
            turn += 1
            assistant_at[turn] = i
        elif m.role == "tool" and turn:
            by_turn[turn].append(i)
        elif m.role == "user" and user_at is None:
            user_at = i
    marks: dict[int, list[int]] = defaultdict(list)
    for j, (pid, t) in enumerate(zip(gold_page_ids, gold_first_seen)):
        if t is None or t < 0:
            continue
        if t == 0:
            if user_at is not None:
                marks[user_at].append(j)
            continue
        obs = by_turn.get(t, [])
        named = [i for i in obs if find_page(messages[i].text, pid) >= 0]
        targets = named or obs[:1] or ([assistant_at[t]] if t in assistant_at else [])
        for i in targets:
            marks[i].append(j)
    return dict(marks)


def trace_view(row: dict, max_text: int = MAX_TEXT) -> dict:
    """What the page shows of one trace row: its measures and its conversation, texts clipped."""
    try:
        conv = Conversation.from_openai(orjson.loads(row["messages"]))
    except (TypeError, orjson.JSONDecodeError) as e:
        conv = Conversation((), f"messages are not JSON: {e}")
    gold = list(row.get("gold_page_ids") or [])
    seen = [int(x) for x in (row.get("gold_first_seen") or [])]
    marks = gold_marks(list(conv.messages), gold, seen)
    msgs = []
    turn = 0
    for i, m in enumerate(conv.messages):
        if m.role == "assistant":
            turn += 1
        text = m.text
        focus = None
        if i in marks and text:
            at = find_page(text, gold[marks[i][0]])
            focus = at if at >= 0 else None
        text, cut = clip(text, max_text, focus)
        item: dict[str, Any] = {"role": m.role, "turn": turn, "text": text}
        if cut:
            item["cut"] = cut
        if m.tool_calls:
            item["calls"] = [{"id": tc.id, "name": tc.name, "args": clip(tc.arguments, MAX_ARGS)[0]}
                             for tc in m.tool_calls]
        if m.tool_call_id is not None:
            item["call_id"] = m.tool_call_id
        if m.name is not None:
            item["name"] = m.name
        if m.reasoning_content:
            item["reasoning"] = clip(m.reasoning_content, max_text)[0]
        if i in marks:
            item["gold"] = marks[i]
        msgs.append(item)
    return {
        "id": row["trace_id"], "sample": int(row.get("sample_index") or 0), "model": row.get("teacher_model"),
        "stop": row.get("stop_reason"), "turns": row.get("n_turns"), "calls": row.get("n_tool_calls"),
        "tool_errors": row.get("n_tool_errors"), "answer": row.get("final_answer"), "error": row.get("error"),
        "protocol": row.get("tool_protocol"), "prompt_tokens": row.get("prompt_tokens"),
        "completion_tokens": row.get("completion_tokens"), "latency_s": row.get("latency_s"),
        "gold": gold, "gold_first_seen": seen, "problem": conv.problem, "problem_at": conv.problem_at,
        "messages": msgs,
    }


def filter_steps(chain: list[str], verdict: dict | None, detail: str | None = None) -> list[dict]:
    """Each filter's verdict on a trace: ``pass``, ``drop`` (with reason and detail) or ``skip``
    (not run: the chain stops at the first drop), then the split and best-of-n steps."""
    if verdict is None:
        return []
    reason = verdict.get("reason")
    kept = bool(verdict.get("kept"))
    stop = REASON_FILTER.get(reason) if reason else None
    steps: list[dict] = []
    if reason and stop is None and reason not in AFTER_CHAIN:  # a reason this page does not know
        return [{"filter": name, "status": "unknown"} for name in chain] + [
            {"filter": "filter", "status": "drop", "reason": reason, "detail": detail}]
    dropped_at = chain.index(stop) if stop in chain else (len(chain) if stop is None else -1)
    if dropped_at < 0:  # dropped by a filter that is not in the chain this run reports
        return [{"filter": stop, "status": "drop", "reason": reason, "detail": detail}]
    for k, name in enumerate(chain):
        if k < dropped_at:
            steps.append({"filter": name, "status": "pass"})
        elif k == dropped_at:
            steps.append({"filter": name, "status": "drop", "reason": reason, "detail": detail})
        else:
            steps.append({"filter": name, "status": "skip"})
    if reason in AFTER_CHAIN:
        if reason == NOT_BEST:
            steps.append({"filter": "split", "status": "pass"})
        steps.append({"filter": AFTER_CHAIN[reason], "status": "drop", "reason": reason, "detail": detail})
    elif kept:
        steps += [{"filter": "split", "status": "pass"}, {"filter": "best_of_n", "status": "kept"}]
    return steps


# ---- one question ----------------------------------------------------------------------------

def hop_evidence(links: list[dict], path: list[str], titles: list[str], hops: list[dict] | None = None) -> list[dict]:
    """One entry per hop ``path[i] -> path[i+1]``: titles, sub-question and the evidence link
    (``reverse``: the link runs from ``path[i+1]`` to ``path[i]``); ``evidence`` None when none is stored."""
    out = []
    for i in range(len(path) - 1):
        a, b = path[i], path[i + 1]
        ev, reverse = None, False
        for link in links:
            if link["src_id"] == a and link["dst_id"] == b:
                ev = link
                break
        else:
            for link in links:
                if link["src_id"] == b and link["dst_id"] == a:
                    ev, reverse = link, True
                    break
        hop = hops[i] if hops and i < len(hops) else {}
        item: dict[str, Any] = {"from": titles[i] if i < len(titles) else a, "to": titles[i + 1] if i + 1 < len(titles) else b,
                                "from_id": a, "to_id": b, "sub_question": hop.get("sub_question")}
        if ev is not None:
            para = ev.get("paragraph") or ""
            anchor = ev.get("anchor_text") or ""
            at = para.find(anchor) if anchor else -1
            text, cut = clip(para, MAX_EVIDENCE, at if at >= 0 else None)
            item["evidence"] = {"src_id": ev["src_id"], "dst_id": ev["dst_id"], "paragraph_id": ev.get("paragraph_id"),
                                "paragraph": text, "cut": cut, "anchor": anchor, "reverse": reverse}
        else:
            item["evidence"] = None
        out.append(item)
    return out


def question_outcome(split: str, n_traces: int, n_verdicts: int, kept_traces: int, correct: int, in_rl_pool: bool,
                     trace_reasons: Counter, rejected: str | None) -> tuple[int, str | None, str]:
    """``(status, reason, label)`` of a question: status KEPT, DROPPED or UNFILTERED; the drop reason
    as ``"<stage>: <reason>"``; the label says where a kept question went.

    Dropped by the questions stage; no rollouts; otherwise, once filtered, an eval question is kept
    as the eval set, an rl question when it is in ``rl_pool`` (else its difficulty band), an sft
    question when one of its traces is an SFT row or it is in ``rl_pool`` (else its traces' most
    common drop reason).
    """
    if rejected is not None:
        return DROPPED, f"questions: {rejected}", "dropped"
    if n_traces == 0 and n_verdicts == 0:
        return DROPPED, "rollout: no traces", "dropped"
    if n_verdicts == 0:
        return UNFILTERED, None, "not filtered"
    if split == Split.EVAL:
        return KEPT, None, "eval set"
    if split == Split.RL:
        if in_rl_pool:
            return KEPT, None, "rl_pool"
        b = "all_wrong" if correct == 0 else "all_right" if correct >= n_verdicts else "not in rl_pool"
        return DROPPED, f"band: {b}", "dropped"
    if kept_traces or in_rl_pool:
        return KEPT, None, "sft + rl_pool" if kept_traces and in_rl_pool else "sft" if kept_traces else "rl_pool"
    if trace_reasons:
        top = max(trace_reasons.items(), key=lambda kv: kv[1])[0]  # ties: the first seen
        return DROPPED, f"filter: {top}", "dropped"
    return DROPPED, "filter: no kept trace", "dropped"


def _proposed(raw: str | None) -> tuple[str | None, str | None]:
    """The question and answer a teacher reply proposed, when the reply is a JSON object that has them."""
    if not raw or not raw.lstrip().startswith("{"):
        return None, None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None, None
    if not isinstance(obj, dict):
        return None, None
    q, a = obj.get("question"), obj.get("answer")
    return (q if isinstance(q, str) else None), (a if isinstance(a, str) else None)


# ---- writing ---------------------------------------------------------------------------------

class _Spill:
    """Per-shard scratch files of ``[kind, position, payload]`` JSON lines, appended in bulk."""

    def __init__(self, folder: Path, shard_size: int):
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.shard_size = shard_size
        self._buf: dict[int, list[bytes]] = defaultdict(list)
        self._bytes = 0

    def add(self, kind: str, pos: int, payload: Any) -> None:
        try:
            line = orjson.dumps([kind, pos, payload], default=str) + b"\n"
        except (TypeError, orjson.JSONEncodeError):  # lone surrogates: the stdlib writes them escaped
            line = (json.dumps([kind, pos, payload], ensure_ascii=True, default=str) + "\n").encode()
        self._buf[pos // self.shard_size].append(line)
        self._bytes += len(line)
        if self._bytes >= SPILL_BYTES:
            self.flush()

    def flush(self) -> None:
        for shard, lines in self._buf.items():
            with open(self.folder / f"{shard:05d}.jsonl", "ab") as f:
                f.write(b"".join(lines))
        self._buf.clear()
        self._bytes = 0

    def path(self, shard: int) -> Path:
        return self.folder / f"{shard:05d}.jsonl"

    def read(self, shard: int) -> Iterator[list]:
        return _read_spill(self.path(shard))


def _read_spill(p: Path) -> Iterator[list]:
    """The lines of one spill file, then the file is removed."""
    if not p.exists():
        return
    with open(p, "rb") as f:
        for line in f:
            yield orjson.loads(line)
    p.unlink()


def _dataset(store: Store, rel: str) -> ds.Dataset | None:
    try:
        return store.dataset(rel)
    except MissingInput:
        return None


def _batches(data: ds.Dataset | None, columns: list[str], batch_size: int = 4096,
             keep: tuple[str, pa.Array] | None = None) -> Iterator[list[dict]]:
    """The rows of every file of ``data``, a batch at a time, as dicts.

    Each file is read as a buffered stream, page by page: decoding a whole row group at once (what
    a dataset scan does) would hold a row group's conversations, often hundreds of MB, in memory.
    ``keep = (column, values)`` keeps only the rows whose ``column`` is one of ``values``.
    """
    for batch in _record_batches(data, columns, batch_size, keep):
        yield batch.to_pylist()


def _record_batches(data: ds.Dataset | None, columns: list[str], batch_size: int = 4096,
                    keep: tuple[str, pa.Array] | None = None) -> Iterator[pa.RecordBatch]:
    """:func:`_batches` as Arrow record batches (what a worker process is handed)."""
    if data is None:
        return
    for path in data.files:
        pf = pq.ParquetFile(path, buffer_size=1 << 20, pre_buffer=False)
        cols = [c for c in columns if c in pf.schema_arrow.names]
        for batch in pf.iter_batches(batch_size=batch_size, columns=cols, use_threads=False):
            if keep is not None:
                batch = batch.filter(pc.is_in(batch.column(keep[0]), value_set=keep[1]))
            if batch.num_rows:
                yield batch


def _figure_captions(out: Path) -> dict[str, str]:
    """Figure file -> caption, from the report's ``index.md`` (``![caption](file.png)``)."""
    try:
        md = (out / "index.md").read_text()
    except OSError:
        return {}
    return {m.group(2): m.group(1) for m in re.finditer(r"!\[([^\]]*)\]\(([^)\s]+)\)", md)}


def _chain(reports: RunReports) -> list[str]:
    """The filter chain the filter stage reported (empty when it has not run)."""
    reports = RunReports.of(reports)
    chain = list((reports.filter.chain if reports.filter else None) or [])
    if chain and "correctness" not in chain:  # the filter stage appends it when it is not listed
        chain.append("correctness")
    return chain


def _scalars(summary: dict | None) -> dict[str, Any]:
    return {k: v for k, v in (summary or {}).items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}


def write_explorer(store: Store, out: Path, figures: list[str], summary: dict | None = None, *,
                   shard_size: int = SHARD_SIZE, shard_bytes: int = SHARD_BYTES, min_f1: float = 0.8,
                   max_text: int = MAX_TEXT, ctx: Any = None) -> dict:
    """Write ``out/index.html`` and its data (``out/explorer/``) for the run in ``store``.

    ``figures`` are PNG file names already in ``out`` (the report's); ``summary`` the report's
    summary numbers (its ``funnel`` rows are shown when present, else the funnel is read from
    ``reports/``).  ``min_f1`` grades answers only when the filter stage has not run.  Returns
    what was written: counts, files and bytes.

    With ``ctx`` (the report stage's context) the trace views and the shards' JSON are made in its
    worker processes (:mod:`synth.engine.workers`), batch by batch and bucket by bucket, and used in
    order, so the files are the same for any worker count.
    """
    t0 = time.monotonic()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    reports = read_reports(store.root)
    chain = _chain(reports)
    work = Path(tempfile.mkdtemp(dir=out, prefix=".explorer-"))
    try:
        counts, index = _write_data(store, work, chain, shard_size, shard_bytes, min_f1, max_text, ctx)
        captions = _figure_captions(out)
        figs = [{"file": f, "caption": captions.get(f, "")} for f in figures
                if f == Path(f).name and not f.startswith(".") and (out / f).is_file()]
        funnel = (summary or {}).get("funnel") or funnel_rows(reports)
        index["meta"] = {"run": store.root.name, "funnel": funnel, "figures": figs, "summary": _scalars(summary),
                         "chain": chain}
        data = js_call("hopforgeIndex", index)
        (work / "explorer" / "index-data.js").write_bytes(data)
        final = out / "explorer"
        old = None
        if final.exists():
            old = out / f".explorer-old-{os.getpid()}-{time.monotonic_ns()}"
            os.replace(final, old)
        os.replace(work / "explorer", final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        page = render_page(store.root.name)
        (work / "index.html").write_bytes(page)
        os.replace(work / "index.html", out / "index.html")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    in_shards = sum(p.stat().st_size for p in (out / "explorer").glob("shard-*.js"))
    return {**counts, "files": ["index.html", "explorer/index-data.js"],
            "bytes": len(page) + len(data) + in_shards, "index_bytes": len(data), "shard_bytes": in_shards,
            "seconds": round(time.monotonic() - t0, 3)}


# ---- the work worker processes do (synth.engine.workers) ----------------------------------------
def _spread(ctx: Any, setup: Any, args: tuple, step: Any, items: Iterator, n: int | None, name: Any) -> Iterator:
    """``step(setup(*args), item)`` of each item, in order: in ``ctx``'s worker processes, or here without one."""
    if ctx is None:
        state = setup(*args)
        return (step(state, item) for item in items)
    return ctx.cpu_map(ctx.cpu_work(setup, args, step, name), items, ctx.cpu_workers(n))


def _views_setup(max_text: int) -> tuple:
    return (max_text,)


def _bucket_setup(chain: list[str]) -> tuple:
    return (chain,)


def _views_step(state: tuple, batch: pa.RecordBatch) -> list[tuple[str, Any, dict]]:
    """(question id, final answer, view) of every trace of a batch."""
    (max_text,) = state
    return [(r["question_id"], r.get("final_answer"), trace_view(r, max_text)) for r in batch.to_pylist()]


def _views_name(i: int, batch: pa.RecordBatch) -> str:
    ids = batch.column("trace_id") if "trace_id" in batch.schema.names else None
    return f"batch {i} of traces ({batch.num_rows} traces{f', {ids[0]} .. {ids[-1]}' if ids else ''})"


def _bucket_step(state: tuple, item: tuple) -> list[str]:
    """The JSON of each question of one bucket of positions, from its spill file and its index columns."""
    (chain,) = state
    spill, lo, hi, heads = item
    details = _assemble(_read_spill(Path(spill)), lo, hi, chain)
    parts = []
    for d, (qid, st, reason, label, c, n) in zip(details, heads):
        d.update(id=qid, status=st, reason=reason, label=label, c=c, n=n)
        parts.append(js_json(d))
    return parts


def _bucket_name(i: int, item: tuple) -> str:
    _, lo, hi, heads = item
    return f"questions {lo}..{hi - 1} ({heads[0][0]} .. {heads[-1][0]})" if heads else f"questions {lo}..{hi - 1}"


@dataclass
class QuestionIndex:
    """The page's question index, one column per field and one position per question.

    Positions are the questions in table order, then the questions the questions stage dropped;
    ``add_*`` fill a position's columns from one row of a table (the first row of an id stands),
    :meth:`settle` derives each question's outcome and the reasons it can be found by, and
    :meth:`to_json` is the index the page loads.
    """

    pos: dict[str, int]
    n_table: int  # positions that are rows of ``questions``
    ids: list[str] = field(init=False)
    text: list[str] = field(init=False)
    titles: list[str] = field(init=False)
    answer: list[str] = field(init=False)
    split: list[str] = field(init=False)
    hops: list[int] = field(init=False)
    depth: list[int] = field(init=False)
    rejected: list[str | None] = field(init=False)  # the questions stage's reason, for a dropped question
    n_traces: list[int] = field(init=False)
    n_verdicts: list[int] = field(init=False)
    n_correct: list[int] = field(init=False)
    n_kept: list[int] = field(init=False)
    reasons_of: dict[int, Counter] = field(default_factory=dict)  # position -> the filters' drop reasons
    # What settle() derives.
    status: list[int] = field(default_factory=list)
    reason_ix: list[int] = field(default_factory=list)
    label_ix: list[int] = field(default_factory=list)
    trace_ix: list[list[int]] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    reason_counts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = self.n
        self.ids, self.text, self.titles, self.answer, self.split = ([""] * n for _ in range(5))
        self.hops, self.depth = [-1] * n, [-1] * n
        self.rejected = [None] * n
        self.n_traces, self.n_verdicts, self.n_correct, self.n_kept = ([0] * n for _ in range(4))

    @classmethod
    def of(cls, questions: ds.Dataset | None, qrejects: ds.Dataset | None) -> "QuestionIndex":
        """Empty columns with a position for every question id of ``questions`` and ``rejects/questions``."""
        pos: dict[str, int] = {}
        for rows in _batches(questions, ["question_id"], 65536):
            for r in rows:
                pos.setdefault(r["question_id"], len(pos))
        n_table = len(pos)
        for rows in _batches(qrejects, ["record_id"], 65536):
            for r in rows:
                pos.setdefault(r["record_id"], len(pos))
        return cls(pos, n_table)

    @property
    def n(self) -> int:
        return len(self.pos)

    def add_question(self, r: dict) -> int | None:
        """Fill the position of a ``questions`` row; None when its id was already filled."""
        p = self.pos[r["question_id"]]
        if self.ids[p]:
            return None
        self.ids[p] = r["question_id"]
        self.text[p] = clip(r["question"], INDEX_TEXT)[0] or ""
        self.titles[p] = " → ".join(r["titles"] or [])
        self.answer[p] = r["answer"] or ""
        self.split[p] = r["split"] or ""
        self.hops[p] = max(len(r["path"] or []) - 1, 0)
        self.depth[p] = r["effective_depth"] if r.get("effective_depth") is not None else -1
        return p

    def add_reject(self, r: dict, proposed: str | None, proposed_answer: str | None) -> int | None:
        """Fill the position of a ``rejects/questions`` row; None when its id was already filled."""
        p = self.pos[r["record_id"]]
        if self.ids[p]:
            return None
        self.ids[p] = r["record_id"]
        self.rejected[p] = r["reason"] or "unknown"
        self.answer[p] = proposed_answer or ""
        self.text[p] = clip(proposed if proposed is not None else f"({r['reason']}) {r['raw'] or ''}", INDEX_TEXT)[0] or ""
        return p

    def add_verdict(self, v: dict) -> int | None:
        """Count a filter verdict on its question; None when the question is not in the index."""
        p = self.pos.get(v["question_id"])
        if p is None:
            return None
        self.n_verdicts[p] += 1
        self.n_correct[p] += bool(v["correct"])
        self.n_kept[p] += bool(v["kept"])
        if v["reason"]:
            self.reasons_of.setdefault(p, Counter())[v["reason"]] += 1
        return p

    def add_source(self, p: int, kind: str, path: list | None, titles: list | None) -> None:
        """A dropped question's path, from the walk it was written on (its row has none)."""
        if self.rejected[p] is not None and kind == "walk" and not self.titles[p]:
            self.titles[p] = " → ".join(titles or [])
            self.hops[p] = max(len(path or []) - 1, 0)

    def settle(self, in_pool: set[int]) -> None:
        """Each question's outcome (:func:`question_outcome`), and the reasons it can be found by."""
        n = self.n
        self.status, self.reason_ix, self.label_ix, self.trace_ix = [0] * n, [-1] * n, [0] * n, [[] for _ in range(n)]
        self.reasons, self.labels = [], []
        rix: dict[str, int] = {}
        lix: dict[str, int] = {}

        def intern(table: list[str], ix: dict[str, int], s: str) -> int:
            if s not in ix:
                ix[s] = len(table)
                table.append(s)
            return ix[s]

        for p in range(n):
            st, why, label = question_outcome(self.split[p], self.n_traces[p], self.n_verdicts[p], self.n_kept[p],
                                              self.n_correct[p], p in in_pool, self.reasons_of.get(p, Counter()),
                                              self.rejected[p])
            self.status[p] = st
            self.label_ix[p] = intern(self.labels, lix, label)
            if why is not None:
                self.reason_ix[p] = intern(self.reasons, rix, why)
            if p in self.reasons_of:
                self.trace_ix[p] = sorted({intern(self.reasons, rix, f"filter: {r}") for r in self.reasons_of[p]})
        self.reason_counts = [0] * len(self.reasons)
        for p in range(n):
            hit = set(self.trace_ix[p])
            if self.reason_ix[p] >= 0:
                hit.add(self.reason_ix[p])
            for k in hit:
                self.reason_counts[k] += 1

    def head(self, p: int) -> tuple:
        """What a question's detail repeats of its index row: id, status, reason, label, c, n."""
        return (self.ids[p], self.status[p], self.reasons[self.reason_ix[p]] if self.reason_ix[p] >= 0 else None,
                self.labels[self.label_ix[p]], self.n_correct[p], max(self.n_traces[p], self.n_verdicts[p]))

    def to_json(self, shard_starts: list[int]) -> dict:
        """The index the page loads (``index-data.js``, before the run's ``meta`` is added)."""
        split_names = list(SPLITS) + sorted({x for x in self.split if x and x not in SPLITS})
        if any(not x for x in self.split):
            split_names.append("")
        six = {x: i for i, x in enumerate(split_names)}
        return {
            "version": 1, "n": self.n, "shard_starts": shard_starts, "splits": split_names,
            "reasons": self.reasons, "reason_counts": self.reason_counts, "labels": self.labels,
            "cols": {"id": self.ids, "text": self.text, "titles": self.titles, "answer": self.answer,
                     "split": [six[x] for x in self.split], "hops": self.hops, "depth": self.depth,
                     "status": self.status, "reason": self.reason_ix, "trace_reasons": self.trace_ix,
                     "label": self.label_ix, "c": self.n_correct,
                     "n": [max(a, b) for a, b in zip(self.n_traces, self.n_verdicts)]},
        }

    def counts(self, n_trace_rows: int, n_shards: int) -> dict:
        return {"questions": self.n, "kept_questions": sum(1 for x in self.status if x == KEPT),
                "dropped_questions": sum(1 for x in self.status if x == DROPPED), "questions_table": self.n_table,
                "traces": n_trace_rows, "shards": n_shards}


def _write_data(store: Store, work: Path, chain: list[str], shard_size: int, shard_bytes: int, min_f1: float,
                max_text: int, ctx: Any = None) -> tuple[dict, dict]:
    """Stream the tables into spill files, then write the shards; returns (counts, index columns)."""
    questions = _dataset(store, "questions")
    qrejects = _dataset(store, "rejects/questions")
    verdicts = _dataset(store, "filter/verdicts")
    qi = QuestionIndex.of(questions, qrejects)
    spill = _Spill(work / "spill", shard_size)
    # Without verdicts (the filter stage has not run) traces are graded here, against these answers.
    golds: dict[int, list[str]] | None = {} if verdicts is None else None
    need: dict[str, list[int]] = defaultdict(list)  # walk or subgraph id -> positions that show it
    _read_questions(questions, qrejects, qi, spill, need, golds, max_text)
    _read_verdicts(store, verdicts, qi, spill)
    n_trace_rows = _read_traces(store, qi, spill, golds, min_f1, max_text, ctx)
    _read_sources(store, qi, spill, need)
    rl = _dataset(store, "rl_pool")
    in_pool: set[int] = set()
    if rl is not None:
        col = rl.to_table(columns={"qid": ds.field("extra_info", "question_id")})["qid"].to_pylist()
        in_pool = {qi.pos[q] for q in col if q in qi.pos}
    qi.settle(in_pool)
    starts = _write_shards(work / "explorer", spill, qi, chain, shard_size, shard_bytes, ctx)
    return qi.counts(n_trace_rows, len(starts)), qi.to_json(starts)


def _read_questions(questions: ds.Dataset | None, qrejects: ds.Dataset | None, qi: QuestionIndex, spill: _Spill,
                    need: dict[str, list[int]], golds: dict[int, list[str]] | None, max_text: int) -> None:
    """The kept questions' and the dropped ones' index columns and detail."""
    for rows in _batches(questions, ["question_id", "kind", "source_id", "path", "titles", "question", "answer",
                                     "answer_aliases", "answer_page_id", "hops", "teacher_model", "split",
                                     "effective_depth", "entry", "entered_by"], 1024):
        for r in rows:
            p = qi.add_question(r)
            if p is None:
                continue  # a repeated id: the first row stands
            need[r["source_id"]].append(p)
            if golds is not None:
                golds[p] = [r["answer"], *(r["answer_aliases"] or [])]
            spill.add("q", p, r)
    for rows in _batches(qrejects, ["record_id", "source_id", "reason", "detail", "raw"], 1024):
        for r in rows:
            proposed, proposed_answer = _proposed(r["raw"])
            p = qi.add_reject(r, proposed, proposed_answer)
            if p is None:
                continue
            if r["source_id"]:
                need[r["source_id"]].append(p)
            spill.add("x", p, {"reason": r["reason"], "detail": r["detail"], "raw": clip(r["raw"], max_text)[0],
                               "source_id": r["source_id"], "question": proposed})


def _read_verdicts(store: Store, verdicts: ds.Dataset | None, qi: QuestionIndex, spill: _Spill) -> None:
    """Each trace's filter verdict, and the detail the filter stage gave a dropped trace."""
    for rows in _batches(verdicts, ["trace_id", "question_id", "teacher_model", "rule_correct", "em", "f1", "match",
                                    "judge_correct", "correct", "rubric_raw", "rubric", "n_tokens",
                                    "ungrounded_steps", "kept", "reason"]):
        for v in rows:
            p = qi.add_verdict(v)
            if p is not None:
                spill.add("v", p, v)
    for rows in _batches(_dataset(store, "rejects/filter"), ["trace_id", "question_id", "detail"]):
        for r in rows:
            p = qi.pos.get(r["question_id"])
            if p is not None and r["detail"]:
                spill.add("d", p, [r["trace_id"], r["detail"]])


def _read_traces(store: Store, qi: QuestionIndex, spill: _Spill, golds: dict[int, list[str]] | None, min_f1: float,
                 max_text: int, ctx: Any) -> int:
    """Each trace's view (made in ``ctx``'s workers), counted on its question; returns the traces read."""
    traces = _dataset(store, "traces")
    trace_cols = [c for c in (traces.schema.names if traces is not None else []) if c != "tools"]
    n_rows = 0
    n_batches = None if traces is None else -(-traces.count_rows() // BATCH_ROWS)
    batches = _record_batches(traces, trace_cols, BATCH_ROWS, keep=("question_id", pa.array(list(qi.pos), pa.string())))
    for views in _spread(ctx, _views_setup, (max_text,), _views_step, batches, n_batches, _views_name):
        for qid, final_answer, view in views:
            p = qi.pos[qid]
            n_rows += 1
            qi.n_traces[p] += 1
            if golds is not None:
                qi.n_correct[p] += is_correct(final_answer, golds.get(p, []), min_f1)
            spill.add("t", p, view)
    return n_rows


def _read_sources(store: Store, qi: QuestionIndex, spill: _Spill, need: dict[str, list[int]]) -> None:
    """The walk or subgraph each question was written on (``need``: source id -> positions; emptied)."""
    for rel, id_col, kind, path_col, links_col in (("walks", "walk_id", "walk", "path", "hops"),
                                                   ("subgraphs", "subgraph_id", "subgraph", "nodes", "edges")):
        data = _dataset(store, rel)
        if data is None or not need:
            continue
        wanted = (id_col, pa.array(list(need), pa.string()))
        for rows in _batches(data, [id_col, path_col, "titles", links_col], 1024, keep=wanted):
            for r in rows:
                ps = need.get(r[id_col])
                if not ps:
                    continue
                src = {"kind": kind, "id": r[id_col], "path": r[path_col], "titles": r["titles"],
                       "links": r[links_col]}
                for p in ps:
                    qi.add_source(p, kind, r[path_col], r["titles"])
                    spill.add("w", p, src)
                need.pop(r[id_col], None)
    need.clear()


def _write_shards(out_dir: Path, spill: _Spill, qi: QuestionIndex, chain: list[str], shard_size: int,
                  shard_bytes: int, ctx: Any) -> list[int]:
    """The detail shards: each bucket of ``shard_size`` positions, cut where a shard would pass ``shard_bytes``
    (the JSON made in ``ctx``'s workers); returns each shard's first position."""
    out_dir.mkdir()
    spill.flush()
    n = qi.n
    starts: list[int] = []
    n_buckets = (n + shard_size - 1) // shard_size

    def bucket(b: int) -> tuple:
        lo, hi = b * shard_size, min(n, (b + 1) * shard_size)
        return str(spill.path(b)), lo, hi, [qi.head(p) for p in range(lo, hi)]

    buckets = (bucket(b) for b in range(n_buckets))
    for b, made in enumerate(_spread(ctx, _bucket_setup, (chain,), _bucket_step, buckets, n_buckets, _bucket_name)):
        lo, hi = b * shard_size, min(n, (b + 1) * shard_size)
        parts: list[str] = []
        size = 0
        first = lo
        for p in range(lo, hi):
            part = made[p - lo]
            if parts and size + len(part) > shard_bytes:
                _write_shard(out_dir, len(starts), first, qi.ids[first:p], parts)
                starts.append(first)
                parts, size, first = [], 0, p
            parts.append(part)
            size += len(part)
        if parts:
            _write_shard(out_dir, len(starts), first, qi.ids[first:hi], parts)
            starts.append(first)
    return starts


def _write_shard(folder: Path, k: int, start: int, ids: list[str], parts: list[str]) -> None:
    """``shard-<k>.js``: ``hopforgeShard(k, {start, ids, questions})``, the questions already as safe JSON."""
    body = f'hopforgeShard({k},{{"start":{start},"ids":{js_json(ids)},"questions":[' + ",".join(parts) + "]});\n"
    (folder / f"shard-{k:05d}.js").write_bytes(body.encode("utf-8", "replace"))


def _assemble(lines: Iterator[list], lo: int, hi: int, chain: list[str]) -> list[dict]:
    """The detail of questions ``lo..hi-1`` from their spilled lines."""
    parts: list[dict[str, Any]] = [{"q": None, "x": None, "src": None, "t": [], "v": {}, "d": {}} for _ in range(lo, hi)]
    for kind, p, payload in lines:
        slot = parts[p - lo]
        if kind == "q":
            slot["q"] = payload
        elif kind == "x":
            slot["x"] = payload
        elif kind == "w":
            slot["src"] = slot["src"] or payload
        elif kind == "t":
            slot["t"].append(payload)
        elif kind == "v":
            slot["v"][payload["trace_id"]] = payload
        elif kind == "d":
            slot["d"][payload[0]] = payload[1]
    out = []
    for slot in parts:
        q, src = slot["q"], slot["src"]
        d: dict[str, Any] = {"question": None, "rejected": slot["x"], "hops": [], "source": None, "traces": []}
        if q is not None:
            links = (src or {}).get("links") or []
            d["question"] = {k: q[k] for k in ("kind", "source_id", "question", "answer", "answer_aliases", "answer_page_id",
                                               "path", "titles", "teacher_model", "split", "effective_depth", "entry",
                                               "entered_by")
                             if k in q}
            d["hops"] = hop_evidence(links, q["path"] or [], q["titles"] or [], q.get("hops"))
        elif src is not None:  # a dropped question: the walk (or subgraph) it was written from
            path = src["path"] or []
            d["source"] = {"kind": src["kind"], "id": src["id"], "titles": src["titles"], "path": path}
            if src["kind"] == "walk":
                d["hops"] = hop_evidence(src["links"] or [], path, src["titles"] or [])
        seen = set()
        for t in sorted(slot["t"], key=lambda t: (t["sample"], t["id"])):
            seen.add(t["id"])
            v = slot["v"].get(t["id"])
            t["verdict"] = _verdict_view(v)
            t["filters"] = filter_steps(chain, v, slot["d"].get(t["id"]))
            d["traces"].append(t)
        for tid, v in sorted(slot["v"].items()):  # verdicts whose trace is gone (a rollout rerun)
            if tid not in seen:
                d["traces"].append({"id": tid, "sample": -1, "messages": [], "missing": True, "verdict": _verdict_view(v),
                                    "filters": filter_steps(chain, v, slot["d"].get(tid))})
        out.append(d)
    return out


def _verdict_view(v: dict | None) -> dict | None:
    if v is None:
        return None
    return {k: v.get(k) for k in ("correct", "rule_correct", "em", "f1", "judge_correct", "rubric", "rubric_raw",
                                  "n_tokens", "ungrounded_steps", "kept", "reason")}


# ---- the page --------------------------------------------------------------------------------

def _asset(name: str) -> str:
    return resources.files("synth.report").joinpath("explorer_page", name).read_text(encoding="utf-8")


def render_page(run_name: str) -> bytes:
    """``index.html``: the template with the stylesheet and the script inlined (they hold no data)."""
    page = _asset("index.html")
    for key, value in (("{{title}}", html.escape(f"hopforge explorer: {run_name}")),
                       ("/*{{style}}*/", _asset("explorer.css")), ("/*{{script}}*/", _asset("explorer.js"))):
        page = page.replace(key, value, 1)
    return page.encode("utf-8")


__all__ = ["MAX_TEXT", "REASON_FILTER", "SHARD_SIZE", "clip", "filter_steps", "gold_marks", "hop_evidence", "js_call",
           "js_json", "question_outcome", "render_page", "trace_view", "write_explorer"]
