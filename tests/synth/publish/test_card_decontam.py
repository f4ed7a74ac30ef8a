"""The dataset card names every benchmark file the data was kept apart from, by name and sha256."""

from __future__ import annotations


from helpers.benchworld import ID, fixture, resolver
from synth.decontam.check import ENTITY, PATH, TEXT, contaminated
from synth.decontam.formats import read_benchmark
from synth.decontam.index import BenchIndex, Benchmark, file_sha256
from synth.decontam.tally import Tally, merge, report
from synth.engine.records import Evidence
from synth.publish.decontam import decontam_section
from synth.teacher.tasks import Source


def _walk(sid: str, *titles: str) -> Source:
    ents = [{"page_id": ID[t], "title": t, "description": None, "aliases": None} for t in titles]
    return Source("walk", sid, ents, [Evidence(ID[a], ID[b], 1, "p", b) for a, b in zip(titles, titles[1:])], 0)


def _entry() -> dict:
    files = [("hotpotqa", "hotpot_dev_distractor_v1.json"), ("musique", "musique_ans_v1.0_dev.jsonl")]
    benches = [Benchmark(f, n, file_sha256(fixture(n)), read_benchmark(fixture(n), f)) for f, n in files]
    index = BenchIndex(benches, resolver())
    walks = [_walk("w1", "Scott Derrickson", "Ed Wood"), _walk("w2", "Lionel Messi", "FC Barcelona"),
             _walk("w3", "Argentina", "Unrelated A", "Camp Nou"), _walk("w4", "Unrelated A", "Unrelated B")]
    # Two shards: the first drops w1 and w2, the second w3 and one written question.
    shards = [Tally(), Tally()]
    for i, (reason, row) in sorted(contaminated(index, walks).items()):
        shards[i >= 2].add(int(index.owner_bench[row]), reason, {"source_id": walks[i].source_id})
    shards[1].add(0, TEXT, {"question": "q", "ngram": "g"})
    return report([b.summary() for b in benches], merge([t.as_dict() for t in shards]))


def test_the_card_lists_each_file_with_its_hash_and_drops() -> None:
    entry = _entry()
    assert entry["dropped"] == {ENTITY: 1, PATH: 2, TEXT: 1}
    text = "\n".join(decontam_section({"decontamination": entry}))
    for b in entry["benchmarks"]:
        row = next(line for line in text.splitlines() if f"`{b['file']}`" in line)
        assert f"`{b['sha256']}`" in row and len(b["sha256"]) == 64
        assert row.endswith(" | ".join(str(b["dropped"][lv]) for lv in ("entity", "path", "text")) + " |")
    assert str(fixture("x").parent) not in text  # a file's name, never where it lay
    hotpot, musique = entry["benchmarks"]
    assert hotpot["dropped"] == {"entity": 0, "path": 1, "text": 1}
    assert musique["dropped"] == {"entity": 1, "path": 1, "text": 0}


def test_a_card_without_benchmarks_says_so() -> None:
    text = "\n".join(decontam_section({}))
    assert "## Decontamination" in text and "not checked against benchmark files" in text
