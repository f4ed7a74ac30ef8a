"""The ingest stage: every rule of the spec on tiny sources the tests write themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.kilt import (HF_SCHEMA, RULES_ANCHORS, RULES_DROPS, RULES_LINKS, page, rules_corpus, to_hf,
                          with_bad_anchor, write_hf_jsonl, write_hf_parquet, write_kilt_jsonl)
from flows.config import load_config
from synth.engine.errors import InputError, StageFailed
from synth.engine.runner import run_stage
from flows.stages import INGEST
from synth.engine.store import Store
from synth.corpus.synthetic import write_synthetic_kilt


def ingest(tmp: Path, source, *overrides: str, out: str = "out", force: bool = False):
    """Run the ingest stage through the pipeline runner; returns (outcome, store)."""
    cfg = load_config(None, [f"corpus.source={source}", *overrides])
    store = Store(tmp / out)
    return run_stage(INGEST, cfg, store, force=force, progress=False), store


def links_of(store: Store) -> list[tuple]:
    t = store.read("corpus/links")
    return list(zip(*(t.column(c).to_pylist() for c in ("src_id", "dst_id", "paragraph_id", "anchor_text"))))


def rejects_of(store: Store) -> list[dict]:
    text = store.path("rejects/ingest.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def check_funnels(report: dict) -> None:
    assert report["input"] == report["output"] + sum(report["dropped"].values())
    links = report["links"]
    assert links["input"] == links["output"] + sum(links["dropped"].values())


# ---- link rules ---------------------------------------------------------------------------

def test_link_rules_kilt_jsonl(tmp_path):
    src = write_kilt_jsonl(tmp_path / "kilt.jsonl", with_bad_anchor(rules_corpus()))
    outcome, store = ingest(tmp_path, src)
    assert links_of(store) == RULES_LINKS
    r = outcome.report
    assert r["links"] == {"input": RULES_ANCHORS, "output": len(RULES_LINKS), "dropped": RULES_DROPS}
    assert (r["input"], r["output"], sum(r["dropped"].values())) == (6, 6, 0)
    assert r["bytes"] == src.stat().st_size and r["mb_per_s"] > 0 and "seconds" in r
    check_funnels(r)
    assert rejects_of(store) == []  # written even when nothing is rejected


def test_pages_fields_and_paragraph_indexing(tmp_path):
    src = write_kilt_jsonl(tmp_path / "kilt.jsonl", with_bad_anchor(rules_corpus()))
    _, store = ingest(tmp_path, src)
    pages = {r["page_id"]: r for r in store.read("corpus/pages").to_pylist()}
    alpha = pages["1"]
    assert alpha["title"] == "Alpha"
    assert alpha["paragraphs"][1] == "Section::::History.\n"  # text[1:], markup kept
    assert alpha["n_chars"] == sum(len(p) for p in alpha["paragraphs"])
    assert (alpha["description"], alpha["aliases"], alpha["wikidata_id"]) == ("first letter", ["A", "Alef"], "Q1")
    assert alpha["url"] == "https://en.wikipedia.org/wiki?curid=1"
    assert alpha["categories"] == "Category of Alpha"
    assert (pages["2"]["description"], pages["2"]["aliases"], pages["2"]["url"]) == (None, None, None)
    assert pages["4"]["wikidata_id"] == "Q4"
    # A link's paragraph_id indexes KILT text: paragraphs[p - 1], or the title for p == 0.
    for link in store.read("corpus/links").to_pylist():
        src = pages[link["src_id"]]
        para = src["title"] if link["paragraph_id"] == 0 else src["paragraphs"][link["paragraph_id"] - 1]
        assert para[link["start"]:link["end"]] == link["anchor_text"]


@pytest.mark.parametrize("kind", ["hf_parquet", "hf_jsonl", "hf_folder", "gz", "bz2", "hf_stream", "kilt_parquet"])
def test_every_layout_gives_the_same_tables(tmp_path, kind, monkeypatch):
    records = with_bad_anchor(rules_corpus())
    _, ref = ingest(tmp_path, write_kilt_jsonl(tmp_path / "ref.jsonl", records), out="ref")
    if kind == "hf_parquet":
        src = write_hf_parquet(tmp_path / "kilt.parquet", records)
    elif kind == "hf_jsonl":
        src = write_hf_jsonl(tmp_path / "kilt_hf.jsonl", records)
    elif kind == "hf_folder":
        write_hf_parquet(tmp_path / "hf" / "full" / "part-0.parquet", records[:3])
        write_hf_parquet(tmp_path / "hf" / "full" / "part-1.parquet", records[3:])
        (tmp_path / "hf" / "README.md").write_text("not data")
        src = tmp_path / "hf"
    elif kind in ("gz", "bz2"):
        src = write_kilt_jsonl(tmp_path / f"kilt.jsonl.{kind}", records)
    elif kind == "kilt_parquet":  # the original layout saved as Parquet
        src = tmp_path / "kilt_layout.parquet"
        pq.write_table(pa.Table.from_pylist(records), src)
    else:
        src = "hf:facebook/kilt_wikipedia"
        _fake_hub(monkeypatch, write_hf_parquet(tmp_path / "hub.parquet", records, row_group_size=2))
    outcome, store = ingest(tmp_path, src)
    for table in ("corpus/pages", "corpus/links"):
        assert store.read(table).equals(ref.read(table)), table
    assert outcome.report["links"]["dropped"] == RULES_DROPS
    check_funnels(outcome.report)


def _fake_hub(monkeypatch, local: Path, script_error: bool = False) -> list:
    """Make datasets.load_dataset stream ``local`` for the Hub dataset; return the calls it saw."""
    import datasets

    real, calls = datasets.load_dataset, []

    def fake(path, *args, **kw):
        calls.append((path, args, kw))
        assert kw.get("streaming") is True
        if path == "facebook/kilt_wikipedia":
            assert args == ("2019-08-01",) and kw["split"] == "full"
            if script_error:
                raise RuntimeError("Dataset scripts are no longer supported, but found kilt_wikipedia.py")
            return real("parquet", data_files={"full": str(local)}, split="full", streaming=True)
        assert path == "parquet"
        assert kw["data_files"] == {"full": "hf://datasets/facebook/kilt_wikipedia@refs/convert/parquet/2019-08-01/full/*.parquet"}
        return real("parquet", data_files={"full": str(local)}, split="full", streaming=True)

    monkeypatch.setattr(datasets, "load_dataset", fake)
    return calls


def test_hf_stream_falls_back_to_parquet_export(tmp_path, monkeypatch):
    records = rules_corpus()
    calls = _fake_hub(monkeypatch, write_hf_parquet(tmp_path / "hub.parquet", records), script_error=True)
    outcome, store = ingest(tmp_path, "hf:facebook/kilt_wikipedia")
    assert [c[0] for c in calls] == ["facebook/kilt_wikipedia", "parquet"]
    assert store.read("corpus/pages").column("page_id").to_pylist() == [r["_id"] for r in records]
    assert outcome.report["output"] == len(records)


def test_hf_stream_other_errors_are_not_swallowed(tmp_path, monkeypatch):
    import datasets

    def broken(*a, **kw):
        raise ConnectionError("no route to the Hub")

    monkeypatch.setattr(datasets, "load_dataset", broken)
    with pytest.raises(ConnectionError):
        ingest(tmp_path, "hf:facebook/kilt_wikipedia")


# ---- bad lines ----------------------------------------------------------------------------

def _bad_file(tmp_path: Path) -> Path:
    good = [page(str(i), f"Page {i}", [f"Page {i} text.\n"]) for i in range(1, 5)]
    return write_kilt_jsonl(tmp_path / "bad.jsonl", [
        good[0],                                                      # line 1
        "",                                                           # 2 blank
        "{not json",                                                  # 3 bad_json
        "[1, 2]",                                                     # 4 not_object
        "   ",                                                        # 5 blank (spaces)
        {"wikipedia_title": "No id", "text": ["No id\n"]},            # 6 bad_id (missing)
        {"_id": 7, "wikipedia_title": "Int id", "text": ["x\n"]},     # 7 bad_id (ill-typed)
        {"_id": "8", "text": ["x\n"]},                                # 8 bad_title
        {"_id": "9", "wikipedia_title": "T", "text": "not a list"},   # 9 bad_text
        {"_id": "10", "wikipedia_title": "T", "text": []},            # 10 bad_text (empty)
        dict(good[0], wikipedia_title="Second copy"),                 # 11 duplicate_id
        good[1],                                                      # 12
        "null",                                                       # 13 not_object
        {"_id": "", "wikipedia_title": "Empty id", "text": ["x\n"]},  # 14 bad_id (empty)
        good[2],                                                      # 15
        good[3],                                                      # 16
    ])


EXPECTED_REJECTS = [(3, "bad_json"), (4, "not_object"), (6, "bad_id"), (7, "bad_id"), (8, "bad_title"),
                    (9, "bad_text"), (10, "bad_text"), (11, "duplicate_id"), (13, "not_object"), (14, "bad_id")]


def test_bad_lines_are_skipped_counted_and_kept(tmp_path):
    outcome, store = ingest(tmp_path, _bad_file(tmp_path))
    r = outcome.report
    assert r["input"] == 14 and r["output"] == 4  # blank lines are not records
    assert r["dropped"] == {"bad_json": 1, "not_object": 2, "bad_id": 3, "bad_title": 1, "blank_title": 0,
                            "nul_title": 0, "long_title": 0, "bad_text": 2, "no_text": 0, "long_word": 0,
                            "duplicate_id": 1}
    check_funnels(r)
    pages = store.read("corpus/pages")
    assert pages.column("page_id").to_pylist() == ["1", "2", "3", "4"]
    assert pages.column("title").to_pylist()[0] == "Page 1"  # the first record of id 1 wins
    rejects = rejects_of(store)
    assert [(x["line"], x["reason"]) for x in rejects] == EXPECTED_REJECTS
    assert rejects[0]["raw"] == "{not json"
    assert rejects[7]["raw"].startswith('{"_id": "1", "wikipedia_id": "1", "wikipedia_title": "Second copy"')
    assert "wikipedia_title" in rejects[4]["detail"] and "_id" in rejects[3]["detail"]


@pytest.mark.parametrize("bad, why", [
    ("{not json", "not valid JSON"),
    ('{"_id": 7, "wikipedia_title": "T", "text": ["T"]}', "`_id` must be a non-empty string"),
    ('{"_id": "1", "wikipedia_title": "Again", "text": ["Again", "More text."]}', "page id '1' was already read"),
])
def test_strict_stops_at_the_first_bad_line(tmp_path, bad, why):
    good = [page(str(i), f"Page {i}", [f"Page {i} text.\n"]) for i in range(1, 4)]
    src = write_kilt_jsonl(tmp_path / "strict.jsonl", [good[0], "", good[1], bad, "[1]", good[2]])
    with pytest.raises(InputError, match=rf"^line 4: {why}"):
        ingest(tmp_path, src, "corpus.strict=true")
    assert not Store(tmp_path / "out").exists("corpus/pages")  # nothing published


def test_strict_passes_a_clean_file(tmp_path):
    src = write_kilt_jsonl(tmp_path / "kilt.jsonl", rules_corpus())
    outcome, _ = ingest(tmp_path, src, "corpus.strict=true")
    assert outcome.report["output"] == 6


def test_cli_strict_exits_2(tmp_path):
    from typer.testing import CliRunner

    from flows.cli import app

    config = Path(__file__).resolve().parents[3] / "configs" / "demo.yaml"
    result = CliRunner().invoke(app, ["ingest", "--kilt", str(_bad_file(tmp_path)), "--strict",
                                      "--config", str(config), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "line 3" in result.output


def test_bad_lines_across_blocks_keep_their_line_numbers(tmp_path):
    # ~3 MB in 1 MiB blocks: the fast path bisects around each bad line, line numbers stay exact.
    syn = tmp_path / "syn.jsonl"
    write_synthetic_kilt(syn, 330, anchors_per_page=20, seed=3)
    lines = syn.read_bytes().splitlines()
    bad_at = {40: b"{oops", 170: b'{"_id": "1000", "wikipedia_title": "Dup", "text": ["Dup\\n", "Again.\\n"]}',
              171: b"", 300: b'{"_id": "x", "wikipedia_title": "T", "text": [1]}'}
    for at in sorted(bad_at):
        lines.insert(at - 1, bad_at[at])
    src = tmp_path / "mixed.jsonl"
    src.write_bytes(b"\r\n".join(lines) + b"\r\n")  # CRLF line ends too
    outcome, store = ingest(tmp_path, src, "corpus.batch_mb=1")
    assert [(x["line"], x["reason"]) for x in rejects_of(store)] == [(40, "bad_json"), (170, "duplicate_id"),
                                                                     (300, "bad_text")]
    assert outcome.report["output"] == 330 and outcome.report["input"] == 333
    _, ref = ingest(tmp_path, syn, out="ref")
    assert store.read("corpus/pages").equals(ref.read("corpus/pages"))
    assert store.read("corpus/links").equals(ref.read("corpus/links"))


def test_max_pages_cuts_the_funnel_at_the_last_page(tmp_path):
    outcome, store = ingest(tmp_path, _bad_file(tmp_path), "corpus.max_pages=2")
    r = outcome.report
    # Page 2 is line 12: lines 13-16 are never read.
    assert (r["input"], r["output"]) == (10, 2)
    assert [x["line"] for x in rejects_of(store)] == [ln for ln, _ in EXPECTED_REJECTS if ln < 12]
    check_funnels(r)


# ---- sources, layouts, reuse, determinism --------------------------------------------------

def test_unknown_layout_is_a_clear_error(tmp_path):
    src = write_kilt_jsonl(tmp_path / "odd.jsonl", [{"id": "1", "title": "T"}])
    with pytest.raises(InputError, match=r"`_id`.*`kilt_id`"):
        ingest(tmp_path, src)


def test_resolve_source(tmp_path, monkeypatch):
    import synth.corpus.demo as democorpus
    from synth.corpus.kilt import resolve_source

    with pytest.raises(InputError, match=r"corpus.source is not set.*--kilt.*--set corpus.source="):
        resolve_source(None, tmp_path)
    with pytest.raises(InputError, match="nope.jsonl"):
        resolve_source(str(tmp_path / "nope.jsonl"), tmp_path)
    assert resolve_source("hf:facebook/kilt_wikipedia", tmp_path) == "hf:facebook/kilt_wikipedia"
    built = []
    monkeypatch.setattr(democorpus, "build_demo_corpus",
                        lambda p: built.append(p) or write_kilt_jsonl(Path(p), rules_corpus()))
    path = resolve_source("demo", tmp_path)
    assert Path(path) == tmp_path / "source" / "kilt_demo.jsonl" and built == [Path(path)]
    resolve_source("demo", tmp_path)
    assert len(built) == 1  # built once, then reused


def test_source_identity_follows_content(tmp_path, monkeypatch):
    import synth.corpus.kilt as kilt

    a = write_kilt_jsonl(tmp_path / "a.jsonl", rules_corpus())
    first = kilt.source_identity(str(a))
    assert kilt.source_identity(str(a)) == first
    write_kilt_jsonl(a, rules_corpus()[:3])
    assert kilt.source_identity(str(a)) != first
    folder = tmp_path / "hf"
    write_hf_parquet(folder / "x.parquet", rules_corpus())
    before = kilt.source_identity(str(folder))
    write_hf_parquet(folder / "y.parquet", rules_corpus())
    assert kilt.source_identity(str(folder)) != before
    assert kilt.source_identity("hf:facebook/kilt_wikipedia") == "hf:facebook/kilt_wikipedia"
    # Big files: size, mtime and edges, not the whole content.
    monkeypatch.setattr(kilt, "HASH_WHOLE_MAX", 10)
    monkeypatch.setattr(kilt, "HASH_EDGE", 8)
    big = kilt.source_identity(str(a))
    assert big.startswith(f"{a.stat().st_size}:{a.stat().st_mtime_ns}:")


def test_rerun_is_reused_and_output_is_deterministic(tmp_path):
    src = write_kilt_jsonl(tmp_path / "kilt.jsonl", with_bad_anchor(rules_corpus()) + ["{bad"])
    first, store = ingest(tmp_path, src)
    assert not first.reused
    again, _ = ingest(tmp_path, src)
    assert again.reused and again.report["links"] == first.report["links"]
    _, other = ingest(tmp_path, src, out="other")
    for table in ("corpus/pages", "corpus/links"):
        mine = sorted(store.path(table).glob("*.parquet"))
        theirs = sorted(other.path(table).glob("*.parquet"))
        assert [p.name for p in mine] == [p.name for p in theirs]
        assert all(m.read_bytes() == t.read_bytes() for m, t in zip(mine, theirs)), table
    assert store.path("rejects/ingest.jsonl").read_bytes() == other.path("rejects/ingest.jsonl").read_bytes()
    write_kilt_jsonl(src, rules_corpus())
    changed, _ = ingest(tmp_path, src)
    assert not changed.reused  # new content, new key
    assert not any(p.name == "_ingest_tmp" for p in (tmp_path / "out").rglob("*"))  # staging removed


def test_hf_parquet_irregular_anchor_lists_fall_back_per_record(tmp_path):
    records = rules_corpus()
    table = pq.read_table(write_hf_parquet(tmp_path / "ok.parquet", records)).to_pylist()
    table[1]["anchors"]["start"] = []  # parallel lists of unequal length: that anchor is bad
    table[2]["kilt_id"] = ""  # HF writes "" for a missing id
    src = tmp_path / "odd.parquet"
    pq.write_table(pa.Table.from_pylist(table, schema=HF_SCHEMA), src)
    outcome, store = ingest(tmp_path, src)
    assert [(x["line"], x["reason"]) for x in rejects_of(store)] == [(3, "bad_id")]
    assert outcome.report["links"]["dropped"]["bad_anchor"] == 1
    assert store.read("corpus/pages").column("page_id").to_pylist() == ["1", "2", "4", "5", "6"]


def test_empty_and_all_bad_sources_stop_the_run_unless_empty_is_allowed(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"\n\n")
    with pytest.raises(StageFailed, match=r"stage ingest: its input was empty.*runner.allow_empty=true"):
        ingest(tmp_path, empty, out="strict")
    assert not (tmp_path / "strict" / "corpus" / "pages").exists()  # nothing committed
    outcome, store = ingest(tmp_path, empty, "runner.allow_empty=true")
    assert (outcome.report["input"], outcome.report["output"]) == (0, 0)
    assert store.read("corpus/pages").num_rows == 0 and store.read("corpus/links").num_rows == 0
    bad = write_kilt_jsonl(tmp_path / "bad.jsonl", ["{x", {"_id": "1"}])
    with pytest.raises(StageFailed, match=r"every one of its 2 items was dropped"):
        ingest(tmp_path, bad, out="bad-strict")
    outcome, store = ingest(tmp_path, bad, "runner.allow_empty=true", out="bad")
    assert outcome.report["dropped"]["bad_json"] == 1 and outcome.report["dropped"]["bad_title"] == 1
    assert store.read("corpus/pages").schema.names[0] == "page_id"


def test_folder_rejects_name_their_file_and_bom_is_ignored(tmp_path):
    records = rules_corpus()
    write_kilt_jsonl(tmp_path / "src" / "a.jsonl", records[:3])
    b = write_kilt_jsonl(tmp_path / "src" / "b.jsonl", [page("2", "B again", ["B\n"]), *records[3:]])
    b.write_bytes(b"\xef\xbb\xbf" + b.read_bytes())  # a byte-order mark before line 1
    _, store = ingest(tmp_path, tmp_path / "src")
    (reject,) = rejects_of(store)
    assert (reject["line"], reject["reason"], reject["file"]) == (1, "duplicate_id", "b.jsonl")
    assert reject["detail"] == "page id '2' was already read (the first record is kept)"
    assert store.read("corpus/pages").column("page_id").to_pylist() == ["1", "2", "3", "4", "5", "6"]
    with pytest.raises(InputError, match=r"^line 1: .*\(in b.jsonl\)"):
        ingest(tmp_path, tmp_path / "src", "corpus.strict=true", out="strict")


def test_strict_names_the_file_and_does_not_say_it_keeps_what_it_stops_at(tmp_path):
    """--strict said "(the first record is kept)" though it stops, and named no file for a file source: it says
    the line, why, the file (a folder's file and the folder), and that it stops; the rejects file still says
    that a run without --strict keeps the first record."""
    import shutil

    records = [page("1", "A", ["A text.\n"]), page("1", "A again", ["More.\n"])]
    src = write_kilt_jsonl(tmp_path / "dup.jsonl", records)
    with pytest.raises(InputError) as err:
        ingest(tmp_path, src, "corpus.strict=true", out="strict")
    assert str(err.value) == (f"line 2: page id '1' was already read (in {src}); --strict stops at the first bad "
                              "record: fix it, or run without --strict to skip and count bad records in "
                              "rejects/ingest.jsonl")
    (tmp_path / "src").mkdir()
    shutil.copy(src, tmp_path / "src" / "b.jsonl")
    with pytest.raises(InputError) as err:
        ingest(tmp_path, tmp_path / "src", "corpus.strict=true", out="strict-folder")
    assert str(err.value).startswith(f"line 2: page id '1' was already read (in b.jsonl) of the folder {tmp_path / 'src'}; "
                                     "--strict stops at the first bad record")
    _, store = ingest(tmp_path, src)
    assert rejects_of(store)[0]["detail"] == "page id '1' was already read (the first record is kept)"


def test_hf_jsonl_bad_lines_take_the_per_line_path(tmp_path):
    hf = [to_hf(r) for r in rules_corpus()]
    hf[2]["text"] = {"paragraph": "not a list"}
    src = write_kilt_jsonl(tmp_path / "hf.jsonl", [hf[0], hf[1], hf[2], "{nope", *hf[3:]])
    outcome, store = ingest(tmp_path, src)
    assert [(x["line"], x["reason"]) for x in rejects_of(store)] == [(3, "bad_text"), (4, "bad_json")]
    assert "`text.paragraph`" in rejects_of(store)[0]["detail"]
    assert store.read("corpus/pages").column("page_id").to_pylist() == ["1", "2", "4", "5", "6"]


BAD_PAGES = [  # (record, the reason it is dropped for)
    (page("20", "", ["Text.\n"]), "blank_title"),
    (page("21", "  \t", ["Text.\n"]), "blank_title"),
    (page("22", "\u00a0\u3000", ["Text.\n"]), "blank_title"),
    (page("23", "Nul\x00title", ["Text.\n"]), "nul_title"),
    (page("24", "Only a title", []), "no_text"),
    (page("25", "Blank paragraphs", ["", "  \n", "\t"]), "no_text"),
    ({"_id": "26", "wikipedia_title": 26, "text": ["x", "y"]}, "bad_title"),
]


@pytest.mark.parametrize("path", ["fast", "per-record"])
def test_blank_or_nul_titles_and_pages_without_text_are_dropped_by_name(tmp_path, path):
    records = [page("1", "Kept", ["Kept text.\n"])]
    for rec, _ in BAD_PAGES:
        rec = dict(rec)
        if path == "per-record":
            rec["categories"] = 5  # not a string: the block's Arrow parse fails, so each line is read alone
        records.append(rec)
    records.append(page("2", " Padded title ", ["Text.\n"]))  # whitespace around a real title is kept
    outcome, store = ingest(tmp_path, write_kilt_jsonl(tmp_path / "k.jsonl", records))
    got = [(x["line"], x["reason"]) for x in rejects_of(store)]
    assert got == [(i + 2, why) for i, (_, why) in enumerate(BAD_PAGES)]
    assert {x["reason"]: x["detail"] for x in rejects_of(store)}["nul_title"] == "`wikipedia_title` contains a NUL character"
    r = outcome.report
    assert {k: v for k, v in r["dropped"].items() if v} == {"blank_title": 3, "nul_title": 1, "no_text": 2,
                                                            "bad_title": 1}
    check_funnels(r)
    assert store.read("corpus/pages").column("title").to_pylist() == ["Kept", " Padded title "]


def _pathological() -> tuple[list[dict], list[tuple[int, str, str]], list[str]]:
    """Records at and past the bounds on a title and a word: the records, the rejects expected (line, reason, a
    piece of the detail) and the titles kept."""
    from synth.corpus.normalise import MAX_TITLE_CHARS, MAX_WORD_CHARS

    blob = "ab" * 100_000  # 200,000 characters without a space
    records = [
        page("1", "Kept", ["Kept text.\n"]),
        page("2", "t" * 1_000_000, ["A page whose title is a million characters.\n"]),
        page("3", "Blob", [f"Here is {blob} in a paragraph.\n"]),
        page("4", "Later blob", ["A fine first paragraph.\n", "x" * (MAX_WORD_CHARS + 1) + "\n"]),
        page("5", "T" * MAX_TITLE_CHARS, ["A title at the bound is kept.\n"]),
        page("6", "Word at the bound", ["w" * MAX_WORD_CHARS + " is kept, as is " + "é" * 700 + ".\n"]),
        # no ASCII space for 1,500 characters, but Python splits at the no-break spaces: words of 499 kept
        page("7", "Spaced by NBSP", ["\u00a0".join(["n" * 499] * 3) + "\n"]),
        page("8", "Wide blob", ["Wide " + "é" * (MAX_WORD_CHARS + 1) + "\n"]),  # over the bound in characters
    ]
    rejects = [(2, "long_title", "is 1,000,000 characters long (at most 512"),
               (3, "long_word", "`text`[1] holds a word of 200,000 characters with no space in it (at most 1,000)"),
               (4, "long_word", "`text`[2] holds a word of 1,001 characters"),
               (8, "long_word", "`text`[1] holds a word of 1,001 characters")]
    return records, rejects, ["Kept", "T" * MAX_TITLE_CHARS, "Word at the bound", "Spaced by NBSP"]


@pytest.mark.parametrize("path", ["fast", "per-record", "hf-parquet"])
def test_pathological_titles_and_words_are_refused_at_ingest_and_counted(tmp_path, path):
    """A million-character title and a 200,000-character word (which made the tokenizer stage's time grow with
    the square of its length) are refused by name in rejects/ingest.jsonl, on every reading path; a title or a
    word at the bound is kept, and the bound counts characters between Python's whitespace."""
    records, expected, kept = _pathological()
    if path == "per-record":
        records = [dict(r, categories=5) for r in records]  # the block's Arrow parse fails: each line alone
    src = write_hf_parquet(tmp_path / "hf.parquet", records) if path == "hf-parquet" else \
        write_kilt_jsonl(tmp_path / "k.jsonl", records)
    outcome, store = ingest(tmp_path, src)
    rejects = rejects_of(store)
    assert [(x["line"], x["reason"]) for x in rejects] == [(line, why) for line, why, _ in expected]
    for x, (_, _, said) in zip(rejects, expected):
        assert said.replace("`text`", "`text.paragraph`" if path == "hf-parquet" else "`text`") in x["detail"], x
        assert len(x["raw"]) <= 200 and "\n" not in x["detail"]
    r = outcome.report
    assert {k: v for k, v in r["dropped"].items() if v} == {"long_title": 1, "long_word": 3}
    check_funnels(r)
    assert store.read("corpus/pages").column("title").to_pylist() == kept
    with pytest.raises(InputError, match=r"^line 2: `wikipedia_title` is 1,000,000 characters long"):
        ingest(tmp_path, src, "corpus.strict=true", out="strict")


def test_hf_layout_blank_title_and_no_text(tmp_path):
    pages = [page("1", "Kept", ["Kept text.\n"]), page("2", "", ["x\n"]), page("3", "No text", [" "])]
    _, store = ingest(tmp_path, write_hf_parquet(tmp_path / "hf.parquet", pages))
    assert [(x["line"], x["reason"]) for x in rejects_of(store)] == [(2, "blank_title"), (3, "no_text")]


def test_strict_names_a_blank_title(tmp_path):
    src = write_kilt_jsonl(tmp_path / "k.jsonl", [page("1", "A", ["a\n"]), page("2", " ", ["b\n"])])
    with pytest.raises(InputError, match=r"^line 2: `wikipedia_title` is empty or only whitespace"):
        ingest(tmp_path, src, "corpus.strict=true")


def test_shared_titles_are_counted_and_name_the_smallest_id(tmp_path):
    records = [page("10", "Twin", ["Twin ten.\n"]), page("100", "Twin", ["Twin hundred.\n"]),
               page("9", "Twin", ["Twin nine.\n"]), page("7", "Pair", ["Pair.\n"]), page("70", "Pair", ["Pair.\n"]),
               page("1", "Linker", ["Linker cites Twin and Pair.\n"],
                    [(1, "Twin", "Twin", None), (1, "Pair", "Pair", None)])]
    outcome, store = ingest(tmp_path, write_kilt_jsonl(tmp_path / "k.jsonl", records))
    r = outcome.report
    assert r["duplicate_titles"] == {"titles": 2, "pages": 3, "examples": ["Pair", "Twin"]}
    assert r["output"] == 6 and sum(r["dropped"].values()) == 0  # all kept: their ids differ
    assert [(s, d) for s, d, *_ in links_of(store)] == [("1", "9"), ("1", "7")]  # "9" < "10" as numbers
    report = json.loads(store.path("reports/ingest.json").read_text())
    assert report["duplicate_titles"]["titles"] == 2


def test_text_with_a_null_paragraph_is_bad_text(tmp_path):
    src = write_kilt_jsonl(tmp_path / "k.jsonl", [page("1", "A", ["a\n"]),
                                                  {"_id": "2", "wikipedia_title": "B", "text": ["B\n", None]}])
    outcome, store = ingest(tmp_path, src)
    assert [(x["line"], x["reason"]) for x in rejects_of(store)] == [(2, "bad_text")]


def test_prefetch_propagates_errors_and_stops_early():
    from synth.corpus.ingest import prefetch

    closed = []

    def gen():
        try:
            for i in range(100):
                yield i
        finally:
            closed.append(True)

    it = prefetch(gen())
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    it.close()
    assert closed == [True]

    def failing():
        yield 1
        raise InputError("line 2: boom")

    with pytest.raises(InputError, match="line 2: boom"):
        list(prefetch(failing()))


def test_blocks_end_at_newlines_even_for_lines_longer_than_a_block():
    import io

    from synth.corpus.lines import iter_blocks

    data = b"".join(b"x" * n + b"\n" for n in (0, 3, 20, 1, 7, 7, 50)) + b"tail"
    blocks = list(iter_blocks(io.BytesIO(data), 8))
    assert b"".join(blocks) == data
    assert all(b.endswith(b"\n") for b in blocks[:-1]) and blocks[-1].endswith(b"tail")
    assert b"x" * 50 + b"\n" in blocks  # a 51-byte line arrives whole
