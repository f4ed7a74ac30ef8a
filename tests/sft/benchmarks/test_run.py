"""`hopforge eval --benchmark`: a fixture per published format, run end to end over the demo corpus's index by a
local fake OpenAI-compatible model that answers through the tools, graded by the rule and a fake judge, and the
report's numbers checked against a hand count of the scripts below.

Each question's play says what the model does (tool calls, one a turn, then its answer) and, by hand: whether
the rule accepts the answer, whether the judge does, and whether the model had opened every supporting page
before answering.  Only ``open`` is used where the benchmark names supporting pages, so what the model has seen is
exactly what it opened.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from helpers.benchmodel import BENCHDEMO, Play, judge_handler, model_handler, spec
from helpers.demostore import ROOT, demo_config
from helpers.openai_server import serve
from sft.benchmarks.run import run_benchmarks
from sft.benchmarks.table import judge_without_verdict

SECRET = "sk-bench-secret-0123456789abcdef"
SETTINGS = ["teacher.tool_protocol=native", "teacher.max_retries=0", "teacher.price_per_mtok={prompt: 2.0, completion: 8.0}"]


def o(title):
    return ("open", {"page": title})


def s(query):
    return ("search", {"query": query})


# phrase -> (format, play, rule correct, judge correct, every supporting page opened before the answer)
HAND = {
    "Angel Falls lies": ("hotpotqa", Play((o("Angel Falls"), o("Venezuela")), "Caracas"), True, True, True),
    "Gustave Flaubert and H. G. Wells": ("hotpotqa", Play((o("Gustave Flaubert"),), "yes"), False, False, False),
    "deepest oceanic trench": ("hotpotqa", Play((o("Mariana Trench"),), "the Pacific"), False, True, True),
    "author of The Prince": ("2wiki", Play((o("The Prince"), o("Niccolò Machiavelli")), "Italy"), True, True, True),
    "author of Pride and Prejudice": ("2wiki", Play((o("Pride and Prejudice"),), "London"), False, False, False),
    "launched the first artificial satellite": ("musique", Play((o("Sputnik 1"), o("Soviet Union")), "Moskva"),
                                                True, True, True),
    "Singin' in the Rain": ("musique", Play((o("Gene Kelly"),), "Pennsylvania"), True, True, False),
    "10,000 metres": ("frames", Play((o("Haile Gebrselassie"), o("Ethiopia")), "Addis Ababa"), True, True, True),
    "future daughter": ("frames", Play((o("Anna Akhmatova"),), "Anna Bovary"), False, False, False),
    "Boxer Indemnity": ("browsecomp", Play((s("university Beijing 1911"),), "Tsinghua University"), True, True, None),
    "labour camp": ("browsecomp", Play((s("chief designer satellite"), o("Sputnik 1")), "Korolev"), False, True, None),
    "Give the year only": ("gaia", Play((s("Sputnik 1 launch"),), "1957"), True, True, None),
    "Threepenny Opera": ("gaia", Play((o("Bertolt Brecht"),), "Munich"), False, False, None),
}
ACCEPT = {play.answer for _, play, _, judged, _ in HAND.values() if judged}
FORMATS = ["hotpotqa", "2wiki", "musique", "frames", "browsecomp", "gaia"]


def plays(answer_of=lambda play: play.answer):
    return {phrase: Play(play.calls, answer_of(play)) for phrase, (_, play, *_rest) in HAND.items()}


def hand_count(fmt: str) -> dict:
    """The figures of one benchmark's row, counted from HAND (one sample a question)."""
    rows = [(play, rule, judged, seen) for f, play, rule, judged, seen in HAND.values() if f == fmt]
    n = len(rows)
    turns = [len(p.calls) + 1 for p, *_ in rows]
    out = {"asked": n, "rule": round(sum(r for _, r, _, _ in rows) / n, 4),
           "judge": round(sum(j for _, _, j, _ in rows) / n, 4),
           "agreement": round(sum(r == j for _, r, j, _ in rows) / n, 4),
           "tool_calls": round(sum(len(p.calls) for p, *_ in rows) / n, 3), "turns": round(sum(turns) / n, 3),
           "model_calls": sum(turns), "evidence": None}
    if rows[0][3] is not None:
        # Recovered: every supporting page seen, or a correct answer (then T_recover is the answer's turn).
        out["evidence"] = {"before": round(sum(not seen for *_, seen in rows) / n, 4),
                           "recovered": round(sum(seen or rule for _, rule, _, seen in rows) / n, 4)}
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The demo corpus's pages and index (the stages up to index that the tools need), and its config."""
    from flows.stages import INDEX, INGEST
    from synth.engine.runner import run_stage
    from synth.engine.store import Store

    out = tmp_path_factory.mktemp("bench") / "run"
    cfg = demo_config(*SETTINGS)
    for stage in (INGEST, INDEX):
        run_stage(stage, cfg, Store(out), progress=False)
    return out, cfg


