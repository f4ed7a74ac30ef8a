"""The report compared as data: index.md without what the run paid the teacher, every other file by bytes."""

from __future__ import annotations

from synth.engine.sameness import output_digest
from synth.report.digest import report_file_digest
from synth.report.stage import Report, _cost_section


def _md(requests: int, cached: int, body: str = "one row") -> str:
    """An index.md whose teacher-cost section the report itself writes, for a run that paid ``requests`` calls
    and was answered ``cached`` from the call cache."""
    usage = {"calls": requests + cached, "requests": requests, "cache_hits": cached, "prompt_tokens": 40 * requests,
             "completion_tokens": 9 * requests, "cached_prompt_tokens": 40 * cached,
             "cached_completion_tokens": 9 * cached}
    md = ["# hopforge report: `run`", "", "## Funnel", "", body, ""]
    _cost_section(md, {"questions": {"teacher": usage}, "filter": {"output": 2}}, Report())
    return "\n".join(md + ["## Per kept SFT row", "", "calls / row: 7", ""])


def test_index_md_leaves_out_what_the_run_paid(tmp_path):
    for name, requests, cached, body in (("paid", 10, 0, "one row"), ("replayed", 0, 10, "one row"),
                                         ("other", 10, 0, "two rows")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "index.md").write_text(_md(requests, cached, body))
        (tmp_path / name / "funnel.png").write_bytes(b"png")
    paid, replayed, other = (tmp_path / n / "index.md" for n in ("paid", "replayed", "other"))
    assert "## Teacher cost" in paid.read_text() and paid.read_text() != replayed.read_text()
    assert report_file_digest(paid, "index.md") == report_file_digest(replayed, "index.md")
    assert report_file_digest(paid, "index.md") != report_file_digest(other, "index.md")
    assert report_file_digest(paid, "funnel.png") is None  # compared by the default rule
    a, b = (output_digest(tmp_path / n, report_file_digest) for n in ("paid", "replayed"))
    assert a == b and a.differing(output_digest(tmp_path / "other", report_file_digest)) == ["index.md"]


def test_the_run_folders_name_is_no_data(tmp_path):
    from synth.report.explorer import js_call, render_page

    def write(folder, name, n):
        (folder / "explorer").mkdir(parents=True)
        (folder / "index.md").write_text(f"# hopforge report: `{name}`\n\n## Funnel\n\n{n} questions\n")
        (folder / "index.html").write_bytes(render_page(name))
        (folder / "explorer" / "index-data.js").write_bytes(
            js_call("hopforgeIndex", {"version": 1, "n": n, "meta": {"run": name, "funnel": []}}))

    write(tmp_path / "a", "demo", 3)
    write(tmp_path / "b", "det<1>", 3)
    write(tmp_path / "c", "demo", 4)
    a, b, c = (output_digest(tmp_path / n, lambda f, rel, n=name: report_file_digest(f, rel, n))
               for n, name in (("a", "demo"), ("b", "det<1>"), ("c", "demo")))
    assert a == b
    assert a.differing(c) == ["explorer/index-data.js", "index.md"]
    assert output_digest(tmp_path / "a") != output_digest(tmp_path / "b")  # the names, by bytes


def test_the_explorers_bytes_leave_the_report_stages_figures():
    from synth.report.digest import report_figures

    a = {"output": 3, "explorer": {"questions": 3, "bytes": 1000}}
    b = {"output": 3, "explorer": {"questions": 3, "bytes": 1004}}  # a folder name four characters longer
    assert report_figures(a) == report_figures(b) == {"output": 3, "explorer": {"questions": 3}}
    assert a["explorer"]["bytes"] == 1000  # the report itself is left as it is
