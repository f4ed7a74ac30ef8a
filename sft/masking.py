"""Loss-mask validation: prove, row by row, that training sees only the agent's own tokens.

What is trained is the policy of :mod:`synth.tokenizer.losspolicy` (the trained role, the context, the end of a
turn, the reasoning); this module checks each row's mask against a :class:`~synth.tokenizer.losspolicy.LossPolicy`.
Each row is tokenized exactly as TRL's ``SFTTrainer`` does it (``trl.data_utils._tokenize``:
``apply_chat_template(messages, tools=...)``), and the resulting ``input_ids`` /
``assistant_masks`` are what :mod:`sft.train` hands the trainer, so the masks checked here are
the masks trained on.  A template with ``{% generation %}`` markers gets its masks from them
(``return_assistant_tokens_mask=True``); a template without markers gets them derived from
prefix renders (:meth:`synth.tokenizer.turns.Turns.assistant_mask`): what the model writes
after each generation prompt, through the turn's end-of-turn token.

Where each message lies in the rendered text is found without trusting the template
(:func:`synth.tokenizer.turns.conversation_turns`).  A token belongs to a message when its
character offsets overlap the message's span.  The checks:

* no token of a ``tool`` message is trained (``tool_tokens_trained == 0``), nor of a user or
  system message (``prompt_tokens_trained == 0``);
* every assistant turn's end-of-turn token is trained (``eot_untrained_turns == 0``), or the
  model never learns to stop;
* every tool schema of the row (name, description, parameters) appears in the prompt before
  the first assistant turn (``rows_missing_tools == 0``): a template that drops or empties the
  tools block trains an agent that has never seen its tools;
* a template without markers renders each generation prompt as a prefix of the conversation,
  or its masks cannot be derived;
* every row has trained tokens;
* the reasoning of every trained assistant turn is rendered and every one of its tokens trained
  (``reasoning_untrained_turns == 0``), however ``reasoning`` (``sft.reasoning``) renders it:
  in the template's thinking format (``keep``) or before the content (``inline``);
* a row of ``sft.context: as_seen`` (its ``turn`` set) trains its last assistant message only: the
  earlier ones are the context the teacher saw, and count as prompt.

A failure raises :class:`synth.engine.errors.InputError` naming the row (exit 2).
"""

from __future__ import annotations

import bisect
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from synth.engine.errors import InputError
from synth.tokenizer.losspolicy import TRAINED_ROLE, LossPolicy, trained_message
from synth.tokenizer.turns import conversation_turns

from sft.rows import parse_tools

MAX_FAILURES_LISTED = 20
# Rows each map process holds before writing them to its cache file.  A checked row of a demo-sized trace
# (~14k tokens: ids, masks, offsets as Python lists) holds about 0.85 MB until written, so datasets' default
# of 1,000 rows grows each process by ~0.85 GB; 64 keeps it near 55 MB.
WRITER_ROWS = 64


def release_mapped_pages(folder: str | Path | None) -> int:
    """Drop this process's resident pages of the read-only memory-mapped files under ``folder``; returns bytes.

    ``datasets`` reads its Arrow cache files through memory maps, and every page of a row read stays in the
    reader's RSS until the map is closed: the check's processes grew by the bytes of the rows they had read
    (about 0.85 GB a process at 100,000 traces), though the pages are the file's, which the kernel could
    drop.  ``madvise(MADV_DONTNEED)`` drops them now; a page read again is mapped again from the page cache.
    Only mappings without write permission are touched, so no data can be lost.  Linux only (0 elsewhere)."""
    if folder is None or not sys.platform.startswith("linux"):
        return 0
    import ctypes
    import mmap

    prefix = str(Path(folder).resolve()) + os.sep
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    dropped = 0
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) < 6 or "w" in parts[1] or not parts[5].rstrip("\n").startswith(prefix):
                continue
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if libc.madvise(lo, hi - lo, mmap.MADV_DONTNEED) == 0:
                dropped += hi - lo
    return dropped


