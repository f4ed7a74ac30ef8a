"""The data explorer's data: outcomes and c/n, drop reasons, gold first seen, filter steps, escaping, shards.

``build_run`` makes a small run folder in code -- questions (and two the questions stage
dropped), walks with hop evidence, traces whose observations name the gold pages -- and
runs the production ``filter`` stage on it; the tests read back what :func:`write_explorer`
wrote (the JS files are a call around one JSON value).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from helpers.filterstore import config, publish
from helpers.tinytok import save_tokenizer
from helpers.traces import DEFAULT_CALLS, make_question, make_trace
from synth.engine.records import REJECT_SCHEMA, Evidence, Question, Trace, Walk
from synth.engine.conversation import Conversation
from synth.engine.runner import run_stage
from synth.engine.store import Store
import synth.report.explorer as explorer
from synth.report.explorer import (DROPPED, KEPT, REASON_FILTER, UNFILTERED, clip, filter_steps, gold_marks, hop_evidence,
                                   js_call, js_json, question_outcome, trace_view, write_explorer)

HOSTILE = ('</script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"><!-- & '
           '\u2028 <b>bold</b>')
CHAIN = ["format", "correctness", "low_step"]
TITLES = ["Alpha Station", "Bravo Harbour", "Charlie (planet)", "Delta City"]
PATH = ["p0", "p1", "p2", "p3"]


# ---- a small run -----------------------------------------------------------------------------

def observations(hostile: bool = False) -> list[str]:
    """What the four default tool calls (search, open p1, find p2, search) observe: each names gold page k."""
    return [
        json.dumps([{"page_id": "p0", "title": "Alpha Station", "snippet": "Alpha Station is a station."},
                    {"page_id": "p9", "title": "Noise", "snippet": "Nothing to see."}]),
        json.dumps({"page_id": "p1", "title": "Bravo Harbour",
                    "text": "Bravo Harbour lies near Charlie (planet)." + (" " + HOSTILE if hostile else "")}),
        json.dumps({"page_id": "p2", "title": "Charlie (planet)", "matches": ["... Delta City ..."]}),
        json.dumps([{"page_id": "p8", "title": "Echo"}, {"page_id": "p3", "title": "Delta City", "snippet": "A city."}]),
    ]


def observed_trace(tid: str, qid: str, *, sample: int = 0, answer: str = "Delta City", calls: int = 4,
                   split: str = "sft", hostile: bool = False) -> Trace:
    """A valid trace whose tool observations show the gold pages p0..p3 at turns 1..4 (those it reaches)."""
    seen = [t if t <= calls else -1 for t in (1, 2, 3, 4)]
    tr = make_trace(tid, qid, sample_index=sample, answer=answer, calls=DEFAULT_CALLS[:calls], split=split,
                    gold_first_seen=seen)
    msgs = json.loads(tr.messages)
    obs = iter(observations(hostile))
    for m in msgs:
        if m["role"] == "tool":
            m["content"] = next(obs)
    return dataclasses.replace(tr, messages=json.dumps(msgs))


def walk(walk_id: str, reverse_hop: int | None = None) -> Walk:
    hops = []
    for i in range(3):
        src, dst = PATH[i], PATH[i + 1]
        if i == reverse_hop:  # the link runs the other way: dst's page links back to src
            hops.append(Evidence(dst, src, 2, f"{TITLES[i + 1]} is reached from {TITLES[i]} by ferry.", TITLES[i]))
        else:
            hops.append(Evidence(src, dst, 1, f"{TITLES[i]} is linked to {TITLES[i + 1]} in this paragraph.",
                                 TITLES[i + 1]))
    return Walk(walk_id, PATH, TITLES, hops, 0)


ENTRY = ("one search for hop 3's sub-question ('hop 2') returns 'Charlie (planet)', page 2 of the chain, at rank 1: "
         "a solver can enter there and skip 2 of 3 hops")
SPLITS = {"qa": "sft", "qb": "sft", "qc": "rl", "qd": "rl", "qe": "eval", "qf": "sft"}


def build_run(root: Path, tokenizer_dir: Path) -> Store:
    """Questions qa..qf, dropped questions qx (ambiguous_hop) and qy (prose), traces, walks; filter stage run.

    qa (sft): a kept trace, a wrong answer, a trace with too few steps.  qb (sft, hostile text): two
    correct traces, one kept, one not_best.  qc (rl): 2 of 4 correct -> rl_pool.  qd (rl): all right.
    qe (eval): held out.  qf (sft): no traces.
    """
    store = Store(root)
    questions = [make_question(q, split=s, question=(HOSTILE + " Which city?") if q == "qb" else None)
                 for q, s in SPLITS.items()]
    questions[0].effective_depth = 3  # qa needs every hop; qc can be entered at its second page
    questions[2].effective_depth, questions[2].entry = 1, ENTRY
    rejects = [
        {"record_id": "qx", "source_id": "w-qx", "reason": "ambiguous_hop", "detail": "hop 2: the clue also fits Echo",
         "raw": json.dumps({"question": "Which river flows past the harbour?", "answer": "Delta City"})},
        {"record_id": "qy", "source_id": "s-unknown", "reason": "prose", "detail": "no JSON object",
         "raw": "This group has no chain of links long enough."},
    ]
    traces = [
        observed_trace("ta0", "qa", sample=0), observed_trace("ta1", "qa", sample=1, answer="Echo"),
        observed_trace("ta2", "qa", sample=2, calls=2),
        observed_trace("tb0", "qb", sample=0, hostile=True), observed_trace("tb1", "qb", sample=1),
        *[observed_trace(f"tc{i}", "qc", sample=i, split="rl", answer="Delta City" if i < 2 else "Echo") for i in range(4)],
        *[observed_trace(f"td{i}", "qd", sample=i, split="rl") for i in range(2)],
        *[observed_trace(f"te{i}", "qe", sample=i, split="eval") for i in range(2)],
    ]
    publish(store, "questions", {"questions": Question.to_table(questions),
                                 "rejects/questions": pa.Table.from_pylist(rejects, schema=REJECT_SCHEMA)},
            {"stage": "questions", "input": 8, "output": 6, "dropped": {"ambiguous_hop": 1, "prose": 1}})
    walks = [walk("w-qa", reverse_hop=1)] + [walk(f"w-{q}") for q in ("qc", "qd", "qe", "qf", "qx")]  # none for qb
    publish(store, "walks", {"walks": Walk.to_table(walks)},
            {"stage": "walks", "input": 7, "output": 6, "dropped": {"dead_end": 1}})
    publish(store, "rollout", {"traces": Trace.to_table(traces)},
            {"stage": "rollout", "input": 6, "output": len(traces), "dropped": {}})
    publish(store, "tokenizer", {"tokenizer": save_tokenizer(tokenizer_dir)}, None)
    from flows.stages import FILTER

    run_stage(FILTER, config(chain=CHAIN), store)
    return store


def read_js(path: Path) -> tuple[str, list]:
    """A data file ``fn(arg, ...);`` as (fn, args)."""
    text = path.read_text(encoding="utf-8")
    fn, _, rest = text.partition("(")
    return fn, json.loads("[" + rest.rstrip().removesuffix(";").removesuffix(")") + "]")


def load(out: Path) -> tuple[dict, dict[str, dict]]:
    """The index and every question's detail, by id, as the page would see them."""
    fn, (index,) = read_js(out / "explorer" / "index-data.js")
    assert fn == "hopforgeIndex"
    details = {}
    for k, start in enumerate(index["shard_starts"]):
        fn, (kk, shard) = read_js(out / "explorer" / f"shard-{k:05d}.js")
        assert (fn, kk, shard["start"]) == ("hopforgeShard", k, start)
        assert len(shard["ids"]) == len(shard["questions"])
        for qid, d in zip(shard["ids"], shard["questions"]):
            assert d["id"] == qid == index["cols"]["id"][start + shard["ids"].index(qid)]
            details[qid] = d
    return index, details


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Store:
    root = tmp_path_factory.mktemp("explorer")
    return build_run(root / "run", root / "tok")


