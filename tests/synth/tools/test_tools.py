"""The agent's tools: open pagination, find, page lookup, argument errors, the dispatcher, schemas, shortcuts."""

import json

import pytest
from helpers.searchcorpus import build_test_index

from synth.tools.search import SearchIndex
from synth.tools.analysis import page_text
from synth.tools.toolbox import Toolbox, is_shortcut, run_find, run_open, text_window
from synth.tools.config import ToolsConfig
from synth.tools.schema import TOOL_SCHEMAS, tool_schemas, tool_schemas_json


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> SearchIndex:
    return SearchIndex.open(build_test_index(tmp_path_factory.mktemp("tools")))


@pytest.fixture()
def box(index) -> Toolbox:
    return Toolbox(index, ToolsConfig(page_chars=500, find_max_passages=3))


def _call(box, name, args):
    obs, info = box.call(name, args if isinstance(args, str) else json.dumps(args))
    return json.loads(obs), info


def test_open_pages_through_the_text_exactly_once(index, box):
    page = index.get_page("105")
    full = page_text(page["title"], page["paragraphs"])
    assert len(full) > 3 * 500
    offset, pieces = 0, []
    while offset is not None:
        got, info = _call(box, "open", {"page": "105", "offset": offset})
        assert got["offset"] == offset and got["total_chars"] == len(full) and got["page_id"] == "105"
        assert len(got["text"]) <= 500 and got["text"] == full[offset:offset + len(got["text"])]
        if got["next_offset"] is not None:
            assert got["next_offset"] == offset + len(got["text"])
            assert got["text"][-1].isspace()  # cut on whitespace, not inside a word
        pieces.append(got["text"])
        assert info.opened_page_ids == ["105"] and not info.is_error
        offset = got["next_offset"]
    assert "".join(pieces) == full and len(pieces) >= 4
    assert full.startswith("Long harbour page\n\n## Part 0\n\nParagraph 1 ") and "\n\n## Part 5\n\n" in full


def test_text_window_edges():
    assert text_window("abc", 0, 10) == ("abc", None)
    assert text_window("abcdefghij", 0, 4) == ("abcd", 4)  # no whitespace: a hard cut
    assert text_window("ab cd ef gh", 0, 7) == ("ab cd ", 6)
    assert text_window("ab cd ef gh", 6, 7) == ("ef gh", None)


def test_open_from_the_middle_and_by_title(box):
    got, _ = _call(box, "open", {"page": "Obsidian", "offset": 8})
    assert got["text"].startswith("\n\nObsidian is a naturally") and got["next_offset"] is None
    assert _call(box, "open", {"page": "obsidian"})[0]["page_id"] == "103"
    assert _call(box, "open", {"page": "https://en.wikipedia.org/wiki/Paris_Hilton"})[0]["page_id"] == "101"


@pytest.mark.parametrize("args, needle", [
    ({"page": "103", "offset": -1}, "'offset' must be >= 0"),
    ({"page": "103", "offset": "5"}, "'offset' must be an integer"),
    ({"page": "103", "offset": 1.5}, "'offset' must be an integer"),
    ({"page": "103", "offset": True}, "'offset' must be an integer"),
    ({"page": "103", "offset": 10**6}, "past the end"),
    ({"page": "no such page"}, "no page with id or title"),
    ({"page": ""}, "'page' is empty"),
    ({"page": 103}, "'page' must be a string"),
    ({}, "missing argument 'page'"),
    ({"page": "103", "line": 3}, "unknown argument(s) line"),
])
def test_open_bad_arguments_are_error_strings(box, args, needle):
    got, info = _call(box, "open", args)
    assert set(got) == {"error"} and needle in got["error"]
    assert info.is_error and info.opened_page_ids == []


