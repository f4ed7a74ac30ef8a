"""``bench/retrieval.py``'s scoring: hit@1, hit@10 and MRR@10 from hand-made rankings, and query sets that are
the same for a seed and keep the title's words out of the sets that must not name the page."""

from __future__ import annotations

import pytest

from bench.retrieval import SETS, metrics, query_sets, rank_of, score, score_many, variant_name, worst_margin


def test_hit_at_k_and_mrr_from_hand_made_rankings() -> None:
    ranked = {"q1": ["a", "b"], "q2": ["x", "y", "b"], "q3": [f"p{i}" for i in range(10)] + ["c"], "q4": []}
    queries = [("q1", "a"), ("q2", "b"), ("q3", "c"), ("q4", "d")]
    # ranks: 1, 3, 11 (past the top 10: a miss), none
    assert [rank_of(ranked[q], pid) for q, pid in queries] == [1, 3, None, None]
    want = {"hit1": 0.25, "hit10": 0.5, "mrr": round((1 + 1 / 3) / 4, 3)}
    assert score(ranked.__getitem__, queries) == want
    assert score_many(lambda qs: [ranked[q] for q in qs], queries) == want
    assert metrics([]) == {"hit1": 0.0, "hit10": 0.0, "mrr": 0.0}


def test_query_sets_are_seeded_and_leave_the_title_out() -> None:
    pages = [{"page_id": str(i), "title": f"Zorbl{i} river",
              "paragraphs": [f"Zorbl{i} river is a long waterway flowing through valley{i} near town{i} and "
                             f"hamlet{i % 3}. It is wide."],
              "description": f"Waterway in region{i}"} for i in range(30)]
    a, b = query_sets(pages, 5, seed=3), query_sets(pages, 5, seed=3)
    assert a == b and a != query_sets(pages, 5, seed=4)
    assert all(len(v) == 5 for v in a.values())
    by_id = {p["page_id"]: p for p in pages}
    for name in ("lead_sentence", "keywords", "rare_keywords"):
        for q, pid in a[name]:
            assert not {w.lower() for w in by_id[pid]["title"].split()} & {w.lower() for w in q.split()}, (name, q)
    for q, pid in a["rare_keywords"]:
        assert f"valley{pid}" in q.split() and f"town{pid}" in q.split()  # in one page each: the rarest
    assert a["title"][0][0] == by_id[a["title"][0][1]]["title"]


def test_a_fusions_worst_margin_is_over_the_better_half_on_each_set_and_measure_titles_aside() -> None:
    v = ("zscore", 0.25, (0.7, 0.8))
    assert variant_name(v) == "zscore@0.25 gate 0.7-0.8" and variant_name(("rrf", 0.5, None)) == "rrf@0.5"
    row = lambda h10, mrr: {"hit1": 0.0, "hit10": h10, "mrr": mrr}  # noqa: E731
    table = {s: {"bm25": row(0.9, 0.8), "dense": row(0.5, 0.4), v: row(0.95, 0.85)} for s in SETS}
    table["keywords"]["dense"] = row(0.99, 0.7)  # the better half differs by set and by measure
    table["title"][v] = row(0.0, 0.0)  # titles are judged by hit@1 alone, not here
    assert worst_margin(table, v) == -0.04


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