@pytest.fixture()
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)


def _no_secret(folder: Path) -> None:
    for p in folder.rglob("*"):
        if p.is_file():
            assert SECRET.encode() not in p.read_bytes(), p


def test_every_format_end_to_end_against_a_hand_count(world, key):
    out, cfg = world
    model = model_handler(plays())
    asked: list = []
    with serve(handler=model.handler()) as srv, serve(handler=judge_handler(ACCEPT, asked=asked)) as judge:
        report = run_benchmarks(out, cfg, [spec(f) for f in FORMATS], model=f"fake-student@{srv.base_url}",
                                judge=f"fake-judge@{judge.base_url}", progress=False)
    rows = {r["benchmark"]: r for r in report["benchmarks"]}
    assert list(rows) == FORMATS
    for fmt, r in rows.items():
        want = hand_count(fmt)
        assert r["asked"] == want["asked"] and r["traces"] == want["asked"] and r["sample"] is None, fmt
        assert (r["accuracy"]["rule"], r["accuracy"]["judge"]) == (want["rule"], want["judge"]), fmt
        assert r["judge"]["agreement"] == want["agreement"] and r["judge"]["failed"] == r["judge"]["unparsed"] == 0
        assert (r["tool_calls_per_question"], r["turns_mean"]) == (want["tool_calls"], want["turns"]), fmt
        assert r["cost"]["model"]["calls"] == want["model_calls"] and r["cost"]["judge"]["calls"] == want["asked"]
        assert r["cost"]["model"]["cost_usd"] == round((r["cost"]["model"]["prompt_tokens"] * 2.0
                                                        + r["cost"]["model"]["completion_tokens"] * 8.0) / 1e6, 6)
        assert r["avg_at_k"] == {"k": 1, "rule": {"mean": want["rule"], "std": 0.0, "min": want["rule"],
                                                  "max": want["rule"]},
                                 "judge": {"mean": want["judge"], "std": 0.0, "min": want["judge"], "max": want["judge"]}}
        if want["evidence"] is None:
            assert r["evidence"] is None, fmt
        else:
            ev = r["evidence"]
            assert ev["answered_before_all_evidence"] == want["evidence"]["before"], fmt
            assert ev["recovered"] == want["evidence"]["recovered"] == ev["erf"]["fraction"][-1], fmt
    # GAIA's withheld "?" question is not asked; answers that are pages resolved to them (Caracas, Moscow via
    # the answer, Italy...), the others (no, Steventon, Anna Flaubert, 1957, Augsburg) not.
    assert rows["gaia"]["read"] == 3 and rows["gaia"]["withheld"] == 1
    assert rows["hotpotqa"]["answers_resolved_to_pages"] == 2 and rows["2wiki"]["answers_resolved_to_pages"] == 1
    assert rows["frames"]["supporting_titles"] == {"resolved": 4, "unresolved": 0}
    # The judge saw every answer once, with the benchmark's gold; the model each question once per turn.
    assert sorted(p for _, p in asked) == sorted(play.answer for _, play, *_ in HAND.values())
    assert all(model.seen[phrase] == len(play.calls) + 1 for phrase, (_, play, *_r) in HAND.items())
    # The verdicts, side by side per answer; the table and its header name the judge and the prompt's hash.
    folder = Path(report["report_dir"])
    verdicts = pq.read_table(folder / rows["hotpotqa"]["folder"] / "verdicts.parquet").to_pylist()
    assert [(v["prediction"], v["rule_correct"], v["judge_correct"]) for v in verdicts] == [
        ("Caracas", True, True), ("yes", False, False), ("the Pacific", False, True)]
    assert [v["rule_basis"] for v in verdicts] == ["page", "none", "none"]  # Caracas by page identity
    musique = pq.read_table(folder / rows["musique"]["folder"] / "verdicts.parquet").to_pylist()
    assert musique[0]["rule_basis"] == "page"  # Moskva: MuSiQue's own alias of the answer page
    saved = json.loads((folder / "eval_report.json").read_text())
    assert saved["judge"]["prompt_sha256"] == report["judge"]["prompt_sha256"] and len(saved["judge"]["prompt_sha256"]) == 64
    assert saved["harness"]["max_turns"] == cfg.eval.max_turns and saved["model"] == "fake-student"
    md = (folder / "eval.md").read_text()
    assert saved["judge"]["prompt_sha256"] in md and md.count("\n| ") == 1 + len(FORMATS)
    assert "| hotpotqa | hotpot_dev_distractor_v1.json | 3 | 33.3% | 66.7% | 66.7% | 33.3 (k=1) |" in md
    _no_secret(folder)


