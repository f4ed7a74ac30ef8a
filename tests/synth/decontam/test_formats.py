"""Each benchmark format, read from a hand-written file in its published schema, matched against walks.

Per format: a walk through two consecutive supporting pages of a benchmark question is dropped at
the path level; a walk that ends at a benchmark answer and visits another page of that question is
dropped at the entity level; a walk that only ends at the same answer is kept; a malformed record
is one error line naming the file, the record and the field.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from helpers.benchworld import ID, PAGES, fixture, resolver
from synth.decontam.check import ENTITY, MATCH_REASONS, PATH, last_answers, match, probe_paths
from synth.decontam.formats import read_benchmark
from synth.decontam.index import BenchIndex, Benchmark
from synth.engine.errors import InputError

# format -> (file, walk through two supporting pages, walk to the answer via another page, walk that only
# shares the answer)
CASES = {
    "hotpotqa": ("hotpot_dev_distractor_v1.json", ["Unrelated A", "Scott Derrickson", "Ed Wood"],
                 ["Benedict Cumberbatch", "Unrelated A", "Marvel Studios"],
                 ["Unrelated B", "Unrelated A", "Marvel Studios"]),
    "2wiki": ("2wiki_dev.json", ["Polish-Russian War (film)", "Xawery Żuławski", "Unrelated A"],
              ["Polish-Russian War (film)", "Unrelated A", "Małgorzata Braunek"],
              ["Unrelated B", "Unrelated A", "Małgorzata Braunek"]),
    "musique": ("musique_ans_v1.0_dev.jsonl", ["FC Barcelona", "Lionel Messi", "Unrelated B"],
                ["Argentina", "Unrelated A", "Camp Nou"],  # Argentina: a paragraph, not a supporting one
                ["Unrelated B", "Unrelated A", "Camp Nou"]),
    "frames": ("frames_test.tsv", ["Unrelated A", "James Buchanan", "Harriet Lane"],
               ["President of the United States", "Unrelated B", "Harriet Lane"],
               ["Unrelated B", "Unrelated A", "Harriet Lane"]),
    "jsonl": ("own_eval.jsonl", ["Doctor Strange (2016 film)", "Michael Giacchino"],
              ["Scott Derrickson", "Unrelated A", "Michael Giacchino"],
              ["Unrelated A", "Unrelated B", "Michael Giacchino"]),
}


def _index(fmt: str, name: str) -> BenchIndex:
    return BenchIndex([Benchmark(fmt, name, "-", read_benchmark(fixture(name), fmt))], resolver())


def _verdicts(index: BenchIndex, walks: list[list[str]]) -> list[str | None]:
    paths = pa.array([[ID[t] for t in w] for w in walks], pa.list_(pa.string()))
    answers = last_answers(index, pa.array([ID[w[-1]] for w in walks]), pa.array([[w[-1]] for w in walks]))
    level, owner = match(index, probe_paths(index, paths, answers), len(walks))
    assert all((o >= 0) == (lv > 0) for lv, o in zip(level, owner))
    return [MATCH_REASONS[lv] for lv in level]


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_entity_and_path_matches_are_dropped_and_a_shared_answer_is_not(fmt: str) -> None:
    name, path_walk, entity_walk, share_walk = CASES[fmt]
    index = _index(fmt, name)
    assert _verdicts(index, [path_walk, entity_walk, share_walk]) == [PATH, ENTITY, None]
    # Reversed, the path still retraces the question; the answer walk no longer ends at the answer.
    assert _verdicts(index, [path_walk[::-1], entity_walk[::-1]]) == [PATH, None]


def test_the_readers_take_the_published_fields() -> None:
    hotpot = read_benchmark(fixture("hotpot_dev_distractor_v1.json"), "hotpotqa")
    assert [q.qid for q in hotpot][:1] == ["5a8b57f25542995d1e6f1371"] and hotpot[0].answers == ["yes"]
    assert hotpot[1].supporting == ["Doctor Strange (2016 film)", "Doctor Strange (2016 film)", "Marvel Studios"]
    assert "Benedict Cumberbatch" in hotpot[1].linked
    wiki = read_benchmark(fixture("2wiki_dev.json"), "2wiki")
    assert {"Polish-Russian War", "Małgorzata Braunek"} <= set(wiki[0].linked)  # evidence subjects and objects
    musique = read_benchmark(fixture("musique_ans_v1.0_dev.jsonl"), "musique")
    assert musique[0].supporting == ["Lionel Messi", "FC Barcelona"] and "Nou Camp" in musique[0].answers
    frames = read_benchmark(fixture("frames_test.tsv"), "frames")
    assert frames[0].answers == ["Jane Ballou"] and len(frames[0].supporting) == 3
    gaia = read_benchmark(fixture("gaia_validation_metadata.jsonl"), "gaia")
    assert [q.answers for q in gaia] == [["Baltimore"], ["Feige"], []]  # "?" withholds the answer
    bc = read_benchmark(fixture("browse_comp_test_set_decrypted.csv"), "browsecomp")
    assert bc[1].answers == ["Małgorzata Braunek"] and not bc[1].supporting


def test_titles_resolve_through_ingest_normalisation_and_the_rest_are_counted() -> None:
    frames = _index("frames", "frames_test.tsv")
    bench = frames.benchmarks[0]
    # URLs become titles as anchors' hrefs do: unquoted, `_` as spaces, cut at `#`.
    assert bench.titles_resolved == 4 and bench.titles_unresolved == 1
    assert bench.unresolved_examples == ["Bachelor_presidents%23List"]
    hotpot = _index("hotpotqa", "hotpot_dev_distractor_v1.json").benchmarks[0].summary()
    assert hotpot["questions"] == 3 and hotpot["titles_unresolved"] == 2


@pytest.mark.parametrize("fmt,name", [("browsecomp", "browse_comp_test_set_decrypted.csv"),
                                      ("gaia", "gaia_validation_metadata.jsonl")])
def test_text_only_benchmarks_never_drop_a_walk(fmt: str, name: str) -> None:
    index = _index(fmt, name)
    assert len(index.pair_keys) == 0 and len(index.entity_keys) == 0
    walks = [[t] + ["Unrelated A"] for t in PAGES.values() if t != "Unrelated A"]
    assert _verdicts(index, walks) == [None] * len(walks)


# format, file name, content with one malformed record, what the error names
MALFORMED = [
    ("hotpotqa", "h.json", '[{"_id": "a", "question": "q?", "answer": "x", "supporting_facts": [["T", 0]]},\n'
                           ' {"_id": "b", "question": "q?", "answer": "x", "supporting_facts": [[3, 0]]}]',
     "record 1: field `supporting_facts[0]`"),
    ("2wiki", "w.json", '[{"_id": "a", "question": "q?", "answer": "x", "evidences": [["s", "r"]]}]',
     "record 0: field `evidences[0]`"),
    ("musique", "m.jsonl", '{"id": "a", "question": "q?", "answer": "x", "paragraphs": []}\n'
                           '{"id": "b", "question": "q?", "answer": "x", "paragraphs": [{"idx": 0}]}\n',
     "line 2: field `paragraphs[0].title`"),
    ("frames", "f.tsv", "Prompt\tAnswer\twiki_links\nq?\tx\t['https://example.org/page']\n",
     "row 0 (line 2): field `wiki_links`"),
    ("browsecomp", "b.csv", "problem,answer,problem_topic,canary\n"
                            "eyJhbGciOiJIUzI1NiJ9dGhpc2lzY2lwaGVydGV4dA==,x,Art,c\n",
     "row 0 (line 2): field `problem`"),
    ("gaia", "g.jsonl", '{"task_id": "t", "Question": ["not", "text"], "Final answer": "x"}\n',
     "line 1: field `Question`"),
    ("jsonl", "j.jsonl", '{"question": "q?", "answer": "x", "titles": "T"}\n', "line 1: field `titles`"),
    ("jsonl", "k.jsonl", '{"question": "q?"}\n{"question": \n', "line 2: not JSON"),
]


@pytest.mark.parametrize("fmt,name,text,names", MALFORMED)
def test_a_malformed_file_is_one_line_naming_file_record_and_field(tmp_path, fmt, name, text, names) -> None:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_benchmark(p, fmt)
    msg = str(err.value)
    assert msg.startswith(f"{p}: ") and names in msg and "\n" not in msg


BLANK_QUESTION = [  # format, file name, a record whose question is blank, the field the error names
    ("hotpotqa", "h.json", '[{"_id": "a", "question": "", "answer": "x"}]', "record 0: field `question`"),
    ("2wiki", "w.json", '[{"_id": "a", "question": " ", "answer": "x"}]', "record 0: field `question`"),
    ("musique", "m.jsonl", '{"id": "a", "question": "\\n", "answer": "x", "paragraphs": []}\n',
     "line 1: field `question`"),
    ("frames", "f.tsv", "Prompt\tAnswer\twiki_links\n \tx\t[]\n", "row 0 (line 2): field `Prompt`"),
    ("browsecomp", "b.csv", "problem,answer\n  ,x\n", "row 0 (line 2): field `problem`"),
    ("gaia", "g.jsonl", '{"task_id": "t", "Question": "\\t", "Final answer": "x"}\n', "line 1: field `Question`"),
    ("jsonl", "j.jsonl", '{"question": "q?", "answer": "x"}\n{"question": "", "answer": "y"}\n',
     "line 2: field `question`"),
]


@pytest.mark.parametrize("fmt,name,text,names", BLANK_QUESTION)
def test_an_empty_question_is_refused_like_a_missing_one(tmp_path, fmt, name, text, names) -> None:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_benchmark(p, fmt)
    assert str(err.value) == f"{p}: {names}: empty or only whitespace (a question needs text)"


def test_what_is_not_a_benchmark_file_says_what_it_is_and_a_json_error_where(tmp_path) -> None:
    """A folder or a FIFO given as FILE was "file not found"; a JSON error stopped mid-phrase ("Invalid control
    character at"): each says what is wrong with what was given."""
    import os

    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for path, said in [(tmp_path, "a folder, not a file"), (fifo, "a FIFO (named pipe), not a regular file"),
                       (tmp_path / "absent.jsonl", "no such file")]:
        with pytest.raises(InputError) as err:
            read_benchmark(path, "jsonl")
        assert str(err.value) == f"{path}: {said}: give a benchmark file (jsonl)"
    bad = tmp_path / "ctl.jsonl"
    bad.write_text('{"question": "q?"}\n{"question": "a\tb"}\n', encoding="utf-8")  # a raw tab in a string
    with pytest.raises(InputError) as err:
        read_benchmark(bad, "jsonl")
    assert str(err.value) == f"{bad}: line 2: not JSON (Invalid control character at column 16)"
    arr = tmp_path / "arr.json"
    arr.write_text('[{"question": "q?",\n  "answer": }]', encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_benchmark(arr, "hotpotqa")
    assert str(err.value) == f"{arr}: line 2: not JSON (Expecting value at column 13)"


def test_hub_layouts_of_hotpotqa_are_read_too(tmp_path) -> None:
    # The Hugging Face copy stores supporting_facts and context as parallel lists (Parquet or JSONL).
    row = {"id": "h1", "question": "q?", "answer": "Ed Wood", "type": "bridge", "level": "easy",
           "supporting_facts": {"title": ["Scott Derrickson", "Ed Wood"], "sent_id": [0, 0]},
           "context": {"title": ["Ed Wood"], "sentences": [["s"]]}}
    (tmp_path / "h.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "h.parquet")
    for name in ("h.jsonl", "h.parquet"):
        (q,) = read_benchmark(tmp_path / name, "hotpotqa")
        assert q.qid == "h1" and q.supporting == ["Scott Derrickson", "Ed Wood"] and q.linked == ["Ed Wood"]
