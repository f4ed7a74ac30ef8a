"""Normalising KILT records of both layouts into one Arrow schema, :data:`RAW_SCHEMA`.

A KILT knowledge source comes in two layouts:

* the original JSON Lines: ``_id``, ``text`` a list of strings, ``anchors`` a list
  of objects, ``wikidata_info.aliases`` a list of strings;
* the Hugging Face ``facebook/kilt_wikipedia`` layout (``datasets`` features):
  ``kilt_id``, ``text = {"paragraph": [...]}``, ``anchors`` a dict of parallel lists,
  ``wikidata_info.aliases = {"alias": [...]}``, and ``""`` where a value is missing.

Both become "raw pages with raw anchors": one row per page, ``text`` kept whole
(``text[0]`` is the title, so anchor ``paragraph_id`` indexes it directly) and the
1-based ``line`` (record number) kept for error messages.  Each layout has a
vectorised Arrow normaliser (the fast path) and a per-record Python one, used for
records the fast path cannot type; both apply the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ANCHOR_FIELDS = ("paragraph_id", "start", "end", "text", "href", "wikipedia_id")
ANCHOR_TYPE = pa.struct([("paragraph_id", pa.int64()), ("start", pa.int64()), ("end", pa.int64()),
                         ("text", pa.string()), ("href", pa.string()), ("wikipedia_id", pa.string())])

RAW_SCHEMA = pa.schema([
    ("line", pa.int64()),  # 1-based line (JSONL) or record number (Parquet, streams)
    ("page_id", pa.string()),
    ("title", pa.string()),
    ("text", pa.list_(pa.string())),  # KILT `text`, title first
    ("anchors", pa.list_(ANCHOR_TYPE)),
    ("categories", pa.string()),
    ("url", pa.string()),
    ("description", pa.string()),
    ("aliases", pa.list_(pa.string())),
    ("wikidata_id", pa.string()),
])

# What pyarrow.json parses for each layout; unknown fields are ignored.
KILT_JSON_SCHEMA = pa.schema([
    ("_id", pa.string()), ("wikipedia_title", pa.string()), ("text", pa.list_(pa.string())),
    ("anchors", pa.list_(ANCHOR_TYPE)), ("categories", pa.string()),
    ("history", pa.struct([("url", pa.string())])),
    ("wikidata_info", pa.struct([("description", pa.string()), ("wikidata_id", pa.string()),
                                 ("aliases", pa.list_(pa.string()))])),
])
HF_JSON_SCHEMA = pa.schema([
    ("kilt_id", pa.string()), ("wikipedia_title", pa.string()),
    ("text", pa.struct([("paragraph", pa.list_(pa.string()))])),
    ("anchors", pa.struct([(f, pa.list_(ANCHOR_TYPE.field(f).type)) for f in ANCHOR_FIELDS])),
    ("categories", pa.string()),
    ("history", pa.struct([("url", pa.string())])),
    ("wikidata_info", pa.struct([("description", pa.string()), ("wikidata_id", pa.string()),
                                 ("aliases", pa.struct([("alias", pa.list_(pa.string()))]))])),
])

# Field names per layout, for messages that name the field as the user's file spells it.
FIELD_NAMES = {"kilt": {"id": "_id", "text": "text"}, "hf": {"id": "kilt_id", "text": "text.paragraph"}}


class BadRecord(ValueError):
    """A record that cannot become a page: ``reason`` is the drop reason, the message says why."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


# ---- per-record (Python) normalisers -------------------------------------------------------

