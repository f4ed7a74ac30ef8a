"""``retrieved_pages``, ranking a few traces at a time from Arrow, gives exactly what the rule over every trace at
once gives, on random traces."""

import random

import pyarrow as pa
import pytest

from synth.assemble import stage
from synth.assemble.stage import RetrievedPages, retrieved_pages
from synth.engine.store import Store, write_parquet_atomic

TRACES = pa.schema([("trace_id", pa.string()), ("question_id", pa.string()), ("sample_index", pa.int64()),
                    ("searched_page_ids", pa.list_(pa.string())), ("opened_page_ids", pa.list_(pa.string()))])


def reference(rows: list[dict], question_ids: set[str], kept: set[str] | None) -> dict[str, list[str]]:
    """The rule over every wanted trace at once (its order on a fixed case: test_assemble's
    ``test_retrieved_pages_order``)."""
    return stage._first_retrieval([r for r in rows if r["question_id"] in question_ids
                                   and (kept is None or r["trace_id"] in kept)])


def _random_traces(rnd: random.Random, n_questions: int) -> list[dict]:
    pages = [f"p{i:03d}" for i in range(60)]
    rows = []
    for q in range(n_questions):
        for s in range(rnd.randint(0, 5)):
            # Samples may share an index (a resumed rollout), and trace ids do not sort like sample indexes.
            rows.append({"trace_id": f"t{rnd.randrange(10**6):06d}-{q}-{s}", "question_id": f"q{q:03d}",
                         "sample_index": rnd.choice([s, s, 0]),
                         "searched_page_ids": None if rnd.random() < 0.1 else
                         [rnd.choice(pages[:20]) for _ in range(rnd.randint(0, 12))],
                         "opened_page_ids": None if rnd.random() < 0.2 else
                         [rnd.choice(pages) for _ in range(rnd.randint(0, 4))]})
    rnd.shuffle(rows)  # a question's traces spread over files, in no order
    return rows


@pytest.mark.parametrize("seed,rank_rows", [(0, 3), (1, 7), (2, 4096)])
def test_retrieved_pages_match_the_rule_per_trace(tmp_path, monkeypatch, seed, rank_rows):
    monkeypatch.setattr(stage, "RANK_ROWS", rank_rows)  # small: a question's traces straddle the cuts
    rnd = random.Random(seed)
    rows = _random_traces(rnd, 40)
    root = tmp_path / "run"
    for k in range(0, len(rows), 17):
        write_parquet_atomic(pa.Table.from_pylist(rows[k:k + 17], schema=TRACES),
                             root / "traces" / f"part-{k // 17:05d}.parquet")
    kept = {r["trace_id"] for r in rows if rnd.random() < 0.5}
    write_parquet_atomic(pa.table({"trace_id": pa.array(sorted(kept), pa.string())}), root / "sft/part-00000.parquet")
    store = Store(root)
    wanted = {f"q{q:03d}" for q in range(40) if q % 3}  # some questions are not asked for
    for mode, keep in (("all", None), ("kept", kept)):
        got = retrieved_pages(store, wanted, mode)
        expected = reference(rows, wanted, keep)
        assert isinstance(got, RetrievedPages) and len(got) == len(expected) > 0
        assert dict(got.items()) == expected
        assert sorted(got) == sorted(expected)
    # An Arrow array of ids reads the same as a set of them.
    assert dict(retrieved_pages(store, pa.array(sorted(wanted)), "all").items()) == reference(rows, wanted, None)


def test_no_traces_or_no_questions_give_an_empty_mapping(tmp_path):
    store = Store(tmp_path)
    assert len(retrieved_pages(store, {"q1"}, "all")) == 0
    write_parquet_atomic(pa.Table.from_pylist([], schema=TRACES), tmp_path / "traces/part-00000.parquet")
    got = retrieved_pages(store, set(), "all")
    assert len(got) == 0 and got.get("q1") is None