def mapped_folder(dataset) -> str | None:
    """The folder of a ``datasets.Dataset``'s memory-mapped cache files (None for one held in memory)."""
    files = getattr(dataset, "cache_files", None) or []
    return str(Path(files[0]["filename"]).parent) if files else None


_rows_since_release = 0


def _release_every(folder: str | None, rows: int = WRITER_ROWS) -> None:
    """Call :func:`release_mapped_pages` once every ``rows`` rows this process checks."""
    global _rows_since_release
    _rows_since_release += 1
    if folder is not None and _rows_since_release >= rows:
        _rows_since_release = 0
        release_mapped_pages(folder)


def missing_tool_schemas(prompt: str, tools: list[dict] | None) -> list[str]:
    """The tool schemas of ``tools`` that ``prompt`` does not show, as ``name (what is missing)``.

    A schema shows when its name, its description and each parameter's name and description
    appear in the text, as written or JSON-escaped (templates list schemas with ``tojson``).
    """
    def shown(text: str) -> bool:
        return text in prompt or json.dumps(text, ensure_ascii=False)[1:-1] in prompt

    missing = []
    for tool in tools or []:
        fn = tool.get("function") or tool
        name = str(fn.get("name", "?"))
        params = (fn.get("parameters") or {}).get("properties") or {}
        gaps = [w for w, text in [("name", name), ("description", fn.get("description"))] if text and not shown(text)]
        gaps += [f"parameter {p}" for p, spec in params.items()
                 if not shown(p) or (isinstance(spec, dict) and spec.get("description")
                                     and not shown(str(spec["description"])))]
        if gaps:
            missing.append(f"{name} ({', '.join(gaps)})")
    return missing


_EMPTY = {"n_reasoning_tokens": 0, "reasoning_trained": 0, "reasoning_turns": 0, "reasoning_untrained": 0}


def analyse_row(example: dict, tokenizer, policy: LossPolicy, max_length: int | None,
                mapped: str | None = None) -> dict:
    """Tokenize one row as TRL does, derive or read its masks, and measure them against ``policy`` (a
    ``datasets.map`` function).

    ``mapped``: the folder of the dataset's memory-mapped files, whose read pages are released every
    :data:`WRITER_ROWS` rows (:func:`release_mapped_pages`)."""
    from jinja2 import TemplateError
    from trl.data_utils import _tokenize

    _release_every(mapped)
    chat_template, eot = policy.template, policy.eot

    known = example.get("known_n_tokens")  # the rendered length an earlier stage counted (sft.train.prepare)
    if max_length is not None and known is not None and known > max_length:
        # Dropped, never truncated, and not tokenized again: the cached count is exact under this tokenizer and
        # template (synth.tokenizer.counts keys it by both).
        return {"input_ids": [], "assistant_masks": [], "n_tokens": int(known), "too_long": True, "n_trained": 0,
                "n_tool_tokens": 0, "tool_trained": 0, "prompt_trained": 0, "assistant_turns": 0, "eot_untrained": 0,
                "missing_tools": 0, **_EMPTY, "problem": ""}
    original, tools = [dict(m) for m in example["messages"]], parse_tools(example["tools"])
    thoughts = policy.thoughts(original)
    messages = policy.render(original)
    markers = policy.markers
    try:
        enc = _tokenize(tokenizer, messages, chat_template=chat_template, tools=tools,
                        return_assistant_tokens_mask=markers, tokenizer_kwargs={"return_offsets_mapping": True})
    except (TemplateError, TypeError) as e:  # one row's message, not a traceback from inside datasets.map
        raise InputError(f"the chat template cannot render row trace_id={example.get('trace_id')}: {e}") from None
    ids, offsets = list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]
    out = {"input_ids": ids, "assistant_masks": [], "n_tokens": len(ids), "too_long": False, "n_trained": 0,
           "n_tool_tokens": 0, "tool_trained": 0, "prompt_trained": 0, "assistant_turns": 0, "eot_untrained": 0,
           "missing_tools": 0, **_EMPTY, "problem": ""}
    if max_length is not None and len(ids) > max_length:
        out.update(input_ids=[], too_long=True)  # dropped, never truncated
        return out
    turns = conversation_turns(tokenizer, messages, tools, chat_template, eot)
    mask = list(enc["assistant_masks"]) if markers else turns.assistant_mask(offsets)
    roles = policy.roles(messages, example.get("turn"))
    last = trained_message(messages, example.get("turn"))
    if last is not None:
        # sft.context as_seen: the row trains its last assistant message; the earlier ones are what the teacher saw.
        a, b = turns.spans[last]
        mask = [t if e > a and s < b else 0 for t, (s, e) in zip(mask, offsets)]
    out.update(assistant_masks=mask, n_trained=sum(mask))
    problems = _leaks(out, turns, roles, offsets, mask)
    problems += _eot_problems(out, turns, roles, offsets, mask, eot)
    problems += _reasoning_problems(out, turns, roles, thoughts, offsets, mask)
    missing = missing_tool_schemas(turns.text[:turns.prompt_end()], tools)
    if missing:
        out["missing_tools"] = len(missing)
        problems.insert(0, f"tool schema(s) missing from the rendered prompt: {'; '.join(missing)} "
                           "(does the template render `tools`?)")
    if turns.unattributable and not markers:
        problems.insert(0, f"the template renders the conversation before assistant message(s) "
                           f"{turns.unattributable} differently once the turn follows, so their masks cannot be "
                           "derived; use a template with {% generation %} markers")
    if out["n_trained"] == 0:
        problems.insert(0, "no token is trained" + (" (do the template's {% generation %} markers enclose the "
                                                     "assistant's text?)" if markers else ""))
    out["problem"] = "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
    return out