def test_find_returns_containing_paragraphs(index, box):
    got, info = _call(box, "find", {"page": "Obsidian", "text": "OBSIDIAN GLASS"})
    assert got["total"] == 1 and [p["index"] for p in got["passages"]] == [3]
    passage = got["passages"][0]
    assert passage["text"] == index.get_page("103")["paragraphs"][3] and info.opened_page_ids == ["103"]
    full = page_text("Obsidian", index.get_page("103")["paragraphs"])
    assert full[passage["offset"]:passage["offset"] + len(passage["text"])] == passage["text"]
    # Capped at find_max_passages, in page order, with the total.
    got, _ = _call(box, "find", {"page": "105", "text": "lighthouse keeper"})
    assert got["total"] == 48 and [p["index"] for p in got["passages"]] == [1, 2, 3]
    assert _call(box, "find", {"page": "105", "text": "volcano"})[0] == {
        "page_id": "105", "title": "Long harbour page", "text": "volcano", "total": 0, "passages": []}


@pytest.mark.parametrize("args, needle", [
    ({"page": "103", "text": ""}, "'text' is empty"),
    ({"page": "103", "text": "   "}, "'text' is empty"),
    ({"page": "103"}, "missing argument 'text'"),
    ({"page": "103", "text": ["a"]}, "'text' must be a string"),
    ({"page": "Atlantis", "text": "x"}, "no page with id or title"),
])
def test_find_bad_arguments_are_error_strings(box, args, needle):
    got, info = _call(box, "find", args)
    assert needle in got["error"] and info.is_error


def test_search_tool_and_its_errors(box):
    got, info = _call(box, "search", {"query": "volcano crater", "k": 3})
    assert len(got) == 3 and info.searched_page_ids == [r["page_id"] for r in got]
    assert len(_call(box, "search", {"query": "volcano"})[0]) == ToolsConfig().search_k
    assert _call(box, "search", {"query": "?!"})[0] == []  # no terms: an empty list, not an error
    top = ToolsConfig().search_max_k
    for args, needle in [({"query": "x", "k": 0}, f"between 1 and {top}"), ({"query": "x", "k": top + 1}, f"between 1 and {top}"),
                         ({"query": "x", "k": "5"}, "must be an integer"), ({"query": ""}, "'query' is empty"),
                         ({"k": 3}, "missing argument 'query'"), ({"query": 7}, "must be a string")]:
        got, info = _call(box, "search", args)
        assert needle in got["error"] and info.is_error and info.searched_page_ids == []


def test_dispatcher_handles_malformed_json_and_unknown_tools(box):
    for raw in ['{"query": "volcano"', "not json", "{'query': 'x'}"]:
        got, info = _call(box, "search", raw)
        assert "not valid JSON" in got["error"] and info.arguments is None and info.is_error
    got, _ = _call(box, "search", '{"query": "a\tb"}')  # a raw tab: json's msg alone stops mid-phrase
    assert "not valid JSON (Invalid control character at character 12)" in got["error"]
    got, info = _call(box, "search", '{"query": "\\ud800 volcano"}')  # a lone surrogate, as JSON allows
    assert isinstance(got, list) and not info.is_error
    got, info = _call(box, "search", "[1, 2]")
    assert "must be a JSON object" in got["error"]
    got, info = _call(box, "browse", {"url": "x"})
    assert "unknown tool 'browse'" in got["error"] and "search, open, find" in got["error"]
    got, info = box.call("open", None)  # no arguments at all
    assert "missing argument 'page'" in json.loads(got)["error"]
    obs, info = box.call("open", {"page": "100"})  # a dict is taken as is
    assert json.loads(obs)["title"] == "Paris" and info.arguments == {"page": "100"}
    assert "Paris" in obs and "\\u" not in json.dumps(json.loads(box.call("open", {"page": "104"})[0]),
                                                      ensure_ascii=False)


def test_toolbox_masks_the_answer_page(index):
    masked = Toolbox(index, ToolsConfig(), mask_page_ids=["100"])
    for q in ("Paris", "Paris capital of France", "Eiffel Tower Louvre"):
        assert "100" not in masked.call("search", {"query": q})[1].searched_page_ids
    assert json.loads(masked.call("open", {"page": "Paris"})[0])["page_id"] == "100"  # open still reads it
    unmasked = Toolbox(index, ToolsConfig(mask_answer_page=False), mask_page_ids=["100"])
    assert unmasked.call("search", {"query": "Paris"})[1].searched_page_ids[0] == "100"


