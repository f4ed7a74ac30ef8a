"""The entity and path checks on question sources: walks and subgraphs, aliases, attribution, the bench path.

A subgraph's question may take any of its edges and end at any node, so an edge between two
supporting pages is a path match and any node that is a benchmark answer, beside another page of
that question, an entity match.  A drop is attributed to one benchmark question: the first file
that holds the key.
"""

from __future__ import annotations

import pyarrow as pa

from helpers.benchworld import ID, fixture, resolver
from synth.decontam.check import ENTITY, PATH, contaminated, last_answers, match, probe_paths, probe_sources
from synth.decontam.formats import BenchQuestion, read_benchmark
from synth.decontam.index import BenchIndex, Benchmark
from synth.engine.records import Evidence
from synth.teacher.tasks import Source


def _entity(title: str, aliases: list[str] | None = None) -> dict:
    return {"page_id": ID[title], "title": title, "description": None, "aliases": aliases}


def _edge(a: str, b: str) -> Evidence:
    return Evidence(ID[a], ID[b], 1, f"{a} links to {b}.", b)


def _walk(sid: str, *titles: str, aliases: list[str] | None = None) -> Source:
    ents = [_entity(t) for t in titles[:-1]] + [_entity(titles[-1], aliases)]
    return Source("walk", sid, ents, [_edge(a, b) for a, b in zip(titles, titles[1:])], 0)


def _subgraph(sid: str, titles: list[str], edges: list[tuple[str, str]]) -> Source:
    return Source("subgraph", sid, [_entity(t) for t in titles], [_edge(a, b) for a, b in edges], 0)


def _hotpot() -> BenchIndex:
    name = "hotpot_dev_distractor_v1.json"
    return BenchIndex([Benchmark("hotpotqa", name, "-", read_benchmark(fixture(name), "hotpotqa"))], resolver())


def test_subgraphs_match_by_edges_and_by_any_answer_node() -> None:
    index = _hotpot()
    sources = [
        # an edge between the two supporting pages, whatever the order of the nodes
        _subgraph("s-path", ["Unrelated A", "Ed Wood", "Scott Derrickson"],
                  [("Unrelated A", "Ed Wood"), ("Ed Wood", "Scott Derrickson")]),
        # both pages present but not linked to each other: no path to retrace
        _subgraph("s-apart", ["Ed Wood", "Unrelated A", "Scott Derrickson"],
                  [("Ed Wood", "Unrelated A"), ("Unrelated A", "Scott Derrickson")]),
        # the answer (Marvel Studios) in the middle of the subgraph, a context page elsewhere in it
        _subgraph("s-entity", ["Benedict Cumberbatch", "Marvel Studios", "Unrelated B"],
                  [("Benedict Cumberbatch", "Unrelated B"), ("Unrelated B", "Marvel Studios")]),
        _subgraph("s-clean", ["Unrelated A", "Marvel Studios", "Unrelated B"],
                  [("Unrelated A", "Marvel Studios"), ("Marvel Studios", "Unrelated B")]),
    ]
    found = contaminated(index, sources)
    assert {sources[i].source_id: reason for i, (reason, _) in found.items()} == {"s-path": PATH, "s-entity": ENTITY}


def test_an_alias_of_the_answer_entity_is_the_answer() -> None:
    # MuSiQue lists "Nou Camp" among the answer's aliases; a walk ending at a page aliased so matches too.
    name = "musique_ans_v1.0_dev.jsonl"
    index = BenchIndex([Benchmark("musique", name, "-", read_benchmark(fixture(name), "musique"))], resolver())
    walks = [_walk("w-alias", "Argentina", "Unrelated A", "Burbank, California", aliases=["Nou Camp"]),
             _walk("w-plain", "Argentina", "Unrelated A", "Unrelated B")]
    assert {walks[i].source_id: r for i, (r, _) in contaminated(index, walks).items()} == {"w-alias": ENTITY}


