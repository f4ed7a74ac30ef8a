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


def test_the_minimal_prefix_is_found_by_binary_search():
    """ACTGUIDE's k*: the smallest k that works, in O(log K) probes, each k the midpoint of what is left."""
    from sft.rlband import minimal_prefix

    assert minimal_prefix(8, lambda k: k >= 3) == (3, [4, 2, 3])  # 4 works, 2 does not, 3 works: k* = 3
    assert minimal_prefix(8, lambda k: False) == (None, [4, 6, 7, 8])  # not even the whole path: no k*
    assert minimal_prefix(8, lambda k: True) == (1, [4, 2, 1])
    assert minimal_prefix(5, lambda k: k >= 5) == (5, [3, 4, 5])
    assert minimal_prefix(1, lambda k: True) == (1, [1]) and minimal_prefix(0, lambda k: True) == (None, [])
    for K in range(1, 65):  # never more than floor(log2 K) + 1 probes, whatever k* is
        for star in range(1, K + 2):
            best, tried = minimal_prefix(K, lambda k: k >= star)
            assert best == (star if star <= K else None) and len(tried) <= K.bit_length()


def _guided_handler(right, need):
    """A served student that answers right only with at least ``need`` guidance actions played before its first
    turn (and the coin question ``right`` on even seeds); otherwise one search, then a wrong answer."""

    def handler(req):
        msgs = req["messages"]
        assistants = [m for m in msgs if m["role"] == "assistant"]
        given = sum(1 for m in assistants for tc in m.get("tool_calls") or [] if tc["id"].startswith("guide_"))
        if given >= need:
            return Reply(content=f"<answer>{handler.answers[msgs[1]['content']]}</answer>")
        if len(assistants) == given:  # the student's own first turn
            return Reply(tool_calls=[call("search", {"query": msgs[1]["content"][:60]})])
        coin = msgs[1]["content"] == right.question and req["seed"] % 2 == 0
        return Reply(content=f"<answer>{right.answer if coin else 'nobody at all'}</answer>")

    return handler


