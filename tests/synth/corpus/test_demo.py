"""The demo corpus: real summaries as KILT JSONL with title-mention anchors."""

import json


from synth.corpus.demo import build_demo_corpus, build_matcher, find_mentions


def test_whole_words_longest_first_first_mention_only():
    auto = build_matcher(["New York", "New York City", "York", "Ant", "Water", "Mercury (planet)", "Mercury (element)"])
    text = "New York City is not York. Antelope and water; an ant, New York City again. Mercury rises."
    got = [(text[a:b], t) for a, b, t in find_mentions(text, auto)]
    assert ("New York City", "New York City") in got
    assert ("York", "York") in got
    assert ("New York", "New York") not in got  # only inside the longer match
    assert ("ant", "Ant") in got and all(m != "Ant" or s == "ant" for s, m in got)  # not inside "Antelope"
    assert ("water", "Water") in got
    assert sum(1 for _, t in got if t == "New York City") == 1  # first mention only
    assert not any(t.startswith("Mercury") for _, t in got)  # ambiguous surface form is skipped


def test_exclude_self():
    auto = build_matcher(["Paris", "France"])
    got = find_mentions("Paris is in France.", auto, exclude="Paris")
    assert [t for _, _, t in got] == ["France"]


def test_demo_corpus_is_kilt(tmp_path):
    out = tmp_path / "demo.jsonl"
    stats = build_demo_corpus(out)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == stats["pages"] > 9000
    ids = set()
    n_anchors = 0
    for line in lines:
        r = json.loads(line)
        assert isinstance(r["_id"], str) and r["text"][0] == r["wikipedia_title"]
        ids.add(r["_id"])
        for a in r["anchors"]:
            assert r["text"][a["paragraph_id"]][a["start"]:a["end"]] == a["text"]
            assert a["wikipedia_id"] != r["_id"]
            n_anchors += 1
    assert n_anchors == stats["anchors"] > 20000
    assert len(ids) == len(lines)
    # Deterministic: a second build is byte-identical.
    out2 = tmp_path / "demo2.jsonl"
    build_demo_corpus(out2)
    assert out2.read_bytes() == out.read_bytes()