@pytest.fixture(scope="module")
def written(run, tmp_path_factory) -> tuple[Path, dict, dict, dict]:
    out = tmp_path_factory.mktemp("report")
    (out / "funnel.png").write_bytes(b"\x89PNG fake")
    info = write_explorer(run, out, ["funnel.png", "missing.png", "../escape.png"], {"pass@1": 0.5, "traces": 13})
    index, details = load(out)
    return out, info, index, details


# ---- the pieces ------------------------------------------------------------------------------

def test_js_json_escapes_markup_and_round_trips() -> None:
    obj = {"q": HOSTILE, "k": ["</SCRIPT >", "a<!--b", "x\u2029y"], "n": 3}
    text = js_json(obj)
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in text
    assert json.loads(text) == obj
    call = js_call("hopforgeShard", 3, obj).decode()
    assert call.startswith("hopforgeShard(3,") and call.endswith(");\n")
    assert json.loads(call[len("hopforgeShard(3,"):-3]) == obj
    # Lone surrogates (broken UTF-16 in a dump) go through the stdlib, escaped, and still parse.
    assert json.loads(js_json({"s": "a\ud800b"})) == {"s": "a\ud800b"}


def test_clip_keeps_the_focus() -> None:
    assert clip("short", 10) == ("short", 0)
    assert clip(None, 10) == (None, 0)
    text = "a" * 100 + "GOLD" + "b" * 100
    head, cut = clip(text, 40)
    assert head == "a" * 40 + " […]" and cut == 164
    focused, cut = clip(text, 40, focus=100)
    assert "GOLD" in focused and focused.startswith("a" * 20) and cut == 204 - 40