def test_an_all_wrong_question_of_the_student_band_is_guided_with_its_minimal_prefix(world, monkeypatch):
    """The student fails every question unguided but the coin one; given the first k actions of the teacher's
    reference it answers iff k >= 3.  A question whose reference has K >= 3 actions enters with guidance and
    k* = 3, found by the binary search's probes; one with K < 3 stays out (no working prefix).  Every row
    carries its reference, step labels and (rl.baselines) the teacher's baselines."""
    from filters.guidance import load_references
    from sft.rlband import GUIDED, minimal_prefix

    store, _, questions = world
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    publish(store, "sft", {"student": store.root / "questions"})
    refs = load_references(store, [q.question_id for q in questions])
    right = questions[0]
    need = 3
    handler = _guided_handler(right, need)
    handler.answers = {q.question: q.answer for q in questions}
    with serve(handler=handler) as srv:
        cfg = load_config(None, BASE + [f"rl.base_url={srv.base_url}", "teacher.tool_protocol=native",
                                        "teacher.max_retries=0", "rl.guidance=true", "rl.baselines=true"])
        run_stage(RL_BAND, cfg, store)
    rows = {r["extra_info"]["question_id"]: r for r in _rows(store.root, "rl_pool")}
    guided = defaultdict(set)
    for t in _rows(store.root, GUIDED):
        guided[t["question_id"]].add(t["sample_index"] // N)
    report = json.loads((store.root / "reports" / "rl_band.json").read_text())
    wrong = [q for q in questions[1:] if q.answer != right.answer]
    assert wrong, "every pooled question shares the coin question's answer"
    expect_rows, expect_k, without, no_prefix, probes = 0, {}, 0, 0, 0
    for q in wrong:
        ref = refs.get(q.question_id)
        if ref is None:  # no correct teacher rollout: no guidance, no probe
            without += 1
            assert q.question_id not in rows and q.question_id not in guided
            continue
        K = len(json.loads(ref.calls))
        best, tried = minimal_prefix(K, lambda k: k >= need)
        assert set(tried) == guided[q.question_id] and len(tried) <= K.bit_length()  # the probes, and only those
        probes += len(tried)
        if best is None:
            no_prefix += 1
            assert K < need and q.question_id not in rows
            continue
        assert K >= need and best == need and {need - 1, need} <= set(tried)  # k* worked, k* - 1 did not
        info = rows[q.question_id]["extra_info"]
        assert info["c"] == 0 and info["guidance_k"] == need and info["guidance"] == ref.calls
        expect_rows += 1
        expect_k[str(need)] = expect_k.get(str(need), 0) + 1
    assert report["guidance"] == {"rows": expect_rows, "without_correct_rollout": without,
                                  "no_working_prefix": no_prefix, "probes": probes, "k": expect_k}
    assert expect_rows >= 1, "no pooled question has a teacher reference of 3 actions or more"
    # The guided rollouts are student rollouts with the reference's first k calls, in order, before its own turn.
    for t in _rows(store.root, GUIDED):
        k, msgs = t["sample_index"] // N, json.loads(t["messages"])
        calls = json.loads(refs[t["question_id"]].calls)
        played = [m["tool_calls"][0]["function"] for m in msgs[2:2 + 2 * k:2]]
        assert [p["name"] for p in played] == [c["name"] for c in calls[:k]]
        assert all(m["role"] == "tool" for m in msgs[3:3 + 2 * k:2])
    # Every row, band or guided: its reference, that rollout's step labels, and the baselines rl.baselines asked for.
    band_row = rows[right.question_id]["extra_info"]  # in the band (1 <= c <= n - 1): never guided, never probed
    assert band_row["c"] >= 1 and band_row["guidance"] is None and band_row["guidance_k"] is None
    assert right.question_id not in guided
    for qid, r in rows.items():
        info = r["extra_info"]
        assert qid in refs and info["reference_trace_id"] == refs[qid].trace_id
        assert info["step_labels"] == refs[qid].step_labels and info["step_labels"]
        assert info["baselines"] is not None
        assert set(info["baselines"]) == {"closed_book", "rag"}
    assert report["baselines"]["asked"] == len(rows)


def test_guidance_min_correct_cannot_exceed_the_rollouts():
    with pytest.raises(Exception, match="guidance_min_correct 9 is above n 8"):
        load_config(None, ["rl.n=8", "rl.guidance_min_correct=9"])
    assert load_config(None, ["rl.n=8", "rl.guidance_min_correct=8"]).rl.guidance_min_correct == 8



def test_the_oracle_stand_in_writes_guided_rows_each_with_its_minimal_prefix(world):
    """``rl.policy: oracle``: the offline oracle agent in the student's harness measures the band.  Under a
    four-turn limit it answers no question unguided (an 8-hop question needs more turns), so every question
    is all-wrong; the teacher's reference, played as a prefix, lets it finish, and each question enters
    ``rl_pool`` guided, with the k* the binary search found: its guided rollouts at k* answer, those at every
    probed k < k* do not.  The guided turns do not spend its own budget (it still gets four turns after them)."""
    from filters.guidance import load_references
    from sft.rlband import GUIDED

    store, _, _ = world
    publish(store, "sft", {"student": store.root / "questions"})  # the band's stage reads sft; the oracle needs no checkpoint
    n, turns = 4, 4
    cfg = load_config(None, [b for b in BASE if not b.startswith(("rl.n=", "eval.max_turns="))]
                      + ["rl.policy=oracle", "rl.guidance=true", f"rl.n={n}", f"eval.max_turns={turns}"])
    questions = pool_questions(store, cfg)
    run_stage(RL_BAND, cfg, store)
    report = json.loads((store.root / "reports" / "rl_band.json").read_text())
    rows = {r["extra_info"]["question_id"]: r["extra_info"] for r in _rows(store.root, "rl_pool")}
    golds = {q.question_id: q.golds for q in questions}
    unguided = _rows(store.root, "rl_band/traces")
    assert {t["question_id"] for t in unguided} == set(golds) and all(t["n_turns"] <= turns for t in unguided)
    assert not any(is_correct(t["final_answer"], golds[t["question_id"]], cfg.filters.min_f1) for t in unguided)
    assert report["band_model"] == f"student:oracle@{turns}-turns"
    guided = defaultdict(lambda: defaultdict(list))
    for t in _rows(store.root, GUIDED):
        guided[t["question_id"]][t["sample_index"] // n].append(t)
    refs = load_references(store, list(golds))
    assert len(rows) >= 1 and report["guidance"]["rows"] == len(rows)
    for qid, info in rows.items():
        k = info["guidance_k"]
        assert info["c"] == 0 and info["band_model"] == report["band_model"] and info["guidance"] == refs[qid].calls
        assert 1 <= k <= refs[qid].n_actions and info["question"] == next(q.question for q in questions
                                                                           if q.question_id == qid)
        for probed, ts in guided[qid].items():
            assert len(ts) == n
            right = sum(is_correct(t["final_answer"], golds[qid], cfg.filters.min_f1) for t in ts)
            assert (right >= cfg.rl.guidance_min_correct) == (probed >= k), (qid, probed, k, right)
            # k guided turns, then at most the harness's turns of the oracle's own
            assert all(probed < t["n_turns"] <= probed + turns for t in ts)
        assert k in guided[qid] and (k == 1 or k - 1 in guided[qid]), qid  # k* worked, k* - 1 was probed and failed
    assert sum(report["guidance"]["k"].values()) == len(rows)


def test_the_oracle_stand_in_takes_no_server():
    with pytest.raises(Exception, match="base_url must be unset"):
        load_config(None, ["rl.policy=oracle", "rl.base_url=http://127.0.0.1:9/v1"])
    assert load_config(None, ["rl.policy=oracle"]).rl.policy == "oracle"
