"""Loss-mask validation: prove, row by row, that training sees only the agent's own tokens.

Each row is tokenized exactly as TRL's ``SFTTrainer`` does it (``trl.data_utils._tokenize``:
``apply_chat_template(messages, tools=..., return_assistant_tokens_mask=True)``), and the
resulting ``input_ids`` / ``assistant_masks`` are what :mod:`sft.train` hands the trainer, so
the masks checked here are the masks trained on.

Where each message lies in the rendered text is found without trusting the template: the
conversation cut after message ``i`` is rendered too, and message ``i`` ends where that render
stops agreeing with the full one (their common prefix).  A token belongs to a message when its
character offsets overlap the message's span.  The checks:

* no token of a ``tool`` message is trained (``tool_tokens_trained == 0``), nor of a user or
  system message (``prompt_tokens_trained == 0``);
* every assistant turn's end-of-turn token (the first one at or after the turn starts) is
  trained (``eot_untrained_turns == 0``), or the model never learns to stop;
* every row has trained tokens.

A failure raises :class:`synth.engine.errors.InputError` naming the row (exit 2).
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Any

from synth.engine.errors import InputError

from sft.rows import parse_tools

MAX_FAILURES_LISTED = 20


def common_prefix_len(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings (binary search over C-level compares)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def render(tokenizer, messages: list[dict], tools, chat_template: str | None) -> str:
    """The template's text for ``messages`` (no generation prompt)."""
    return tokenizer.apply_chat_template(messages, tools=tools, chat_template=chat_template, tokenize=False)


def message_spans(tokenizer, messages: list[dict], tools, chat_template: str | None,
                  rendered: str | None = None) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and each message's ``(start, end)`` character span in it."""
    full = rendered if rendered is not None else render(tokenizer, messages, tools, chat_template)
    ends = []
    for i in range(len(messages) - 1):
        ends.append(common_prefix_len(render(tokenizer, messages[: i + 1], tools, chat_template), full))
    ends.append(len(full))
    for i in range(1, len(ends)):  # a template that reorders text must not give negative spans
        ends[i] = max(ends[i], ends[i - 1])
    starts = [0] + ends[:-1]
    return full, list(zip(starts, ends))


def analyse_row(example: dict, tokenizer, chat_template: str | None, eot: str, max_length: int | None) -> dict:
    """Tokenize one row as TRL does and measure its masks (a ``datasets.map`` function)."""
    from trl.data_utils import _tokenize

    messages, tools = example["messages"], parse_tools(example["tools"])
    enc = _tokenize(tokenizer, messages, chat_template=chat_template, tools=tools,
                    return_assistant_tokens_mask=True, tokenizer_kwargs={"return_offsets_mapping": True})
    ids, mask = list(enc["input_ids"]), list(enc["assistant_masks"])
    out = {"input_ids": ids, "assistant_masks": mask, "n_tokens": len(ids), "too_long": False, "n_trained": sum(mask),
           "n_tool_tokens": 0, "tool_trained": 0, "prompt_trained": 0, "assistant_turns": 0, "eot_untrained": 0,
           "problem": ""}
    if max_length is not None and len(ids) > max_length:
        out.update(input_ids=[], assistant_masks=[], too_long=True)  # dropped, never truncated
        return out
    offsets = [tuple(o) for o in enc["offset_mapping"]]
    full, spans = message_spans(tokenizer, [dict(m) for m in messages], tools, chat_template)
    roles = [m["role"] for m in messages]
    ends = [e for _, e in spans]
    problems = []
    leaked: dict[str, dict[int, int]] = {}  # role -> message index -> trained tokens that must not be
    for t, (s, e) in enumerate(offsets):
        if e <= s:
            continue
        first, last = bisect.bisect_right(ends, s), bisect.bisect_left(ends, e)
        for m in range(first, min(last, len(spans) - 1) + 1):
            a, b = spans[m]
            if not (e > a and s < b):
                continue
            if roles[m] == "tool":
                out["n_tool_tokens"] += 1
                if mask[t]:
                    out["tool_trained"] += 1
            elif roles[m] != "assistant" and mask[t]:
                out["prompt_trained"] += 1
            if roles[m] != "assistant" and mask[t]:
                leaked.setdefault(roles[m], {}).setdefault(m, 0)
                leaked[roles[m]][m] += 1
    for role in sorted(leaked, key=lambda r: r != "tool"):
        per = leaked[role]
        problems.append(f"{sum(per.values())} token(s) of {role} message(s) {sorted(per)} are trained")
    starts = [s for s, _ in offsets]
    for m, role in enumerate(roles):
        if role != "assistant":
            continue
        out["assistant_turns"] += 1
        pos = full.find(eot, spans[m][0])
        limit = spans[m + 1][1] if m + 1 < len(spans) else len(full)
        t = bisect.bisect_right(starts, pos) - 1 if 0 <= pos < limit else -1
        if t < 0 or not (offsets[t][0] <= pos < offsets[t][1]) or not mask[t]:
            out["eot_untrained"] += 1
            problems.append(f"end-of-turn token {eot!r} of assistant message {m} is not trained"
                            + (" (the turn has none)" if t < 0 else ""))
    if out["n_trained"] == 0:
        problems.insert(0, "no token is trained (does the chat template have {% generation %} markers?)")
    out["problem"] = "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
    return out