def test_gold_marks_point_at_the_observation_that_names_the_page() -> None:
    tr = observed_trace("t", "q")
    msgs = list(Conversation.from_json(tr.messages).messages)
    marks = gold_marks(msgs, PATH, [1, 2, 3, 4])
    tool_at = [i for i, m in enumerate(msgs) if m.role == "tool"]
    assert marks == {tool_at[0]: [0], tool_at[1]: [1], tool_at[2]: [2], tool_at[3]: [3]}
    # Never seen: no mark; seen at turn 0: the user message; an observation that does not name the page:
    # the turn's first observation; a turn without observations: its assistant message.
    user = next(i for i, m in enumerate(msgs) if m.role == "user")
    last = len(msgs) - 1
    assert gold_marks(msgs, ["p0", "zz", "p2", "p3"], [0, 1, -1, 5]) == {user: [0], tool_at[0]: [1], last: [3]}
    # Two pages first seen in one observation.
    assert gold_marks(msgs, ["p8", "p3"], [4, 4]) == {tool_at[3]: [0, 1]}


def test_trace_view_clips_around_the_gold_page() -> None:
    tr = observed_trace("t", "q")
    msgs = json.loads(tr.messages)
    tool = next(m for m in msgs if m["role"] == "tool")
    tool["content"] = json.dumps([{"page_id": f"x{i}", "title": "filler " * 20} for i in range(100)]
                                 + [{"page_id": "p0", "title": "Alpha Station"}])
    view = trace_view(dataclasses.replace(tr, messages=json.dumps(msgs)).to_row(), max_text=800)
    obs = next(m for m in view["messages"] if m["role"] == "tool")
    assert obs["gold"] == [0] and obs["cut"] > 0 and '"page_id": "p0"' in obs["text"] and len(obs["text"]) < 900
    assert view["gold_first_seen"] == [1, 2, 3, 4] and view["id"] == "t"
    calls = [c for m in view["messages"] for c in m.get("calls", [])]
    assert [c["name"] for c in calls] == ["search", "open", "find", "search"]


def test_filter_steps_follow_the_chain() -> None:
    def steps(reason: str | None, kept: bool = False, detail: str | None = None) -> list[tuple]:
        return [(s["filter"], s["status"], s.get("reason"), s.get("detail"))
                for s in filter_steps(CHAIN, {"reason": reason, "kept": kept}, detail)]

    assert steps(None, kept=True) == [("format", "pass", None, None), ("correctness", "pass", None, None),
                                      ("low_step", "pass", None, None), ("split", "pass", None, None),
                                      ("best_of_n", "kept", None, None)]
    assert steps("wrong_answer", detail="F1 0.00") == [("format", "pass", None, None),
                                                       ("correctness", "drop", "wrong_answer", "F1 0.00"),
                                                       ("low_step", "skip", None, None)]
    assert steps("held_out")[-1] == ("split", "drop", "held_out", None)
    assert [s[1] for s in steps("held_out")] == ["pass", "pass", "pass", "drop"]
    assert steps("not_best")[-2:] == [("split", "pass", None, None), ("best_of_n", "drop", "not_best", None)]
    assert steps("too_long") == [("length", "drop", "too_long", None)]  # a filter outside this chain
    assert steps("new_reason")[-1] == ("filter", "drop", "new_reason", None)
    assert filter_steps(CHAIN, None) == []


