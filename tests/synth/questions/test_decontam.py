"""Decontamination in the questions stage, on the demo corpus: benchmark questions made from demo walks.

The benchmark files are written in HotpotQA's and MuSiQue's published schemas from the pages of
a few demo walks (two consecutive pages as supporting facts; a walk's last page as the answer
with its first page in the context; an answer shared with no page on the walk).  A plain,
independent Python reading of the rules says which walks retrace a benchmark question; the stage
must drop exactly those before their question is requested, spend no rollout on them, and report
per benchmark the drops that ``rejects/questions`` holds.
"""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.dataset as ds
import pytest

import synth.questions.write as write_mod
from flows.stages import QUESTIONS, ROLLOUT
from helpers.demostore import copy_demo_store, demo_config
from synth.decontam.check import ENTITY, LEVELS, PATH, TEXT
from synth.decontam.tally import EXAMPLES
from synth.engine.config import ConfigError
from synth.engine.errors import InputError
from synth.engine.records import Walk
from synth.engine.runner import run_stage
from synth.text.answers import normalize_answer


def _walks(store) -> list[Walk]:
    return [Walk.from_row(r) for r in ds.dataset(store.root / "walks").to_table().to_pylist()]


def _benchmarks(tmp_path, walks: list[Walk]) -> tuple[list[str], list[dict]]:
    """Config overrides naming a HotpotQA and a MuSiQue file made from the walks, and their records as
    ``{supporting, linked, answers}`` (titles) for the reference."""
    a, b, c, d = walks[2], walks[5], walks[8], walks[11]
    hotpot = [
        {"_id": "path-1", "question": "Which page follows which?", "answer": "nothing at all", "type": "bridge",
         "supporting_facts": [[a.titles[1], 0], [a.titles[2], 1]],
         "context": [[a.titles[1], ["s0", "s1"]], [a.titles[2], ["s0", "s1"]]], "level": "hard"},
        {"_id": "entity-1", "question": "Where does this walk end?", "answer": b.titles[-1], "type": "bridge",
         "supporting_facts": [[b.titles[0], 0], ["A Page The Demo Corpus Lacks", 0]],
         "context": [[b.titles[0], ["s0"]], ["A Page The Demo Corpus Lacks", ["s0"]]], "level": "medium"},
        {"_id": "shares-answer", "question": "Same answer, other pages?", "answer": c.titles[-1], "type": "bridge",
         "supporting_facts": [["Another Absent Page", 0]], "context": [["Another Absent Page", ["s0"]]],
         "level": "easy"},
    ]
    musique = [{"id": "2hop__1_2", "question": "Which two pages?", "answer": "x", "answer_aliases": [],
                "answerable": True, "question_decomposition": [],
                "paragraphs": [{"idx": 0, "title": d.titles[2], "paragraph_text": "p", "is_supporting": True},
                               {"idx": 1, "title": d.titles[3], "paragraph_text": "p", "is_supporting": True},
                               {"idx": 2, "title": "Unheard Of", "paragraph_text": "p", "is_supporting": False}]}]
    (tmp_path / "hotpot_dev.json").write_text(json.dumps(hotpot), encoding="utf-8")
    (tmp_path / "musique_dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in musique), encoding="utf-8")
    refs = [{"supporting": {t for t, _ in r["supporting_facts"]}, "linked": {t for t, _ in r["context"]},
             "answers": {normalize_answer(r["answer"])}, "bench": 0} for r in hotpot]
    refs += [{"supporting": {p["title"] for p in r["paragraphs"] if p["is_supporting"]},
              "linked": {p["title"] for p in r["paragraphs"]}, "answers": {normalize_answer(r["answer"])}, "bench": 1}
             for r in musique]
    files = (f"questions.decontaminate=[{{path: {tmp_path / 'hotpot_dev.json'}, format: hotpotqa}}, "
             f"{{path: {tmp_path / 'musique_dev.jsonl'}, format: musique}}]")
    return [files], refs


def _reference(walk: Walk, aliases: list[str], refs: list[dict]) -> str | None:
    """The rules read plainly, one walk at a time (titles here are the corpus's own)."""
    for r in refs:
        if any(x in r["supporting"] and y in r["supporting"] for x, y in zip(walk.titles, walk.titles[1:])):
            return PATH
    names = {normalize_answer(n) for n in [walk.titles[-1], *aliases]}
    for r in refs:
        if names & r["answers"] and any(t in r["linked"] | r["supporting"] for t in walk.titles[:-1]):
            return ENTITY
    return None


@pytest.fixture
def spied(monkeypatch):
    """The source ids the questions stage asks the teacher to write a question for."""
    asked: list[str] = []
    real = write_mod.question_request

    def spy(src, *a, **k):
        asked.append(src.source_id)
        return real(src, *a, **k)

    monkeypatch.setattr(write_mod, "question_request", spy)
    return asked


def test_matching_walks_are_dropped_before_questions_and_no_rollout_is_spent(tmp_path, demo_store, spied):
    store = copy_demo_store(demo_store[0], tmp_path / "run", walks=30)
    walks = _walks(store)
    files, refs = _benchmarks(tmp_path, walks)
    aliases = {r["page_id"]: r["aliases"] or [] for r in
               ds.dataset(store.root / "corpus" / "pages").to_table(columns=["page_id", "aliases"]).to_pylist()}
    expected = {w.walk_id: _reference(w, aliases[w.path[-1]], refs) for w in walks}
    expected = {k: v for k, v in expected.items() if v}
    for made in (walks[2], walks[5], walks[11]):  # the walks the files were made from are among them
        assert made.walk_id in expected
    assert expected[walks[5].walk_id] == ENTITY and expected[walks[2].walk_id] == PATH

    cfg = demo_config("questions.from_subgraphs=false", "rollout.n=2", "rollout.policy=fixed", *files)
    out = run_stage(QUESTIONS, cfg, store)
    rejects = ds.dataset(store.root / "rejects" / "questions").to_table().to_pylist()
    dropped = {r["source_id"]: r["reason"] for r in rejects if r["reason"] in (ENTITY, PATH)}
    assert dropped == expected
    assert not set(spied) & set(expected) and set(spied) == {w.walk_id for w in walks} - set(expected)

    # The report: each file's drops per level add up to the rejects that name the file.
    report = json.loads((store.root / "reports" / "questions.json").read_text())
    decon = report["decontamination"]
    assert [b["file"] for b in decon["benchmarks"]] == ["hotpot_dev.json", "musique_dev.jsonl"]
    for b in decon["benchmarks"]:
        named = Counter(LEVELS[r["reason"]] for r in rejects if r["reason"] in (ENTITY, PATH)
                        and f" {b['file']} " in r["detail"])
        assert {k: v for k, v in b["dropped"].items() if v} == dict(named)
        assert {k: len(v) for k, v in b["examples"].items()} == {k: min(v, EXAMPLES) for k, v in named.items()}
    for reason in (ENTITY, PATH):
        assert decon["dropped"][reason] == report["dropped"].get(reason, 0) == Counter(dropped.values())[reason]
    hotpot = decon["benchmarks"][0]
    assert hotpot["questions"] == 3 and hotpot["titles_unresolved"] == 2 and len(hotpot["sha256"]) == 64
    assert out.report["input"] == len(walks)

    # No rollout is spent on them: the traces are of the kept questions only.
    run_stage(ROLLOUT, cfg, store)
    traced = {r["question_id"] for r in ds.dataset(store.root / "traces").to_table(columns=["question_id"]).to_pylist()}
    kept = {r["question_id"]: r["source_id"] for r in ds.dataset(store.root / "questions").to_table().to_pylist()}
    assert traced == set(kept) and not set(kept.values()) & set(expected)

    # The report's section and the explorer show the same drops.
    from synth.report.stage import build_report

    out = tmp_path / "report"
    rep = build_report(store, out)
    assert rep.summary["decontamination"] == decon
    index_md = (out / "index.md").read_text()
    for b in decon["benchmarks"]:
        row = next(line for line in index_md.splitlines() if line.startswith(f"| {b['benchmark']} | {b['file']} "))
        assert row.endswith(" | ".join(str(b["dropped"][lv]) for lv in ("entity", "path", "text")) + " |")
    text = (out / "explorer" / "index-data.js").read_text(encoding="utf-8")
    explorer = json.loads(text[text.index("(") + 1:].rstrip().removesuffix(";").removesuffix(")"))
    cols = explorer["cols"]
    shown = {cols["id"][i]: explorer["reasons"][k] for i, k in enumerate(cols["reason"]) if k >= 0}
    by_source = {r["source_id"]: r["record_id"] for r in rejects}
    assert {shown[by_source[s]] for s in expected} <= {f"questions: {r}" for r in (ENTITY, PATH)}
    assert all(shown[by_source[s]] == f"questions: {r}" for s, r in expected.items())


def test_the_text_level_drops_a_written_question_before_rollout(tmp_path, demo_store):
    store = copy_demo_store(demo_store[0], tmp_path / "run", walks=60)  # about one walk in thirteen gets a question
    # against the lexical adversaries (with the dense one too, about one in a hundred: too few to drop one of)
    lexical = ("questions.from_subgraphs=false", "questions.adversaries=[tool,body,keywords]")
    run_stage(QUESTIONS, demo_config(*lexical), store)
    written = ds.dataset(store.root / "questions").to_table().to_pylist()
    assert len(written) >= 2  # one to drop, and the rest to keep
    victim = written[0]
    bench = tmp_path / "own.jsonl"
    bench.write_text(json.dumps({"question": "Quiz: " + victim["question"], "answer": victim["answer"]}) + "\n")
    again = run_stage(QUESTIONS, demo_config(*lexical, f"questions.decontaminate=[{{path: {bench}, format: jsonl}}]"),
                      store)
    assert again.report["teacher"]["requests"] == 0  # the same questions, from the call cache
    kept = {r["question_id"] for r in ds.dataset(store.root / "questions").to_table().to_pylist()}
    assert kept == {r["question_id"] for r in written} - {victim["question_id"]}
    rejects = [r for r in ds.dataset(store.root / "rejects" / "questions").to_table().to_pylist()
               if r["reason"] == TEXT]
    assert [(r["record_id"], r["raw"]) for r in rejects] == [(victim["question_id"], victim["question"])]
    assert again.report["decontamination"]["benchmarks"][0]["dropped"] == {"entity": 0, "path": 0, "text": 1}


def test_the_files_bytes_key_the_stage_and_bad_files_are_one_line(tmp_path, demo_store):
    from synth.questions.decontam import identity

    bench = tmp_path / "own.jsonl"
    bench.write_text('{"question": "a question nobody wrote", "answer": "x"}\n')
    cfg = demo_config(f"questions.decontaminate=[{{path: {bench}, format: jsonl}}]")
    before = identity(cfg)
    bench.write_text('{"question": "another question nobody wrote", "answer": "x"}\n')
    assert identity(cfg) != before and identity(demo_config()) == ""
    missing = demo_config(f"questions.decontaminate=[{{path: {tmp_path / 'nope.json'}, format: hotpotqa}}]")
    with pytest.raises(ConfigError, match="questions.decontaminate.*nope.json"):
        identity(missing)
    bench.write_text('{"question": "fine", "answer": "x"}\n{"answer": "no question"}\n')
    store = copy_demo_store(demo_store[0], tmp_path / "run", walks=4)
    with pytest.raises(InputError, match=r"own.jsonl: line 2: field `question`: missing"):
        run_stage(QUESTIONS, cfg, store)


def test_a_malformed_benchmark_file_exits_2_with_one_line(tmp_path, demo_store):
    import os
    import subprocess

    from helpers.cli import hopforge_command

    store = copy_demo_store(demo_store[0], tmp_path / "run", walks=4)
    bad = tmp_path / "hotpot.json"
    bad.write_text('[{"_id": "a", "question": "q?", "answer": "x", "supporting_facts": [["T", 0]]},\n'
                   ' {"_id": "b", "question": "q?", "answer": "x", "supporting_facts": "T"}]', encoding="utf-8")
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PYTHONUNBUFFERED": "1"}
    r = subprocess.run([*hopforge_command(), "questions", "--out", str(store.root), "--set",
                        f"questions.decontaminate=[{{path: {bad}, format: hotpotqa}}]"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert r.returncode == 2, r.stdout
    errors = [line for line in r.stdout.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {bad}: record 1: field `supporting_facts`: expected a list of [title, sent_id] pairs"]
    assert "Traceback" not in r.stdout
