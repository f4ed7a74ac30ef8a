"""Answer keys from the corpus: the answer page's names, supported teacher aliases, and the titles of other
pages token F1 would mistake for it (synth.corpus.answerkeys)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from synth.corpus.answerkeys import MAX_OTHER_TITLES, answer_keys, build, min_overlap
from synth.engine.records import PAGE_SCHEMA
from synth.text.answers import OTHER_PAGE, PAGE, judge

from helpers.answerworld import FOLDED, NEAR_MISS, answer_store, page
from helpers.filterstore import make_store, publish
from helpers.traces import make_question


def test_other_pages_within_the_threshold_are_listed_and_judged_wrong(tmp_path: Path) -> None:
    keys = build(answer_store(tmp_path / "run"), 0.8)
    for qid, other in NEAR_MISS.items():
        assert other in keys[qid].other_titles, qid
        assert judge(other, keys[qid], 0.8).basis == OTHER_PAGE
    # "York" and "Oceanography" are other pages, but too far from any name for F1 to take them.
    assert all("York" not in k.other_titles and "Oceanography" not in k.other_titles for k in keys.values())
    # The folded forms of the right pages are still right.
    for qid, prediction in {**FOLDED, "q-ny": "NYC"}.items():
        assert judge(prediction, keys[qid], 0.8).basis == PAGE, qid
    # "Zürich (canton)" is F1 0.67 from Zürich: the fallback cannot take it (the qualifier rule refuses it anyway).
    assert keys.stats["other_titles"]["questions"] == 6 and keys["q-zu"].other_titles == ()


def test_teacher_aliases_need_support_in_the_corpus(tmp_path: Path) -> None:
    aliases = {"q-ny": ["NYC", "Big Apple", "Gotham"], "q-gw": ["President Washington"]}
    # A link into New York whose text is "Big Apple": the corpus calls the page so.
    store = answer_store(tmp_path / "run", aliases=aliases, links=[("p-start", "p-ny", "the Big Apple")])
    keys = build(store, 0.8)
    assert "Big Apple" in keys["q-ny"].names and "NYC" in keys["q-ny"].names
    assert "Gotham" not in keys["q-ny"].names and "President Washington" not in keys["q-gw"].names
    assert not judge("Gotham", keys["q-ny"], 0.8).correct
    a = keys.stats["aliases"]
    assert (a["teacher"], a["kept"], a["dropped"]) == (3, 1, 2)
    assert {e["alias"] for e in a["dropped_examples"]} == {"Gotham", "President Washington"}


def test_keys_are_cached_per_run_and_threshold(tmp_path: Path) -> None:
    store = answer_store(tmp_path / "run")
    first = answer_keys(store, 0.8)
    cached = list((tmp_path / "run" / ".cache" / "answer_keys").glob("*.parquet"))
    assert len(cached) == 1
    again = answer_keys(store, 0.8)  # read back from the file
    assert again is not first and dict(again) == dict(first) and again.stats == first.stats
    # A stage run's shards share one object per process (ctx.shared).
    from flows.config import load_config
    from synth.engine.stage import Stage, StageContext

    ctx = StageContext(Stage(name="grade", entry=lambda c: None, sections=("filters",)), load_config(None), store, "k")
    shared = answer_keys(store, 0.8, ctx.shared)
    assert answer_keys(store, 0.8, ctx.shared) is shared and dict(shared) == dict(first)
    assert answer_keys(store, 1.0, ctx.shared) is not shared
    stricter = answer_keys(store, 1.0)
    assert "New York City" not in stricter["q-ny"].other_titles  # F1 0.8 < 1.0: the fallback cannot take it
    assert len(list((tmp_path / "run" / ".cache" / "answer_keys").glob("*.parquet"))) == 2


def test_a_store_without_a_corpus_keys_the_answer_and_aliases(tmp_path: Path) -> None:
    q = make_question("q1", aliases=["Delta"])
    keys = build(make_store(tmp_path / "run", [q], [], tokenizer=False), 0.8)
    assert keys["q1"].names == ("Delta City", "Delta") and keys["q1"].other_titles == ()
    assert keys.stats["corpus"] is False


def test_the_prefix_filter_bound_is_tight() -> None:
    # A title sharing fewer words than min_overlap cannot reach min_f1; one sharing that many can.
    from synth.text.answers import _f1

    for n in range(1, 8):
        for f in (0.5, 0.8, 1.0):
            o = min_overlap(n, f)
            gold = " ".join(f"w{i}" for i in range(n))
            assert _f1(" ".join(f"w{i}" for i in range(o)), gold) >= f - 1e-9
            if o > 1:
                assert _f1(" ".join(f"w{i}" for i in range(o - 1)), gold) < f


def test_other_titles_are_capped_closest_first(tmp_path: Path) -> None:
    store = make_store(tmp_path / "run", [make_question("q1", path=["s", "g"], titles=["S", "Red"])], [],
                       tokenizer=False)
    pages = [page("s", "S"), page("g", "Red")] + [page(f"x{i}", f"Red x{i}") for i in range(MAX_OTHER_TITLES + 5)]
    publish(store, "ingest", {"corpus/pages": pa.Table.from_pylist(pages, schema=PAGE_SCHEMA)})
    keys = build(store, 0.5)
    assert len(keys["q1"].other_titles) == MAX_OTHER_TITLES and keys.stats["other_titles"]["capped"] == 1