def test_reason_map_matches_the_filters() -> None:
    from filters.base import available

    reasons = {r: name for name, cls in available().items() for r in cls.reasons}
    assert REASON_FILTER == reasons


def test_question_outcome() -> None:
    none = Counter()
    assert question_outcome("sft", 0, 0, 0, 0, False, none, "prose") == (DROPPED, "questions: prose", "dropped")
    assert question_outcome("sft", 0, 0, 0, 0, False, none, None) == (DROPPED, "rollout: no traces", "dropped")
    assert question_outcome("sft", 4, 0, 0, 0, False, none, None) == (UNFILTERED, None, "not filtered")
    assert question_outcome("eval", 4, 4, 0, 1, False, Counter(held_out=4), None) == (KEPT, None, "eval set")
    assert question_outcome("rl", 4, 4, 0, 2, True, none, None) == (KEPT, None, "rl_pool")
    assert question_outcome("rl", 4, 4, 0, 0, False, none, None) == (DROPPED, "band: all_wrong", "dropped")
    assert question_outcome("rl", 4, 4, 0, 4, False, none, None) == (DROPPED, "band: all_right", "dropped")
    assert question_outcome("sft", 4, 4, 1, 3, False, none, None) == (KEPT, None, "sft")
    assert question_outcome("sft", 4, 4, 1, 3, True, none, None) == (KEPT, None, "sft + rl_pool")
    drops = Counter({"wrong_answer": 3, "format": 1})
    assert question_outcome("sft", 4, 4, 0, 0, False, drops, None) == (DROPPED, "filter: wrong_answer", "dropped")


def test_question_index_fills_each_position_once_and_settles_outcomes() -> None:
    qi = explorer.QuestionIndex({"q1": 0, "q2": 1, "x1": 2}, n_table=2)
    row = {"question_id": "q1", "question": "Which river?", "titles": ["A", "B", "C"], "answer": "C",
           "split": "sft", "path": ["a", "b", "c"], "effective_depth": 2}
    assert qi.add_question(row) == 0
    assert qi.add_question({**row, "answer": "other"}) is None  # a repeated id: the first row stands
    assert (qi.answer[0], qi.hops[0], qi.titles[0], qi.depth[0]) == ("C", 2, "A → B → C", 2)
    assert qi.add_question({**row, "question_id": "q2", "split": "rl", "effective_depth": None}) == 1
    assert qi.depth[1] == -1
    assert qi.add_reject({"record_id": "x1", "reason": None, "raw": "junk"}, None, None) == 2
    assert qi.rejected[2] == "unknown" and qi.text[2] == "(None) junk"
    qi.add_source(2, "walk", ["a", "b"], ["A", "B"])
    qi.add_source(0, "walk", ["z"], ["Z"])  # a kept question keeps its own path
    assert (qi.titles[2], qi.hops[2], qi.titles[0]) == ("A → B", 1, "A → B → C")
    for correct, kept, reason in ((True, False, "too_few_calls"), (False, False, "wrong"), (False, False, "wrong")):
        qi.add_verdict({"question_id": "q1", "correct": correct, "kept": kept, "reason": reason})
    assert qi.add_verdict({"question_id": "elsewhere", "correct": True, "kept": True, "reason": None}) is None
    qi.n_traces[0] = 3
    qi.settle(in_pool={1})
    assert qi.status == [DROPPED, DROPPED, DROPPED]
    assert qi.reasons[qi.reason_ix[1]] == "rollout: no traces"  # in rl_pool, but never rolled out
    assert qi.reasons[qi.reason_ix[0]] == "filter: wrong" and qi.reasons[qi.reason_ix[2]] == "questions: unknown"
    assert sorted(qi.reasons[k] for k in qi.trace_ix[0]) == ["filter: too_few_calls", "filter: wrong"]
    assert qi.head(0) == ("q1", DROPPED, "filter: wrong", "dropped", 1, 3)
    index = qi.to_json([0])
    assert index["cols"]["n"] == [3, 0, 0] and index["n"] == 3
    assert index["reason_counts"][qi.reasons.index("filter: wrong")] == 1
    assert qi.counts(n_trace_rows=3, n_shards=1)["questions_table"] == 2


