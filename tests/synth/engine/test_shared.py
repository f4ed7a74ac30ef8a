"""ctx.shared: a value made once per process and stage run, for every shard's context of that run."""

from __future__ import annotations

import threading

from flows.config import load_config
from synth.engine.stage import Stage, StageContext
from synth.engine.store import Store

STAGE = Stage(name="things", entry=lambda ctx: None, sections=("walk",), outputs=("things",))


def test_a_value_is_made_once_per_run_and_dropped_for_another_run(tmp_path):
    cfg, store = load_config(None), Store(tmp_path)
    made = []

    def opener(tag):
        def make():
            made.append(tag)
            return [tag]
        return make

    shard_a, shard_b = StageContext(STAGE, cfg, store, "k1"), StageContext(STAGE, cfg, store, "k1")
    got = []
    threads = [threading.Thread(target=lambda c=c: got.append(c.shared("sources", opener("k1")))) for c in
               (shard_a, shard_b) * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == ["k1"] and all(g is got[0] for g in got)  # one value, made once, for every shard
    # An opener may ask for another shared value (the screen is built over the sources).
    screen = shard_a.shared("screen", lambda: ("screen over", shard_a.shared("sources", opener("again"))))
    assert screen == ("screen over", ["k1"]) and made == ["k1"]
    # Another run (another key) in this process drops the first run's values.
    other = StageContext(STAGE, cfg, store, "k2")
    assert other.shared("sources", opener("k2")) == ["k2"]
    assert shard_a.shared("sources", opener("k1 again")) == ["k1 again"]
    assert made == ["k1", "k2", "k1 again"]
