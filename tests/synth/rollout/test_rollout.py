"""Rollouts: the ReAct loop with the oracle and with the openai backend against a scripted server.

The questions are written here from the walks' evidence in the question writer's text contract
(the start's title in the first sentence, one quoted clue per hop with the linking name blanked,
a closing question), so these tests exercise the rollout whatever the question writer does.
"""

import json
import re

import pyarrow.dataset as ds
import pytest

from helpers.openai_server import Reply, call, serve
from helpers.walkstore import commit_stage, make_chain_store
from flows.config import load_config
from synth.engine.records import Hop, Question, Trace, Walk
from synth.engine.runner import run_stage
from synth.engine.store import MissingInput
from synth.rollout.loop import PLACEHOLDER, trace_id
from synth.tools.analysis import analyze, query_terms
from synth.tools.registry import tool_names
from flows.stages import EMBED, INDEX, ROLLOUT


def _traces(root):
    return ds.dataset(root / "traces").to_table().to_pylist()


def contract_question(w: Walk, split: str = "sft") -> Question:
    """A question through walk ``w`` in the writer's contract: each clue quotes the hop's paragraph,
    the linking name blanked."""
    clues = []
    for h in w.hops:
        left, _, right = h.paragraph.partition(h.anchor_text)
        clues.append(f'Its text says "{left.strip()} ___ {right.strip().rstrip(".")}".')
    text = " ".join([f"Start from the article on {w.titles[0]}.", *clues, "Which page do you reach last?"])
    return Question(question_id=f"q-{w.walk_id}", kind="walk", source_id=w.walk_id, path=w.path, titles=w.titles,
                    question=text, answer=w.titles[-1], answer_aliases=[], answer_page_id=w.path[-1],
                    hops=[Hop(c, t, p) for c, t, p in zip(clues, w.titles[1:], w.path[1:])],
                    teacher_model="hand", prompt_sha="-", seed=0, split=split)


def _store(tmp_path, n=4, hops=3):
    store = make_chain_store(tmp_path, n=n, hops=hops, extra_pages=30)
    run_stage(INDEX, load_config(None, []), store)
    walks = [Walk.from_row(r) for r in store.read("walks").to_pylist()]
    commit_stage(store, "questions", "questions", Question.to_table([contract_question(w) for w in walks]))
    return store


def ungrounded(t) -> list[str]:
    """Independently of the grounded filter: every search word (index terms, stop words aside) and every
    opened or searched-in page must be in the question or an observation shown before the call."""
    conv = Trace.from_row(t).conversation
    seen_terms, seen_text, seen_ids, bad = set(), [], set(), []
    for m in conv.messages:
        if m.role == "user":
            seen_terms.update(analyze(m.text)), seen_text.append(" ".join(analyze(m.text)))
        elif m.role == "tool":
            obs = json.loads(m.text)
            if isinstance(obs, dict) and "error" in obs:
                continue
            for item in obs if isinstance(obs, list) else [obs]:
                seen_ids.add(item["page_id"])
                for key in ("title", "snippet", "text"):
                    if key in item and not (key == "text" and "passages" in item):
                        seen_terms.update(analyze(item[key])), seen_text.append(" ".join(analyze(item[key])))
                for p in item.get("passages", []):
                    seen_terms.update(analyze(p["text"])), seen_text.append(" ".join(analyze(p["text"])))
        elif m.role == "assistant":
            for tc in m.tool_calls:
                args = tc.args()
                words = query_terms(args.get("query") or args.get("text") or "")
                bad += [f"{tc.name} word {w!r}" for w in words if w not in seen_terms]
                page = args.get("page")
                if page is not None and page not in seen_ids and not any(
                        f" {' '.join(analyze(page))} " in f" {s} " for s in seen_text):
                    bad.append(f"{tc.name} page {page!r}")
    return bad


