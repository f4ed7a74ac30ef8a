"""Incremental rebuilds: an unchanged rerun recomputes nothing, a filter change re-pays no teacher
call, and added pages make new walks (and teacher work) only where the graph changed."""

import json

import pyarrow.dataset as ds
import pytest

from flows.config import load_config
from synth.corpus.demo import build_demo_corpus
from flows.stages import PIPELINE
from synth.engine.store import Store

UNTIL_REPORT = [s for s in PIPELINE][: [s.name for s in PIPELINE].index("report") + 1]
SMALL = ["questions.route=false", "walk.num_walks=100", "walk.hops=3", "expand.num_subgraphs=0", "rollout.n=2", "questions.shard_size=24",
         "rollout.shard_size=4", "walk.incremental=true"]


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("src") / "demo.jsonl"
    build_demo_corpus(path)
    return path


def _run(out, source, extra=()):
    cfg = load_config("configs/demo.yaml", SMALL + [f"corpus.source={source}", *extra])
    outcomes = PIPELINE.run(UNTIL_REPORT, cfg, Store(out))
    run = json.loads((out / "reports" / "run.json").read_text())
    assert run["stages"].keys() == {o.name for o in outcomes}
    return run


def test_noop_rerun_and_filter_change(tmp_path, demo_file):
    first = _run(tmp_path, demo_file)
    assert first["teacher_calls"] > 0
    again = _run(tmp_path, demo_file)
    assert again["teacher_calls"] == 0
    assert all(s["reused"] for s in again["stages"].values())
    changed = _run(tmp_path, demo_file, ["filters.min_tool_calls=5"])
    assert changed["teacher_calls"] == 0
    reran = {name for name, s in changed["stages"].items() if not s["reused"]}
    assert reran == {"filter", "assemble", "report"}


def test_added_pages_pay_only_for_new_walks(tmp_path, demo_file):
    lines = demo_file.read_text(encoding="utf-8").splitlines(keepends=True)
    small = tmp_path / "small.jsonl"
    small.write_text("".join(lines[: int(len(lines) * 0.8)]), encoding="utf-8")
    out = tmp_path / "out"
    first = _run(out, small)
    walks_a = {r["walk_id"]: r for r in ds.dataset(out / "walks").to_table().to_pylist()}
    questions_a = {r["question_id"]: r for r in ds.dataset(out / "questions").to_table().to_pylist()}
    repairs_a = json.loads((out / "reports" / "questions.json").read_text()).get("repairs", {})

    second = _run(out, demo_file)  # 25% more pages, with walk.incremental on
    report = json.loads((out / "reports" / "walks.json").read_text())
    walks_b = {r["walk_id"]: r for r in ds.dataset(out / "walks").to_table().to_pylist()}
    kept = walks_a.keys() & walks_b.keys()
    new = walks_b.keys() - walks_a.keys()
    assert report["walks"]["reused"] == len(kept) > 0
    assert all(walks_a[w]["path"] == walks_b[w]["path"] for w in kept)
    questions_b = {r["question_id"]: r for r in ds.dataset(out / "questions").to_table().to_pylist()}
    repairs_b = json.loads((out / "reports" / "questions.json").read_text()).get("repairs", {})
    # Questions of kept walks cost nothing: only the new walks' questions were asked, and the one repair of
    # any question the validators, reading the grown corpus, now send back.
    assert second["stages"]["questions"]["teacher_calls"] <= len(new) + sum(r["attempted"] for r in repairs_b.values())
    assert second["teacher_calls"] < first["teacher_calls"]
    # A kept walk's question is the same cached draft, unless the question validators, which read the
    # grown index and link graph, now send it back for its one repair or now accept a draft they once
    # sent back: only repairs can tell the two runs' questions apart.
    repairs = sum(r["attempted"] for rep in (repairs_a, repairs_b) for r in rep.values())
    differ = [q for q in questions_a.keys() & questions_b.keys()
              if questions_a[q]["question"] != questions_b[q]["question"]]
    assert len(differ) <= repairs


# Routed walks (questions.route): most 3-hop walks then get a question, so the student has rows to train; rows of
# routed questions run to ~15k tokens.
STUDENT = ["walk.num_walks=60", "walk.hops=3", "questions.route=true", "expand.num_subgraphs=0", "rollout.n=2",
           "assemble.lengths=[2048]", "sft.overrides=[max_steps=2, eval_fraction=0.3]", "eval.max_turns=2",
           "eval.max_new_tokens=8", "eval.max_questions=2", "filters.min_tool_calls=2",
           "questions.splits={sft: 0.6, rl: 0.1, eval: 0.3}"]


def test_the_student_retrains_only_when_the_sft_table_changed(tmp_path, demo_file):
    """The sft stage is keyed by the content of the `sft` table: a filter change that leaves it as it was
    reruns the filter but not the training (nor the eval); one that changes it retrains."""

    def run(extra=()):
        cfg = load_config("configs/demo.yaml", STUDENT + [f"corpus.source={demo_file}", *extra])
        PIPELINE.run(PIPELINE, cfg, Store(tmp_path))
        return json.loads((tmp_path / "reports" / "run.json").read_text())["stages"]

    def sft_bytes():
        return {p.name: p.read_bytes() for p in sorted((tmp_path / "sft").glob("*.parquet"))}

    first = run()
    assert not first["sft"]["reused"] and not first["eval"]["reused"]
    rows, table = first["sft"]["input"], sft_bytes()
    weights = (tmp_path / "student" / "model.safetensors").stat().st_mtime_ns
    key = json.loads((tmp_path / "manifest.json").read_text())["stages"]["sft"]
    assert "filter" not in key["inputs"] and "sft" in key["content"]["filter"]

    # filters.ngram shapes decontamination, and there is no decontamination file: the sft rows are the same.
    same = run(["filters.ngram=9"])
    assert not same["filter"]["reused"] and same["filter"]["teacher_calls"] == 0
    assert sft_bytes() == table
    assert same["sft"]["reused"] and same["eval"]["reused"]
    assert (tmp_path / "student" / "model.safetensors").stat().st_mtime_ns == weights

    # Two correct traces kept per question: more rows, so the student retrains (and is evaluated again).
    changed = run(["filters.ngram=9", "filters.keep_per_question=2"])
    assert changed["sft"]["input"] > rows
    assert not changed["sft"]["reused"] and not changed["eval"]["reused"]