def validate(dataset, tokenizer, chat_template: str | None, eot: str, max_length: int | None,
             num_proc: int | None = None, template_name: str = "") -> tuple[Any, dict]:
    """Tokenize and check every row; returns ``(dataset with input_ids/assistant_masks/..., report)``.

    The report holds ``trained_tokens``, ``masked_tokens``, ``tool_tokens_trained``,
    ``eot_untrained_turns``, ``too_long`` and the offending rows (``failures``); call
    :func:`raise_on_failure` after writing it.
    """
    processed = dataset.map(analyse_row, fn_kwargs={"tokenizer": tokenizer, "chat_template": chat_template,
                                                    "eot": eot, "max_length": max_length},
                            num_proc=num_proc if num_proc and num_proc > 1 else None, desc="Checking loss masks")
    cols = processed.select_columns(["trace_id", "question_id", "n_tokens", "too_long", "n_trained", "n_tool_tokens",
                                     "tool_trained", "prompt_trained", "assistant_turns", "eot_untrained", "problem"])
    rows = cols.to_list()
    kept = [r for r in rows if not r["too_long"]]
    total = sum(r["n_tokens"] for r in kept)
    trained = sum(r["n_trained"] for r in kept)
    failures = [{"trace_id": r["trace_id"], "question_id": r["question_id"], "problem": r["problem"]}
                for r in kept if r["problem"]]
    report = {
        "template": template_name, "eot_token": eot, "max_length": max_length,
        "rows": len(rows), "rows_checked": len(kept), "too_long": len(rows) - len(kept),
        "total_tokens": total, "trained_tokens": trained, "masked_tokens": total - trained,
        "trained_fraction": round(trained / total, 6) if total else 0.0,
        "tool_tokens": sum(r["n_tool_tokens"] for r in kept),
        "tool_tokens_trained": sum(r["tool_trained"] for r in kept),
        "prompt_tokens_trained": sum(r["prompt_trained"] for r in kept),
        "assistant_turns": sum(r["assistant_turns"] for r in kept),
        "eot_untrained_turns": sum(r["eot_untrained"] for r in kept),
        "rows_without_trained_tokens": sum(1 for r in kept if r["n_trained"] == 0),
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
                     f"template {report['template'] or '?'}]")


def write_report(report: dict, path: str | Path) -> Path:
    """Write ``mask_report.json`` atomically."""
    from synth.engine.store import atomic_write_json

    p = Path(path)
    atomic_write_json(p, report)
    return p


def check_rows(rows: list[dict], tokenizer, chat_template: str | None, eot: str,
               max_length: int | None = None, template_name: str = "") -> dict:
    """Check in-memory rows (dicts in ``SFT_SCHEMA``) without a ``datasets`` table: for tests and tools."""
    import pyarrow as pa
    from datasets import Dataset
    from datasets.table import InMemoryTable

    from synth.engine.records import SFT_SCHEMA

    ds = Dataset(InMemoryTable(pa.Table.from_pylist(rows, schema=SFT_SCHEMA)))
    _, report = validate(ds, tokenizer, chat_template, eot, max_length, template_name=template_name)
    return report


__all__ = ["analyse_row", "check_rows", "common_prefix_len", "message_spans", "raise_on_failure", "render",
           "validate", "write_report"]