def test_limit_takes_a_seeded_sample_and_samples_give_avg_at_k(world, key):
    out, cfg = world

    def handler(req):  # right on even seeds, wrong on odd ones: the k samples of a question differ
        inner = model.handler()(req)
        if "<answer>" in (inner.content or "") and req["seed"] % 2:
            inner.content = "<answer>nobody at all</answer>"
        return inner

    model = model_handler(plays())
    with serve(handler=handler) as srv:
        runs = [run_benchmarks(out, cfg, [spec("hotpotqa")], model=f"m@{srv.base_url}", limit=2, samples=3,
                               progress=False, report_dir=out / "evals" / f"sample-{i}") for i in range(2)]
    r = runs[0]["benchmarks"][0]
    assert r["asked"] == 2 and r["traces"] == 6 and r["sample"] == {"limit": 2, "seed": cfg.seed, "of": 3}
    assert "a seeded sample" in (Path(runs[0]["report_dir"]) / "eval.md").read_text()
    v = [pq.read_table(Path(x["report_dir"]) / x["benchmarks"][0]["folder"] / "verdicts.parquet").to_pylist()
         for x in runs]
    assert [x["question_id"] for x in v[0]] == [x["question_id"] for x in v[1]]  # the same sample, twice
    per_sample = [sum(x["rule_correct"] for x in v[0] if x["sample_index"] == k) / 2 for k in range(3)]
    assert r["avg_at_k"]["rule"] == {"mean": round(statistics.fmean(per_sample), 4),
                                     "std": round(statistics.pstdev(per_sample), 4),
                                     "min": min(per_sample), "max": max(per_sample)}
    assert r["accuracy"]["rule"] == round(sum(x["rule_correct"] for x in v[0]) / 6, 4)


def test_a_rerun_with_other_files_leaves_the_folder_as_its_report_lists_it(world, key):
    """A second `eval --benchmark` with other files kept the first run's benchmark folders beside a report that
    lists only its own: the report and the folders now agree, the earlier run's folders gone with its report."""
    out, cfg = world
    model = model_handler(plays())
    with serve(handler=model.handler()) as srv:
        first = run_benchmarks(out, cfg, [spec("hotpotqa"), spec("frames")], model=f"rerun-model@{srv.base_url}",
                               progress=False)
        folder = Path(first["report_dir"])
        assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == sorted(r["folder"] for r in first["benchmarks"])
        second = run_benchmarks(out, cfg, [spec("gaia")], model=f"rerun-model@{srv.base_url}", progress=False)
    assert second["report_dir"] == str(folder)
    saved = json.loads((folder / "eval_report.json").read_text())
    listed = [r["folder"] for r in saved["benchmarks"]]
    assert listed == [r["folder"] for r in second["benchmarks"]] and len(listed) == 1 and "gaia" in listed[0]
    assert sorted(p.name for p in folder.iterdir()) == sorted([*listed, "eval.md", "eval_report.json"])
    assert sorted(p.name for p in folder.parent.iterdir()) == ["benchmarks"]  # no staging folder left behind
    assert "hotpotqa" not in (folder / "eval.md").read_text()