def check_trace_valid(t, tools_known=("search", "open", "find")):
    """Every tool message answers a preceding tool_call_id; the stored shape parses; counts match the messages."""
    conv = Trace.from_row(t).conversation
    assert conv.problem is None  # ids, function names and string arguments where OpenAI puts them
    msgs = conv.messages
    tools = json.loads(t["tools"])
    assert sorted(x["function"]["name"] for x in tools) == sorted(tools_known)
    assert msgs[0].role == "system" and msgs[1].role == "user"
    pending, n_calls, n_turns = set(), 0, 0
    for m in msgs[2:]:
        if m.role == "assistant":
            n_turns += 1
            for tc in m.tool_calls:
                pending.add(tc.id)
                n_calls += 1
        elif m.role == "tool":
            assert m.tool_call_id in pending
            pending.discard(m.tool_call_id)
    assert not pending
    assert n_calls == t["n_tool_calls"] and n_turns == t["n_turns"]
    assert [c["name"] for c in t["tool_counts"]] == list(tool_names())  # every registered tool, in order
    assert sum(c["calls"] for c in t["tool_counts"]) <= t["n_tool_calls"]
    return msgs


def test_oracle_rollouts_follow_the_real_index(tmp_path):
    store = _store(tmp_path)
    cfg = load_config(None, ["rollout.n=4", "rollout.policy=fixed"])
    out = run_stage(ROLLOUT, cfg, store)
    traces = _traces(tmp_path)
    questions = {q["question_id"]: q for q in ds.dataset(tmp_path / "questions").to_table().to_pylist()}
    assert len(traces) == 4 * len(questions) == out.report["output"]
    assert sorted({t["sample_index"] for t in traces}) == [0, 1, 2, 3]
    for t in traces:
        msgs = check_trace_valid(t)
        q = questions[t["question_id"]]
        # Source masking: no search result ever shows the answer page.
        for m in msgs:
            if m.role == "tool" and m.content.startswith("["):
                assert q["answer_page_id"] not in {r["page_id"] for r in json.loads(m.content)}
        assert q["answer_page_id"] not in t["searched_page_ids"]
        assert t["gold_page_ids"] == q["path"]
        # first-seen turns are real turns, and a page is seen at most when it was retrieved
        for pid, turn in zip(t["gold_page_ids"], t["gold_first_seen"]):
            assert turn == -1 or 1 <= turn <= t["n_turns"]
            assert (turn >= 0) == (pid in t["searched_page_ids"] or pid in t["opened_page_ids"])
    assert sum(t["stop_reason"] == "answer" for t in traces) >= len(traces) // 2
    assert sum(t["final_answer"] == questions[t["question_id"]]["answer"] for t in traces) >= len(traces) // 2
    # Honest: every search word and every page it opened came from the question or an earlier observation.
    assert {t["trace_id"]: ungrounded(t) for t in traces} == {t["trace_id"]: [] for t in traces}
    # Samples differ (seeded personas), and a rerun is identical and pays nothing new.
    assert len({t["messages"] for t in traces}) > len(questions)
    again = run_stage(ROLLOUT, cfg, store, force=True)
    assert _traces(tmp_path) == traces
    assert again.report["teacher"]["requests"] == 0
    assert out.report["search"] == {"ranker": "bm25"}  # the agents' search, as the report and card name it


def test_rollouts_search_with_the_configured_ranker_and_its_traces_follow_it(tmp_path):
    store = _store(tmp_path, n=2)
    bm25 = run_stage(ROLLOUT, load_config(None, ["rollout.n=1", "rollout.policy=fixed"]), store)
    cfg = load_config(None, ["rollout.n=1", "rollout.policy=fixed", "tools.ranker=hybrid", "runner.cpu_workers=1"])
    with pytest.raises(MissingInput, match="needs the output of stage 'embed'"):
        run_stage(ROLLOUT, cfg, store)  # the page vectors are an input under a dense ranker
    run_stage(EMBED, cfg, store)
    out = run_stage(ROLLOUT, cfg, store)
    assert not out.reused and out.key != bm25.key  # another ranker: the traces are made again
    search = out.report["search"]
    assert search["ranker"] == "hybrid" and search["model"] == "all-MiniLM-L6-v2" and len(search["model_sha"]) >= 12
    assert search["fusion"] == "zscore" and search["weights"] and search["dense_gate"]  # how the hybrid fused
    assert store.stage_entry("rollout")["extra"] == (  # manifest.json
        f"ranker=hybrid model={search['identity']} fusion=zscore "
        f"weights={','.join(map(str, search['weights']))} gate={','.join(map(str, search['dense_gate']))} depth=100")
    questions = {q["question_id"]: q for q in ds.dataset(tmp_path / "questions").to_table().to_pylist()}
    for t in _traces(tmp_path):
        assert questions[t["question_id"]]["answer_page_id"] not in t["searched_page_ids"]  # still masked


