"""A run folder over the embedded demo corpus (~10k real Wikipedia summaries), built up to the page vectors.

The question writer's and the agent's tests need a real corpus: whether a clue is locally
unique and globally ambiguous depends on real link neighbourhoods and a real index.  Building
it (ingest, graph, walks, subgraphs, index, and the page vectors of the dense adversary, about half a
minute on 2 cores) takes under a minute; the fixture does it once per test session.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def demo_config(*overrides: str):
    """The demo config with ``overrides`` (``key=value`` strings)."""
    from flows.config import load_config

    # Walks unrouted unless an override routes them: these stores serve tests of the stages' own machinery, and
    # routing is tested on its own (tests/synth/questions/test_route.py).
    return load_config(str(ROOT / "configs" / "demo.yaml"), ["questions.route=false", *overrides])


def build_demo_store(root: Path, *overrides: str):
    """``(store, cfg)``: the demo corpus's stages up to ``embed`` in ``root``."""
    from flows.stages import PIPELINE
    from synth.engine.runner import run_stage
    from synth.engine.store import Store

    cfg = demo_config(*overrides)
    store = Store(root)
    for stage in PIPELINE.upto("embed"):
        run_stage(stage, cfg, store, progress=False)
    return store, cfg





def copy_demo_store(store, root: Path, walks: int | None = None, hops: int | None = None):
    """A copy of a demo store in ``root`` whose ``walks`` are its first ``walks`` walks cut to ``hops`` hops
    (their first hops, evidence and all), committed as the walks stage; the rest as it was."""
    import shutil

    import pyarrow.dataset as pads

    from helpers.walkstore import commit_stage
    from synth.engine.records import Walk
    from synth.engine.store import Store

    shutil.copytree(store.root, root, symlinks=True, ignore=shutil.ignore_patterns("cache", "*.lock"))
    copy = Store(root)
    if walks is not None or hops is not None:
        rows = [Walk.from_row(r) for r in pads.dataset(copy.root / "walks").to_table().to_pylist()][:walks]
        if hops is not None:
            rows = [Walk(w.walk_id, w.path[:hops + 1], w.titles[:hops + 1], w.hops[:hops], w.slot) for w in rows]
        commit_stage(copy, "walks", "walks", Walk.to_table(rows), key=f"cut-{walks}-{hops}")
    return copy
__all__ = ["ROOT", "build_demo_store", "copy_demo_store", "demo_config"]