def test_compare_puts_two_models_side_by_side_on_the_same_questions(world, key):
    out, cfg = world
    a, b = model_handler(plays()), model_handler(plays(lambda p: "Paris"))
    with serve(handler=a.handler()) as sa, serve(handler=b.handler()) as sb, \
            serve(handler=judge_handler(ACCEPT)) as judge:
        both = run_benchmarks(out, cfg, [spec("hotpotqa"), spec("frames")], judge=f"j@{judge.base_url}",
                              compare=(f"model-a@{sa.base_url}", f"model-b@{sb.base_url}"), progress=False)
    assert (both["A"]["model"], both["B"]["model"]) == ("model-a", "model-b")
    rows = {r["benchmark"]: r for r in both["rows"]}
    assert rows["hotpotqa"]["accuracy (rule) A"] == "33.3%" and rows["hotpotqa"]["accuracy (rule) B"] == "0.0%"
    assert rows["hotpotqa"]["accuracy (judge) A"] == "66.7%" and rows["hotpotqa"]["accuracy (judge) B"] == "0.0%"
    assert rows["frames"]["rule accuracy B - A"] == -0.5
    ra, rb = (both[s]["report"]["benchmarks"] for s in "AB")
    assert [x["sha256"] for x in ra] == [x["sha256"] for x in rb] and both["judge"]["model"] == "j"
    md = (Path(both["report_dir"]) / "compare.md").read_text()
    assert "model-a" in md and "model-b" in md and both["judge"]["prompt_sha256"] in md


def test_hostile_input_leaves_the_rule_standing(world, key, tmp_path):
    out, cfg = world
    model = model_handler({"moons of Mars": Play((s("Mars moons"),), "two"),
                           "sky of Mars": Play((), "red"), **plays()})
    with serve(handler=model.handler()) as srv, serve(handler=judge_handler(set(), garbage=True)) as garbage:
        # Answers that are not pages: graded by F1 alone, and the report says none resolved.
        report = run_benchmarks(out, cfg, [f"jsonl:{BENCHDEMO / 'not_pages.jsonl'}", spec("hotpotqa")],
                                model=f"m@{srv.base_url}", judge=f"g@{garbage.base_url}", progress=False)
        np_row, hp_row = report["benchmarks"]
        assert np_row["answers_resolved_to_pages"] == 0 and np_row["accuracy"]["rule"] == 0.5
        # A judge that answers garbage: every verdict is recorded as unparsed and the rule's stands.
        for r in (np_row, hp_row):
            assert r["judge"]["unparsed"] == r["judge"]["asked"] == r["traces"] and r["judge"]["agreement"] is None
            assert r["accuracy"]["judge"] == r["accuracy"]["rule"]
        assert judge_without_verdict(report) == np_row["traces"] + hp_row["traces"]
        verdicts = pq.read_table(Path(report["report_dir"]) / hp_row["folder"] / "verdicts.parquet").to_pylist()
        assert {v["judge_error"] for v in verdicts} == {"unparsed: prose"}
        assert [v["judged_correct"] for v in verdicts] == [v["rule_correct"] for v in verdicts]
        # A dead judge (nothing listens on its port): failures recorded per answer, the rule stands.
        with serve() as dead:
            url = dead.base_url
        report = run_benchmarks(out, cfg, [spec("hotpotqa")], model=f"m@{srv.base_url}", judge=f"d@{url}",
                                progress=False)
    r = report["benchmarks"][0]
    assert r["judge"]["failed"] == r["traces"] == 3 and r["accuracy"]["judge"] == r["accuracy"]["rule"] == round(1 / 3, 4)
    assert judge_without_verdict(report) == 3
    _no_secret(Path(report["report_dir"]))


