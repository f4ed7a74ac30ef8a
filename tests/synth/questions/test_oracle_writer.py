"""The oracle's question writer: clues from the evidence, the text contract, no mistakes, varied phrasing."""

import random
import re

from synth.engine.records import Evidence
from synth.questions.skeletons import count_skeletons, vocabulary
from synth.teacher.oracle_questions import chain_question, subgraph_chain
from synth.teacher.question_frames import CLOSER_LEADS, CLOSERS, frame_words
from synth.teacher.question_text import content_words, leaked, repeats_description, sentences

SYLLABLES = ["al", "bre", "cor", "dan", "el", "fa", "gor", "hin", "ir", "jo", "ka", "lum", "mer", "nor", "os",
             "pel", "qua", "ros", "sil", "tam", "ul", "ven", "wes", "xan", "yor", "zel"]
KINDS = ["river", "village", "painter", "castle", "mountain pass", "ferry company", "folk dance", "market town"]


def _word(r: random.Random) -> str:
    return "".join(r.choice(SYLLABLES) for _ in range(r.randint(2, 3)))


def _chain(r: random.Random, c: int, hops: int) -> tuple[list[dict], list[Evidence]]:
    """A chain of made-up entities whose paragraphs mention the next one inside a sentence of made-up words."""
    ents = [{"page_id": f"c{c}-{i}", "title": f"{_word(r).capitalize()} {_word(r).capitalize()}",
             "description": f"{r.choice(KINDS).capitalize()} in {_word(r).capitalize()}", "aliases": None}
            for i in range(hops + 1)]
    links = []
    for i in range(hops):
        a, b = ents[i], ents[i + 1]
        words = [_word(r) for _ in range(14)]
        para = (f"{a['title']} is a {words[0]} {words[1]} of the {words[2]} {words[3]}. Its {words[4]} {words[5]} "
                f"and {words[6]} were shaped by {b['title']} during the {words[7]} {words[8]} of {words[9]}, "
                f"when {words[10]} {words[11]} came to {words[12]} {words[13]}.")
        links.append(Evidence(a["page_id"], b["page_id"], 1, para, b["title"]))
    return ents, links


def _sources(n: int = 150, hops: int = 5, seed: int = 0):
    r = random.Random(seed)
    return [_chain(r, c, hops) for c in range(n)]


def _old_writer(chain: list[dict], rnd: random.Random) -> str:
    """The writer before evidence clues, kept here as the baseline: fixed templates over descriptions."""
    openers = ["Start from the Wikipedia article on {t}.", "Begin with the article about {t}.",
               "Open the article on {t}."]
    first = ["It mentions {d}.", "That article links to {d}.", "Its text refers to {d}."]
    later = ["The latter's article mentions {d}.", "That article in turn links to {d}.", "Its article refers to {d}.",
             "From there, the article mentions {d}."]
    closers = ["What is the title of the last article in this chain?",
               "Which article is reached at the end of the chain?", "Name the final entity of this chain."]
    parts = [rnd.choice(openers).format(t=chain[0]["title"])]
    for i, e in enumerate(chain[1:], start=1):
        d = e["description"]
        d = ("an " if d[0].lower() in "aeiou" else "a ") + d[0].lower() + d[1:]
        parts.append(rnd.choice(first if i == 1 else later).format(d=d))
    parts.append(rnd.choice(closers))
    return " ".join(parts)


def _material(ents, links):
    return vocabulary([e["title"] for e in ents] + [e["description"] for e in ents] + [l.paragraph for l in links])


