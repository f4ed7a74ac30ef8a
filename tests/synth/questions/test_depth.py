"""Effective depth against every adversary: a hop one search of any of them enters is an entry point."""

import pyarrow as pa
import pytest

from synth.engine.records import PAGE_SCHEMA, Hop, Question
from synth.engine.store import write_parquet_atomic
from synth.questions.depth import ADVERSARIES, LEXICAL, Adversaries, DepthMeter, by_adversary, searches
from synth.tools.dense import DenseIndex, Embedder
from synth.tools.embed import page_texts
from synth.tools.search import SearchIndex, build_index


def _page(pid: str, title: str, text: str) -> dict:
    return {"page_id": pid, "title": title, "paragraphs": [text], "description": None, "aliases": None,
            "wikidata_id": None, "categories": None, "url": None, "n_chars": len(text)}


# "Zephyr" is a title whose page never says the word; "Gale" says it in its text.  The agents' tool ranks
# the titled page first for a query with that word (title and body are one field, and the title counts
# twice); a plain BM25 over page bodies never sees the title, and ranks Gale first.
PAGES = [
    _page("1", "Weather", "Weather is the state of the atmosphere, and Gale is one kind of it."),
    _page("2", "Gale", "A gale is a strong wind, sometimes called a zephyr by poets, that sinks ships at sea."),
    _page("3", "Ship", "A ship is a large watercraft that travels the oceans."),
    _page("4", "Zephyr", "A gentle west wind that the Greeks named after a god."),
    _page("5", "Sea", "The sea is the body of salty water that covers most of the Earth."),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> SearchIndex:
    root = tmp_path_factory.mktemp("depth")
    write_parquet_atomic(pa.Table.from_pylist(PAGES, schema=PAGE_SCHEMA), root / "pages" / "a.parquet")
    build_index(root / "pages", root / "index", threads=1, heap_mb=32)
    return SearchIndex.open(root / "index")


@pytest.fixture(scope="module")
def dense() -> DenseIndex:
    """The pages' vectors by the packaged all-MiniLM-L6-v2, as the embed stage makes them."""
    embedder = Embedder()
    table = pa.Table.from_pylist(PAGES, schema=PAGE_SCHEMA)
    return DenseIndex([p["page_id"] for p in PAGES], embedder.encode(page_texts(table, "title_description")), embedder)


def _question(sub_questions: list[str]) -> Question:
    path, titles = ["1", "2", "3"], ["Weather", "Gale", "Ship"]
    text = "Start at Weather. " + " ".join(sub_questions) + " What is the last page?"
    return Question(question_id="q-1", kind="walk", source_id="w1", path=path, titles=titles, question=text,
                    answer="Ship", answer_aliases=[], answer_page_id="3",
                    hops=[Hop(s, t, p) for s, t, p in zip(sub_questions, titles[1:], path[1:])],
                    teacher_model="test", prompt_sha="x", seed=0, split="sft")


def test_a_hop_the_tool_misses_but_a_plain_bm25_finds_is_an_entry_point(index):
    clue = "Which zephyr does the previous page link to?"
    # The premise: within k = 1, the tool's search for the clue misses Gale and a plain BM25 finds it.
    assert index.search_ids(clue, 1) == ["4"]
    assert index.search_ids(clue, 1, ranking="body") == ["2"]
    q = _question([clue, "Which vessel does that article mention?"])
    alone = DepthMeter(index, k=1, adversaries=["tool"]).measure(q)
    assert alone.effective == 2 and alone.entry is None  # the tool alone would call it full depth
    both = DepthMeter(index, k=1).measure(q)
    assert both.effective == 1 and both.entry.page == 1 and both.entry.adversary == "body"
    assert both.by_adversary == {"tool": 2, "body": 1, "keywords": 1}
    assert "plain BM25" in both.entry.describe(2) and "'Gale'" in both.entry.describe(2)
    report = by_adversary([both])
    assert report["body"] == {"questions": 1, "entered": 1, "hops_caught": 1, "full_depth_share": 0.0}
    assert report["tool"]["entered"] == 0 and report["tool"]["full_depth_share"] == 1.0


def test_keywords_drop_the_frame_and_search_with_both_rankings(index):
    adv = Adversaries(index, k=2)
    found = adv.found("Which zephyr does the previous page link to?")
    assert [(a, q) for a, q, _ in found] == [("tool", "Which zephyr does the previous page link to?"),
                                             ("body", "Which zephyr does the previous page link to?"),
                                             ("keywords", "zephyr"), ("keywords", "zephyr")]
    # The keyword query is an exact title for the tool: the titled page first, Gale by its text second.
    assert found[2][2] == ["4", "2"] and found[3][2] == ["2"]
    assert adv.pages("Which zephyr does the previous page link to?") == ["4", "2"]


def test_the_adversaries_are_checked_and_searches_remembered(index):
    with pytest.raises(ValueError, match="unknown adversaries"):
        Adversaries(index, 5, ["tool", "semantic"])
    with pytest.raises(ValueError, match="at least one"):
        Adversaries(index, 5, [])
    with pytest.raises(ValueError, match="dense adversary needs the page vectors"):
        Adversaries(index, 5, ADVERSARIES)  # named, but no DenseIndex to search
    assert Adversaries(index, 5).names == LEXICAL  # unnamed: the adversaries there are indexes for
    adv = Adversaries(index, 5, LEXICAL)
    adv.found("strong wind at sea")
    made = adv.searches  # the tool's, the body's, and the keywords' with the tool (with the body: the same bag)
    assert (made, adv.pruned) == (3, 1)
    adv.found("Strong wind  at SEA")  # the same bag of words and title key: every search answered from memory
    assert adv.searches == made and adv.pruned == 5


@pytest.mark.parametrize("first, second", [("ships", "ship"), ("ship", "ships")])
def test_a_remembered_search_is_one_the_ranking_cannot_tell_apart(index, first, second):
    # Stemmed, "ship" and "ships" are one query for the tool; the plain BM25 reads words as written, so for
    # it they are two, and what one returned must not answer the other, whichever was asked first.
    direct = {q: index.search_ids(q, 5, ranking="body") for q in (first, second)}
    assert direct[first] != direct[second]  # the premise
    adv = Adversaries(index, 5, ["tool", "body"])
    assert [adv.top(q, "body") for q in (first, second)] == [direct[first], direct[second]]
    assert adv.pruned == 0
    assert adv.top(first.upper(), "body") == direct[first]  # case aside the same words: from memory
    assert adv.pruned == 1


def test_a_paraphrase_only_the_dense_retriever_finds_is_an_entry_point(index, dense):
    # "vessel" is no word of any page: no lexical search finds Ship for the second hop's clue, which means it.
    first, second = "Which kind of weather is meant?", "Which vessel does that article mention?"
    assert index.search_ids(second, 1) == [] and index.search_ids(second, 1, ranking="body") == []
    assert dense.search_ids(second, 1) == ["3"]  # the premise: by meaning, Ship first
    q = _question([first, second])
    lexical = DepthMeter(index, k=1, adversaries=LEXICAL).measure(q)
    assert lexical.effective == 2 and lexical.entry is None  # three lexical adversaries: full depth
    meter = DepthMeter(index, k=1, dense=dense)
    assert meter.adversaries.names == ADVERSARIES
    d = meter.measure(q)
    assert d.effective == 0 and d.by_adversary == {"tool": 2, "body": 2, "keywords": 2, "dense": 0}
    assert (d.entry.adversary, d.entry.hop, d.entry.page, d.entry.rank) == ("dense", 1, 2, 1)
    assert "dense retriever" in d.entry.describe(2) and "'Ship'" in d.entry.describe(2)
    # The question's texts were searched in one batch first, each once: the depth's own searches were remembered.
    adv = meter.adversaries
    assert adv.dense_texts == len({t for _, _, t in searches(q)}) == 3 and adv.pruned >= 3
    assert by_adversary([d])["dense"] == {"questions": 1, "entered": 1, "hops_caught": 2, "full_depth_share": 0.0}