def test_hop_evidence_either_direction() -> None:
    links = [dataclasses.asdict(e) for e in walk("w", reverse_hop=1).hops]
    hops = hop_evidence(links, PATH, TITLES, [{"sub_question": f"sq{i}"} for i in range(3)])
    assert [h["from"] for h in hops] == TITLES[:3] and [h["to"] for h in hops] == TITLES[1:]
    assert [h["evidence"]["reverse"] for h in hops] == [False, True, False]
    assert hops[1]["evidence"]["src_id"] == "p2" and hops[1]["sub_question"] == "sq1"
    assert hop_evidence([], PATH, TITLES)[0]["evidence"] is None


# ---- a whole run -----------------------------------------------------------------------------

def test_every_question_with_its_outcome_and_pass_count(run, written) -> None:
    _, info, index, details = written
    cols = index["cols"]
    ids = cols["id"]
    assert ids == ["qa", "qb", "qc", "qd", "qe", "qf", "qx", "qy"]  # the table's order, then the dropped ones
    assert info["questions"] == 8 and info["questions_table"] == 6 and info["traces"] == 13
    row = {q: i for i, q in enumerate(ids)}

    def outcome(q: str) -> tuple:
        i = row[q]
        return (cols["status"][i], index["reasons"][cols["reason"][i]] if cols["reason"][i] >= 0 else None,
                index["labels"][cols["label"][i]])

    assert outcome("qa") == (KEPT, None, "sft")
    assert outcome("qb") == (KEPT, None, "sft")
    assert outcome("qc") == (KEPT, None, "rl_pool")
    assert outcome("qd") == (DROPPED, "band: all_right", "dropped")
    assert outcome("qe") == (KEPT, None, "eval set")
    assert outcome("qf") == (DROPPED, "rollout: no traces", "dropped")
    assert outcome("qx") == (DROPPED, "questions: ambiguous_hop", "dropped")
    assert outcome("qy") == (DROPPED, "questions: prose", "dropped")
    assert info["kept_questions"] == 4 and info["dropped_questions"] == 4

    # c/n against the verdicts table.
    verdicts = run.read("filter/verdicts").to_pylist()
    for q in ids:
        vs = [v for v in verdicts if v["question_id"] == q]
        i = row[q]
        assert (cols["c"][i], cols["n"][i]) == (sum(v["correct"] for v in vs), len(vs)), q
        assert (details[q]["c"], details[q]["n"]) == (cols["c"][i], cols["n"][i])
    assert (cols["c"][row["qa"]], cols["n"][row["qa"]]) == (2, 3)
    assert (cols["c"][row["qc"]], cols["n"][row["qc"]]) == (2, 4)

    # Trace reasons a question can be found by, with how many questions each finds.
    trace_reasons = {q: sorted(index["reasons"][k] for k in cols["trace_reasons"][row[q]]) for q in ids}
    assert trace_reasons["qa"] == ["filter: too_few_steps", "filter: wrong_answer"]
    assert trace_reasons["qb"] == ["filter: not_best"]
    assert trace_reasons["qc"] == ["filter: held_out", "filter: wrong_answer"]
    counts = dict(zip(index["reasons"], index["reason_counts"]))
    assert counts["filter: wrong_answer"] == 2 and counts["filter: held_out"] == 3 and counts["questions: prose"] == 1

    splits = index["splits"]
    assert [splits[cols["split"][row[q]]] for q in ids] == ["sft", "sft", "rl", "rl", "eval", "sft", "", ""]
    assert cols["hops"][row["qa"]] == 3 and cols["hops"][row["qx"]] == 3 and cols["hops"][row["qy"]] == -1
    assert cols["text"][row["qx"]] == "Which river flows past the harbour?"
    assert cols["titles"][row["qx"]] == " → ".join(TITLES)  # from its walk
    assert cols["text"][row["qy"]].startswith("(prose) This group")


