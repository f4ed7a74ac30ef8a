"""The one tokenizer every token count in hopforge comes from.

The config names it (``tokenizer: demo``, a local folder or a Hub id).  The ``tokenizer``
stage writes a pinned copy to ``DIR/tokenizer``, so later counts (long-context lengths,
SFT ``max_length`` drops) never change under a run because a Hub repo moved.

``demo`` is offline: a byte-level BPE (about 8k tokens) trained with the ``tokenizers``
library on the corpus pages, with ChatML special tokens and the tiny student's chat
template (``sft/templates/tiny_chatml.jinja2``).  Training is deterministic: pages are
chosen and read in the order of a hash of their ids, so the same corpus gives the same
files byte for byte, whatever the shard layout.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

DEMO = "demo"
DEMO_VOCAB_SIZE = 8192
DEMO_MAX_PAGES = 50_000
# ChatML control tokens (special: never produced from text) ...
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
# ... and the agent-format tags, added as ordinary tokens (as Qwen2.5 does) so a decoded
# generation keeps them and a tool call costs one token per tag.
TAG_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<answer>", "</answer>"]
TEMPLATE_FILE = Path(__file__).resolve().parent / "templates" / "tiny_chatml.jinja2"


def tokenizer_spec(cfg: Any) -> tuple[str, int, int]:
    """``(name, vocab_size, max_pages)``: the configured ``tokenizer`` and the demo BPE's sizes."""
    return cfg.tokenizer, DEMO_VOCAB_SIZE, DEMO_MAX_PAGES


def _page_key(page_id: str) -> bytes:
    return hashlib.sha1(page_id.encode()).digest()


def page_texts(pages, max_pages: int = DEMO_MAX_PAGES) -> tuple[list[str], int]:
    """Texts (title, then paragraphs) of at most ``max_pages`` pages, and the number of pages seen.

    ``pages`` is a ``pyarrow.dataset.Dataset`` or ``Table`` in ``PAGE_SCHEMA``.  The pages kept
    are the ``max_pages`` with the smallest hash of their id, in that order: a choice that does
    not depend on how the table is sharded.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    table = pages if isinstance(pages, pa.Table) else pages.to_table(columns=["page_id"])
    ids = table.column("page_id").to_pylist()
    chosen = sorted(ids, key=_page_key)[:max_pages]
    if isinstance(pages, pa.Table):
        sub = pages.select(["page_id", "title", "paragraphs"])
    else:
        flt = None if len(chosen) == len(ids) else ds.field("page_id").isin(chosen)
        sub = pages.to_table(columns=["page_id", "title", "paragraphs"], filter=flt)
    if len(chosen) != len(ids):
        sub = sub.filter(pc.is_in(sub.column("page_id"), value_set=pa.array(chosen)))
    rows = {r["page_id"]: r for r in sub.to_pylist()}
    texts = []
    for pid in chosen:
        r = rows[pid]
        texts.append(r["title"] + "\n" + "".join(p if p.endswith("\n") else p + "\n" for p in r["paragraphs"] or []))
    return texts, len(ids)


def _extra_texts() -> list[str]:
    """Agent-format text the pages lack (tool schemas, JSON calls), so JSON punctuation gets merges."""
    from synth.tools.schema import tool_schemas_json

    calls = [json.dumps({"name": n, "arguments": a}) for n, a in
             [("search", {"query": "capital of France"}), ("open", {"page": "Paris", "offset": 2000}),
              ("find", {"page": "Paris", "text": "river"})]]
    return [tool_schemas_json()] * 20 + ["<tool_call>\n" + c + "\n</tool_call>" for c in calls] * 20


# The longest piece (in bytes) the BPE trainer counts whole: a longer word is counted as pieces of this length.
# The trainer re-scans a word for each merge it applies to it, so its time grows with the square of the longest
# word; cut, it grows with the text's length.  No prose word is this long, so the merges are those of the whole
# words (the saved tokenizer splits words as before: the cut is the trainer's only).
TRAIN_PIECE_BYTES = 256


def train_bpe(texts: Iterable[str], vocab_size: int = DEMO_VOCAB_SIZE):
    """A byte-level BPE ``tokenizers.Tokenizer`` trained on ``texts`` (deterministic), in time linear in the
    length of the longest word (:data:`TRAIN_PIECE_BYTES`)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    words = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [words, pre_tokenizers.Split(Regex(rf"[\s\S]{{1,{TRAIN_PIECE_BYTES}}}"), behavior="isolated")])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)  # exact character offsets for masks
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(list(texts), trainer)
    tok.pre_tokenizer = words
    return tok