def _leaks(out: dict, turns, roles: list[str], offsets, mask) -> list[str]:
    """Count tool tokens and trained tokens of messages the model only reads; describe the leaks.

    A token belongs to every message its characters overlap (a token that straddles two messages counts
    for both).  Vectorized over tokens: the messages a token overlaps are a run of spans found by two
    binary searches, and most tokens lie inside one message."""
    import numpy as np

    n_msgs = len(turns.spans)
    if not offsets or not n_msgs:
        return []
    off = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    s, e = off[:, 0], off[:, 1]
    trained = np.asarray(mask, dtype=np.int64)
    spans = np.asarray(turns.spans, dtype=np.int64)
    ends = spans[:, 1]
    real = e > s
    first = np.searchsorted(ends, s, side="right")
    last = np.minimum(np.searchsorted(ends, e, side="left"), n_msgs - 1)
    kind = np.array([2 if r == "tool" else 0 if r == TRAINED_ROLE else 1 for r in roles], dtype=np.int8)
    hits = np.zeros(n_msgs, dtype=np.int64)  # trained tokens per message the model only reads
    one = real & (first == last)  # the common case: one message; the spans cover the text, so it overlaps
    m1 = first[one]
    k1, t1 = kind[m1], trained[one]
    out["n_tool_tokens"] += int(np.count_nonzero(k1 == 2))
    out["tool_trained"] += int(t1[k1 == 2].sum())
    out["prompt_trained"] += int(t1[k1 == 1].sum())
    np.add.at(hits, m1[(k1 != 0) & (t1 != 0)], 1)
    for t in np.flatnonzero(real & (first < last)).tolist():  # tokens across a boundary: rare
        for m in range(int(first[t]), int(last[t]) + 1):
            a, b = turns.spans[m]
            if not (e[t] > a and s[t] < b):
                continue
            if kind[m] == 2:
                out["n_tool_tokens"] += 1
                out["tool_trained"] += int(trained[t])
            elif kind[m] == 1:
                out["prompt_trained"] += int(trained[t])
            if kind[m] != 0 and trained[t]:
                hits[m] += 1
    leaked: dict[str, dict[int, int]] = {}  # role -> message index -> trained tokens that must not be
    for m in np.flatnonzero(hits).tolist():
        leaked.setdefault(roles[m], {})[m] = int(hits[m])
    return [f"{sum(per.values())} token(s) of {role} message(s) {sorted(per)} are trained"
            for role, per in sorted(leaked.items(), key=lambda kv: kv[0] != "tool")]


