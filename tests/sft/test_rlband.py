"""The student band (``rl.band_by: student``): the student rolls out n times on rl questions, and ``rl_pool``
holds the questions it answers 1 <= c <= n-1 times, with c/n and the model that measured them.

The world is a real run folder (``rl_run``: the pipeline up to the filter on the demo corpus), copied, with a
student committed as the ``sft`` stage's output.  The student is a real ``transformers`` checkpoint whose answer
is a coin toss between one question's answer and a wrong one (:mod:`helpers.coinstudent`), or a local
OpenAI-compatible server scripted the same way, searching once before it answers.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict

import pyarrow.dataset as ds
import pytest

from flows.config import load_config
from flows.stages import FILTER, RL_BAND
from helpers.filterstore import publish
from helpers.openai_server import Reply, call, serve
from sft.rlband import pool_questions
from synth.engine.errors import StageFailed
from synth.engine.records import TEACHER_FAILED, tool_calls_of
from synth.engine.runner import run_stage
from synth.engine.store import Store
from synth.text.answers import is_correct

N, QUESTIONS = 8, 3
BASE = ["rl.band_by=student", f"rl.n={N}", f"rl.max_questions={QUESTIONS}", "rl.shard_size=2", "eval.max_turns=3",
        "eval.max_new_tokens=16", "runner.shard_workers=1"]


@pytest.fixture()
def world(rl_run, tmp_path):
    """A private copy of the run folder, its config, and the rl questions the band measures."""
    out = tmp_path / "run"
    shutil.copytree(rl_run, out, symlinks=True)
    cfg = load_config(None, BASE)
    return Store(out), cfg, pool_questions(Store(out), cfg)


def _rows(root, table):
    return ds.dataset(root / table).to_table().to_pylist()


def check_band(store, cfg, questions, model_prefix):
    """The pool against the student's own traces: c recounted, rows exactly the 1 <= c <= n-1 questions."""
    root = store.root
    traces = _rows(root, "rl_band/traces")
    by_q = defaultdict(list)
    for t in traces:
        by_q[t["question_id"]].append(t)
    golds = {q.question_id: q.golds for q in questions}
    assert set(by_q) == set(golds)
    for ts in by_q.values():  # n rollouts of each question, one per sample index, through the harness
        assert sorted(t["sample_index"] for t in ts) == list(range(N))
        assert all(1 <= t["n_turns"] <= cfg.eval.max_turns for t in ts)
    counts = {q: sum(is_correct(t["final_answer"], golds[q], cfg.filters.min_f1) for t in ts) for q, ts in by_q.items()}
    band = {q: c for q, c in counts.items() if 1 <= c <= N - 1}
    rows = _rows(root, "rl_pool")
    assert {r["extra_info"]["question_id"]: r["extra_info"]["c"] for r in rows} == band
    for i, r in enumerate(rows):
        info = r["extra_info"]
        assert info["index"] == i and info["n"] == N and info["split"] == "rl"
        assert info["band_model"].startswith(model_prefix)
        first = min(by_q[info["question_id"]], key=lambda t: t["sample_index"])
        msgs = json.loads(first["messages"])
        assert r["prompt"] == [{"role": m["role"], "content": m["content"]} for m in msgs[:2]]
        assert r["tools"] == first["tools"]
    report = json.loads((root / "reports" / "rl_band.json").read_text())
    assert report["rl_pool_rows"] == len(rows) == report["bands"]["rl_pool"] == report["output"]
    assert sum(report["bands"].values()) == len(counts) and report["bands_by_split"] == {"rl": report["bands"]}
    assert report["band_model"] == rows[0]["extra_info"]["band_model"] if rows else True
    return counts, rows


def test_a_transformers_student_measures_the_band(world, tmp_path):
    from helpers.coinstudent import save_coin_student

    store, cfg, questions = world
    right = questions[0]
    publish(store, "sft", {"student": save_coin_student(tmp_path / "coin", right.answer)})
    # Under band_by: student the filter measures the teacher's band but leaves rl_pool to the student's stage.
    run_stage(FILTER, cfg, store)
    filt = json.loads((store.root / "reports" / "filter.json").read_text())
    assert filt["band_by"] == "student" and filt["rl_pool_rows"] == 0 and filt["bands"]["rl_pool"] >= 1
    run_stage(RL_BAND, cfg, store)
    counts, rows = check_band(store, cfg, questions, "student:DIR/student@")
    # The report reads the band from the stage that wrote rl_pool: the student's band is the table's rows.
    from synth.report.stage import build_report

    bands = build_report(store, tmp_path / "report", explorer=False).summary["bands"]
    pooled = [r for r in bands if r["in_pool"]]
    assert [(r["stage"], r["split"], r["rl_pool"], r["rows"]) for r in pooled] == [("rl_band", "rl", len(rows), len(rows))]
    assert all(r["rows"] == 0 for r in bands if r["stage"] == "filter")
    # The coin student answers only the first question right, about half the time: in the band, the others not.
    assert 1 <= counts[right.question_id] <= N - 1 and right.question_id in {r["extra_info"]["question_id"] for r in rows}
    golds = {q.question_id: q.golds for q in questions}
    assert all(c == 0 for q, c in counts.items() if right.answer not in golds[q])
    # Seeds are derived from the run seed and the sample index: a rebuild gives the same band.
    run_stage(RL_BAND, cfg, store, force=True)
    assert _rows(store.root, "rl_pool") == rows


