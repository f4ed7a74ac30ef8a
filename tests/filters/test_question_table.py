"""The filter's questions: read from Arrow and built on demand, the same questions a dict of rows gives."""

from __future__ import annotations

import pyarrow as pa
import pytest

from filters.stage import QuestionTable
from helpers.traces import make_question
from synth.engine.records import Question


def _table(questions: list[Question]) -> pa.Table:
    return pa.Table.from_pylist([q.to_row() for q in questions])


def test_the_table_maps_ids_to_the_questions_a_dict_of_rows_gives(monkeypatch) -> None:
    questions = [make_question(f"q{i}", answer=f"Answer {i}", split="rl" if i % 3 else "sft") for i in range(40)]
    questions.append(make_question("q7", answer="Answer seven, again"))  # a duplicated id: the last row wins
    table = _table(questions)
    expected = {r["question_id"]: Question.from_row(r) for r in table.to_pylist()}
    monkeypatch.setattr(QuestionTable, "CACHE", 5)  # most reads below miss the cache and are built again
    got = QuestionTable(table)
    assert len(got) == len(expected) == 40 and list(got) == list(expected)
    for qid in [*expected, *reversed(expected), "q7", "q7", "q3"]:
        assert qid in got and got[qid] == expected[qid] and got.get(qid) == expected[qid]
    assert got["q7"].answer == "Answer seven, again"
    assert "q99" not in got and got.get("q99") is None
    with pytest.raises(KeyError):
        got["q99"]
    assert dict(got.items()) == expected and len(got._built) == 5
