"""The local BM25 index: build, ranking, masking, hostile queries, snippets, lookups, the stage."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers.linkcorpus import write_ingest
from helpers.searchcorpus import N_EMPTY, N_PAGES, build_test_index, pages_table

from flows.config import load_config
from synth.engine.runner import run_stage
from synth.engine.stage import Stage
from synth.tools.search import IndexNotFound, SearchIndex, build_index
from synth.tools.analysis import query_terms, render_paragraph, snippet_window, title_key
from synth.engine.store import Store


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> SearchIndex:
    return SearchIndex.open(build_test_index(tmp_path_factory.mktemp("search")), snippet_chars=120)


def test_build_counts_and_drops_empty(tmp_path):
    from helpers.searchcorpus import write_pages

    stats = build_index(write_pages(tmp_path / "pages"), tmp_path / "index", threads=1, heap_mb=32)
    assert stats["pages"] == N_PAGES and stats["empty"] == N_EMPTY and stats["indexed"] == N_PAGES - N_EMPTY
    assert SearchIndex.open(tmp_path / "index").num_docs == N_PAGES - N_EMPTY
    # A rebuild into the same folder starts over instead of adding to what is there.
    build_index(tmp_path / "pages", tmp_path / "index", threads=1, heap_mb=32)
    assert SearchIndex.open(tmp_path / "index").num_docs == N_PAGES - N_EMPTY


@pytest.mark.parametrize("title", ["Paris", "Paris Hilton", "Paris, Texas", "Obsidian", "Zürich", "Volcano 3"])
def test_exact_title_ranks_first(index, title):
    assert index.search(title, 5)[0]["title"] == title
    assert index.search(title.lower(), 5)[0]["title"] == title


def test_results_have_the_documented_shape(index):
    hits = index.search("volcano crater lake", 5)
    assert len(hits) == 5
    assert all(set(h) == {"page_id", "title", "snippet"} for h in hits)
    assert all(isinstance(v, str) for h in hits for v in h.values())
    assert [h["page_id"] for h in hits] == index.search_ids("volcano crater lake", 5)


def test_masked_page_never_returned_and_k_kept(index):
    top = index.search("volcano", 5)
    assert len(top) == 5
    masked = [top[0]["page_id"], top[2]["page_id"]]
    hits = index.search("volcano", 5, exclude_page_ids=masked)
    assert len(hits) == 5 and not set(masked) & {h["page_id"] for h in hits}
    # Masked for every k, even when k covers every matching page.
    for k in (1, 3, 13, 50):
        assert not set(masked) & set(index.search_ids("volcano", k, exclude_page_ids=masked))
    # The result is the top k of the pages that are not masked, in the same order.
    for q in ("volcano crater", "Paris Eiffel Tower", "lighthouse harbour", "erupted times"):
        full = index.search_ids(q, 100)
        for masked in (full[:1], full[1:3], full[:4] + ["no-such-id"]):
            assert index.search_ids(q, 3, exclude_page_ids=masked) == [p for p in full if p not in masked][:3]
    # An exact-title query for the masked page itself does not bring it back.
    assert "100" not in index.search_ids("Paris", 5, exclude_page_ids=["100"])
    assert "100" not in index.search_ids("Paris", 5, exclude_page_ids="100")


HOSTILE = [
    "", "   ", '"', '""', "'", ":", "title:Paris", "Paris AND", "AND OR NOT", "NOT Paris", "-Paris +Texas",
    "(Paris", "Paris)", "[1 TO 5]", "{}", "a*", "?", "~2", "^3", "\\", "\\\\\"", "Paris^", "obsidian~",
    "\"unbalanced quote", "Zürich 東京", "🌋 volcano", "\x00\x01", "a" * 5000, " ".join(["volcano"] * 500),
    "who was the founder of hilton hotels?", "the", "the the the", "\ud800 lone surrogate", "\udfff",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_queries_never_raise(index, query):
    hits = index.search(query, 5)
    assert isinstance(hits, list) and len(hits) <= 5


def test_empty_and_stopword_queries(index):
    assert index.search("", 5) == [] and index.search("  \t ", 5) == [] and index.search("?!", 5) == []
    assert index.search("Paris", 0) == []
    assert query_terms("the founder of the hotels") == ["founder", "hotel"]
    assert query_terms("the the") == ["the"]  # only stop words: they are kept
    assert index.search("AND OR NOT Obsidian", 5)[0]["title"] == "Obsidian"


def test_snippet_is_the_best_matching_paragraph(index):
    hit = next(h for h in index.search("obsidian glass blades", 5) if h["title"] == "Obsidian")
    assert "glass" in hit["snippet"] and "Knappers" in index.get_page("103")["paragraphs"][3]
    assert hit["snippet"].strip("…") in index.get_page("103")["paragraphs"][3]
    # A later paragraph wins over the lead when it matches better.
    hit = index.search("Tarnoch eruption ash", 1)[0]
    assert hit["title"] == "Mount Quillar" and hit["snippet"].startswith("Its last eruption")
    # Accented and CJK text matches through folding.
    assert index.search("zurichsee", 1)[0]["snippet"].startswith("Der Zürichsee")
    assert "東京" in index.search("東京", 1)[0]["snippet"]


def test_snippet_is_trimmed_around_the_match(index):
    hit = index.search("obsidian surgeons", 1, snippet_chars=60)[0]
    assert len(hit["snippet"]) <= 60 and "surgeons" in hit["snippet"]
    assert hit["snippet"].startswith("…")
    # A title-only match shows the lead paragraph, headings skipped.
    assert index.search("Blue Fjord", 1)[0]["snippet"] == "A narrow inlet on a rocky coast."


def test_snippet_window():
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho"
    assert snippet_window("short", [], 40) == "short"
    at = text.index("omicron")
    out = snippet_window(text, [(at, at + 7)], 30)
    assert len(out) <= 30 and "omicron" in out and out.startswith("…")
    assert all(w in text.split() for w in out.strip("…").split())  # cut on whole words
    head = snippet_window(text, [], 30)
    assert head.startswith("alpha") and head.endswith("…") and len(head) <= 30


def test_get_page_by_id_and_title(index):
    p = index.get_page("100")
    assert p["title"] == "Paris" and p["description"] == "capital of France" and p["aliases"] == ["City of Light"]
    assert p["paragraphs"][1] == "## History" and p["paragraphs"][3] == "- Eiffel Tower"
    assert index.get_page("Paris")["page_id"] == "100"
    assert index.get_page("paris, texas")["page_id"] == "102"
    assert index.get_page("Paris_Hilton")["page_id"] == "101"
    assert index.get_page("Zürich")["page_id"] == "104"
    assert index.get_page("Blank page") is None  # not indexed: no text
    assert index.get_page("nope") is None and index.get_page("") is None and index.get_page(None) is None


def test_paragraph_indices_match_the_corpus(index):
    src = pages_table().to_pylist()
    long = next(r for r in src if r["page_id"] == "105")
    got = index.get_page("105")["paragraphs"]
    assert len(got) == len(long["paragraphs"])
    assert got[7] == long["paragraphs"][7].strip() and got[5] == "## Part 5"


def test_concurrent_searches_match_sequential(index):
    queries = ["volcano", "Paris", "obsidian glass", "harbour lighthouse", "Zürich", "eruption"] * 20
    expected = [index.search(q, 5) for q in queries]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda q: index.search(q, 5), queries))
    assert got == expected


def test_missing_index_names_the_command(tmp_path):
    with pytest.raises(IndexNotFound, match="hopforge index --out"):
        SearchIndex.open(tmp_path / "index")


def test_render_and_title_key():
    assert render_paragraph("Section::::Early life.\n") == "## Early life"
    assert render_paragraph("Section::::Career.:::Film.\n") == "### Film"
    assert render_paragraph("BULLET::::- item\n") == "- item"
    assert render_paragraph("BULLET::::item") == "- item"
    assert render_paragraph(None) == "" and render_paragraph("plain\n") == "plain"
    assert title_key(" Barack_Obama ") == title_key("barack  obama") == "barack obama"


def test_index_stage_commits_the_index(tmp_path):
    from synth.tools.stage import run_index

    store = Store(tmp_path)
    write_ingest(store, pages_table(), _no_links())
    from flows.stages import BY_NAME

    stage = BY_NAME.get("index") or Stage(name="index", entry=run_index, reads=("ingest",),
                                          outputs=("index",), command="index")
    out = run_stage(stage, load_config(None), store, progress=False)
    assert out.report["input"] == N_PAGES and out.report["output"] == N_PAGES - N_EMPTY
    assert out.report["dropped"] == {"empty": N_EMPTY}
    assert (tmp_path / "index").is_symlink() and not list((tmp_path / ".stages" / "index").glob("*.partial"))
    assert SearchIndex.open(tmp_path / "index").search("Paris", 1)[0]["page_id"] == "100"
    assert run_stage(stage, load_config(None), store, progress=False).reused


def _no_links():
    import pyarrow as pa

    from synth.engine.records import LINK_SCHEMA

    return pa.Table.from_pylist([], schema=LINK_SCHEMA)


def test_a_shared_title_opens_the_page_with_the_smallest_id(tmp_path):
    from helpers.searchcorpus import _page

    from synth.engine.records import PAGE_SCHEMA
    from synth.engine.store import write_parquet_atomic
    import pyarrow as pa

    twins = [_page(pid, "Twin", [f"Twin page {pid}.\n"]) for pid in ("10", "100", "9")]
    lower = [_page("8", "twin", ["A twin in lower case.\n"])]
    crowd = [_page(str(pid), "Crowd", [f"Crowd page {pid}.\n"]) for pid in range(30, 50)] + \
        [_page("5", "Crowd", ["The crowd's first page.\n"])]
    write_parquet_atomic(pa.Table.from_pylist(twins + lower + crowd, schema=PAGE_SCHEMA), tmp_path / "p" / "a.parquet")
    build_index(tmp_path / "p", tmp_path / "index", threads=1, heap_mb=32)
    ix = SearchIndex.open(tmp_path / "index")
    assert ix.get_page("Twin")["page_id"] == "9"  # numerically smallest, though "10" < "9" as strings
    assert ix.get_page("twin")["page_id"] == "8"  # an exact title wins over case-insensitive ones
    assert ix.get_page("TWIN")["page_id"] == "8"  # none exact: the smallest id of all that match
    assert ix.get_page("Crowd")["page_id"] == "5"  # more pages than one lookup batch: all are weighed
    assert ix.get_page("100")["page_id"] == "100"  # the others are opened by id


@pytest.fixture(scope="module")
def huge(tmp_path_factory):
    """The test corpus plus two pages of ~1 MB: many paragraphs, and one paragraph with no break."""
    from helpers.searchcorpus import PAGES, _page

    from synth.engine.records import PAGE_SCHEMA
    from synth.engine.store import write_parquet_atomic
    import pyarrow as pa

    filler = "The quick brown fox jumps over the lazy dog near the river bank. "
    paragraphs = [f"Paragraph {i}: " + filler * 7 + "\n" for i in range(2200)]
    paragraphs[2] = "The zebrafish kelpie lives in this long page's third paragraph.\n"
    paragraphs[2000] = "A late zebrafish kelpie, and a quasar, far past the start.\n"
    one = "A quasar zebrafish opens the one-paragraph page. " + filler * 16_000
    pages = PAGES + [_page("900", "Huge page", paragraphs), _page("901", "One paragraph page", [one])]
    root = tmp_path_factory.mktemp("huge")
    write_parquet_atomic(pa.Table.from_pylist(pages, schema=PAGE_SCHEMA), root / "pages" / "a.parquet")
    stats = build_index(root / "pages", root / "index", threads=1, heap_mb=32)
    assert stats["long"] == 2  # both stored whole beside the index, their leads in it
    return SearchIndex.open(root / "index", snippet_chars=120)


def test_a_huge_page_is_scored_for_its_snippet_on_its_bounded_lead(huge, monkeypatch):
    import synth.tools.search as search_mod
    from synth.tools.snippet import SCAN_CHARS

    scanned: list[int] = []
    real = search_mod.best_paragraph

    def counting(paragraphs, idf):
        scanned.append(sum(map(len, paragraphs)))
        return real(paragraphs, idf)

    monkeypatch.setattr(search_mod, "best_paragraph", counting)
    hits = {h["page_id"]: h for h in huge.search("zebrafish kelpie", 5)}
    assert "900" in hits and "901" in hits
    assert max(scanned) <= SCAN_CHARS  # the ~1 MB pages were not read whole for their snippets
    assert "zebrafish kelpie" in hits["900"]["snippet"] and len(hits["900"]["snippet"]) <= 120
    assert "zebrafish" in hits["901"]["snippet"] and len(hits["901"]["snippet"]) <= 120


def test_a_match_past_the_bound_shows_the_lead_and_open_reads_the_whole_page(huge):
    (hit,) = [h for h in huge.search("quasar", 5) if h["page_id"] == "900"]
    assert hit["snippet"].startswith("Paragraph 0:") and len(hit["snippet"]) <= 120  # the lead, not paragraph 2000
    assert "far past the start" in huge.get_page("900")["paragraphs"][2000]
    one = huge.get_page("One paragraph page")["paragraphs"]
    assert len(one) == 1 and len(one[0]) > 1_000_000 and one[0].startswith("A quasar zebrafish")


def test_each_page_lists_its_own_links_across_batches_and_files(tmp_path):
    """The links are sorted by page and merged with the pages as both stream: with pages and links
    spread over several files, in no id order, batches far smaller than either, ties in paragraph and
    offset, and links from or to pages that are not there, every page lists exactly its own links in
    page order (each target once), as a plain per-page grouping gives them."""
    import random

    import pyarrow as pa

    from synth.engine.records import LINK_SCHEMA
    from synth.engine.store import write_parquet_atomic

    rnd = random.Random(7)
    ids = [str(x) for x in rnd.sample(range(10_000, 99_999), 240)]
    titles = {i: f"Page {i} title" for i in ids}
    for f in range(3):
        part = ids[f * 80:(f + 1) * 80]
        write_parquet_atomic(pa.Table.from_pylist([{"page_id": i, "title": titles[i], "paragraphs": [titles[i], f"body of {i}"]}
                                                   for i in part]), tmp_path / "pages" / f"part-{f}.parquet")
    pool = ids + ["1", "2"]  # two ids that are no page
    rows = [{"src_id": rnd.choice(pool), "dst_id": rnd.choice(pool), "paragraph_id": rnd.randint(1, 3),
             "start": rnd.randint(0, 5), "end": 9, "anchor_text": rnd.choice(["a", "b", None])} for _ in range(3000)]
    for f in range(4):
        write_parquet_atomic(pa.Table.from_pylist(rows[f::4], schema=LINK_SCHEMA), tmp_path / "links" / f"part-{f}.parquet")

    stats = build_index(tmp_path / "pages", tmp_path / "index", threads=1, heap_mb=32, links=tmp_path / "links",
                        batch_rows=7, memory_limit="64MB")
    index = SearchIndex.open(tmp_path / "index")
    want_total = 0
    for i in ids:
        mine = sorted((r for r in rows if r["src_id"] == i and r["dst_id"] in titles),
                      key=lambda r: (r["paragraph_id"], r["start"], r["dst_id"], r["anchor_text"] or ""))
        want, seen = [], set()
        for r in mine:
            if r["dst_id"] not in seen:
                seen.add(r["dst_id"])
                want.append([r["anchor_text"] or "", r["dst_id"], titles[r["dst_id"]]])
        want_total += len(want)
        assert index.get_page(i)["links"] == want, i
    assert stats["links"] == want_total > 0
    assert not (tmp_path / "index.links-tmp").exists()  # the scratch file goes with the build


@pytest.fixture(scope="module")
def countries(tmp_path_factory) -> SearchIndex:
    """Short titles that each hold one word of a description, and the long pages the description is about."""
    from helpers.searchcorpus import _page

    from synth.engine.records import PAGE_SCHEMA
    from synth.engine.store import write_parquet_atomic
    import pyarrow as pa

    pages = [
        _page("1", "Country", ["A country is a distinct territorial body or political entity.\n"]),
        _page("2", "Country music", ["Country music is a genre of popular music from the American South.\n"]),
        _page("3", "Central Africa", ["Central Africa is a subregion of the African continent.\n"]),
        _page("4", "Europe", ["Europe is a continent located entirely in the Northern Hemisphere.\n"]),
        _page("9", "Eastern Europe", ["Eastern Europe is the eastern part of the continent.\n"]),
        _page("5", "Austria", ["Austria is a landlocked country in Central Europe, lying in the Eastern Alps. "
                               "It is a federation of nine states, and its capital, Vienna, lies on the Danube. "
                               "The country borders Germany, the Czech Republic, Slovakia, Hungary, Slovenia, "
                               "Italy, Switzerland and Liechtenstein.\n"]),
        _page("6", "Rice", ["Rice is a cereal grain and, in its domesticated form, is the staple food of over "
                            "half of the world's population, particularly in Asia and Africa, where it is grown "
                            "in paddy fields flooded with water.\n"]),
        _page("7", "Domestication", ["Domestication is a sustained multi-generational relationship.\n"]),
        _page("8", "Food", ["Food is any substance consumed to provide nutritional support.\n"]),
    ]
    root = tmp_path_factory.mktemp("countries")
    write_parquet_atomic(pa.Table.from_pylist(pages, schema=PAGE_SCHEMA), root / "pages" / "a.parquet")
    build_index(root / "pages", root / "index", threads=1, heap_mb=32)
    return SearchIndex.open(root / "index")


@pytest.mark.parametrize("query,page", [("landlocked country in Central Europe", "Austria"),
                                        ("grain domesticated form staple food", "Rice")])
def test_a_full_match_in_the_text_outranks_one_word_in_a_short_title(countries, query, page):
    # Title and body are one BM25F field: a two-word title that holds one query word no longer
    # outscores the page whose text holds every word, as separate per-field BM25 clauses did.
    assert countries.search(query, 3)[0]["title"] == page
    assert countries.search_ids(query, 3, ranking="body")[0] == countries.search(query, 1)[0]["page_id"]


def test_exact_title_still_first_over_a_page_that_repeats_it(countries):
    # "Country music" and Austria both say "country"; the page titled exactly "Country" comes first.
    assert countries.search("country", 3)[0]["title"] == "Country"
    assert countries.search("eastern europe", 3)[0]["title"] == "Eastern Europe"


def test_body_ranking_ignores_titles(countries):
    # Only the title of "Europe" says "Europe" alone; the body ranking reads the text, where every page
    # that says it counts, and gives no exact-title bonus.
    tool, body = countries.search_ids("Europe", 8), countries.search_ids("Europe", 8, ranking="body")
    assert tool[0] == "4"
    assert tool[0] == "4" and set(body) == {"4", "5", "9"}


def test_the_body_ranking_has_its_own_index_that_the_tools_never_read(countries, tmp_path):
    import tantivy

    from synth.tools.build import BODY_DIR

    # The agents' index holds no body field (one analysed field a page); the body ranking searches index/body.
    with pytest.raises(ValueError):
        tantivy.Query.term_query(countries._schema, "body", "europe")
    fresh = SearchIndex.open(countries.index_dir)
    fresh.search("landlocked country", 3)
    assert "body" not in fresh._rankings  # opened only when a check asks for it
    body = countries.ranking("body")
    assert body.source is not countries._main and body.source.searcher.num_docs == countries.num_docs
    # Masking, snippets and k work through it as through the tool's ranking.
    assert sorted(countries.search_ids("Europe", 8, exclude_page_ids=["5"], ranking="body")) == ["4", "9"]
    assert len(countries.search_ids("Europe", 2, exclude_page_ids=["9"], ranking="body")) == 2
    hits = countries.search("landlocked country", 1, ranking="body")
    assert hits[0]["title"] == "Austria" and "landlocked" in hits[0]["snippet"].lower()
    # Built without it, the index still serves the tools, and asking for the body ranking says how to get it.
    stats = build_index(countries.index_dir.parent / "pages", tmp_path / "nobody", threads=1, heap_mb=32, body=False)
    assert not (tmp_path / "nobody" / BODY_DIR).exists() and stats["body_seconds"] == 0
    bare = SearchIndex.open(tmp_path / "nobody")
    assert bare.search("landlocked country in Central Europe", 1)[0]["title"] == "Austria"
    with pytest.raises(ValueError, match="without the body ranking"):
        bare.search_ids("Europe", 3, ranking="body")


def test_text_is_the_only_analysed_field_of_the_agents_index(countries, tmp_path):
    import orjson
    import tantivy

    from synth.tools.build import FORMAT, META_FILE

    # The stored title is what results show; as an indexed field it is one raw term, never stemmed (the tool
    # ranks the title through ``text``, and looks it up through ``title_key``), so a page costs one stemmed field.
    searcher, schema = countries._searcher, countries._schema
    assert searcher.doc_freq("title", "europ") == searcher.doc_freq("title", "europe") == 0
    assert searcher.doc_freq("title", "Eastern Europe") == 1 and searcher.doc_freq("text", "europ") == 3
    q = tantivy.Query.term_query(schema, "title", "Eastern Europe", index_option="basic")
    assert [countries._main.page_id(a) for _, a in searcher.search(q, 3).hits] == ["9"]
    assert countries.get_page("9")["title"] == "Eastern Europe"
    # An index of the layout before (the title analysed) is refused and names the rebuild, never read.
    old = tmp_path / "old"
    build_index(countries.index_dir.parent / "pages", old, threads=1, heap_mb=32, body=False)
    meta = orjson.loads((old / META_FILE).read_bytes())
    (old / META_FILE).write_bytes(orjson.dumps({**meta, "format": FORMAT - 1}))
    with pytest.raises(IndexNotFound, match="--force"):
        SearchIndex.open(old)


def test_a_registered_ranking_serves_search_with_snippets_and_fusion(countries):
    from synth.tools.search import FusedRanking, reciprocal_rank_fusion

    class Fixed:  # a stand-in for a dense retriever: always the same order, masking honoured
        def top(self, query, k, exclude):
            return [p for p in ("8", "7", "6") if p not in exclude][:k]

    assert reciprocal_rank_fusion([["a", "b"], ["b", "c"]], 3) == ["b", "a", "c"]
    countries.register_ranking("fixed", Fixed())
    countries.register_ranking("hybrid", FusedRanking([countries.ranking("tool"), Fixed()]))
    with pytest.raises(ValueError, match="new name"):
        countries.register_ranking("tool", Fixed())
    with pytest.raises(ValueError, match="unknown ranking"):
        countries.search_ids("rice", 3, ranking="nope")
    hits = countries.search("staple food grain", 2, ranking="fixed", exclude_page_ids=["8"])
    assert [h["page_id"] for h in hits] == ["7", "6"] and "staple food" in hits[1]["snippet"]
    assert countries.search_ids("staple food grain", 3)[:2] == ["6", "8"]  # BM25: Rice, then Food
    # Food: 1/62 + 1/61 (second in BM25, first in the fixed list) beats Rice: 1/61 + 1/63; then Domestication.
    assert countries.search_ids("staple food grain", 3, ranking="hybrid") == ["8", "6", "7"]
    assert "8" not in countries.search_ids("staple food grain", 3, ranking="hybrid", exclude_page_ids={"8"})



@pytest.fixture(scope="module")
def babel(tmp_path_factory) -> SearchIndex:
    """400 pages of seeded random words of a 40-word vocabulary, of many lengths: scores of many magnitudes."""
    import random

    import pyarrow as pa

    from synth.engine.records import PAGE_SCHEMA
    from synth.engine.store import write_parquet_atomic

    rng = random.Random(7)
    vocab = [f"{a}{b}" for a in ("kel", "mor", "sav", "tun", "pix")
             for b in ("ba", "do", "fi", "lu", "ne", "ro", "su", "ta")]
    rows = []
    for i in range(400):
        text = " ".join(rng.choices(vocab, weights=range(1, len(vocab) + 1), k=rng.randint(5, 300)))
        rows.append({"page_id": str(i), "title": " ".join(rng.sample(vocab, 2)), "paragraphs": [text],
                     "description": None, "aliases": None, "wikidata_id": None, "categories": None, "url": None,
                     "n_chars": len(text)})
    root = tmp_path_factory.mktemp("babel")
    write_parquet_atomic(pa.Table.from_pylist(rows, schema=PAGE_SCHEMA), root / "pages" / "a.parquet")
    build_index(root / "pages", root / "index", threads=1, heap_mb=32)
    return SearchIndex.open(root / "index")


def test_a_ranking_is_a_function_of_the_bag_of_terms(babel):
    # tantivy sums the clauses' scores in clause order, in float32, so "a b" and "b a" could differ in the last
    # bit and order a near tie the other way; a memo keyed by the bag (questions' adversaries) relies on this.
    import itertools

    words = "kelba morfi savlu tunsu pixta kelro".split()
    for ranking in ("tool", "body"):
        rank = babel.ranking(ranking)
        want = rank.ranked(" ".join(words), 10, frozenset())
        assert want  # the premise: the words are in the corpus
        for order in itertools.permutations(words):
            assert rank.ranked(" ".join(order), 10, frozenset()) == want, (ranking, order)
            assert rank.memo_key(" ".join(order))[0] == rank.memo_key(" ".join(words))[0]  # the bag, sorted