def wrap(tok, chat_template: str | None = None):
    """``tokenizers.Tokenizer`` -> ``PreTrainedTokenizerFast`` with ChatML roles and the tiny template."""
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAG_TOKENS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|pad|>", unk_token=None, bos_token=None,
        extra_special_tokens=["<|im_start|>", "<|endoftext|>"], model_max_length=131072,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = chat_template if chat_template is not None else TEMPLATE_FILE.read_text(encoding="utf-8")
    return fast


def train_demo_tokenizer(pages, out_dir: str | Path, vocab_size: int = DEMO_VOCAB_SIZE,
                         max_pages: int = DEMO_MAX_PAGES) -> dict:
    """Train the demo tokenizer on ``pages`` and ``save_pretrained`` it to ``out_dir``; returns stats."""
    import logging

    texts, n_pages = page_texts(pages, max_pages)
    if not texts:
        from synth.engine.errors import InputError

        raise InputError("corpus/pages is empty: the demo tokenizer needs text to train on")
    logging.getLogger("hopforge").info("tokenizer: training the demo BPE (%s tokens) on %s pages, %s characters",
                                       f"{vocab_size:,}", f"{len(texts):,}", f"{sum(map(len, texts)):,}")
    fast = wrap(train_bpe(texts + _extra_texts(), vocab_size))
    fast.save_pretrained(str(out_dir))
    return {"kind": DEMO, "pages": n_pages, "pages_used": len(texts), "vocab_size": len(fast),
            "files_sha": files_sha(out_dir)}


# Keys ``from_pretrained`` records in a tokenizer's ``init_kwargs`` that say how it was loaded, not what it
# is: HF_HUB_OFFLINE sets ``local_files_only``, and a ``token`` (should a version record it) is a secret. Saved, they would make the same
# tokenizer's files differ with the loading machine's environment (and could write a key to disk).
LOAD_TIME_KEYS = ("local_files_only", "cache_dir", "force_download", "proxies", "revision", "subfolder",
                  "token", "use_auth_token", "_commit_hash", "is_local", "_from_auto", "_from_pipeline")


def save_tokenizer(tok: Any, out: str | Path) -> None:
    """``save_pretrained`` without the load-time keys, so the files are a function of the tokenizer alone."""
    kept = {k: tok.init_kwargs.pop(k) for k in LOAD_TIME_KEYS if k in tok.init_kwargs}
    try:
        tok.save_pretrained(str(out))
    finally:
        tok.init_kwargs.update(kept)


def files_sha(folder: str | Path) -> str:
    """Hash of a tokenizer folder's files (names and bytes), to pin what counted the tokens."""
    h = hashlib.sha256()
    for p in sorted(Path(folder).iterdir()):
        if p.is_file():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


# Classes AutoTokenizer would resolve to the plain fast tokenizer itself: loaded directly, which spares the
# process the import of transformers' model configs (and with them torch), about a second.
_PLAIN_FAST = ("TokenizersBackend", "PreTrainedTokenizerFast")


def _plain_fast(folder: Path):
    """The tokenizer of ``folder`` when its config names the plain fast class, else None."""
    try:
        cls = json.loads((folder / "tokenizer_config.json").read_text()).get("tokenizer_class")
    except (OSError, ValueError):
        return None
    if cls not in _PLAIN_FAST or not (folder / "tokenizer.json").is_file():
        return None
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(folder))