def test_tool_schemas_are_openai_functions():
    cfg = ToolsConfig(page_chars=1234, search_k=4, search_max_k=9, find_max_passages=2)
    schemas = tool_schemas(cfg)
    assert [s["function"]["name"] for s in schemas] == ["search", "open", "find"]
    for s in schemas:
        assert s["type"] == "function" and s["function"]["description"]
        params = s["function"]["parameters"]
        assert params["type"] == "object" and set(params["required"]) <= set(params["properties"])
    by = {s["function"]["name"]: s["function"] for s in schemas}
    assert "1234 characters" in by["open"]["description"]
    assert by["search"]["parameters"]["properties"]["k"]["maximum"] == 9
    assert "default 4" in by["search"]["parameters"]["properties"]["k"]["description"]
    assert json.loads(tool_schemas_json(cfg)) == json.loads(json.dumps(schemas))
    assert TOOL_SCHEMAS == tool_schemas(ToolsConfig())


def test_tools_config_rejects_k_above_max():
    with pytest.raises(ValueError, match="search_k"):
        ToolsConfig(search_k=30, search_max_k=20)


def test_shortcut_check(index):
    assert is_shortcut(index, "Who is the American media personality Paris Hilton?", "101", k=5)
    assert is_shortcut(index, "Which stratovolcano buried the village of Tarnoch?", "108", k=1)
    assert not is_shortcut(index, "Which city has an Eiffel Tower replica with a cowboy hat?", "107", k=5)
    assert not is_shortcut(index, "", "101", k=5)


def test_run_functions_match_the_dispatcher(index, box):
    cfg = box.cfg
    assert json.loads(box.call("open", {"page": "102"})[0]) == run_open(index, cfg, "102")
    assert json.loads(box.call("find", {"page": "102", "text": "eiffel"})[0]) == run_find(index, cfg, "102", "eiffel")


def test_open_lists_the_window_s_links_and_the_description(tmp_path):
    import pyarrow as pa

    from helpers.searchcorpus import write_pages
    from synth.engine.records import LINK_SCHEMA
    from synth.engine.store import write_parquet_atomic
    from synth.tools.search import build_index

    links = [("100", "101", "Paris Hilton"), ("100", "107", "lighthouse keeper"), ("100", "103", "Louvre"),
             ("100", "101", "Hilton"), ("105", "107", "lighthouse keeper"), ("105", "999", "ghost")]
    rows = [{"src_id": s, "dst_id": d, "paragraph_id": 1, "start": i, "end": i + len(a), "anchor_text": a}
            for i, (s, d, a) in enumerate(links)]
    write_pages(tmp_path / "pages")
    write_parquet_atomic(pa.Table.from_pylist(rows, schema=LINK_SCHEMA), tmp_path / "links" / "part-0.parquet")
    stats = build_index(tmp_path / "pages", tmp_path / "index", threads=1, heap_mb=32, links=tmp_path / "links")
    assert stats["links"] == 4  # each target once per page; a link to a page that is not there is none
    box = Toolbox(SearchIndex.open(tmp_path / "index"), ToolsConfig(page_chars=500))
    paris, _ = _call(box, "open", {"page": "Paris"})
    assert paris["description"] == "capital of France"
    # Only the anchors this window shows: "Louvre" (a bullet of the page, linked to page 103 here); "Paris
    # Hilton", "Hilton" and "lighthouse keeper" are not in its text.
    assert paris["links"] == [{"text": "Louvre", "title": "Obsidian"}]
    long_first, _ = _call(box, "open", {"page": "Long harbour page"})
    later, _ = _call(box, "open", {"page": "Long harbour page", "offset": long_first["next_offset"]})
    assert "description" not in later  # the description heads the first window only
    assert [l["title"] for l in long_first["links"]] == ["Lighthouse keeper"]
    hits, _ = _call(box, "search", {"query": "capital of France"})
    assert hits[0]["title"] == "Paris" and hits[0]["description"] == "capital of France"
    hits, _ = _call(box, "search", {"query": "volcano crater lake"})
    assert hits and all("description" not in h for h in hits)  # a page without one shows none
