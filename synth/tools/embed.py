"""The ``embed`` stage: ``corpus/pages`` -> ``embed`` (every page's vector, for search by meaning).

Each page is one text (``tools.dense.text``, :func:`page_texts`): its title and description (the Wikidata
description, else the first sentence of its lead) or its title and lead (its first paragraph as ``open``
shows it).  :class:`synth.tools.dense.Embedder` turns the texts into vectors; the output folder ``DIR/embed``
holds them in page order with the page ids and the model's identity (:func:`synth.tools.dense.write_index`),
which :class:`synth.tools.dense.DenseIndex` searches.  Funnel: every page in, every page out.

The stage is sharded (``tools.dense.shard_pages`` pages a shard) and its shards run in ``runner.cpu_workers``
processes with one torch thread each (``tools.dense.threads``), so a crash resumes at the shard it stopped in.
A page's vector does not depend on its shard, batch or process (:mod:`synth.tools.dense`), so the output is the
same bytes for any shard size, batch size or worker count, which are operational.  The key holds the model
(``tools.dense.model`` and, through ``key_extra``, its identity) and ``tools.dense.text``, so a second run
reuses the vectors and a change of either embeds again.  The stage embeds only when a reader needs the vectors
(:func:`needed`: the questions' ``dense`` adversary, or ``tools.ranker`` ``dense`` / ``hybrid``); otherwise it
commits an empty ``embed`` at once.  A page's vector depends on neither the ranker nor the adversaries, so when
the stage embeds its key holds neither (:func:`embed_reads`): a switch between ``dense`` and ``hybrid``, or from a
dense adversary to a dense ranker, reuses the vectors.  Only the idle stage's key holds them, so the first run
with a reader after an idle one embeds.

Measured on the demo corpus (10,033 pages, 2 cores shared with other work): title and description at 200-260
pages per CPU second a process (``reports/embed.json``: ``pages_per_cpu_s``, ``cpu_seconds``), 50 CPU seconds in
all; the stage took 53 s of wall time with two workers under load, loading the model included.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from synth.engine.stage import Shards, ShardSummary, StageContext, StageResult
from synth.text.question_text import sentences
from synth.tools.analysis import render_paragraph
from synth.tools.dense import VECTORS_FILE, Embedder, model_identity, save_npy, write_meta


def dense_identity(cfg, store=None) -> str:
    """Stage ``key_extra``: the identity (name and file hash) of ``tools.dense.model``."""
    return model_identity(cfg.tools.dense.model)


def lead(paragraphs: list[str] | None) -> str:
    """A page's lead as ``open`` shows it: its first paragraph that is text (no heading), rendered."""
    for p in paragraphs or ():
        text = render_paragraph(p)
        if text.strip() and not text.lstrip().startswith("#"):
            return text.strip()
    return ""


def page_texts(pages: pa.Table, how: str) -> list[str]:
    """The text embedded for each page of ``pages`` (``title``, ``description``, ``paragraphs``), by
    ``tools.dense.text``: ``Title: description`` (without one, the lead's first sentence) or ``Title: lead``."""
    out = []
    for title, description, paragraphs in zip(pages.column("title").to_pylist(),
                                               pages.column("description").to_pylist(),
                                               pages.column("paragraphs").to_pylist()):
        if how == "title_lead":
            body = lead(paragraphs)
        elif description and description.strip():
            body = description.strip()
        else:
            first = lead(paragraphs)
            body = sentences(first)[0] if first else ""
        out.append(f"{title}: {body}" if body else title)
    return out


def _pages(ctx: StageContext):
    return ctx.store.dataset("corpus/pages", hint="ingest")


def _embedder(ctx: StageContext) -> Embedder:
    # One model per process and stage run: every shard the process runs uses it.
    return ctx.shared("embedder", lambda: Embedder.for_documents(ctx.cfg.tools.dense))


def needed(cfg) -> bool:
    """Whether a reader needs the page vectors: the questions stage's ``dense`` adversary, or the agents' search
    under ``tools.ranker`` ``dense`` or ``hybrid`` (:mod:`synth.tools.rank`)."""
    return "dense" in cfg.questions.adversaries or cfg.tools.ranker != "bm25"


IDLE_READS = ("questions.adversaries", "tools.ranker")  # what :func:`needed` reads