def _scripted(req):
    """A teacher that misbehaves by question: malformed args, unknown tools, loops, then answers."""
    msgs = req["messages"]
    q = msgs[1]["content"]
    turn = sum(m["role"] == "assistant" for m in msgs) + 1
    if "Alder" in q:  # malformed arguments, an unknown tool, then an answer
        if turn == 1:
            return Reply(content="Searching.", tool_calls=[
                {"id": "a1", "type": "function", "function": {"name": "search", "arguments": '{"query": "Alder'}},
                {"id": "a2", "type": "function", "function": {"name": "teleport", "arguments": "{}"}}])
        if turn == 2:
            return Reply(tool_calls=[call("open", {"page": "Alder 0-0"}, id="a3")])
        return Reply(content="Done. <answer>Alder 0-3</answer>")
    if "Birch" in q:  # an endless loop of searches
        return Reply(content="Still looking.", tool_calls=[call("search", {"query": f"birch {turn}"}, id=f"b{turn}")])
    if "Cedar" in q:  # talks without a tool call or an answer
        return Reply(content="I think I know this one.")
    return Reply(content="x" * 10, usage={"prompt_tokens": 5000, "completion_tokens": 10},
                 tool_calls=[call("search", {"query": "dogwood"}, id=f"d{turn}")])


