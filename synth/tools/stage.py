"""The ``index`` stage: ``corpus/pages`` and ``corpus/links`` -> ``index`` (the local BM25 index the tools search).

Funnel: input is every page, output every indexed page; a page with no text (all its
paragraphs empty once rendered) is dropped as ``empty``.  The index is built in the
stage's staging folder and published by the store's rename, so a crash never leaves
a half-built index at ``DIR/index``; a rerun after a crash starts the build over
(:func:`~synth.tools.build.build_index` clears its folder first).  Two passes, each with its bar: the
agents' index, then ``index/body``, the question checks' plain-BM25 index (:mod:`synth.tools.build`).

Only the pages and the code shape the index: the ``tools`` settings (window sizes,
k, masking) act at query time, and the writer's heap and threads are operational.
"""

from __future__ import annotations

from synth.engine.stage import StageContext, StageResult
from synth.tools.build import build_index
from synth.tools.config import ToolsConfig


def run_index(ctx: StageContext) -> StageResult:
    """Build the search index over ``corpus/pages`` into ``ctx.out("index")``."""
    pages = ctx.store.dataset("corpus/pages", hint="ingest")
    links = ctx.store.dataset("corpus/links", hint="ingest")
    tools: ToolsConfig = ctx.cfg.tools
    total = pages.count_rows()
    with ctx.bar("pages", total, "pages") as bar, ctx.bar("body", total, "pages") as body_bar:
        stats = build_index(pages, ctx.out("index"), progress=bar.update, heap_mb=tools.index_heap_mb,
                            threads=tools.index_threads, links=links, memory_limit=tools.index_memory_limit,
                            body_progress=body_bar.update)
    dropped = {"empty": stats["empty"]} if stats["empty"] else {}
    return StageResult(
        input=stats["pages"],
        output=stats["indexed"],
        dropped=dropped,
        extra={"pages_per_s": stats["pages_per_s"], "links": stats["links"]},
    )


__all__ = ["run_index"]