def _str_or_none(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _anchor(a: Any) -> dict:
    if not isinstance(a, dict):
        return dict.fromkeys(ANCHOR_FIELDS)  # counted as bad_anchor later
    wid = a.get("wikipedia_id")
    return {"paragraph_id": _int_or_none(a.get("paragraph_id")), "start": _int_or_none(a.get("start")),
            "end": _int_or_none(a.get("end")), "text": _str_or_none(a.get("text")),
            "href": _str_or_none(a.get("href")),
            # an integer id is clearly meant as the id; anything else cannot be one
            "wikipedia_id": str(wid) if _int_or_none(wid) is not None else _str_or_none(wid)}


BLANK_TITLE = "`wikipedia_title` is empty or only whitespace"
NUL_TITLE = "`wikipedia_title` contains a NUL character"
NO_TEXT = "the page has no text: every paragraph after the title is empty or only whitespace"
# The bounds on what one string of a page may be, so no later stage's time depends on a pathological one (a BPE
# trainer's time grows with the square of a word's length): Wikipedia allows titles of 255 bytes of UTF-8, and
# its longest words are a few hundred letters; a run of 1,000 characters without a space is a blob, not prose.
MAX_TITLE_CHARS = 512
MAX_WORD_CHARS = 1_000


def long_title(n: int) -> str:
    return f"`wikipedia_title` is {n:,} characters long (at most {MAX_TITLE_CHARS:,}; Wikipedia allows 255 bytes)"


def long_word(field: str, paragraph: int, word: str) -> str:
    return (f"`{field}`[{paragraph}] holds a word of {len(word):,} characters with no space in it (at most "
            f"{MAX_WORD_CHARS:,}): {word[:24]!r}...")


def _longest_word(text: list[str]) -> tuple[int, str] | None:
    """The first paragraph after the title (its index in ``text``) holding a word over :data:`MAX_WORD_CHARS`, and
    the word; None when every word is within it."""
    for i, p in enumerate(text[1:], 1):
        if len(p) > MAX_WORD_CHARS:
            word = max(p.split(), key=len, default="")
            if len(word) > MAX_WORD_CHARS:
                return i, word
    return None


def _check_core(obj: Any, layout: str, page_id: Any, title: Any, text: Any) -> None:
    names = FIELD_NAMES[layout]
    if not isinstance(obj, dict):
        raise BadRecord("not_object", f"expected a JSON object, got {type(obj).__name__}")
    if page_id is None:
        raise BadRecord("bad_id", f"`{names['id']}` is missing or null")
    if not isinstance(page_id, str) or not page_id:
        raise BadRecord("bad_id", f"`{names['id']}` must be a non-empty string, got {page_id!r:.40}")
    if title is None:
        raise BadRecord("bad_title", "`wikipedia_title` is missing or null")
    if not isinstance(title, str):
        raise BadRecord("bad_title", f"`wikipedia_title` must be a string, got {title!r:.40}")
    if not title.strip():
        raise BadRecord("blank_title", BLANK_TITLE)
    if "\x00" in title:
        raise BadRecord("nul_title", NUL_TITLE)
    if len(title) > MAX_TITLE_CHARS:
        raise BadRecord("long_title", long_title(len(title)))
    if text is None:
        raise BadRecord("bad_text", f"`{names['text']}` is missing or null")
    if not isinstance(text, list) or not text or not all(isinstance(t, str) for t in text):
        raise BadRecord("bad_text", f"`{names['text']}` must be a non-empty list of strings (title first)")
    if not any(t.strip() for t in text[1:]):
        raise BadRecord("no_text", NO_TEXT)
    if (long := _longest_word(text)) is not None:
        raise BadRecord("long_word", long_word(names["text"], *long))


def _aliases(v: Any) -> list[str] | None:
    if isinstance(v, dict):  # the HF layout wraps them: {"alias": [...]}
        v = v.get("alias")
    if not isinstance(v, list):
        return None
    out = [a for a in v if isinstance(a, str)]
    return out or None


def kilt_record(obj: Any) -> dict:
    """One KILT JSON Lines record as a raw row (no ``line``); raises :class:`BadRecord`."""
    get = obj.get if isinstance(obj, dict) else (lambda k: None)
    _check_core(obj, "kilt", get("_id"), get("wikipedia_title"), get("text"))
    anchors = obj.get("anchors")
    hist = obj.get("history") if isinstance(obj.get("history"), dict) else {}
    wd = obj.get("wikidata_info") if isinstance(obj.get("wikidata_info"), dict) else {}
    return {"page_id": obj["_id"], "title": obj["wikipedia_title"], "text": obj["text"],
            "anchors": [_anchor(a) for a in anchors] if isinstance(anchors, list) else [],
            "categories": _str_or_none(obj.get("categories")), "url": _str_or_none(hist.get("url")),
            "description": _str_or_none(wd.get("description")), "aliases": _aliases(wd.get("aliases")),
            "wikidata_id": _str_or_none(wd.get("wikidata_id"))}


def hf_record(obj: Any) -> dict:
    """One record in the Hugging Face layout as a raw row (no ``line``); raises :class:`BadRecord`."""
    get = obj.get if isinstance(obj, dict) else (lambda k: None)
    text = get("text")
    if isinstance(text, dict):
        text = text.get("paragraph")
    _check_core(obj, "hf", get("kilt_id"), get("wikipedia_title"), text)
    cols = obj.get("anchors") if isinstance(obj.get("anchors"), dict) else {}
    lists = [cols.get(f) if isinstance(cols.get(f), list) else [] for f in ANCHOR_FIELDS]
    anchors = [_anchor(dict(zip(ANCHOR_FIELDS, vals))) for vals in zip_longest(*lists)]
    hist = obj.get("history") if isinstance(obj.get("history"), dict) else {}
    wd = obj.get("wikidata_info") if isinstance(obj.get("wikidata_info"), dict) else {}
    blank = lambda v: _str_or_none(v) or None  # noqa: E731 - HF writes "" for a missing value
    return {"page_id": obj["kilt_id"], "title": obj["wikipedia_title"], "text": text, "anchors": anchors,
            "categories": _str_or_none(obj.get("categories")), "url": blank(hist.get("url")),
            "description": blank(wd.get("description")), "aliases": _aliases(wd.get("aliases")),
            "wikidata_id": blank(wd.get("wikidata_id"))}


RECORD_NORMALISERS = {"kilt": kilt_record, "hf": hf_record}


# ---- vectorised (Arrow) normalisers --------------------------------------------------------

def _field(table: pa.Table, path: str, typ: pa.DataType) -> pa.Array:
    """Column ``a.b.c`` of ``table`` (nulls where a level is missing or null), cast to ``typ``."""
    head, *rest = path.split(".")
    if head not in table.column_names:
        return pa.nulls(table.num_rows, typ)
    arr = table.column(head).combine_chunks()
    for name in rest:
        if not pa.types.is_struct(arr.type) or arr.type.get_field_index(name) < 0:
            return pa.nulls(table.num_rows, typ)
        arr = pc.struct_field(arr, name)  # keeps the parent's nulls
    return arr.cast(typ)


def _blank_to_null(arr: pa.Array) -> pa.Array:
    return pc.if_else(pc.equal(arr, ""), pa.scalar(None, arr.type), arr)


def _empty_to_null(arr: pa.Array) -> pa.Array:
    return pc.if_else(pc.equal(pc.list_value_length(arr), 0), pa.scalar(None, arr.type), arr)


def _hf_anchors(table: pa.Table) -> pa.Array | None:
    """Zip HF's parallel anchor lists into a list of structs; None if some row's lists differ in length."""
    lists = [_field(table, f"anchors.{f}", pa.list_(ANCHOR_TYPE.field(f).type)) for f in ANCHOR_FIELDS]
    lengths = [pc.fill_null(pc.list_value_length(a), 0).to_numpy(zero_copy_only=False) for a in lists]
    if any(not np.array_equal(lengths[0], n) for n in lengths[1:]):
        return None
    values = [pc.list_flatten(a) for a in lists]
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths[0], dtype=np.int64)]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, pa.StructArray.from_arrays(values, fields=list(ANCHOR_TYPE)))