def test_openai_rollouts_with_a_misbehaving_model(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    store = _store(tmp_path)
    with serve(handler=_scripted) as srv:
        cfg = load_config(None, ["rollout.n=2", "rollout.max_turns=6", "rollout.max_tokens=4000",
                                 "teacher.backend=openai", f"teacher.base_url={srv.base_url}", "teacher.model=m",
                                 "teacher.max_retries=0", "rollout.compress_observations=true",
                                 "rollout.keep_observations=2", "teacher.tool_protocol=native",
                                 "rollout.policy=fixed"])
        run_stage(ROLLOUT, cfg, store)
        traces = _traces(tmp_path)
        by = {}
        for t in traces:
            user = check_trace_valid(t)[1].content
            by.setdefault(next(n for n in ("Alder", "Birch", "Cedar", "Dogwood") if n in user), []).append(t)
        alder = by["Alder"][0]
        msgs = check_trace_valid(alder)
        errors = [json.loads(m.content) for m in msgs if m.role == "tool"][:2]
        assert "not valid JSON" in errors[0]["error"] and "teleport" in errors[1]["error"]
        assert alder["n_tool_errors"] == 2 and alder["stop_reason"] == "answer" and alder["final_answer"] == "Alder 0-3"
        assert all(t["stop_reason"] == "max_turns" and t["n_turns"] == 6 for t in by["Birch"])
        assert all(t["stop_reason"] == "no_answer" and t["final_answer"] is None for t in by["Cedar"])
        assert all(t["stop_reason"] == "max_tokens" and t["n_turns"] == 1 for t in by["Dogwood"])
        # Distinct samples are distinct calls (different seeds), so the cache keeps them apart.
        first_turns = [r for r in srv.requests if len(r.body["messages"]) == 2]
        assert len(first_turns) == 8 and len({(r.body["messages"][1]["content"], r.body["seed"]) for r in first_turns}) == 8
        # Compression: the teacher saw placeholders for all but the latest 2 observations; the trace keeps them all.
        last = max((r for r in srv.requests if "Birch" in r.body["messages"][1]["content"]),
                   key=lambda r: len(r.body["messages"]))
        tool_msgs = [m for m in last.body["messages"] if m["role"] == "tool"]
        assert len(tool_msgs) >= 4 and all(m["content"] == PLACEHOLDER for m in tool_msgs[:-2])
        assert all(m["content"] != PLACEHOLDER for m in tool_msgs[-2:])
        stored = [m for m in json.loads(by["Birch"][0]["messages"]) if m["role"] == "tool"]
        assert all(m["content"] != PLACEHOLDER for m in stored)
        # Resumable: a rerun sends nothing.
        n = srv.count
        run_stage(ROLLOUT, cfg, store, force=True)
        assert srv.count == n and _traces(tmp_path) == traces


def test_a_failed_call_is_never_a_finished_trace(tmp_path, monkeypatch):
    """vLLM answers 400 "maximum context length" once the prompt grows: those trajectories are not committed,
    the stage says how many failed and why, and a plain rerun against the fixed server retries exactly them
    (their first turns are cache hits) while the trajectories that finished cost nothing."""
    import pytest

    from helpers.openai_server import Status
    from synth.engine.errors import StageFailed

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    store = _store(tmp_path, n=4)
    long_ones = ("Birch", "Cedar")  # the questions whose context outgrows the server

    def handler(req, limit=True):
        msgs = req["messages"]
        if limit and any(w in msgs[1]["content"] for w in long_ones) and len(msgs) > 3:
            return Status(400, message="This model's maximum context length is 4096 tokens. However, you "
                                       "requested 5000 tokens.")
        turn = sum(m["role"] == "assistant" for m in msgs) + 1
        if turn == 1:
            return Reply(tool_calls=[call("search", {"query": "alder"}, id=f"s{turn}")])
        return Reply(content="Done. <answer>x</answer>")

    args = ["rollout.n=1", "teacher.backend=openai", "teacher.model=m", "teacher.max_retries=0",
            "teacher.tool_protocol=native"]
    with serve(handler=handler) as srv:
        cfg = load_config(None, args + [f"teacher.base_url={srv.base_url}"])
        with pytest.raises(StageFailed, match=r"2 of its 4 items failed \(http_400 2: turn 2: .*maximum context "
                                              r"length.*runner.max_failed_fraction=0.02.*retries only the failed"):
            run_stage(ROLLOUT, cfg, store)
    kept = _traces(tmp_path)
    assert len(kept) == 2 and all(t["stop_reason"] == "answer" for t in kept)
    assert not any(w in t["messages"] for t in kept for w in long_ones)
    report = json.loads((tmp_path / "reports" / "rollout.json").read_text())
    assert report["failed"] == {"http_400": 2} and report["output"] == 2 and report["input"] == 4
    long_qs = [q["question_id"] for q in store.read("questions").to_pylist() if any(w in q["question"] for w in long_ones)]
    assert sorted(f["id"] for f in report["failed_items"]) == sorted(trace_id(q, 0) for q in long_qs)
    assert all("maximum context length" in f["detail"] for f in report["failed_items"])

    # The server is fixed: a plain rerun sends only the failed trajectories' new turns.
    with serve(handler=lambda req: handler(req, limit=False)) as srv:
        cfg = load_config(None, args + [f"teacher.base_url={srv.base_url}"])
        out = run_stage(ROLLOUT, cfg, store)
        sent = [r.body["messages"][1]["content"] for r in srv.requests]
    assert not out.reused and out.report["output"] == 4 and "failed" not in out.report
    assert len(sent) == 2 and all(any(w in q for w in long_ones) for q in sent)
    assert {t["stop_reason"] for t in _traces(tmp_path)} == {"answer"} and len(_traces(tmp_path)) == 4
    # ...and once whole, the stage is reused.
    assert run_stage(ROLLOUT, cfg, store).reused


def test_a_stage_under_the_failure_limit_commits_and_says_a_rerun_retries(tmp_path, monkeypatch, caplog):
    from helpers.openai_server import Drop

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    store = _store(tmp_path, n=4)

    def handler(req):
        if "Alder" in req["messages"][1]["content"]:
            return Drop()
        return Reply(content="Done. <answer>x</answer>")

    with serve(handler=handler) as srv:
        cfg = load_config(None, ["rollout.n=1", "teacher.backend=openai", "teacher.model=m", "teacher.max_retries=0",
                                 "teacher.tool_protocol=native", f"teacher.base_url={srv.base_url}",
                                 "runner.max_failed_fraction=0.5"])
        with caplog.at_level("WARNING", logger="hopforge"):
            out = run_stage(ROLLOUT, cfg, store)
    assert out.report["failed"] == {"connection": 1} and out.report["output"] == 3
    assert any("1 of 4 items failed" in r.getMessage() and "a plain rerun retries them" in r.getMessage()
               for r in caplog.records)
    entry = store.stage_entry("rollout")
    assert entry["failed"] == 1 and entry["failed_digest"]


def test_a_reply_cut_at_max_tokens_is_truncated_even_with_an_answer_tag(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    store = _store(tmp_path, n=2)

    def handler(req):
        if "Alder" in req["messages"][1]["content"]:  # the turn runs out after an answer tag: it never ended
            return Reply(content="Format: <answer>...</answer>. Now I will keep explaining the", finish_reason="length")
        return Reply(content="It is <answer>Birch 0-3</answer>", finish_reason="stop")

    with serve(handler=handler) as srv:
        cfg = load_config(None, ["rollout.n=1", "teacher.backend=openai", f"teacher.base_url={srv.base_url}",
                                 "teacher.model=m", "teacher.max_retries=0", "teacher.tool_protocol=native"])
        run_stage(ROLLOUT, cfg, store)
    by = {next(n for n in ("Alder", "Birch") if n in check_trace_valid(t)[1].content): t for t in _traces(tmp_path)}
    assert by["Alder"]["stop_reason"] == "truncated" and by["Alder"]["final_answer"] is None
    assert by["Birch"]["stop_reason"] == "answer" and by["Birch"]["final_answer"] == "Birch 0-3"


def test_the_model_the_endpoint_says_answered_is_recorded_and_a_different_one_warned_once(tmp_path, monkeypatch,
                                                                                         caplog):
    """An endpoint that answers `"model": "another-model"` to requests for `m` was silently taken for `m`: the
    traces record the served name as teacher_model (and still do when replayed from the call cache), the stage
    report counts the answers by served model, and one warning names both."""
    import logging

    from synth.teacher import client

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setattr(client, "_SERVED_SAID", set())  # said once a process: this test's process included
    store = _store(tmp_path, n=3)

    def handler(req):
        return Reply(content="It is <answer>Alder 0-3</answer>", model="another-model")

    cfg = load_config(None, ["rollout.n=2", "teacher.backend=openai", "teacher.model=m", "teacher.max_retries=0",
                             "teacher.tool_protocol=native", "rollout.policy=fixed"])
    with serve(handler=handler) as srv, caplog.at_level(logging.WARNING, logger="hopforge"):
        cfg.teacher.base_url = srv.base_url
        run_stage(ROLLOUT, cfg, store)
        warned = [r.getMessage() for r in caplog.records if "answers as model" in r.getMessage()]
        assert len(warned) == 1 and "'another-model'" in warned[0] and "teacher.model 'm'" in warned[0]
        assert {t["teacher_model"] for t in _traces(tmp_path)} == {"another-model"}
        report = json.loads(store.path("reports/rollout.json").read_text())
        assert report["teacher"]["served_models"] == {"another-model": 6}
        sent = srv.count
        run_stage(ROLLOUT, cfg, store, force=True)  # every answer from the call cache
        assert srv.count == sent and {t["teacher_model"] for t in _traces(tmp_path)} == {"another-model"}


def test_a_native_run_whose_replies_are_cut_or_empty_says_so_not_that_tools_are_ignored(tmp_path, monkeypatch,
                                                                                        caplog):
    """Replies always cut at max_tokens (or empty), from an endpoint whose probe answered with a native tool call,
    were warned about as "may be ignoring" the tools with advice to change teacher.tool_protocol: the warning now
    names the cause, the setting to raise, and no protocol advice."""
    import logging

    from synth.teacher.probe import NativeWatch, TOOL_PROBE_MESSAGES

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for kind, reply, said in [("cut", Reply(content="Let me think about which page to open first, since the",
                                            finish_reason="length"), "were cut at teacher.max_tokens=64 before"),
                              ("empty", Reply(content=""), "were empty (no text, no tool call)")]:
        store = _store(tmp_path / kind, n=3)

        def handler(req, reply=reply):
            if req["messages"] == TOOL_PROBE_MESSAGES:  # the probe: tool calls work natively
                return Reply(tool_calls=[call("get_weather", {"city": "Paris"})])
            return reply

        cfg = load_config(None, ["rollout.n=3", "teacher.backend=openai", "teacher.model=m", "teacher.max_retries=0",
                                 "teacher.tool_protocol=auto", "teacher.max_tokens=64", "rollout.policy=fixed"])
        caplog.clear()
        with serve(handler=handler) as srv, caplog.at_level(logging.WARNING, logger="hopforge"):
            cfg.teacher.base_url = srv.base_url
            run_stage(ROLLOUT, cfg, store)
        warned = [r.getMessage() for r in caplog.records if "never called one" in r.getMessage()]
        assert len(warned) == 1, [r.getMessage() for r in caplog.records]
        assert f"was sent tools {NativeWatch.SILENT_AFTER} times" in warned[0] and said in warned[0], warned[0]
        assert "ignoring" not in warned[0] and "tool_protocol" not in warned[0]


def test_a_native_run_whose_every_call_arrives_as_text_stops_instead_of_committing(tmp_path, monkeypatch):
    """No preflight here (the stage is run directly, as a library user would): the run's own replies show
    that every call is written as text, so the stage stops rather than commit trajectories without a call."""
    import pytest

    from helpers.openai_server import text_tools_handler
    from synth.teacher.probe import NativeWatch, ToolCallsLost

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    store = _store(tmp_path, n=4)
    with serve(handler=text_tools_handler("hermes", renders_tools=True)) as srv:
        cfg = load_config(None, ["rollout.n=2", "teacher.backend=openai", f"teacher.base_url={srv.base_url}",
                                 "teacher.model=m", "teacher.max_retries=0", "teacher.tool_protocol=native"])
        with pytest.raises(ToolCallsLost, match=r"replies wrote their tool calls as text and none came as tool_calls: "
                                                r"it returns tool calls as text \(hermes format.*nothing of it is "
                                                r"committed"):
            run_stage(ROLLOUT, cfg, store)
        assert srv.count < 8 * NativeWatch.LOST_AFTER
    assert store.stage_entry("rollout") is None and not (tmp_path / "traces").exists()
    # The same server with the format named: the calls are read, and the stage commits.
    with serve(handler=text_tools_handler("hermes", renders_tools=True)) as srv:
        cfg = load_config(None, ["rollout.n=2", "teacher.backend=openai", f"teacher.base_url={srv.base_url}",
                                 "teacher.model=m", "teacher.max_retries=0", "teacher.tool_protocol=hermes"])
        run_stage(ROLLOUT, cfg, store)
    assert all(t["n_tool_calls"] >= 1 for t in _traces(tmp_path))


# ---- how many samples a question gets (rollout.policy) -------------------------------------------
SPLIT_OF = ["sft", "sft", "sft", "sft", "rl", "eval"]


def _split_store(tmp_path):
    store = make_chain_store(tmp_path, n=len(SPLIT_OF), hops=3, extra_pages=30)
    run_stage(INDEX, load_config(None, []), store)
    walks = [Walk.from_row(r) for r in store.read("walks").to_pylist()]
    qs = [contract_question(w, split) for w, split in zip(walks, SPLIT_OF)]
    commit_stage(store, "questions", "questions", Question.to_table(qs))
    return store, qs


def _coin(req):
    """Answers at once; right or wrong by the request's seed, which is fixed by (question, sample index)."""
    q = req["messages"][1]["content"] if len(req.get("messages") or []) > 1 else ""
    title = re.search(r"article on ([A-Za-z]+ \d+)-0", q)
    gold = f"{title.group(1)}-3" if title else "x"
    return Reply(content=f"<answer>{gold if req['seed'] % 3 else 'Nowhere'}</answer>")


def _coin_per_question(req):
    """As :func:`_coin`, with the coin also turned by the question, so questions differ in which samples are right."""
    import hashlib

    q = req["messages"][1]["content"] if len(req.get("messages") or []) > 1 else ""
    flip = int(hashlib.sha256(f"{req['seed']}:{q}".encode()).hexdigest(), 16) % 3
    return _coin({**req, "seed": flip})


def _ledger(root) -> int:
    path = root / "cache" / "ledger.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _by_question(root) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for t in sorted(_traces(root), key=lambda t: (t["question_id"], t["sample_index"])):
        out.setdefault(t["question_id"], []).append(t)
    return out


def _check_adaptive(root, qs, n, keep, eval_n, pooled=("rl",)):
    """Independently of the stage: each sft question holds samples 0..m-1, with m the first count at which
    `keep` of them are right (or n); the questions of the `pooled` splits (rl, and sft when rl_pool shares it)
    hold n, eval questions eval_n."""
    from synth.text.answers import is_correct

    got = _by_question(root)
    for q in qs:
        samples = got.get(q.question_id, [])
        assert [t["sample_index"] for t in samples] == list(range(len(samples)))
        if q.split in pooled:
            assert len(samples) == n
        elif q.split == "eval":
            assert len(samples) == eval_n
        else:
            right = [is_correct(t["final_answer"], [q.answer], 0.8) for t in samples]
            m = next((i + 1 for i in range(n) if i < len(right) and sum(right[:i + 1]) >= keep), n)
            assert len(samples) == m, (q.question_id, right)
    return got


def test_the_adaptive_policy_samples_until_decided_and_a_larger_cap_pays_only_new_samples(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    store, qs = _split_store(tmp_path)
    base = ["teacher.backend=openai", "teacher.model=m", "teacher.max_retries=0", "teacher.tool_protocol=native",
            "filters.keep_per_question=2"]
    with serve(handler=_coin) as srv:
        url = f"teacher.base_url={srv.base_url}"
        out = run_stage(ROLLOUT, load_config(None, [*base, url, "rollout.n=4"]), store)
        got = _check_adaptive(tmp_path, qs, n=4, keep=2, eval_n=1)
        sft = sum(len(got[q.question_id]) for q in qs if q.split == "sft")
        assert out.report["samples_by_split"] == {"sft": sft, "rl": 4, "eval": 1}
        assert out.report["samples_saved"] == 4 * len(qs) - len(_traces(tmp_path)) > 0
        paid = _ledger(tmp_path)
        assert paid == len(_traces(tmp_path)) == srv.count  # one call a sample: the coin answers at once
        # A larger cap: only the new samples are paid for (the others are call-cache hits).
        run_stage(ROLLOUT, load_config(None, [*base, url, "rollout.n=6"]), store)
        got6 = _check_adaptive(tmp_path, qs, n=6, keep=2, eval_n=1)
        new = sum(len(got6[q]) - len(got[q]) for q in got6)
        assert _ledger(tmp_path) - paid == new == srv.count - paid
        # A larger keep extends only the sft questions it leaves undecided.
        before = _ledger(tmp_path)
        run_stage(ROLLOUT, load_config(None, [*base[:-1], url, "rollout.n=6", "filters.keep_per_question=3"]), store)
        got3 = _check_adaptive(tmp_path, qs, n=6, keep=3, eval_n=1)
        grew = {q for q in got3 if len(got3[q]) > len(got6[q])}
        assert grew and all(next(x for x in qs if x.question_id == q).split == "sft" for q in grew)
        assert _ledger(tmp_path) - before == sum(len(got3[q]) - len(got6[q]) for q in grew)
        # policy fixed: every question gets n, the samples already there are not paid again.
        before = _ledger(tmp_path)
        run_stage(ROLLOUT, load_config(None, [*base, url, "rollout.n=6", "rollout.policy=fixed"]), store)
        assert all(len(v) == 6 for v in _by_question(tmp_path).values()) and len(_by_question(tmp_path)) == len(qs)
        assert _ledger(tmp_path) - before == 6 * len(qs) - len(_traces_of(got3))


def test_a_question_rl_pool_shares_gets_every_sample_and_its_band_counts_them_all(tmp_path, monkeypatch):
    """Under the adaptive policy with questions.share_sft_rl, an sft question can enter rl_pool: it gets all
    rollout.n samples, and its pool row's c/n counts exactly those (an early stop would have banded a question
    right on its first sample on the few samples it took to decide).  A pool the student measures (rl.band_by:
    student) samples its own rollouts, so there the sft questions keep the early stop."""
    from helpers.filterstore import publish
    from helpers.tinytok import save_tokenizer
    from flows.stages import FILTER
    from synth.text.answers import is_correct

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    store, qs = _split_store(tmp_path / "run")
    root = tmp_path / "run"
    publish(store, "tokenizer", {"tokenizer": save_tokenizer(tmp_path / "tok")})
    base = ["teacher.backend=openai", "teacher.model=m", "teacher.max_retries=0", "teacher.tool_protocol=native",
            "filters.keep_per_question=1", "rollout.n=4"]
    with serve(handler=_coin_per_question) as srv:
        url = f"teacher.base_url={srv.base_url}"
        # Not shared (and shared into a student's pool): the sft questions stop at their first right answer.
        alone = run_stage(ROLLOUT, load_config(None, [*base, url]), store)
        early = _check_adaptive(root, qs, n=4, keep=1, eval_n=1)
        student = run_stage(ROLLOUT, load_config(None, [*base, url, "questions.share_sft_rl=true",
                                                        "rl.band_by=student"]), store)
        assert not student.reused and _by_question(root) == early  # the same samples: every call a cache hit
        paid = _ledger(root)
        shared = load_config(None, [*base, url, "questions.share_sft_rl=true"])
        out = run_stage(ROLLOUT, shared, store)
        got = _check_adaptive(root, qs, n=4, keep=1, eval_n=1, pooled=("rl", "sft"))
    assert out.report["samples_by_split"] == {"sft": 16, "rl": 4, "eval": 1}
    assert out.report["samples_saved"] == 3 < alone.report["samples_saved"]  # only the eval question saves
    assert _ledger(root) - paid == sum(len(got[q]) - len(early[q]) for q in got) > 0  # only the new samples paid
    right = {q: [is_correct(t["final_answer"], [x.answer], 0.8) for t in got[q]]
             for x in qs for q in [x.question_id] if x.split != "eval"}
    # Right on its first sample, wrong on a later one: the early stop banded it 1 of 1 (all right, never pooled).
    first_right = [q for q, r in right.items() if r[0] and not all(r) and next(x for x in qs
                                                                              if x.question_id == q).split == "sft"]
    assert first_right and all(len(early[q]) == 1 for q in first_right), right

    # The coin answers without a tool call, so no trace is an sft row: the pool is the filter's whole output.
    run_stage(FILTER, load_config(None, [*base, url, "questions.share_sft_rl=true", "runner.allow_empty=true"]),
              store)
    rows = {r["extra_info"]["question_id"]: r["extra_info"] for r in ds.dataset(root / "rl_pool").to_table().to_pylist()}
    assert set(first_right) <= set(rows)
    assert {q: (i["n"], i["c"]) for q, i in rows.items()} == {q: (4, sum(right[q])) for q in rows}
    assert {i["split"] for i in rows.values()} <= {"sft", "rl"}
    rep = json.loads((root / "reports" / "filter.json").read_text())
    assert rep["band_n"] == 4 and rep["short_of_n"] == {}


def _traces_of(by: dict[str, list[dict]]) -> list[dict]:
    return [t for v in by.values() for t in v]


def test_eval_n_zero_skips_eval_questions(tmp_path):
    store, qs = _split_store(tmp_path)
    run_stage(ROLLOUT, load_config(None, ["rollout.n=2", "rollout.eval_n=0"]), store)
    got = _by_question(tmp_path)
    assert not any(q.question_id in got for q in qs if q.split == "eval")
    assert all(len(got[q.question_id]) == 2 for q in qs if q.split == "rl")
