"""The filter stage end to end on a hand-made run folder: funnel, rejects, verdicts, sft, rl_pool."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from synth.engine.records import RL_SCHEMA, VERDICT_SCHEMA, Verdict
from helpers.filterstore import config, make_store, stages
from helpers.traces import TOOLS_JSON, call, make_question, make_trace
from synth.engine.runner import run_stage
from synth.engine.records import SFT_SCHEMA
from synth.rollout.labels import label_rows, labels_of
from synth.tools.schema import TOOL_SCHEMAS

GOOD = [call("search", query="Alpha Station"), call("open", page="p1"), call("find", page="p2", text="Delta"),
        call("search", query="Delta City")]  # covers both intermediate entities
PARTIAL = [call("search", query="Alpha Station"), call("open", page="p1"), call("search", query="Delta"),
           call("search", query="Delta City", k=3), call("open", page="p3", offset=2000)]  # only Bravo Harbour
# make_trace's observations are placeholders, so the question names everything GOOD and PARTIAL act on:
# their calls are grounded.  A trace left with the default question ("Which city?") is not.
GROUNDED = "Start at Alpha Station; its page p1 leads to p2 and p3, and on to Delta City. Which city?"


def trace(*args, **kw):
    """make_trace with a question that grounds the calls above."""
    return make_trace(*args, question=kw.pop("question", GROUNDED), **kw)


def _run(tmp_path: Path, **fcfg):
    q4 = make_question("q4", question="Which river flows through the capital of the country that hosted the 1930 "
                                      "football world cup?")
    questions = [make_question("q1"), make_question("q2"), make_question("q3"), q4]
    traces = [
        trace("t1a", "q1", sample_index=1, calls=GOOD),
        trace("t1b", "q1", sample_index=0, calls=PARTIAL),
        make_trace("t1c", "q1", sample_index=2, answer="Echo Town"),
        make_trace("t1d", "q1", sample_index=3, calls=GOOD[:2]),
        trace("t1e", "q1", sample_index=4, calls=GOOD, thoughts=["Alpha " * 3000]),
        make_trace("t1f", "q1", sample_index=5, calls=GOOD),  # correct, but acts on nothing it was shown
        trace("t2a", "q2", calls=GOOD),
        make_trace("t2b", "q2", sample_index=1, calls=GOOD + [call("open", page="p1")]),
        make_trace("t3a", "q3", answer="Echo"),
        replace(make_trace("t3b", "q3", sample_index=1, answer="Foxtrot"), messages="[{]"),
        trace("t4a", "q4", answer="Delta City"),
    ]
    evals = tmp_path / "eval.jsonl"
    evals.write_text(json.dumps({"question": "which river flows through the capital of the country"}) + "\n")
    store = make_store(tmp_path / "run", questions, traces)
    filt, _ = stages()
    outcome = run_stage(filt, _config(max_tokens=3000, decontaminate=[str(evals)], **fcfg), store)
    return store, outcome, traces


def _config(**fcfg):
    cfg = config(**fcfg)
    cfg.questions.share_sft_rl = True  # every question here is an sft one; let q1 reach rl_pool too
    return cfg


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("filter"))


def test_funnel_adds_up_with_every_reason(run) -> None:
    store, outcome, _ = run
    rep = json.loads((store.root / "reports" / "filter.json").read_text())
    assert rep == outcome.report
    assert rep["input"] == 11 and rep["output"] == 2
    assert rep["dropped"] == {"contaminated": 1, "format": 1, "not_best": 1, "repeated_calls": 1,
                              "too_few_steps": 1, "too_long": 1, "ungrounded": 1, "wrong_answer": 2}
    assert rep["input"] == rep["output"] + sum(rep["dropped"].values())
    assert rep["bands"] == {"rl_pool": 1, "all_wrong": 1, "all_right": 2}
    assert rep["pass"]["questions"] == 4 and rep["pass"]["pass@n"] == 0.75
    assert "teacher" not in rep and "judge" not in rep


def test_rejects_carry_the_full_row_and_its_reason(run) -> None:
    store, _, traces = run
    rejects = ds.dataset(store.path("rejects/filter")).to_table().to_pylist()
    by_id = {r["trace_id"]: r for r in rejects}
    assert {k: v["reason"] for k, v in by_id.items()} == {
        "t1b": "not_best", "t1c": "wrong_answer", "t1d": "too_few_steps", "t1e": "too_long",
        "t1f": "ungrounded", "t2b": "repeated_calls", "t3a": "wrong_answer", "t3b": "format", "t4a": "contaminated"}
    original = {t.trace_id: t.to_row() for t in traces}
    for tid, r in by_id.items():
        assert {k: v for k, v in r.items() if k not in ("reason", "detail")} == original[tid]
        assert r["detail"]
    assert "rubric 0.500" in by_id["t1b"]["detail"] and "1 of 2" in by_id["t1b"]["detail"]
    assert by_id["t1f"]["detail"].startswith("4 ungrounded call(s); first: call 1 (search)")


def test_a_batchs_rejects_are_its_own_rows_in_the_order_rejected(run) -> None:
    """Pass one hands back rejected traces as the batch's own Arrow rows (no dicts and back): the same rows the
    records would give, in the order they were rejected; a batch that lacks a trace column goes through the records."""
    from types import SimpleNamespace

    import pyarrow as pa

    from filters.stage import _PassOne, _reject_row
    from synth.engine.records import TRACE_REJECT_SCHEMA, Trace

    _, _, traces = run
    recs = [Trace.from_row(t.to_row()) for t in traces[:5]]
    pending = [(recs[3].trace_id, "format", "bad"), (recs[0].trace_id, "too_long", None),
               (recs[4].trace_id, "ungrounded", "call 1")]
    expected = [_reject_row(recs[i], r, d) for i, (_, r, d) in zip([3, 0, 4], pending)]
    batch = pa.RecordBatch.from_pylist([t.to_row() for t in recs])
    for b in (batch, batch.drop_columns(["tools"])):
        one = SimpleNamespace(pending=list(pending))
        got = _PassOne._rejects(one, b, recs)
        if isinstance(got, pa.Table):
            got = got.select(TRACE_REJECT_SCHEMA.names).cast(TRACE_REJECT_SCHEMA).to_pylist()
        assert got == expected and one.pending == []
    assert isinstance(_PassOne._rejects(SimpleNamespace(pending=list(pending)), batch, recs), pa.Table)
    assert _PassOne._rejects(SimpleNamespace(pending=[]), batch, recs) == []


def test_verdicts_one_row_per_trace(run) -> None:
    store, _, traces = run
    t = ds.dataset(store.path("filter/verdicts")).to_table()
    assert t.schema.equals(VERDICT_SCHEMA) and VERDICT_SCHEMA.equals(Verdict.SCHEMA)
    v = {r["trace_id"]: r for r in t.to_pylist()}
    assert len(v) == 11
    # A row is a typed Verdict, and back: the contract is the record, not a dict's keys.
    typed = {r.trace_id: r for r in map(Verdict.from_row, t.to_pylist())}
    assert {k: r.to_row() for k, r in typed.items()} == v
    assert typed["t1a"].kept and typed["t1b"].reason == "not_best" and typed["t1a"].rubric == 1.0
    assert {k for k, r in v.items() if r["kept"]} == {"t1a", "t2a"}
    # Positive-only: only traces that passed the chain (all correct) have a rubric.
    assert {k for k, r in v.items() if r["rubric_raw"] is not None} == {"t1a", "t1b", "t2a"}
    assert (v["t1a"]["rubric_raw"], v["t1a"]["rubric"]) == (1.0, 1.0)
    assert (v["t1b"]["rubric_raw"], v["t1b"]["rubric"]) == (0.5, 0.5)
    # Correctness is recorded whatever the other filters said (the band reads it).
    assert v["t1d"]["correct"] and v["t1e"]["correct"] and not v["t1c"]["correct"]
    assert v["t1e"]["n_tokens"] > 3000 and v["t1a"]["n_tokens"] <= 3000
    # Every trace the template can render is counted, also one another filter dropped first (t1d: too few
    # steps), exactly as the length filter counts one trace alone; a malformed one (t3b) has no count.
    from filters.length import rendered_length
    from filters.sftrows import sft_messages
    from synth.tokenizer.tokens import load_tokenizer

    tok = load_tokenizer(store.path("tokenizer"), chat_template=True)
    t1d = next(t for t in traces if t.trace_id == "t1d")
    assert v["t1d"]["n_tokens"] == rendered_length(tok, sft_messages(t1d), json.loads(t1d.tools))
    assert v["t3b"]["n_tokens"] is None
    assert all(r["judge_correct"] is None for r in v.values())
    assert v["t1b"]["reason"] == "not_best" and v["t1a"]["reason"] is None
    # Ungrounded calls are counted for every trace, also those another filter dropped first.
    assert {k: r["ungrounded_steps"] for k, r in v.items()} == {
        "t1a": 0, "t1b": 0, "t1c": 4, "t1d": 2, "t1e": 0, "t1f": 4, "t2a": 0, "t2b": 5, "t3a": 4, "t3b": 0, "t4a": 0}
    assert v["t1f"]["reason"] == "ungrounded" and v["t1f"]["correct"]


def test_sft_renders_through_a_chat_template_with_tools(run, tmp_path: Path) -> None:
    import datasets

    from synth.tokenizer.tokens import load_tokenizer

    store, _, traces = run
    files = sorted(str(p) for p in store.path("sft").glob("*.parquet"))
    assert pq.read_schema(files[0]).equals(SFT_SCHEMA)
    dset = datasets.Dataset.from_parquet(files, cache_dir=str(tmp_path / "hf"))
    assert sorted(dset["trace_id"]) == ["t1a", "t2a"]
    tok = load_tokenizer(store.path("tokenizer"))
    original = {t.trace_id: t.conversation for t in traces if t.trace_id in ("t1a", "t2a")}
    for row in dset:
        tools = json.loads(row["tools"])
        assert tools == TOOL_SCHEMAS and row["tools"] == TOOLS_JSON
        text = tok.apply_chat_template(row["messages"], tools=tools, tokenize=False)
        assert text.count("<tool_call>") == row["n_tool_calls"] == 4
        assert '"arguments": {"query": "Alpha Station"}}' in text  # no merged keys: no "offset": null
        assert "null" not in text.split("<|end|>", 1)[1].replace('"required"', "")
        assert "<answer>Delta City</answer>" in text
        calls = [(tc["function"]["name"], json.loads(tc["function"]["arguments"]))
                 for m in row["messages"] for tc in (m["tool_calls"] or [])]
        want = [(tc.name, tc.args()) for _, tc in original[row["trace_id"]].tool_calls()]
        assert calls == want
        for name, args in calls:
            assert set(args) <= set(next(t for t in tools if t["function"]["name"] == name)["function"]
                                    ["parameters"]["properties"])
        assert row["rubric"] == 1.0 and row["teacher_model"] == "teacher-a"


def test_rl_pool_in_the_verl_layout(run) -> None:
    store, _, traces = run
    t = pq.read_table(sorted(store.path("rl_pool").glob("*.parquet"))[0])
    assert t.schema.equals(RL_SCHEMA)
    assert t.num_rows == 1
    row = t.to_pylist()[0]
    assert row["data_source"] == "hopforge" and row["ability"] == "multihop_search"
    # No corpus in this store: the answer key is the answer and its aliases alone, no other titles.
    assert row["reward_model"] == {"style": "rule", "ground_truth": {"target": ["Delta City"], "other_titles": [],
                                                                     "min_f1": None}}
    target = t.column("reward_model").combine_chunks().field("ground_truth").field("target")
    assert target.to_pylist() == [["Delta City"]]  # verl reads reward_model["ground_truth"]["target"]
    teachers = "+".join(sorted({tr.teacher_model for tr in traces if tr.question_id == "q1"}))
    q1 = make_question("q1")
    # the reference: the best correct rollout that passed the chain (t1a names both bridges, t1b one)
    t1a = next(tr for tr in traces if tr.trace_id == "t1a")
    assert row["extra_info"] == {"question_id": "q1", "question": make_question("q1").question, "index": 0, "path": ["p0", "p1", "p2", "p3"], "n": 6, "c": 5,
                                 "band_model": f"teacher:{teachers}",  # whose rollouts measured the band
                                 "split": "sft",
                                 # verl's tool rollout: the search masks the answer page, as the rollout did;
                                 # CAPF's check_answer (training only) reads the ground truth from here
                                 "tools_kwargs": {"search": {"create_kwargs": {"exclude": ["p3"]}},
                                                  "multi_search": {"create_kwargs": {"exclude": ["p3"]}},
                                                  "check_answer": {"create_kwargs": {
                                                      "target": ["Delta City"], "chain": q1.titles,
                                                      "other_titles": []}}},
                                 "need_tools_kwargs": True, "titles": q1.titles, "reference_trace_id": "t1a",
                                 "step_labels": label_rows(labels_of(t1a, 0.8)), "guidance": None, "guidance_k": None,
                                 "baselines": None,
                                 # sft.context (full by default): the observations the policy trains with
                                 "context": {"policy": "full", "compress_observations": False,
                                             "keep_observations": 2}}
    first = next(tr for tr in traces if tr.trace_id == "t1b").conversation  # sample_index 0
    assert row["prompt"] == [{"role": m.role, "content": m.content} for m in first.messages[:2]]
    assert json.loads(row["tools"]) == TOOL_SCHEMAS


def test_one_split_per_question_reaches_only_its_table(tmp_path: Path) -> None:
    # Three questions with the same traces, one per split: only the sft one trains, only the rl one
    # reaches rl_pool (by default), and the eval one reaches neither.
    questions = [make_question(f"q-{s}", split=s) for s in ("sft", "rl", "eval")]
    traces = [trace(f"t-{s}-{i}", f"q-{s}", sample_index=i, calls=GOOD if i < 2 else GOOD[:1],
                         answer="Delta City" if i < 2 else "Nowhere", split=s)
              for s in ("sft", "rl", "eval") for i in range(3)]
    store = make_store(tmp_path / "run", questions, traces)
    filt, _ = stages()
    out = run_stage(filt, config(max_tokens=3000), store)
    sft = pq.read_table(store.path("sft")).to_pylist()
    rl = pq.read_table(store.path("rl_pool")).to_pylist()
    assert {r["question_id"] for r in sft} == {"q-sft"} and {r["split"] for r in sft} == {"sft"}
    assert [r["extra_info"]["question_id"] for r in rl] == ["q-rl"] and rl[0]["extra_info"]["split"] == "rl"
    assert out.report["dropped"]["held_out"] == 4  # the correct traces of the rl and eval questions
    verdicts = pq.read_table(store.path("filter/verdicts")).to_pylist()
    assert {v["split"] for v in verdicts if v["question_id"] == "q-eval"} == {"eval"}
    # The documented switch: sft questions may feed rl_pool too, never eval ones.
    shared = config(max_tokens=3000)
    shared.questions.share_sft_rl = True
    run_stage(filt, shared, store)
    rl = pq.read_table(store.path("rl_pool")).to_pylist()
    assert sorted(r["extra_info"]["question_id"] for r in rl) == ["q-rl", "q-sft"]


def test_a_question_with_fewer_than_rollout_n_samples_is_refused_by_the_pool(tmp_path: Path, caplog) -> None:
    """The band's c/n counts every one of rollout.n samples, or the question is neither banded nor pooled: a
    shared sft question stopped at its first right answer (1 of 1) or an rl question short of a sample (a failed
    teacher call) is counted as short_of_n and named, never written with a biased c/n."""
    import logging

    from filters.pool import SHORT_OF_N

    def samples(qid: str, split: str, right: list[bool]) -> list:
        return [trace(f"{qid}-{i}", qid, sample_index=i, calls=GOOD, answer="Delta City" if r else "Nowhere",
                      split=split) for i, r in enumerate(right)]

    questions = [make_question("q-rl", split="rl"), make_question("q-rl-short", split="rl"),
                 make_question("q-sft", split="sft"), make_question("q-sft-early", split="sft")]
    traces = (samples("q-rl", "rl", [True, False, True]) + samples("q-rl-short", "rl", [True, False])
              + samples("q-sft", "sft", [True, True, False]) + samples("q-sft-early", "sft", [False, True]))
    store = make_store(tmp_path / "run", questions, traces)
    filt, _ = stages()
    cfg = config(max_tokens=3000)
    cfg.questions.share_sft_rl = True
    cfg.rollout.n = 3
    with caplog.at_level(logging.WARNING, logger="hopforge"):
        out = run_stage(filt, cfg, store)
    rl = {r["extra_info"]["question_id"]: r["extra_info"] for r in pq.read_table(store.path("rl_pool")).to_pylist()}
    assert {q: (i["n"], i["c"]) for q, i in rl.items()} == {"q-rl": (3, 2), "q-sft": (3, 2)}
    rep = out.report
    assert rep["band_n"] == 3 and rep[SHORT_OF_N] == {"rl": 1, "sft": 1}
    # The band's figures count only what was banded, so they still agree with the table.
    assert rep["bands"] == {"rl_pool": 2, "all_wrong": 0, "all_right": 0} and rep["rl_pool_rows"] == 2
    assert rep["bands_by_split"] == {"rl": {"rl_pool": 1, "all_wrong": 0, "all_right": 0},
                                     "sft": {"rl_pool": 1, "all_wrong": 0, "all_right": 0}}
    assert "q-rl-short, q-sft-early" in caplog.text and SHORT_OF_N in caplog.text
    # Not shared, the early-stopped sft question is no pool question: nothing is short of n but the rl one.
    cfg.questions.share_sft_rl = False
    assert run_stage(filt, cfg, store).report[SHORT_OF_N] == {"rl": 1}


def test_rerun_is_reused_and_config_changes_rerun(tmp_path: Path) -> None:
    store, first, _ = _run(tmp_path)
    filt, _ = stages()
    evals = tmp_path / "eval.jsonl"
    same = _config(max_tokens=3000, decontaminate=[str(evals)])
    assert run_stage(filt, same, store).reused
    evals.write_text(json.dumps({"question": "nothing like it at all"}) + "\n")  # its bytes are in the key
    changed = run_stage(filt, same, store)
    assert not changed.reused and changed.report["dropped"].get("contaminated") is None
    more = run_stage(filt, _config(max_tokens=3000, decontaminate=[str(evals)], keep_per_question=2), store)
    assert not run_stage(filt, config(max_tokens=3000, decontaminate=[str(evals)], keep_per_question=2),
                         store).reused  # questions.share_sft_rl is part of the filter stage's key
    assert more.report["output"] == 4 and "not_best" not in more.report["dropped"]  # t1a, t1b, t2a, t4a


def test_judge_in_the_stage(tmp_path: Path, monkeypatch) -> None:
    import synth.teacher.client as teacher_mod
    from helpers.fakejudge import FakeJudge

    backend = FakeJudge(yes={"Delta", "Echo"})
    monkeypatch.setitem(teacher_mod._BACKENDS, "oracle", lambda cfg, **kw: backend)
    traces = [trace("a", calls=GOOD), trace("b", sample_index=1, calls=GOOD, answer="Delta"),
              trace("c", sample_index=2, calls=GOOD, answer="Echo")]
    store = make_store(tmp_path / "run", [make_question()], traces)
    filt, _ = stages()
    out = run_stage(filt, config(judge=True, keep_per_question=3), store)
    rep = out.report
    v = {r["trace_id"]: r for r in ds.dataset(store.path("filter/verdicts")).to_table().to_pylist()}
    assert {k: (r["rule_correct"], r["judge_correct"], r["correct"]) for k, r in v.items()} == {
        "a": (True, False, True), "b": (False, True, True), "c": (False, True, False)}
    assert rep["output"] == 2 and rep["dropped"] == {"wrong_answer": 1}
    assert rep["correct"] == {"rule": 1, "combined": 2, "judge_rescued": 1}
    assert rep["judge"]["asked"] == 3 and rep["judge"]["rescued"] == 1
    assert rep["judge"]["overruled_on_rule_hits"] == 1 and rep["judge"]["ignored_no_overlap"] == 1
    assert rep["teacher"]["completed"] == 3 and rep["teacher"]["prompt_tokens"] == 30
    # Band figures by split: the question is an sft one, so the pool (rl questions) has none of it.
    split = make_question().split
    assert rep["bands_by_split"][split]["rl_pool"] == 1 and rep["bands"]["rl_pool"] == rep["rl_pool_rows"] == 0


def test_missing_tokenizer_names_the_command(tmp_path: Path) -> None:
    from synth.engine.store import MissingInput

    store = make_store(tmp_path / "run", [make_question()], [make_trace()], tokenizer=False)
    filt, _ = stages()
    with pytest.raises(MissingInput, match="tokenizer"):
        run_stage(filt, config(), store)


def _many(n_questions: int) -> tuple[list, list]:
    """Questions with 4 traces each, of every kind the chain tells apart."""
    questions, traces = [], []
    kinds = [dict(calls=GOOD), dict(calls=PARTIAL), dict(answer="Echo Town"), dict(calls=GOOD[:2]),
             dict(calls=GOOD, thoughts=["Alpha " * 3000])]
    for q in range(n_questions):
        qid = f"q{q:03d}"
        questions.append(make_question(qid))
        for s in range(4):
            traces.append(trace(f"{qid}-t{s}", qid, sample_index=s, **kinds[(q + s) % len(kinds)]))
    return questions, traces


def _tables(store) -> dict[str, list]:
    out = {}
    for rel, key in [("sft", "trace_id"), ("rl_pool", "extra_info"), ("rejects/filter", "trace_id"),
                     ("filter/verdicts", "trace_id")]:
        rows = ds.dataset(store.path(rel)).to_table().to_pylist()
        out[rel] = sorted(rows, key=lambda r: json.dumps(r[key], sort_keys=True, default=str))
    return out


def test_worker_processes_write_the_same_tables_as_one_process(tmp_path: Path) -> None:
    questions, traces = _many(24)  # 96 traces: batches of 16 to 32 spread over the workers
    filt, _ = stages()
    results = {}
    for workers in (1, 2, 3):
        store = make_store(tmp_path / f"run{workers}", questions, traces)
        cfg = _config(max_tokens=3000)
        cfg.runner.cpu_workers = workers
        outcome = run_stage(filt, cfg, store)
        assert outcome.report["workers"] == workers
        rep = {k: v for k, v in outcome.report.items() if k not in ("workers", "seconds", "key", "tokens_counted")}
        results[workers] = (_tables(store), rep)
    one = results[1]
    assert one[1]["output"] > 0 and one[1]["dropped"]["too_long"] > 0 and one[1]["dropped"]["not_best"] > 0
    assert results[2] == one and results[3] == one


def test_pass_two_writes_its_rejects_batch_by_batch(tmp_path: Path, monkeypatch) -> None:
    """The best-of-n losers are written with the batch that read them, never gathered for the end (at 40,000
    traces that list was 3.5 GB): with batches of 2 traces no write holds more than 2 losers, there are several,
    and the tables are those of the default batches."""
    import filters.stage as stage

    questions, traces = _many(8)
    filt, _ = stages()
    store = make_store(tmp_path / "default", questions, traces)
    run_stage(filt, _config(max_tokens=3000), store)
    expected = _tables(store)

    sizes: list[int] = []
    real = stage.reject_rows

    def spy(batch, recs, pending):
        if any(reason == "not_best" for _, reason, _ in pending):
            sizes.append(len(pending))
        return real(batch, recs, pending)

    monkeypatch.setattr(stage, "reject_rows", spy)
    monkeypatch.setattr(stage, "BATCH_ROWS", 2)
    small = make_store(tmp_path / "small", questions, traces)
    outcome = run_stage(filt, _config(max_tokens=3000), small)
    assert outcome.report["dropped"]["not_best"] >= 3 and len(sizes) >= 2 and max(sizes) <= 2
    assert sum(sizes) == outcome.report["dropped"]["not_best"]
    assert _tables(small) == expected


def test_a_rerun_reads_token_counts_from_the_cache(tmp_path: Path) -> None:
    questions, traces = _many(6)
    filt, _ = stages()
    store = make_store(tmp_path / "run", questions, traces)
    first = run_stage(filt, _config(max_tokens=3000), store)
    assert first.report["tokens_counted"] == len(traces)
    again = run_stage(filt, _config(max_tokens=3000), store, force=True)
    assert again.report["tokens_counted"] == 0
    assert again.report["dropped"] == first.report["dropped"]
    narrow = _config(max_tokens=1000)
    narrow.runner.allow_empty = True  # this limit drops every trace: an empty `sft`, accepted here
    changed = run_stage(filt, narrow, store)  # a filter change: counts reused, verdicts new
    assert changed.report["tokens_counted"] == 0 and changed.report["dropped"] != first.report["dropped"]


def test_a_daemonic_process_filters_alone(tmp_path: Path, monkeypatch) -> None:
    """A Dask worker is daemonic and may not start processes: the filter runs its batches itself there."""
    import multiprocessing
    from types import SimpleNamespace

    questions, traces = _many(24)
    filt, _ = stages()
    cfg = _config(max_tokens=3000)
    cfg.runner.cpu_workers = 2
    monkeypatch.setattr(multiprocessing, "current_process", lambda: SimpleNamespace(daemon=True))
    outcome = run_stage(filt, cfg, make_store(tmp_path / "run", questions, traces))
    assert outcome.report["workers"] == 1 and outcome.report["output"] > 0


def test_the_parent_keeps_a_harness_prompt_only_for_pooled_questions_and_shares_its_text() -> None:
    """Pass one's facts carry a question's harness prompt only where rl_pool may need it; the band's tally holds
    the system prompt and the tool schemas once for all questions, not once per question."""
    import json as json_

    from filters.stage import _Fact, _PerQuestion

    t = make_trace("t1", "q1")
    assert _Fact.of(t, True, with_prompt=False).prompt is None
    assert _Fact.of(t, True, with_prompt=False).tools is None
    full = _Fact.of(t, True)
    assert [m["role"] for m in full.prompt] == ["system", "user"] and full.tools == t.tools
    tallies = []
    for qid in ("q1", "q2"):
        # Two questions whose traces carry equal but distinct strings, as rows decoded from Parquet do.
        fact = _Fact.of(make_trace(f"t-{qid}", qid, question=f"Which city for {qid}?",
                                   tools=json_.dumps(json_.loads(TOOLS_JSON))), False)
        p = _PerQuestion()
        p.add(fact)
        tallies.append(p)
    a, b = tallies
    assert a.prompt[0]["content"] == b.prompt[0]["content"] and a.prompt[0]["content"] is b.prompt[0]["content"]
    assert a.tools == b.tools and a.tools is b.tools
    assert a.prompt[1]["content"] != b.prompt[1]["content"]