def _reasoning_problems(out: dict, turns, roles: list[str], thoughts: list[str], offsets, mask) -> list[str]:
    """Find each trained assistant turn's reasoning in its rendered span and count its tokens (every one of them
    must be trained); a reasoning the template does not render at all is a problem too."""
    problems = []
    for m, (role, thought) in enumerate(zip(roles, thoughts)):
        if role != TRAINED_ROLE or not thought:
            continue
        out["reasoning_turns"] += 1
        a, b = turns.spans[m]
        at = turns.text.find(thought, a, b)
        if at < 0:
            out["reasoning_untrained"] += 1
            problems.append(f"the reasoning of assistant message {m} is not in the rendered text (does the chat "
                            "template render reasoning_content? see sft.reasoning)")
            continue
        lo, hi = at, at + len(thought)
        inside = [i for i, (s, e) in enumerate(offsets) if e > lo and s < hi and e > s]
        trained = sum(1 for i in inside if mask[i])
        out["n_reasoning_tokens"] += len(inside)
        out["reasoning_trained"] += trained
        if trained < len(inside):
            out["reasoning_untrained"] += 1
            problems.append(f"{len(inside) - trained} of the {len(inside)} reasoning token(s) of assistant message {m} "
                            "are not trained")
    return problems


def _eot_problems(out: dict, turns, roles: list[str], offsets, mask, eot: str) -> list[str]:
    """Check that the end-of-turn token of every assistant turn is trained."""
    problems, starts = [], [s for s, _ in offsets]
    for m, role in enumerate(roles):
        if role != TRAINED_ROLE:
            continue
        out["assistant_turns"] += 1
        pos = turns.eot_at[m]
        t = bisect.bisect_right(starts, pos) - 1 if pos is not None else -1
        if t < 0 or not (offsets[t][0] <= pos < offsets[t][1]) or not mask[t]:
            out["eot_untrained"] += 1
            problems.append(f"end-of-turn token {eot!r} of assistant message {m} is not trained"
                            + (" (the turn has none)" if pos is None else ""))
    return problems


def validate(dataset, tokenizer, policy: LossPolicy, max_length: int | None,
             num_proc: int | None = None) -> tuple[Any, dict]:
    """Tokenize and check every row against ``policy``; returns ``(dataset with input_ids/assistant_masks/...,
    report)``.

    The report holds ``mask_source`` (``generation markers`` or ``prefix renders``), ``trained_tokens``,
    ``masked_tokens``, ``tool_tokens_trained``, ``eot_untrained_turns``, ``rows_missing_tools``, ``too_long``, the
    reasoning (``reasoning``: the mode, rows and turns that carry it, its tokens, how many are trained, and its
    share of the trained tokens) and the offending rows (``failures``); call :func:`raise_on_failure` after
    writing it.
    """
    from trl.data_utils import _tokenize  # noqa: F401 - imported here once: forked map processes inherit it

    from synth.tokenizer.turns import untracked_template

    if policy.template is None:
        policy = replace(policy, template=tokenizer.chat_template)
    untracked_template(policy.template)  # compiled here once, for the same reason
    processed = dataset.map(analyse_row, fn_kwargs={"tokenizer": tokenizer, "policy": policy, "max_length": max_length,
                                                    "mapped": mapped_folder(dataset)},
                            num_proc=num_proc if num_proc and num_proc > 1 else None, desc="Checking loss masks",
                            writer_batch_size=WRITER_ROWS)
    cols = processed.select_columns(["trace_id", "question_id", "n_tokens", "too_long", "n_trained", "n_tool_tokens",
                                     "tool_trained", "prompt_trained", "assistant_turns", "eot_untrained", "missing_tools",
                                     "n_reasoning_tokens", "reasoning_trained", "reasoning_turns", "reasoning_untrained",
                                     "problem"])
    rows = cols.to_list()
    kept = [r for r in rows if not r["too_long"]]
    total = sum(r["n_tokens"] for r in kept)
    trained = sum(r["n_trained"] for r in kept)
    failures = [{"trace_id": r["trace_id"], "question_id": r["question_id"], "problem": r["problem"]}
                for r in kept if r["problem"]]
    report = {
        "template": policy.template_name, "eot_token": policy.eot, "max_length": max_length,
        "mask_source": policy.mask_source,
        "rows": len(rows), "rows_checked": len(kept), "too_long": len(rows) - len(kept),
        "total_tokens": total, "trained_tokens": trained, "masked_tokens": total - trained,
        "trained_fraction": round(trained / total, 6) if total else 0.0,
        "tool_tokens": sum(r["n_tool_tokens"] for r in kept),
        "tool_tokens_trained": sum(r["tool_trained"] for r in kept),
        "prompt_tokens_trained": sum(r["prompt_trained"] for r in kept),
        "assistant_turns": sum(r["assistant_turns"] for r in kept),
        "eot_untrained_turns": sum(r["eot_untrained"] for r in kept),
        "rows_missing_tools": sum(1 for r in kept if r["missing_tools"]),
        "rows_without_trained_tokens": sum(1 for r in kept if r["n_trained"] == 0),
        "reasoning": {
            "mode": policy.reasoning, "rows": sum(1 for r in kept if r["reasoning_turns"]),
            "turns": sum(r["reasoning_turns"] for r in kept),
            "tokens": sum(r["n_reasoning_tokens"] for r in kept),
            "tokens_trained": sum(r["reasoning_trained"] for r in kept),
            "share_of_trained": round(sum(r["reasoning_trained"] for r in kept) / trained, 6) if trained else 0.0},
        "reasoning_untrained_turns": sum(r["reasoning_untrained"] for r in kept),
        "ok": not failures, "n_failures": len(failures), "failures": failures[:MAX_FAILURES_LISTED],
    }
    return processed, report