def test_a_model_call_that_fails_is_counted_and_never_judged(world, key):
    from helpers.openai_server import Status

    out, cfg = world
    model = model_handler(plays())
    asked: list = []

    def handler(req):
        if "Angel Falls" in req["messages"][1]["content"]:
            return Status(400, message="maximum context length exceeded")
        return model.handler()(req)

    with serve(handler=handler) as srv, serve(handler=judge_handler(ACCEPT, asked=asked)) as judge:
        r = run_benchmarks(out, cfg, [spec("hotpotqa")], model=f"m@{srv.base_url}", judge=f"j@{judge.base_url}",
                           progress=False)["benchmarks"][0]
    assert r["stop_reasons"] == {"answer": 2, "teacher_failed": 1} and r["answer_rate"] == round(2 / 3, 4)
    assert r["accuracy"] == {"rule": 0.0, "judge": round(1 / 3, 4)}  # Caracas was never given; the Pacific by the judge
    assert r["judge"]["asked"] == 2 and sorted(p for _, p in asked) == ["the Pacific", "yes"]


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "flows.cli", "eval", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, COLUMNS="250", **(env or {})))


def test_cli_writes_the_table_and_refuses_bad_input_in_one_line(world, tmp_path):
    out, _ = world
    sets = [a for kv in SETTINGS for a in ("--set", kv)]
    bad = tmp_path / "broken_musique.jsonl"
    bad.write_text('{"id": "x", "question": "q?", "answer": "a", "paragraphs": [{"title": 3}]}\n')
    r = _cli("--out", str(out), "-b", f"musique:{bad}", "--model", "m@http://127.0.0.1:9/v1", *sets)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stdout + r.stderr
    assert str(bad) in lines[0] and "line 1" in lines[0] and "paragraphs[0].title" in lines[0]
    r = _cli("--out", str(out), "-b", "nosuchformat:x.json", *sets)
    assert r.returncode == 2 and "unknown format 'nosuchformat'" in r.stdout + r.stderr
    r = _cli("--out", str(out), "-b", spec("gaia"), "--judge", "no-url-here", "--model", "m@http://127.0.0.1:9/v1", *sets)
    assert r.returncode == 2 and "expected MODEL@URL" in r.stdout + r.stderr
    # A dead model endpoint: not a table of zeros but one line and exit 1, the report kept for a look.
    with serve() as dead:
        url = dead.base_url
    r = _cli("--out", str(out), "-b", spec("gaia"), "--model", f"deadm@{url}", *sets, env={"OPENAI_API_KEY": SECRET})
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("error:")]
    assert r.returncode == 1 and len(lines) == 1, r.stdout + r.stderr
    assert "every one of its" in lines[0] and "deadm" in lines[0] and SECRET not in r.stdout + r.stderr
    kept = json.loads((out / "evals" / "deadm" / "benchmarks" / "eval_report.json").read_text())
    assert kept["benchmarks"][0]["stop_reasons"] == {"teacher_failed": kept["benchmarks"][0]["traces"]}
    model = model_handler(plays())
    with serve(handler=model.handler()) as srv:
        r = _cli("--out", str(out), "-b", spec("browsecomp"), "-b", spec("gaia"), "--model", f"cli-model@{srv.base_url}",
                 *sets, env={"OPENAI_API_KEY": SECRET})
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads((out / "evals" / "cli-model" / "benchmarks" / "eval_report.json").read_text())
    assert [b["benchmark"] for b in report["benchmarks"]] == ["browsecomp", "gaia"] and report["judge"] is None
    printed = r.stdout + r.stderr
    assert "browsecomp" in printed and "gaia" in printed and SECRET not in printed


@pytest.mark.parametrize("blank", ['""', '"   \\n\\t"', None])
def test_an_empty_question_is_refused_like_a_missing_one_before_any_model_call(world, key, tmp_path, blank):
    """`{"question": ""}` was asked, three model calls spent on nothing: an empty or blank question is refused
    like a missing one, in one line naming the file, the line and the field, and the model is never called."""
    from synth.engine.errors import InputError

    out, cfg = world
    bench = tmp_path / "blank.jsonl"
    field = "" if blank is None else f'"question": {blank}, '
    bench.write_text('{"question": "Which country holds Angel Falls?", "answer": "Venezuela"}\n'
                     f'{{{field}"answer": "Paris"}}\n')
    model = model_handler(plays())
    with serve(handler=model.handler()) as srv:
        with pytest.raises(InputError) as err:
            run_benchmarks(out, cfg, [f"jsonl:{bench}"], model=f"m@{srv.base_url}", progress=False)
        assert srv.count == 0
    why = "missing" if blank is None else "empty or only whitespace (a question needs text)"
    assert str(err.value) == f"{bench}: line 2: field `question`: {why}"


