"""Configuration of ``hopforge publish`` (``publish:``): shard sizes, Parquet settings, the Hub repo.

Publishing is an action, not a stage, so nothing here enters a content key.  Every
field that shapes the bytes of a shard (rows per shard, row-group size, chunking)
must stay fixed between publishes of one dataset: changing one rewrites every shard
of the tables it touches (which is correct, but uploads everything again).
"""

from __future__ import annotations

from pydantic import Field, field_validator

from synth.engine.config import Section

COMMIT_FIELDS = ("version", "configs", "added", "deleted")


class ShardRows(Section):
    """Target rows per shard, per config.  A table of ``R`` rows gets ``N = 2**ceil(log2(ceil(R / rows)))``
    shards (1 when ``R <= rows``), so a shard holds between about ``rows / 2`` and ``rows`` rows."""

    sft: int = Field(20_000, ge=1, description="Rows per `sft` shard (a row is one conversation, ~10-50 KB).")
    preference: int = Field(10_000, ge=1, description="Rows per `preference` shard (a row is two conversations).")
    longctx: int = Field(1_000, ge=1, description="Rows per `longctx` shard (a row is up to L tokens of documents).")
    rl_pool: int = Field(100_000, ge=1, description="Rows per `rl_pool` shard (a row is one prompt).")
    questions: int = Field(100_000, ge=1, description="Rows per `questions` shard.")
    traces: int = Field(10_000, ge=1, description="Rows per `traces` shard (a row is one full rollout).")


class PublishConfig(Section):
    """How ``hopforge publish`` lays out, writes and uploads the datasets."""

    rows_per_shard: ShardRows = Field(default_factory=ShardRows, description="Target rows per shard, per config.")
    row_group_rows: int = Field(
        1_000, ge=1, description="Rows per Parquet row group (small groups keep the Hub's dataset viewer fast).")
    content_defined_chunking: bool = Field(
        True, description="Write Parquet pages with content-defined chunking (pyarrow), so the Hub's Xet storage "
        "deduplicates the unchanged parts of a shard that did change.")
    private: bool = Field(
        True, description="Create the Hub repo private (only when it does not exist yet; an existing repo keeps "
        "its visibility).")
    pretty_name: str = Field(
        "hopforge multi-hop search-agent warm-start data", min_length=1, description="The card's `pretty_name`.")
    commit_message: str = Field(
        "hopforge {version}: publish {configs}", min_length=1,
        description="Hub commit message; placeholders: {version}, {configs} (e.g. `sft=120 questions=50`), "
        "{added} and {deleted} (file counts).")
    tags: list[str] = Field(default_factory=list, description="Extra card tags, added to hopforge's own.")

    @field_validator("commit_message")
    @classmethod
    def _known_placeholders(cls, v: str) -> str:
        try:
            v.format(**{k: "" for k in COMMIT_FIELDS})
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"bad placeholder {e} (allowed: {', '.join('{' + k + '}' for k in COMMIT_FIELDS)})") \
                from None
        return v


__all__ = ["COMMIT_FIELDS", "PublishConfig", "ShardRows"]
