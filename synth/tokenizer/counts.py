"""Rendered token counts of conversations, computed once per tokenizer and reused by every stage.

A conversation's length is what the student trains on: its messages rendered through the chat
template with the tool schemas, then tokenized, ``len(tokenizer.apply_chat_template(messages,
tools=tools, tokenize=True))``.  :class:`TokenCounts` gives exactly that number, but

* renders each conversation once (``tokenize=False``) and tokenizes the texts of a whole batch
  with one ``encode_batch_fast`` call of the Rust tokenizer (its threads use every core),
  which is what ``apply_chat_template`` does one conversation at a time, with offsets and
  Python objects per token that a count does not need;
* tokenizes only the pieces between added tokens it has not counted before
  (:class:`TokenCounter`): the traces of a run share their system prompt, tool schemas,
  questions and most pages, and the tokenizer encodes each such piece on its own anyway;
* keeps every count in ``DIR/.cache/token_counts/<tokenizer key>/``, keyed by a digest of the
  messages and tools.  The tokenizer key hashes the tokenizer's own serialisation and its chat
  template, so another tokenizer or template never reads these counts.  A later stage or a
  rerun (a filter change, ``--force``) reads the count instead of rendering again.

The cache is a folder of Parquet files (``digest``: 16 bytes, ``n_tokens``: int32), each written
atomically by :meth:`TokenCounts.flush`; several processes may add files at once.  A damaged
file is skipped with a warning (its counts are computed again).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from pathlib import Path
from typing import Any, Sequence

log = logging.getLogger("hopforge.tokenizer")

CACHE_FOLDER = Path(".cache") / "token_counts"


class TokenCounter:
    """Exact token counts under the run's fast tokenizer: no special tokens, no truncation.

    Counts come from the Rust tokenizer behind a ``transformers`` fast tokenizer (its
    ``encode_batch_fast``, which skips offsets), so they equal
    ``len(tokenizer(text, add_special_tokens=False).input_ids)``.

    **Each distinct segment is tokenized once.**  The Rust tokenizer first cuts a text at its
    added tokens (``<|im_start|>``, ``<tool_response>``...) and then normalizes, pre-tokenizes and
    encodes every piece on its own, so a text's count is the sum of its pieces' counts plus one per
    added token.  Rendered conversations are mostly pieces other conversations also hold: the
    system prompt and tool schemas of every trace, the question and the pages every sample of a
    question was shown.  So a text is cut the way the tokenizer cuts it, and only the pieces not
    counted before are tokenized (in one batch call); the counts are remembered for the next
    batch (up to ``memo_chars`` characters, then forgotten and started again).

    The cut is used only where it is the tokenizer's own (:func:`segment_pattern`): added tokens
    that are matched before normalization and take no neighbouring whitespace, and no pre-tokenizer
    that treats the start of the whole text apart (``Metaspace`` with ``prepend_scheme: first``).
    Otherwise each whole text is one piece.  The first ``checks`` texts are also counted whole; a
    difference there switches the cut off for this counter (with a warning) and recounts.
    """

    def __init__(self, tokenizer: Any, memo_chars: int = 1 << 25, checks: int = 8):
        from tokenizers import Tokenizer

        backend = tokenizer if isinstance(tokenizer, Tokenizer) else getattr(tokenizer, "backend_tokenizer", None)
        if backend is None:
            from synth.engine.errors import InputError

            raise InputError("exact token counts (long-context assembly, the length filter) need a fast tokenizer "
                             f"(tokenizer.json), got {type(tokenizer).__name__}")
        # A private copy: truncation or padding set on the caller's tokenizer must not change counts.
        self.tokenizer = Tokenizer.from_str(backend.to_str())
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self._pattern = segment_pattern(self.tokenizer)
        self._memo: dict[str, int] = {}
        self._memo_chars = 0
        self.memo_chars = memo_chars
        self._checks = checks
        self.tokenized_chars = 0  # characters handed to the Rust tokenizer (what the memo saved is the rest)

    @property
    def segmented(self) -> bool:
        """Whether texts are cut at the tokenizer's added tokens (else each whole text is one piece)."""
        return self._pattern is not None

    def _encode_counts(self, texts: list[str]) -> list[int]:
        self.tokenized_chars += sum(map(len, texts))
        return [len(e) for e in self.tokenizer.encode_batch_fast(texts, add_special_tokens=False)]

    def _pieces(self, text: str) -> tuple[list[str], int]:
        """(the non-empty pieces between added tokens, how many added tokens) of ``text``."""
        if self._pattern is None:
            return ([text] if text else []), 0
        parts = self._pattern.split(text)
        return [p for p in parts[0::2] if p], len(parts) // 2

    def count(self, texts: list[str]) -> list[int]:
        """Tokens of each text (the pieces not seen before in one batch call, which the tokenizer parallelises)."""
        if not texts:
            return []
        cut = [self._pieces(t) for t in texts]
        memo = self._memo
        todo = list(dict.fromkeys(p for pieces, _ in cut for p in pieces if p not in memo))
        if todo:
            memo.update(zip(todo, self._encode_counts(todo)))
            self._memo_chars += sum(map(len, todo))
        out = [sum(memo[p] for p in pieces) + n_added for pieces, n_added in cut]
        if self._memo_chars > self.memo_chars:
            memo.clear()
            self._memo_chars = 0
        if self._checks > 0 and self._pattern is not None:
            sample = texts[:self._checks]
            self._checks -= len(sample)
            whole = self._encode_counts(sample)
            if whole != out[:len(sample)]:
                log.warning("token counts of texts cut at the added tokens differ from whole-text counts under this "
                            "tokenizer (%s against %s); every text is counted whole", out[:len(sample)], whole)
                self._pattern = None
                memo.clear()
                self._memo_chars = 0
                return self._encode_counts(list(texts))
        return out

    def cut(self, text: str, n_tokens: int) -> int:
        """The character offset where the first ``n_tokens`` tokens of ``text`` end."""
        offsets = self.tokenizer.encode(text, add_special_tokens=False).offsets
        if n_tokens <= 0 or not offsets:
            return 0
        return offsets[min(n_tokens, len(offsets)) - 1][1]