def test_the_pipelines_student_is_the_default_model(world, tmp_path):
    from helpers.coinstudent import save_coin_student

    out, cfg = world
    # A real transformers checkpoint at DIR/student that answers Caracas or a wrong name by a coin toss.
    save_coin_student(tmp_path / "student", "Caracas")
    target = tmp_path / "report"
    (out / "student").symlink_to(tmp_path / "student")
    try:
        report = run_benchmarks(out, demo_config(*SETTINGS, "eval.temperature=1.0"), [spec("hotpotqa")], samples=4,
                                progress=False, report_dir=target)
    finally:
        (out / "student").unlink()
    r = report["benchmarks"][0]
    assert report["model"] == "student" and report["backend"] == "hf" and r["traces"] == 12
    verdicts = pq.read_table(target / r["folder"] / "verdicts.parquet").to_pylist()
    assert {v["prediction"] for v in verdicts} <= {"Caracas", "nobody at all"}
    right = [v["sample_index"] for v in verdicts if v["rule_correct"]]
    assert all(v["question_id"].endswith("5a7a06935542990198eaf050") for v in verdicts if v["rule_correct"])
    per_sample = [right.count(k) / 3 for k in range(4)]
    assert r["avg_at_k"]["rule"]["mean"] == round(statistics.fmean(per_sample), 4) == r["accuracy"]["rule"]
    assert r["avg_at_k"]["rule"]["std"] == round(statistics.pstdev(per_sample), 4)
    assert r["cost"]["model"]["calls"] == 12 and r["tool_calls_per_question"] == 0


def test_the_runs_own_eval_split_is_a_row_of_the_same_table(world, key, tmp_path):
    import shutil

    from helpers.walkstore import commit_stage
    from synth.engine.records import Hop, Question

    out, cfg = world
    own = tmp_path / "own"
    shutil.copytree(out, own, symlinks=True)

    def q(qid, path, titles, text, split):
        hops = [Hop(f"hop {i}", titles[i + 1], path[i + 1]) for i in range(len(path) - 1)]
        return Question(qid, "walk", f"w-{qid}", path, titles, text, titles[-1], [], path[-1], hops, "oracle", "x", 0,
                        split)

    questions = [q("q1", ["10475", "19534"], ["Angel Falls", "Venezuela"], "Which country holds the tallest waterfall?",
                   "eval"),
                 q("q2", ["13782", "15525"], ["Gustave Flaubert", "Madame Bovary"], "Which novel of a Rouen-born writer "
                   "was tried for obscenity?", "eval"),
                 q("q3", ["16824", "13238"], ["Paris", "France"], "Which country has Paris?", "sft")]
    from synth.engine.store import Store

    commit_stage(Store(own), "questions", "questions", Question.to_table(questions))
    model = model_handler({"tallest waterfall": Play((s("Venezuela waterfall"), o("Angel Falls")), "Venezuela"),
                           "tried for obscenity": Play((o("Gustave Flaubert"),), "Salammbô"), **plays()})
    with serve(handler=model.handler()) as srv:
        report = run_benchmarks(own, cfg, ["eval", spec("hotpotqa")], model=f"m@{srv.base_url}", progress=False)
    mine, hotpot = report["benchmarks"]
    assert (mine["benchmark"], mine["asked"], mine["answer_page_masked"]) == ("hopforge", 2, True)
    assert mine["accuracy"]["rule"] == 0.5 and hotpot["accuracy"]["rule"] == round(1 / 3, 4)
    assert report["harness"]["answer_page_masked"] == ["hopforge:eval split"]
    traces = pq.read_table(Path(report["report_dir"]) / mine["folder"] / "traces.parquet").to_pylist()
    first = next(t for t in traces if t["question_id"] == "q1")
    assert first["searched_page_ids"] and "19534" not in first["searched_page_ids"]  # the answer page is masked
    # q1 saw Angel Falls by opening it, never Venezuela, and answered right: recovered by its answer, early.
    assert mine["evidence"]["answered_before_all_evidence"] == 1.0 and mine["evidence"]["recovered"] == 0.5
    assert "but on the run's own eval split" in (Path(report["report_dir"]) / "eval.md").read_text()