def test_effective_depth_in_the_table_and_the_detail(written) -> None:
    _, _, index, details = written
    row = {q: i for i, q in enumerate(index["cols"]["id"])}
    depth = index["cols"]["depth"]
    assert (depth[row["qa"]], depth[row["qc"]], depth[row["qb"]], depth[row["qx"]]) == (3, 1, -1, -1)
    assert details["qc"]["question"]["effective_depth"] == 1 and details["qc"]["question"]["entry"] == ENTRY
    assert details["qa"]["question"]["entry"] is None


def test_detail_has_path_evidence_traces_and_verdicts(written) -> None:
    _, _, _, details = written
    qa = details["qa"]
    assert qa["question"]["answer"] == "Delta City" and qa["question"]["path"] == PATH
    assert [h["evidence"]["paragraph"] for h in qa["hops"]][0] == "Alpha Station is linked to Bravo Harbour in this paragraph."
    assert [h["evidence"]["reverse"] for h in qa["hops"]] == [False, True, False]
    assert [h["sub_question"] for h in qa["hops"]] == ["hop 0", "hop 1", "hop 2"]
    traces = {t["id"]: t for t in qa["traces"]}
    assert [t["id"] for t in qa["traces"]] == ["ta0", "ta1", "ta2"]  # by sample index
    assert traces["ta0"]["verdict"]["kept"] and traces["ta0"]["filters"][-1] == {"filter": "best_of_n", "status": "kept"}
    wrong = traces["ta1"]["filters"]
    assert wrong[1]["status"] == "drop" and wrong[1]["reason"] == "wrong_answer" and "Echo" in wrong[1]["detail"]
    assert wrong[2] == {"filter": "low_step", "status": "skip"}
    few = traces["ta2"]["filters"]
    assert few[2]["reason"] == "too_few_steps" and few[2]["detail"] == "2 tool calls < 3"
    # Gold first seen: turn k's observation names gold page k-1; ta2 never saw p2, p3.
    gold = {m["text"][:40]: m["gold"] for m in traces["ta0"]["messages"] if m.get("gold")}
    assert sorted(gold.values()) == [[0], [1], [2], [3]]
    assert [m["gold"] for m in traces["ta2"]["messages"] if m.get("gold")] == [[0], [1]]
    assert traces["ta2"]["gold_first_seen"] == [1, 2, -1, -1]

    assert details["qb"]["hops"][0]["evidence"] is None  # no walk stored for qb
    assert [t["verdict"]["reason"] for t in details["qb"]["traces"]] == [None, "not_best"]
    assert details["qf"]["traces"] == []
    qx = details["qx"]
    assert qx["question"] is None and qx["rejected"]["reason"] == "ambiguous_hop"
    assert qx["source"]["kind"] == "walk" and len(qx["hops"]) == 3
    assert details["qy"]["source"] is None and details["qy"]["rejected"]["raw"].startswith("This group")


def test_hostile_text_stays_text(written) -> None:
    out, _, index, details = written
    assert details["qb"]["question"]["question"].startswith(HOSTILE)
    opened = [m["text"] for m in details["qb"]["traces"][0]["messages"] if m["role"] == "tool"][1]
    assert json.loads(opened)["text"].endswith(HOSTILE)
    assert index["cols"]["text"][1] == clip(HOSTILE + " Which city?", explorer.INDEX_TEXT)[0]
    for f in (out / "explorer").iterdir():
        data = f.read_text(encoding="utf-8")
        assert "<" not in data and ">" not in data and "\u2028" not in data, f.name
    page = (out / "index.html").read_text()
    assert page.count("<script") == 1 and "{{" not in page