def segment_pattern(tokenizer: Any) -> "re.Pattern[str] | None":
    """The regex that cuts a text where the Rust tokenizer cuts it before it encodes the pieces apart, or None
    where pieces are not independent (see :class:`TokenCounter`).

    The tokenizer first matches its added tokens that are not normalized, leftmost and longest first; an
    alternation of their texts, longest first, matches the same.  Not used when one of those tokens strips
    neighbouring whitespace or must stand as a single word (the match would reach over the cut), when special
    tokens are encoded as text, or when a ``Metaspace`` pre-tokenizer prepends only at the start of the whole
    text (``prepend_scheme: first``): a piece cut out would be encoded as if it started the text.
    """
    if getattr(tokenizer, "encode_special_tokens", False):
        return None
    spec = json.loads(tokenizer.to_str())
    added = [a for a in spec.get("added_tokens") or [] if not a.get("normalized")]
    if any(a.get("lstrip") or a.get("rstrip") or a.get("single_word") for a in added):
        return None
    if _prepends_at_start(spec.get("pre_tokenizer")) or _prepends_at_start(spec.get("normalizer")):
        return None
    texts = sorted({a["content"] for a in added if a.get("content")}, key=lambda t: (-len(t), t))
    if not texts:
        return None
    return re.compile("(" + "|".join(map(re.escape, texts)) + ")")


def _prepends_at_start(node: Any) -> bool:
    """Whether a tokenizer.json component (or one nested in a sequence) treats the start of the text apart."""
    if isinstance(node, list):
        return any(_prepends_at_start(n) for n in node)
    if not isinstance(node, dict):
        return False
    if node.get("type") == "Metaspace" and node.get("prepend_scheme") == "first":
        return True
    return any(_prepends_at_start(v) for k, v in node.items() if isinstance(v, (list, dict)))


def tokenizer_key(tokenizer: Any) -> str:
    """A hash of what decides a count: the (fast) tokenizer's serialisation and its chat template."""
    h = hashlib.sha256()
    h.update(tokenizer.backend_tokenizer.to_str().encode())
    h.update(b"\0")
    h.update((getattr(tokenizer, "chat_template", None) or "").encode())
    return h.hexdigest()[:20]


