"""``bench/downstream.py`` at toy size: the folder it generates, and one stage measured against its floor."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.dataset as ds

from bench.downstream import ANCHOR, generate, measure
from helpers.filterstore import make_store
from helpers.traces import call, make_question, make_trace
from synth.tokenizer.counts import conversation_digest

CALLS = [call("search", query="Alpha Station"), call("open", page="p1"), call("search", query="Delta City")]


def test_the_generated_folder_replicates_every_trace_distinctly_and_the_filter_runs_on_it(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    questions = [make_question("q1"), make_question("q2", split="rl")]
    traces = [make_trace("a", "q1", calls=CALLS), make_trace("b", "q1", sample_index=1, calls=CALLS, answer="Echo"),
              make_trace("c", "q2", calls=CALLS, split="rl")]
    assert all(ANCHOR in t.messages for t in traces)
    make_store(demo, questions, traces)
    run = tmp_path / "run"
    generate(run, demo, 7, 24, {"toy": True})

    q = ds.dataset(run / "questions", format="parquet").to_table().to_pylist()
    t = ds.dataset(run / "traces", format="parquet").to_table().to_pylist()
    assert len(q) == 7 and len({r["question_id"] for r in q}) == 7
    assert len(t) == 24 and len({r["trace_id"] for r in t}) == 24
    per_q = {r["question_id"]: 0 for r in q}
    for r in t:
        per_q[r["question_id"]] += 1  # every trace names a generated question
    assert sorted(per_q.values()) == [3, 3, 3, 3, 4, 4, 4]
    # No two conversations are the same text (the token-count cache is keyed by content), and each keeps its size.
    assert len({conversation_digest(json.loads(r["messages"]), None) for r in t}) == 24
    # Each keeps its demo trace's conversation: without the copy's name, the same messages but one word.
    base = {x.trace_id: json.loads(x.messages) for x in traces}
    for r in t:
        got, want = _unnamed(json.loads(r["messages"])), base[r["trace_id"].split("-")[0]]
        assert [m for m in got if m["role"] != "assistant"] == [m for m in want if m["role"] != "assistant"]
        assert sum(a != b for a, b in zip(got, want)) == 1 and len(got) == len(want)
    # Copies of one demo trace share no question or observation, so no stage gains from their being copies.
    copies: dict[str, list[set]] = {}
    for r in t:
        conv = json.loads(r["messages"])
        copies.setdefault(r["trace_id"].split("-")[0], []).append(
            {m["content"] for m in conv if m["role"] == "user"}
            | {v for m in conv if m["role"] == "tool" for v in _observed(json.loads(m["content"]))})
    assert all(not a & b for c in copies.values() for i, a in enumerate(c) for b in c[i + 1:])
    manifest = json.loads((run / "manifest.json").read_text())["stages"]
    assert {"questions", "rollout", "tokenizer"} <= set(manifest)

    work = tmp_path / "work"
    m = measure("filter", run, work, 1)
    assert m["report"]["input"] == 24 and m["floor"]["rows"] == 24 and m["floor"]["tokens"] > 24 * 50
    assert m["peak_rss_gib"] > 0 and m["floor_peak_rss_gib"] > 0 and m["ratio"] > 0


def _unnamed(conv: list[dict]) -> list[dict]:
    """A generated conversation with its copy's name taken out of the question and the observations."""
    out = []
    for m in conv:
        m = dict(m)
        if m["role"] == "user" and re.match(r"r\d+\.\d+ ", m["content"]):
            m["content"] = m["content"].split(" ", 1)[1]
        elif m["role"] == "tool" and re.search(r'"r\d+\.\d+ ', m["content"]):
            m["content"] = json.dumps(_unname(json.loads(m["content"])), ensure_ascii=False)
        out.append(m)
    return out


def _unname(obs):
    if isinstance(obs, dict):
        return {k: _unname(v) for k, v in obs.items()}
    if isinstance(obs, list):
        return [_unname(v) for v in obs]
    return re.sub(r"^r\d+\.\d+ ", "", obs) if isinstance(obs, str) else obs


def _observed(obs, key: str = ""):
    """Every text of an observation but its page ids (what the grounding analysis and the tokenizer read)."""
    if isinstance(obs, dict):
        return [t for k, v in obs.items() for t in _observed(v, k)]
    if isinstance(obs, list):
        return [t for v in obs for t in _observed(v, key)]
    return [obs] if isinstance(obs, str) and key != "page_id" else []