def arrow_to_raw(table: pa.Table, layout: str, lines: np.ndarray) -> pa.Table | None:
    """Normalise a parsed table of ``layout`` ("kilt" or "hf") into :data:`RAW_SCHEMA` rows.

    ``lines`` holds each row's line / record number.  Returns None when the batch
    needs the per-record path (HF anchor lists of unequal length, or a column whose
    type cannot be cast), so the caller can fall back.
    """
    try:
        if layout == "kilt":
            cols = {"page_id": _field(table, "_id", pa.string()), "text": _field(table, "text", pa.list_(pa.string())),
                    "anchors": _field(table, "anchors", pa.list_(ANCHOR_TYPE)),
                    "aliases": _field(table, "wikidata_info.aliases", pa.list_(pa.string()))}
        else:
            anchors = _hf_anchors(table)
            if anchors is None:
                return None
            cols = {"page_id": _field(table, "kilt_id", pa.string()),
                    "text": _field(table, "text.paragraph", pa.list_(pa.string())), "anchors": anchors,
                    "aliases": _field(table, "wikidata_info.aliases.alias", pa.list_(pa.string()))}
        url = _field(table, "history.url", pa.string())
        desc = _field(table, "wikidata_info.description", pa.string())
        wid = _field(table, "wikidata_info.wikidata_id", pa.string())
        if layout == "hf":
            url, desc, wid = _blank_to_null(url), _blank_to_null(desc), _blank_to_null(wid)
        arrays = {"line": pa.array(lines, pa.int64()), **cols, "title": _field(table, "wikipedia_title", pa.string()),
                  "categories": _field(table, "categories", pa.string()), "url": url, "description": desc,
                  "wikidata_id": wid}
        arrays["aliases"] = _empty_to_null(arrays["aliases"])
        return pa.Table.from_arrays([arrays[n] for n in RAW_SCHEMA.names], schema=RAW_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def _mask(arr) -> np.ndarray:
    """A boolean Arrow (chunked) array as numpy, nulls as False."""
    return pc.fill_null(arr, False).to_numpy(zero_copy_only=False).astype(bool, copy=False)


def _long_word_rows(paragraphs: pa.ListArray) -> dict[int, tuple[int, str]]:
    """The rows of ``paragraphs`` (``text`` after the title) one of which holds a word over
    :data:`MAX_WORD_CHARS`: row -> (paragraph index in ``text``, word).

    Such a word is more than ``2 * B - 1`` bytes without an ASCII space (B at most half the bound), so it holds a
    whole B-byte block of the paragraphs' bytes, counted from the first, that has no space: one comparison pass finds
    those blocks (prose has a space every few bytes), and only the paragraphs they start in are split in Python,
    which says whether a word there is over the bound (Python's whitespace, characters rather than bytes)."""
    flat = pc.list_flatten(paragraphs)
    if len(flat) == 0:
        return {}
    # into the data buffer (a string array's offsets are int32), past the array's own offset when it is a slice
    offsets = np.frombuffer(flat.buffers()[1], dtype=np.int32)[flat.offset:flat.offset + len(flat) + 1]
    if not (np.diff(offsets) > MAX_WORD_CHARS).any():  # no paragraph long enough to hold one
        return {}
    block = (MAX_WORD_CHARS + 1) // 2 // 8 * 8  # whole 64-bit words of the comparison's bytes
    data = np.frombuffer(flat.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    whole = len(data) // block * block
    spaceless = np.flatnonzero(~(data[:whole] == 32).view(np.uint64).reshape(-1, block // 8).any(axis=1))
    if not len(spaceless):
        return {}
    candidates = np.unique(np.searchsorted(offsets - offsets[0], spaceless * block, side="right") - 1)
    parents = pc.list_parent_indices(paragraphs).to_numpy()
    firsts = np.searchsorted(parents, parents)  # each paragraph's row's first paragraph
    out: dict[int, tuple[int, str]] = {}
    for j in candidates:
        row = int(parents[j])
        if row in out:
            continue
        word = max((flat[int(j)].as_py() or "").split(), key=len, default="")
        if len(word) > MAX_WORD_CHARS:
            out[row] = (int(j - firsts[j]) + 1, word)
    return out


def validate_raw(raw: pa.Table, layout: str) -> tuple[pa.Table, list[tuple[int, str, str]]]:
    """Split ``raw`` into valid rows and ``(row, reason, detail)`` for rows that cannot be pages.

    A page needs a non-empty string id, a title that is not blank (empty or whitespace,
    ``blank_title``), holds no NUL (``nul_title``) and is at most :data:`MAX_TITLE_CHARS` long
    (``long_title``), a non-empty ``text`` with no null paragraph, some text after the title
    (``no_text``), and no word over :data:`MAX_WORD_CHARS` there (``long_word``); the first
    failing check names the drop reason, in the order the per-record normalisers check them.
    """
    names = FIELD_NAMES[layout]
    checks = []
    pid = raw.column("page_id")
    checks.append((_mask(pc.is_null(pid)), "bad_id", f"`{names['id']}` is missing or null"))
    checks.append((_mask(pc.equal(pid, "")), "bad_id", f"`{names['id']}` must be a non-empty string, got ''"))
    title = raw.column("title")
    checks.append((_mask(pc.is_null(title)), "bad_title", "`wikipedia_title` is missing or null"))
    checks.append((_mask(pc.equal(pc.utf8_trim_whitespace(title), "")), "blank_title", BLANK_TITLE))
    checks.append((_mask(pc.match_substring(title, "\x00")), "nul_title", NUL_TITLE))
    title_chars = pc.fill_null(pc.utf8_length(title), 0).to_numpy(zero_copy_only=False)
    checks.append((title_chars > MAX_TITLE_CHARS, "long_title", lambda i: long_title(int(title_chars[i]))))
    text = raw.column("text").combine_chunks()
    checks.append((_mask(pc.is_null(text)), "bad_text", f"`{names['text']}` is missing or null"))
    malformed = _mask(pc.equal(pc.list_value_length(text), 0)).copy()
    flat = pc.list_flatten(text)
    if flat.null_count:  # a null paragraph
        malformed[pc.list_parent_indices(text).to_numpy()[_mask(pc.is_null(flat))]] = True
    checks.append((malformed, "bad_text", f"`{names['text']}` must be a non-empty list of strings (title first)"))
    paragraphs = pc.list_slice(text, 1)
    filled = _mask(pc.greater(pc.utf8_length(pc.utf8_trim_whitespace(pc.list_flatten(paragraphs))), 0))
    with_text = np.bincount(pc.list_parent_indices(paragraphs).to_numpy()[filled], minlength=raw.num_rows)
    checks.append((with_text == 0, "no_text", NO_TEXT))
    long = _long_word_rows(paragraphs)
    long_mask = np.zeros(raw.num_rows, dtype=bool)
    long_mask[list(long)] = True
    checks.append((long_mask, "long_word", lambda i: long_word(names["text"], *long[i])))
    bad: list[tuple[int, str, str]] = []
    taken = np.zeros(raw.num_rows, dtype=bool)
    for mask, why, detail in checks:
        new = mask & ~taken
        bad.extend((int(i), why, detail(int(i)) if callable(detail) else detail) for i in np.flatnonzero(new))
        taken |= new
    if not bad:
        return raw, []
    bad.sort()
    return raw.filter(pa.array(~taken)), bad


@dataclass
class RawBatch:
    """One batch from a reader: valid rows, rejected records, and how much source was consumed.

    ``table`` holds the valid records in source order (:data:`RAW_SCHEMA`); ``rejects``
    the records that cannot be pages, as ``{"line", "reason", "detail", "raw"}`` dicts in
    line order.  ``prefix(i)`` gives the start of row ``i``'s raw record, for rejects
    found later (duplicate ids).  ``source_bytes`` counts bytes of the source file read
    (compressed when it is compressed) and ``data_bytes`` the decoded bytes.
    """

    table: pa.Table
    rejects: list[dict]
    prefix: Callable[[int], str]
    source_bytes: int
    data_bytes: int
    file: str | None = None