def raise_on_failure(report: dict) -> None:
    """Raise :class:`InputError` naming the first offending row if any check failed."""
    if report["ok"]:
        return
    f = report["failures"][0]
    raise InputError(f"loss-mask check failed for row trace_id={f['trace_id']} (question_id={f['question_id']}): "
                     f"{f['problem']} [{report['n_failures']} row(s) fail; tool_tokens_trained="
                     f"{report['tool_tokens_trained']}, eot_untrained_turns={report['eot_untrained_turns']}, "
                     f"reasoning_untrained_turns={report.get('reasoning_untrained_turns', 0)}, "
                     f"rows_missing_tools={report['rows_missing_tools']}, template {report['template'] or '?'}]")


def write_report(report: dict, path: str | Path) -> Path:
    """Write ``mask_report.json`` atomically."""
    from synth.engine.store import atomic_write_json

    p = Path(path)
    atomic_write_json(p, report)
    return p


def check_rows(rows: list[dict], tokenizer, chat_template: str | None, eot: str | None = None,
               max_length: int | None = None, template_name: str = "", reasoning: str = "keep") -> dict:
    """Check in-memory rows (dicts in ``SFT_SCHEMA``) without a ``datasets`` table: for tests and tools.

    The policy is built as given (``reasoning`` is not resolved against the template, so a check can be shown
    a mode that would drop it); ``eot`` None reads the end-of-turn token off the template, as training does.
    """
    import pyarrow as pa
    from datasets import Dataset
    from datasets.table import InMemoryTable

    from synth.engine.records import SFT_SCHEMA
    from synth.tokenizer.turns import end_of_turn

    template = chat_template or tokenizer.chat_template
    eot = eot or end_of_turn(tokenizer, template)
    if not eot:
        raise InputError("the chat template writes no special token after an assistant message; pass eot")
    ds = Dataset(InMemoryTable(pa.Table.from_pylist(rows, schema=SFT_SCHEMA)))
    policy = LossPolicy(template=template, eot=eot, reasoning=reasoning, template_name=template_name)
    _, report = validate(ds, tokenizer, policy, max_length)
    return report


__all__ = ["analyse_row", "check_rows", "mapped_folder", "missing_tool_schemas", "raise_on_failure",
           "release_mapped_pages", "validate", "write_report"]