def embed_reads(cfg) -> tuple[str, ...]:
    """Stage ``more_sections``: nothing when a reader needs the vectors (they are the same bytes whichever reader,
    so switching the ranker between ``dense`` and ``hybrid`` reuses them); else :data:`IDLE_READS`, the settings
    that decided the stage idles, so the idle output's key differs from every embedding one's."""
    return () if needed(cfg) else IDLE_READS


def embeds(cfg) -> bool:
    """Whether the stage embeds, from what its config view shows (``ctx.cfg``): it shows :data:`IDLE_READS` only
    when :func:`embed_reads` found no reader, and then :func:`needed` decides on them; hidden, they needed the
    vectors.  So the answer is a function of the stage's key."""
    from synth.engine.config import UndeclaredConfig

    try:
        return needed(cfg)
    except UndeclaredConfig:  # the view hides the readers' settings: embed_reads found a reader
        return True


def plan(ctx: StageContext) -> list[list[int]]:
    """Shards of ``tools.dense.shard_pages`` pages, in page order: ``[start, end)`` rows of ``corpus/pages``; none
    when no reader needs the vectors (:func:`needed`: ``dense`` is not among ``questions.adversaries`` and
    ``tools.ranker`` is ``bm25``): the stage then commits an empty ``embed`` in no time instead of running a model
    over every page."""
    if not embeds(ctx.cfg):
        return []
    n, size = _pages(ctx).count_rows(), ctx.cfg.tools.dense.shard_pages
    return [[a, min(a + size, n)] for a in range(0, n, size)]


@dataclass(frozen=True)
class EmbedShard(ShardSummary):
    """What one shard embedded: its pages, the vectors' dimension, and the CPU seconds the model took."""

    pages: int = 0
    dim: int = 0
    cpu_seconds: float = 0.0


def _part(ctx: StageContext, i: int):
    return ctx.shard_out("embed", i).with_suffix(".npy")


def run_shard(ctx: StageContext, i: int, span: list[int]) -> EmbedShard:
    """Embed pages ``[start, end)``; their vectors go to the shard's part (``.npy``, written atomically)."""
    rows = _pages(ctx).take(pa.array(range(span[0], span[1]), pa.int64()),
                            columns=["title", "description", "paragraphs"])
    texts = page_texts(rows, ctx.cfg.tools.dense.text)
    embedder = _embedder(ctx)
    bar = ctx.shared_bar("pages", _pages(ctx).count_rows(), "pages")
    t0 = time.thread_time()
    vectors = embedder.encode_documents(texts, progress=bar.update)
    seconds = time.thread_time() - t0
    save_npy(_part(ctx, i), vectors)
    return EmbedShard(pages=len(texts), dim=int(vectors.shape[1]), cpu_seconds=round(seconds, 3))


def finish(ctx: StageContext, summaries: list[EmbedShard]) -> StageResult:
    """Join the shards' vectors in page order into ``embed/vectors.npy``; write the page ids and the metadata."""
    n = sum(s.pages for s in summaries)
    embedder = _embedder(ctx)  # its name and identity (the model itself is loaded only where it embeds)
    dim = summaries[0].dim if summaries else 0
    folder = ctx.out("embed")
    folder.mkdir(parents=True, exist_ok=True)
    out = np.lib.format.open_memmap(folder / VECTORS_FILE, mode="w+", dtype=np.float32, shape=(n, dim))
    at = 0
    for i, s in enumerate(summaries):
        part = np.load(_part(ctx, i), mmap_mode="r")
        out[at:at + len(part)] = part
        at += len(part)
    out.flush()
    del out
    ids = _pages(ctx).to_table(columns=["page_id"]).column("page_id").to_pylist() if summaries else []
    write_meta(folder, ids, dim, embedder, ctx.cfg.tools.dense.text)
    cpu = sum(s.cpu_seconds for s in summaries)
    idle = "" if summaries else ("no reader needs page vectors: dense is not among questions.adversaries "
                                       "and tools.ranker is bm25")
    return StageResult(input=n, output=n, idle=idle, extra={
        "model": embedder.name, "identity": embedder.identity, "dim": dim, "text": ctx.cfg.tools.dense.text,
        "shards": len(summaries), "cpu_seconds": round(cpu, 3),
        "pages_per_cpu_s": round(n / cpu, 1) if cpu else None})


SHARDS = Shards(plan=plan, run=run_shard, finish=finish, summary=EmbedShard)

__all__ = ["IDLE_READS", "SHARDS", "dense_identity", "embed_reads", "embeds", "needed", "page_texts", "lead", "plan", "run_shard",
           "finish"]