def _coin_handler(right, calls):
    """A served student: one search, then the right answer on even seeds, a wrong one on odd seeds."""

    def handler(req):
        msgs = req["messages"]
        calls.append(msgs[1]["content"])
        if not any(m["role"] == "assistant" for m in msgs):
            return Reply(tool_calls=[call("search", {"query": msgs[1]["content"][:60]})])
        return Reply(content=f"<answer>{right.answer if req['seed'] % 2 == 0 else 'nobody at all'}</answer>")

    return handler


def test_a_served_student_measures_the_band_and_resumes(world, monkeypatch):
    store, cfg0, questions = world
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    right = questions[0]
    calls: list[str] = []
    # The student answers through a server: nothing to load locally, so no sft stage is needed in DIR.
    publish(store, "sft", {"student": store.root / "questions"})
    import sft.rlband as rlband

    real = rlband.rollout_one
    last = questions[-1]

    async def crash_on_last(teacher, toolbox, question, sample_index, cfg):
        if question.question_id == last.question_id:
            raise RuntimeError("the machine went down")
        return await real(teacher, toolbox, question, sample_index, cfg)

    with serve(handler=_coin_handler(right, calls)) as srv:
        cfg = load_config(None, BASE + [f"rl.base_url={srv.base_url}", "rl.model=student-7b",
                                        "teacher.tool_protocol=native", "teacher.max_retries=0",
                                        "rl.curriculum=[{name: hard, max_pass: 0.5}, {name: easy, min_pass: 0.5}]"])
        # A crash in the second shard: the first shard's rollouts are kept, and the rerun does only the rest.
        monkeypatch.setattr(rlband, "rollout_one", crash_on_last)
        with pytest.raises(RuntimeError, match="went down"):
            run_stage(RL_BAND, cfg, store)
        monkeypatch.setattr(rlband, "rollout_one", real)
        done = len(calls)
        assert done == 2 * 2 * N  # shard 0: 2 questions x N rollouts x 2 turns
        run_stage(RL_BAND, cfg, store)
        assert len(calls) - done == (QUESTIONS - 2) * 2 * N
        assert {c for c in calls[done:]} == {last.question}
    counts, rows = check_band(store, cfg, questions, "student:student-7b")
    assert 1 <= counts[right.question_id] <= N - 1
    # Curriculum stages: the pool split by c/n into the named files, each row in the first stage it fits.
    hard, easy = (_rows(store.root, f"rl_curriculum/{name}") for name in ("hard", "easy"))
    assert sorted(r["extra_info"]["question_id"] for r in hard + easy) == sorted(
        r["extra_info"]["question_id"] for r in rows)
    assert all(r["extra_info"]["c"] / N <= 0.5 for r in hard) and all(r["extra_info"]["c"] / N > 0.5 for r in easy)
    report = json.loads((store.root / "reports" / "rl_band.json").read_text())
    assert report["curriculum"] == {"hard": len(hard), "easy": len(easy), "unstaged": 0}
    traces = _rows(store.root, "rl_band/traces")
    # The eval harness: the search masked the question's answer page, as in the teacher's rollouts.
    answer_page = {q.question_id: q.answer_page_id for q in questions}
    assert all(tool_calls_of(t["tool_counts"], "search") == 1 and answer_page[t["question_id"]] not in t["searched_page_ids"] for t in traces)


def test_a_failed_student_call_is_never_counted_as_wrong(world, monkeypatch):
    from helpers.openai_server import Status

    store, _, questions = world
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    publish(store, "sft", {"student": store.root / "questions"})
    last = questions[-1]

    def handler(req):
        if req["messages"][1]["content"] == last.question:
            return Status(400, message="maximum context length exceeded")
        return Reply(content="<answer>nobody at all</answer>")

    with serve(handler=handler) as srv:
        args = BASE + [f"rl.base_url={srv.base_url}", "teacher.tool_protocol=native", "teacher.max_retries=0",
                       "runner.max_failed_fraction=0.5"]
        # Every other question is all wrong, so the pool is empty: an error, unless the config accepts it.
        with pytest.raises(StageFailed, match=rf"stage rl_band: none of its {QUESTIONS} items made it: "
                                              rf"{QUESTIONS - 1} were dropped \(all_wrong {QUESTIONS - 1}\) and the "
                                              r"teacher call of 1 failed"):
            run_stage(RL_BAND, load_config(None, args), store)
        run_stage(RL_BAND, load_config(None, args + ["runner.allow_empty=true"]), store)
    report = json.loads((store.root / "reports" / "rl_band.json").read_text())
    assert report["failed"] == {TEACHER_FAILED: 1} and report["failed_items"][0]["id"] == last.question_id
    assert report["bands"]["all_wrong"] == QUESTIONS - 1 and report["input"] == QUESTIONS
    assert last.question_id not in {t["question_id"] for t in _rows(store.root, "rl_band/traces")}


def test_under_the_teacher_band_the_stage_measures_nothing(world):
    store, _, _ = world
    before = _rows(store.root, "rl_pool")
    publish(store, "sft", {"student": store.root / "questions"})
    outcome = run_stage(RL_BAND, load_config(None, []), store)
    assert outcome.report["output"] == 0 and "skipped" in outcome.report
    assert outcome.report["idle"] == "rl.band_by is teacher: the filter stage wrote rl_pool"  # not an empty stage
    assert _rows(store.root, "rl_pool") == before  # the filter's (teacher's) pool stays the public one
    assert before and all(r["extra_info"]["band_model"].startswith("teacher:") for r in before)