def test_page_meta_and_files(written) -> None:
    out, info, index, _ = written
    meta = index["meta"]
    assert [f["file"] for f in meta["figures"]] == ["funnel.png"]  # missing and outside files are left out
    assert meta["summary"] == {"pass@1": 0.5, "traces": 13}
    assert [r["stage"] for r in meta["funnel"]] == ["walks", "questions", "rollout", "filter"]
    assert meta["chain"] == CHAIN and meta["run"] == "run"
    assert info["files"] == ["index.html", "explorer/index-data.js"] and info["shards"] == len(index["shard_starts"])
    assert info["bytes"] == sum(p.stat().st_size for p in [out / "index.html", *(out / "explorer").iterdir()])
    assert not list(out.glob(".explorer-*"))


def test_shards_cut_by_count_and_by_size(run, tmp_path: Path) -> None:
    out = tmp_path / "a"
    info = write_explorer(run, out, [], shard_size=3)
    index, details = load(out)
    assert index["shard_starts"] == [0, 3, 6] and info["shards"] == 3 and len(details) == 8
    # A tiny byte budget: one question a shard; rewriting the folder leaves no stale shard.
    write_explorer(run, out, [], shard_size=3, shard_bytes=10)
    index2, details2 = load(out)
    assert index2["shard_starts"] == list(range(8))
    assert sorted(p.name for p in (out / "explorer").glob("shard-*.js")) == [f"shard-{k:05d}.js" for k in range(8)]
    assert details2 == details
    # Spilling in many small appends gives the same data.
    import synth.report.explorer as mod

    old = mod.SPILL_BYTES
    mod.SPILL_BYTES = 64
    try:
        write_explorer(run, tmp_path / "b", [], shard_size=3)
    finally:
        mod.SPILL_BYTES = old
    assert load(tmp_path / "b")[1] == details


def test_a_run_not_filtered_yet(tmp_path: Path) -> None:
    store = Store(tmp_path / "run")
    publish(store, "questions", {"questions": Question.to_table([make_question("q1"), make_question("q2")])})
    publish(store, "rollout", {"traces": Trace.to_table([observed_trace("t1", "q1"),
                                                         observed_trace("t2", "q1", sample=1, answer="Echo")])})
    write_explorer(store, tmp_path / "out", [])
    index, details = load(tmp_path / "out")
    cols = index["cols"]
    assert cols["status"] == [UNFILTERED, DROPPED] and cols["c"] == [1, 0] and cols["n"] == [2, 0]
    assert details["q1"]["traces"][0]["verdict"] is None and details["q1"]["traces"][0]["filters"] == []
    assert index["meta"]["chain"] == []


def test_an_empty_run(tmp_path: Path) -> None:
    info = write_explorer(Store(tmp_path / "run"), tmp_path / "out", [])
    index, _ = load(tmp_path / "out")
    assert info["questions"] == 0 and index["n"] == 0 and index["shard_starts"] == []
    assert (tmp_path / "out" / "index.html").stat().st_size > 1000


def test_worker_processes_write_the_same_files(run, tmp_path: Path, monkeypatch) -> None:
    """The trace views and the shards' JSON made in 2 worker processes: every file the same bytes as in one."""
    import os

    import synth.report.explorer as mod
    from flows.config import load_config
    from synth.engine.stage import Stage, StageContext

    monkeypatch.setattr(mod, "BATCH_ROWS", 4)  # several batches of traces, and (shard_size 3) several buckets
    marks = tmp_path / "pids"
    marks.mkdir()
    real = mod._views_step

    def views(state, batch):  # leaves a mark of the process that made the views (the workers are forked)
        (marks / str(os.getpid())).touch()
        return real(state, batch)

    monkeypatch.setattr(mod, "_views_step", views)
    from flows.stages import REPORT

    files, pids = {}, {}
    for workers in (1, 2):
        ctx = StageContext(Stage("report", "synth.report.stage:run_report", sections=REPORT.sections),
                           load_config(None, [f"runner.cpu_workers={workers}"]), run, f"test-{workers}")
        out = tmp_path / f"w{workers}"
        write_explorer(run, out, [], shard_size=3, ctx=ctx)
        files[workers] = {p.name: p.read_bytes() for p in sorted((out / "explorer").iterdir())}
        pids[workers] = {int(p.name) for p in marks.iterdir()}
        for p in marks.iterdir():
            p.unlink()
    assert len(files[1]) > 3 and files[1] == files[2]
    assert pids[1] == {os.getpid()} and pids[2] and os.getpid() not in pids[2]
