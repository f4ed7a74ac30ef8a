"""Config of the corpus (``corpus:``): where the KILT knowledge source is and how to read it."""

from __future__ import annotations

from pydantic import Field

from synth.engine.config import Section, operational


class CorpusConfig(Section):
    source: str | None = Field(
        None,
        description="KILT source for `hopforge run`: a JSONL file (plain/.gz/.bz2), a folder or file "
        "in the Hugging Face layout (Parquet/JSONL), `hf:facebook/kilt_wikipedia`, or `demo` "
        "(the embedded demo corpus, built under DIR/source/ when missing).",
    )
    strict: bool = Field(False, description="Stop at the first bad line (exit 2) instead of skipping it.")
    hf_config: str = Field("2019-08-01", description="Config name for an `hf:` source.")
    hf_split: str = Field("full", description="Split for an `hf:` source.")
    batch_mb: int = operational("Bytes read per parse block, in MiB (bounds memory).", 16, ge=1, le=1024)
    max_pages: int | None = Field(None, ge=1, description="Stop after this many pages (for trial runs).")