def _auto(name: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(name)


def load_tokenizer(path_or_store: Any, chat_template: bool = False):
    """The tokenizer at a path, a Store or output folder (its pinned ``tokenizer``), or a Hub id.

    A missing pinned tokenizer names the command that makes it; with ``chat_template`` the
    tokenizer must also have one (the length filter and SFT render conversations with it).
    """
    from synth.engine.errors import InputError
    from synth.engine.store import MissingInput

    store = not isinstance(path_or_store, (str, Path))
    root = path_or_store.root if store else path_or_store
    p = Path(str(root))
    if store or (p.is_dir() and not (p / "tokenizer_config.json").exists() and (p / "tokenizer").exists()):
        p = p / "tokenizer"
    if p.is_dir():
        tok = _plain_fast(p) or _auto(str(p))
    elif store:
        raise MissingInput(f"no tokenizer at {p} (run `hopforge tokenizer --out {p.parent}` first)")
    elif p.exists() or str(root).startswith((".", "/")):
        raise InputError(f"no tokenizer at {p} (run `hopforge tokenizer --out DIR` first)")
    else:
        tok = _auto(str(root))
    if chat_template and not getattr(tok, "chat_template", None):
        raise InputError(f"tokenizer at {p} has no chat template; conversations are rendered with it")
    return tok


def count_tokens(tokenizer, texts: str | list[str]) -> int | list[int]:
    """Token counts of ``texts`` (no special tokens added)."""
    single = isinstance(texts, str)
    ids = tokenizer(([texts] if single else list(texts)), add_special_tokens=False)["input_ids"]
    counts = [len(x) for x in ids]
    return counts[0] if single else counts


def tokenizer_identity(cfg: Any, store: Any = None) -> str:
    """Stage ``key_extra``: a local tokenizer folder's file hash (a Hub id stands for itself)."""
    name, _, _ = tokenizer_spec(cfg)
    p = Path(name)
    return files_sha(p) if name != DEMO and p.is_dir() else name


def run_tokenizer(ctx) -> "Any":
    """Stage ``tokenizer``: write ``DIR/tokenizer`` (the demo BPE, or a pinned copy of the configured one)."""
    from synth.engine.stage import StageResult

    name, vocab_size, max_pages = tokenizer_spec(ctx.cfg)
    out = ctx.out("tokenizer")
    if name == DEMO:
        stats = train_demo_tokenizer(ctx.store.dataset("corpus/pages", hint="ingest"), out, vocab_size, max_pages)
        n, used = stats["pages"], stats["pages_used"]
        return StageResult(input=n, output=used, dropped={"not_sampled": n - used} if n > used else {}, extra=stats)
    tok = load_tokenizer(name)
    template = training_template(tok)
    save_tokenizer(tok, out)
    return StageResult(input=0, output=0, idle=f"the pretrained tokenizer {name} is copied, not trained on pages",
                       extra={"kind": "pretrained", "name": name, "vocab_size": len(tok),
                                                 "chat_template": template, "files_sha": files_sha(out)})


def training_template(tok) -> str:
    """Give a pretrained tokenizer the chat template SFT will train with, when its family is known.

    Token counts (the length filter, long-context assembly) then render traces exactly as SFT
    does: e.g. Qwen2.5's own template would encode tool-call arguments a second time.
    Returns the template's name (``own`` when the tokenizer's template is kept).
    """
    from synth.tokenizer.chat_templates import resolve_template

    from synth.engine.errors import InputError

    try:
        name, text = resolve_template("auto", tok)
    except InputError:
        return "own"
    tok.chat_template = text
    return name if name != "tokenizer" else "own"


__all__ = ["DEMO", "SPECIAL_TOKENS", "TAG_TOKENS", "count_tokens", "files_sha", "load_tokenizer", "page_texts",
           "run_tokenizer", "tokenizer_identity", "tokenizer_spec", "train_bpe", "train_demo_tokenizer", "wrap"]