def test_text_contract_and_clues_from_the_evidence():
    for ents, links in _sources(40):
        text, hops = chain_question(ents, links, seed=7)
        sents = sentences(text, protect=[e["title"] for e in ents])
        assert len(sents) == len(hops) + 2 and ents[0]["title"] in sents[0]
        assert any(sents[-1].lower().endswith(c.lower()) for c in CLOSERS)
        assert sents[-1].startswith(tuple(l.strip().capitalize() for l in CLOSER_LEADS if l)) or sents[-1][0].isupper()
        for i, (hop, sent, link) in enumerate(zip(hops, sents[1:-1], links)):
            assert hop["bridge"] == ents[i + 1]["title"]
            clue = re.search(r'"([^"]+)"', hop["sub_question"]).group(1)
            assert f'"{clue}"' in sent  # the hop's sentence quotes the same clue, in chain order
            left, _, right = clue.partition("___")
            assert left.strip(" ,") in link.paragraph and right.strip(" ,") in link.paragraph  # quoted evidence
            later = ents[i + 1:]
            assert not any(leaked(clue.replace("___", " "), e) for e in later)  # names nothing ahead
        assert "another topic" not in text
        assert repeats_description(text, ents[-1]["description"]) is None
        assert leaked(text, ents[-1], named=[ents[0]["title"]]) is None


def test_seeded_and_repairs_change_only_the_named_hop():
    ents, links = _sources(1)[0]
    assert chain_question(ents, links, seed=3) == chain_question(ents, links, seed=3)
    assert chain_question(ents, links, seed=3) != chain_question(ents, links, seed=4)
    _, before = chain_question(ents, links, seed=3)
    _, after = chain_question(ents, links, seed=3, fix=frozenset([2]))
    assert [h for i, h in enumerate(before) if i != 2] == [h for i, h in enumerate(after) if i != 2]
    assert before[2] != after[2]
    text, _ = chain_question(ents, links, seed=3, max_words=60)
    assert len(text.split()) <= 120  # clues shrink to fit a small budget (the frames alone are ~60 words)


def test_phrasing_is_ten_times_more_varied_than_the_template_writer():
    old, new = [], []
    for c, (ents, links) in enumerate(_sources()):
        vocab, titles = _material(ents, links), [e["title"] for e in ents]
        old.append((_old_writer(ents, random.Random(c)), vocab, titles))
        new.append((chain_question(ents, links, seed=c)[0], vocab, titles))
    before, after = count_skeletons(old), count_skeletons(new)
    assert before["sentences"] == after["sentences"]
    assert after["skeletons"] >= 10 * before["skeletons"], (before, after)
    assert after["top20_share"] < 0.3 < before["top20_share"]


def test_frames_use_only_puzzle_words():
    # Any other word in a frame would read as a clue word to the ambiguity check.
    assert content_words(frame_words()) == set()


def test_subgraph_chain_never_skips_and_ends_forward():
    r = random.Random(1)
    for trial in range(30):
        ids = [f"n{i}" for i in range(8)]
        ents = [{"page_id": p, "title": p.upper(), "description": None, "aliases": None} for p in ids]
        edges = {(a, b) for a in ids for b in ids if a != b and r.random() < 0.3}
        links = [Evidence(a, b, 1, f"{a} links {b}", b) for a, b in sorted(edges)]
        found = subgraph_chain(ents, links, 3, random.Random(trial))
        if found is None:
            continue
        chain, backward = found
        path = [e["page_id"] for e in chain]
        assert len(path) - 1 >= 3 and not backward[-1]
        assert not any((path[i], path[j]) in edges for i in range(len(path)) for j in range(i + 2, len(path)))
        assert all(((a, b) in edges) != bw or (b, a) in edges for a, b, bw in zip(path, path[1:], backward))


def test_the_blank_stands_for_the_linked_word_not_a_word_that_contains_it():
    from synth.teacher.oracle_questions import _clauses

    para = "Engineers using the sine rule compute sin of an angle; sin is periodic."
    (left, anchor, right), = _clauses(para, "sin", most=1)
    assert anchor == "sin" and left == ["Engineers", "using", "the", "sine", "rule", "compute"]
    # a link on the stem of a longer word still takes the whole word ("Roman" in "Romans")
    (_, anchor, _), = _clauses("The Romans built roads.", "Roman", most=1)
    assert anchor == "Romans"
    # inside a word only when nothing else carries it
    (_, anchor, _), = _clauses("It was a hardcore punk band.", "core", most=1)
    assert anchor == "hardcore"