def test_a_shared_key_belongs_to_the_first_file_and_a_walk_to_its_first_hit() -> None:
    first = [BenchQuestion("a1", "q", ["x"], ["Unrelated A", "Unrelated B"])]
    second = [BenchQuestion("b1", "q", ["y"], ["Unrelated A", "Unrelated B"]),
              BenchQuestion("b2", "q", ["z"], ["Lionel Messi", "FC Barcelona"])]
    index = BenchIndex([Benchmark("jsonl", "one", "-", first), Benchmark("jsonl", "two", "-", second)], resolver())
    walks = [_walk("w1", "Unrelated B", "Unrelated A"), _walk("w2", "Lionel Messi", "FC Barcelona", "Unrelated A",
                                                                "Unrelated B")]
    found = contaminated(index, walks)
    assert [index.questions[row].qid for _, row in sorted(found.values())] in (["a1", "b2"], ["b2", "a1"])
    assert index.questions[found[0][1]].qid == "a1" and index.questions[found[1][1]].qid == "b2"


def test_arrow_paths_and_sources_agree() -> None:
    # The bench's vectorised probe of Arrow paths gives the verdicts of the per-source probe.
    index = _hotpot()
    walks = [["Unrelated A", "Scott Derrickson", "Ed Wood"], ["Benedict Cumberbatch", "Unrelated A", "Marvel Studios"],
             ["Unrelated B", "Marvel Studios"], ["Ed Wood"], ["Doctor Strange (2016 film)", "Marvel Studios"]]
    sources = [_walk(f"w{i}", *w) for i, w in enumerate(walks)]
    answers = last_answers(index, pa.array([ID[w[-1]] for w in walks]), pa.array([[w[-1]] for w in walks]))
    arrow = match(index, probe_paths(index, pa.array([[ID[t] for t in w] for w in walks]), answers), len(walks))
    per = match(index, probe_sources(index, sources), len(walks))
    assert arrow[0].tolist() == per[0].tolist() == [1, 2, 0, 0, 1]
    assert arrow[1].tolist() == per[1].tolist()


def test_the_coarse_key_never_splits_names_that_normalise_alike() -> None:
    # The bulk answer lookup keeps a walk only when its name's coarse key is an answer's: two names
    # equal after normalisation must share the key, or an answer would be missed.
    from synth.decontam.index import coarse_key
    from synth.text.answers import normalize_answer

    names = ["The Beatles", "Beatles", "beatles!", "A Tale of Two Cities", "Tale of Two Cities", "AN  Apple, Inc.",
             "Małgorzata Braunek", "MAŁGORZATA BRAUNEK", "Théâtre de l'Odéon", "the_the", "1,000 (number)",
             "Ed Wood (film)", "São Paulo", "Ça va", "Übermensch", "Ⅻ Olympiad", "ΑΘΗΝΑ", "an", "the the"]
    raw = coarse_key(pa.array(names)).to_pylist()
    normal = coarse_key(pa.array([normalize_answer(n) for n in names])).to_pylist()
    assert raw == normal
    assert len(set(raw)) > len(names) // 2  # and it still tells most names apart


def test_bulk_answers_are_the_per_page_answers() -> None:
    # last_answers (Arrow, a coarse prefilter, then exact) gives what answers_of gives page by page.
    qs = [BenchQuestion("q1", "q", ["Marvel Studios", "Marvel"], ["Unrelated A"]),
          BenchQuestion("q2", "q", ["the Camp Nou"], ["Unrelated B"]), BenchQuestion("q3", "q", ["1957"], [])]
    index = BenchIndex([Benchmark("jsonl", "x", "-", qs)], resolver())
    ends = [("Marvel Studios", []), ("Camp Nou", ["Nou Camp"]), ("Unrelated A", ["MARVEL"]),
            ("Unrelated B", ["Camp Nou!"]), ("Ed Wood", ["1957", None]), ("Argentina", [])]
    rows, aids = last_answers(index, pa.array([ID[t] for t, _ in ends]),
                              pa.array([[t, *a] for t, a in ends], pa.list_(pa.string())))
    bulk = [sorted(int(a) for r, a in zip(rows, aids) if r == i) for i in range(len(ends))]
    assert bulk == [index.answers_of(ID[t], [t, *(x for x in a if x)]) for t, a in ends]
    assert [bool(x) for x in bulk] == [True, True, True, True, True, False]