def conversation_digest(messages: list[dict], tools: list[dict] | None) -> bytes:
    """16 bytes that identify a conversation and its tools (key order does not matter).

    The blob is compact JSON with sorted keys, written by ``orjson`` (about 3x faster than ``json`` here, and
    the same bytes for text, lists and integers); what ``orjson`` refuses (a lone surrogate, an integer past 64
    bits) is written by ``json``."""
    import orjson

    try:
        blob = orjson.dumps([messages, tools or None], option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        blob = json.dumps([messages, tools or None], sort_keys=True, ensure_ascii=False,
                          separators=(",", ":")).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(blob, digest_size=16).digest()


class TokenCounts:
    """Exact rendered lengths, batched and cached (module docstring).

    ``root`` is the run folder (None: no cache on disk, counts live for this object only).
    """

    def __init__(self, tokenizer: Any, root: str | Path | None = None):
        self.tokenizer = tokenizer
        self._counter = TokenCounter(tokenizer)
        self.key = tokenizer_key(tokenizer)
        self.folder = None if root is None else Path(root) / CACHE_FOLDER / self.key
        self._known: dict[bytes, int] = {}
        self._new: dict[bytes, int] = {}
        self.hits = self.computed = 0
        if self.folder is not None and self.folder.is_dir():
            self._load()

    def _load(self) -> None:
        import pyarrow.parquet as pq

        for p in sorted(self.folder.glob("*.parquet")):
            try:
                t = pq.read_table(p, columns=["digest", "n_tokens"])
            except Exception as e:  # noqa: BLE001 - a damaged cache file costs a recount, never a wrong count
                log.warning("token-count cache file %s is unreadable (%s); its counts are computed again", p, e)
                continue
            self._known.update(zip(t.column("digest").to_pylist(), t.column("n_tokens").to_pylist()))

    def known(self, digests: Sequence[bytes]) -> list[int | None]:
        """The cached count of each conversation digest (:func:`conversation_digest`), None where none is known.

        For a stage that tokenizes the conversations itself anyway (the sft stage needs the ids): it reads
        what an earlier stage counted, and :meth:`add` records what it counts in turn."""
        out = [self._known.get(d, self._new.get(d)) for d in digests]
        self.hits += sum(n is not None for n in out)
        return out

    def add(self, digests: Sequence[bytes], counts: Sequence[int | None]) -> None:
        """Record counts computed elsewhere (exact, by the same tokenizer and template); :meth:`flush` writes them."""
        for d, n in zip(digests, counts):
            if n is not None and d not in self._known:
                self._new[d] = int(n)

    def count_texts(self, texts: list[str]) -> list[int]:
        """Tokens of each plain text (no template), counted by the same cut as the conversations."""
        return self._counter.count(texts)

    def render(self, messages: list[dict], tools: list[dict] | None) -> str:
        """The conversation as the chat template writes it (what training tokenizes)."""
        return self.tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False)

    def count(self, items: Sequence[tuple[list[dict], list[dict] | None]]) -> list[int | None]:
        """The rendered token count of each ``(messages, tools)``, from the cache or computed in one batch;
        None for a conversation the chat template cannot render."""
        digests = [conversation_digest(m, t) for m, t in items]
        out: list[int | None] = [self._known.get(d, self._new.get(d)) for d in digests]
        todo = [i for i, n in enumerate(out) if n is None]
        self.hits += len(items) - len(todo)
        if todo:
            rendered = [(i, self._render_or_none(*items[i])) for i in todo]
            rendered = [(i, text) for i, text in rendered if text is not None]
            texts = [text for _, text in rendered]
            for (i, _), n in zip(rendered, self._counter.count(texts)):
                out[i] = n
                self._new[digests[i]] = n
            self.computed += len(rendered)
        return out

    def _render_or_none(self, messages: list[dict], tools: list[dict] | None) -> str | None:
        """The render, or None for a conversation the template refuses (empty, or broken: the format
        filter drops it, and a length filter that still reaches it counts it alone and fails loudly)."""
        from jinja2 import TemplateError

        if not messages:
            return None
        try:
            return self.render(messages, tools)
        except (TemplateError, ValueError, TypeError, KeyError, IndexError) as e:
            log.debug("cannot render a conversation for its token count: %s", e)
            return None

    def flush(self) -> int:
        """Write the counts computed since the last flush to the cache (one atomic file); returns how many."""
        new, self._new = self._new, {}
        self._known.update(new)
        if self.folder is None or not new:
            return 0
        import pyarrow as pa

        from synth.engine.store import write_parquet_atomic

        table = pa.table({"digest": pa.array(list(new), pa.binary(16)),
                          "n_tokens": pa.array(list(new.values()), pa.int32())})
        write_parquet_atomic(table, self.folder / f"{uuid.uuid4().hex}.parquet")
        return len(new)


def compact_cache(root: str | Path, most: int = 16) -> None:
    """Merge each tokenizer's cache files into one when there are more than ``most`` (workers write one per
    batch).  The merged file is written before the parts are removed, so a crash loses no count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from synth.engine.store import write_parquet_atomic

    base = Path(root) / CACHE_FOLDER
    for folder in (p for p in base.iterdir() if p.is_dir()) if base.is_dir() else ():
        parts = sorted(folder.glob("*.parquet"))
        if len(parts) <= most:
            continue
        tables, read = [], []
        for p in parts:
            try:
                tables.append(pq.read_table(p, columns=["digest", "n_tokens"]))
                read.append(p)
            except Exception:  # noqa: BLE001 - left in place for TokenCounts to warn about and skip
                continue
        if not tables:
            continue
        write_parquet_atomic(pa.concat_tables(tables), folder / f"{uuid.uuid4().hex}.parquet")
        for p in read:
            p.unlink(missing_ok=True)


__all__ = ["CACHE_FOLDER", "TokenCounter", "TokenCounts", "compact_cache", "conversation_digest", "segment_pattern",
           "tokenizer_key"]
