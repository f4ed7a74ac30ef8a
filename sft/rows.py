"""The ``sft`` table as TRL reads it: loading, tools, and the held-out split by question.

Rows are conversational (``messages`` with ``tool_calls``) plus a ``tools`` column that is a
JSON string; TRL's ``SFTTrainer`` ``json.loads`` it and hands the list to the chat template.
Tool-call ``arguments`` stay JSON strings all the way into the template (hopforge's templates
write them as is), because any step that parsed them into dicts inside an Arrow table would
merge argument keys across rows and render ``"k": null`` into calls that never had a ``k``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

from synth.engine.errors import InputError

HELD_OUT_SALT = "hopforge-heldout"  # a seed: its value fixes which questions are held out


def sft_files(path: str | Path) -> list[str]:
    """The Parquet files of an ``sft`` table folder (symlinks resolved), in name order."""
    p = Path(path).resolve()
    if p.is_file():
        return [str(p)]
    files = sorted(str(f) for f in p.rglob("*.parquet") if not f.name.startswith("."))
    if not files:
        raise InputError(f"no sft table at {path} (no Parquet files; build it with the sft stage first)")
    return files


def load_sft_dataset(path: str | Path, cache_dir: str | None = None):
    """The ``sft`` table as a ``datasets.Dataset`` (``Dataset.from_parquet`` over its shards).

    Arrow caches (the table and the tokenized rows) go to ``<folder of the table>/.cache/datasets``
    by default, i.e. ``DIR/.cache`` beside the data, not the user's home.
    """
    from datasets import Dataset

    import pyarrow.parquet as pq

    if cache_dir is None:
        cache_dir = str(Path(path).absolute().parent / ".cache" / "datasets")
    files = sft_files(path)
    if sum(pq.read_metadata(f).num_rows for f in files) == 0:
        raise InputError(f"the sft table at {path} has no rows: the filter stage kept no trace "
                         "(its drop reasons are in reports/filter.json), so there is nothing to train on")
    ds = Dataset.from_parquet(files, cache_dir=cache_dir)
    missing = {"messages", "tools", "question_id", "trace_id"} - set(ds.column_names)
    if missing:
        raise InputError(f"sft table {path} lacks column(s) {sorted(missing)}")
    return ds


def parse_tools(tools: Any) -> list[dict] | None:
    """The ``tools`` column as the template wants it: a list of OpenAI function schemas (or None)."""
    if tools is None or tools == "":
        return None
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError as e:
            raise InputError(f"tools is not valid JSON: {e}") from None
    if not isinstance(tools, list):
        raise InputError(f"tools must be a JSON list of function schemas, got {type(tools).__name__}")
    return tools or None


def held_out_score(question_id: str) -> float:
    """A question's place in [0, 1): a hash of its id, so the split never depends on row order or seed."""
    h = hashlib.sha256(f"{HELD_OUT_SALT}:{question_id}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def held_out_questions(question_ids: Iterable[str], eval_fraction: float) -> list[str]:
    """The sorted question ids held out for evaluation: those whose hash falls below ``eval_fraction``.

    With at least two questions and ``eval_fraction > 0`` at least one is held out (the lowest
    hash) and at least one is kept, so a small demo still gets an eval loss.
    """
    ids = sorted(set(question_ids))
    if eval_fraction <= 0 or len(ids) < 2:
        return []
    held = [q for q in ids if held_out_score(q) < eval_fraction]
    if not held:
        held = [min(ids, key=held_out_score)]
    if len(held) == len(ids):
        held.remove(max(ids, key=held_out_score))
    return sorted(held)


__all__ = ["held_out_questions", "held_out_score", "load_sft_dataset", "parse_tools", "sft_files"]
