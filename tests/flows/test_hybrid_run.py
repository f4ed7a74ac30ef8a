"""`hopforge run --set tools.ranker=hybrid` through rollout, sft and eval on a small slice of the demo: every consumer
of the agents' search searched with the hybrid ranker, as the run's records say and as the searches themselves show.

One run (the demo config, 100 routed 3-hop walks, a 4-step student: ``helpers.demorun``) through the real command
line.  Then, against its store: each search the teacher made in a kept trace returned what the hybrid ranker
returns for it (its answer page masked) and not what BM25 alone returns; the student's eval harness (the eval stage,
and `hopforge eval` with a scripted model that searches) searched with it; `hopforge tools serve` on the run serves
it; and a run under `tools.ranker=dense` reuses the hybrid run's page vectors.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from helpers.cli import hopforge_command
from helpers.demorun import STUDENT_RUN, sets
from helpers.openai_server import Reply, call, serve
from synth.tools.rank import HYBRID_DEPTH, HYBRID_FUSION, HYBRID_GATE, HYBRID_WEIGHTS

ROOT = Path(__file__).resolve().parents[2]
HYBRID = sets(["tools.ranker=hybrid", *STUDENT_RUN])


def hopforge(*args: str, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*hopforge_command(), *args], cwd=ROOT, env=dict(os.environ, COLUMNS="200", **(env or {})),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hybrid") / "run"
    r = hopforge("run", "--config", "configs/demo.yaml", "--out", str(out), *HYBRID)
    assert r.returncode == 0, r.stdout[-4000:]
    return out


@pytest.fixture(scope="module")
def indexes(run):
    """The run's index under each ranker, opened as the agents open it."""
    from flows.config import load_config
    from synth.engine.store import Store
    from synth.tools.rank import open_search

    return {r: open_search(Store(run), load_config("configs/demo.yaml", [f"tools.ranker={r}"]).tools)
            for r in ("bm25", "hybrid")}


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _searches(traces_dir: Path, answers: dict[str, str]) -> list[tuple[str, int, str, list[str]]]:
    """``(query, k, answer page, page ids the agent saw)`` of every search call of the traces in ``traces_dir``."""
    from synth.engine.records import Trace

    out = []
    for row in ds.dataset(traces_dir).to_table().to_pylist():
        t = Trace.from_row(row)
        seen = {m.tool_call_id: m.text for m in t.conversation.messages if m.role == "tool"}
        for _, c in t.conversation.tool_calls():
            if c.name == "search" and c.args() and c.id in seen:
                args = c.args()
                out.append((args["query"], args.get("k") or 5, answers[t.question_id],
                            [h["page_id"] for h in json.loads(seen[c.id])]))
    return out


def _answers(run: Path) -> dict[str, str]:
    return {q["question_id"]: q["answer_page_id"] for q in ds.dataset(run / "questions").to_table().to_pylist()}


def test_the_run_records_the_hybrid_ranker_for_each_stage_that_searched(run):
    manifest = _json(run / "manifest.json")["stages"]
    facts = _json(run / "reports" / "rollout.json")["search"]
    assert facts["ranker"] == "hybrid" and facts["model"] == "all-MiniLM-L6-v2"
    # how it fused, as the ranker it searched with fuses
    assert (facts["fusion"], facts["weights"], facts["dense_gate"], facts["depth"]) == (
        HYBRID_FUSION, list(HYBRID_WEIGHTS), list(HYBRID_GATE), HYBRID_DEPTH)
    for stage in ("rollout", "eval", "rl_band"):  # their keys hold the ranker and the model, and read the vectors
        assert manifest[stage]["extra"] == (
            f"ranker=hybrid model={facts['identity']} fusion={HYBRID_FUSION} "
            f"weights={','.join(map(str, HYBRID_WEIGHTS))} gate={','.join(map(str, HYBRID_GATE))} depth={HYBRID_DEPTH}"
        ), stage
        assert "embed" in manifest[stage]["inputs"], stage
    assert _json(run / "eval" / "eval_report.json")["search"] == facts  # the student's eval, as its report says
    assert _json(run / "reports" / "eval.json")["search"] == facts
    embed = _json(run / "reports" / "embed.json")
    assert embed["output"] == ds.dataset(run / "corpus" / "pages").count_rows() and not embed.get("idle")


def test_each_kept_trace_searched_with_the_hybrid_ranker(run, indexes):
    kept = ds.dataset(run / "traces").count_rows()
    assert kept > 0 and ds.dataset(run / "sft").count_rows() > 0  # the run kept traces and trained on some
    searches = _searches(run / "traces", _answers(run))
    assert len(searches) >= kept  # the demo's teacher searches in every trace
    beyond_bm25 = 0
    for query, k, answer, seen in searches:
        assert seen == indexes["hybrid"].search_ids(query, k, exclude_page_ids=[answer]), query
        assert answer not in seen
        beyond_bm25 += bool(set(seen) - set(indexes["bm25"].search_ids(query, k, exclude_page_ids=[answer])))
    # Pages BM25 alone does not return for the query: only the page vectors put them there.  The fusion gives the
    # dense list no say where its best page is a poor match (cosine below the gate), as it is for most of the
    # oracle teacher's short clue searches, so there the hybrid's list is BM25's; on the rest it is not.
    assert beyond_bm25 >= max(1, len(searches) // 10), (beyond_bm25, len(searches))


def test_the_students_eval_harness_searches_with_the_hybrid_ranker(run, indexes):
    """The eval stage's student is too small to call a tool in 16 tokens, so the same harness (`hopforge eval`)
    runs a scripted model that searches once for each eval question, then answers."""

    # The query the model searches: of the run's own searches, the one whose hybrid and BM25 lists differ most,
    # so that masking an eval question's answer page cannot make them the same.
    def differ(query: str) -> int:
        return len(set(indexes["hybrid"].search_ids(query, 10)) - set(indexes["bm25"].search_ids(query, 10)))

    probe = max(sorted({q for q, *_ in _searches(run / "traces", _answers(run))}), key=differ)
    assert differ(probe) >= 2, probe

    def searcher(req):
        msgs = req["messages"]
        if any(m["role"] == "tool" for m in msgs):
            return Reply(content="<answer>unknown</answer>")
        return Reply(tool_calls=[call("search", {"query": probe, "k": 10}, id="s1")])

    with serve(handler=searcher) as srv:
        r = hopforge("eval", "--out", str(run), "--model", f"searcher@{srv.base_url}", *HYBRID,
                     "--set", "teacher.tool_protocol=native", "--set", "teacher.max_retries=0",
                     env={"OPENAI_API_KEY": "sk-test"})
    assert r.returncode == 0, r.stdout[-4000:]
    where = run / "evals" / "searcher"
    assert _json(where / "eval_report.json")["search"]["ranker"] == "hybrid"
    searches = _searches(where / "traces.parquet", _answers(run))
    assert len(searches) == _json(where / "eval_report.json")["evaluated_questions"] == 2
    for query, k, answer, seen in searches:
        assert seen == indexes["hybrid"].search_ids(query, k, exclude_page_ids=[answer]), query
    assert any(seen != indexes["bm25"].search_ids(query, k, exclude_page_ids=[answer])
               for query, k, answer, seen in searches)  # and BM25 alone would have shown another list


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_hopforge_tools_serve_on_the_run_serves_the_hybrid_ranker(run, indexes):
    import httpx

    query, k, answer, seen = _searches(run / "traces", _answers(run))[0]
    port = _free_port()
    p = subprocess.Popen([*hopforge_command(), "tools", "serve", "--out", str(run), "--port", str(port), *HYBRID],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        health = None
        for _ in range(1200):  # polled while the server loads the index and the model (it exits on an error)
            if p.poll() is not None:
                break
            try:
                health = httpx.get(f"{url}/health", timeout=5).json()
                break
            except httpx.TransportError:
                time.sleep(0.25)
        assert health is not None, p.communicate(timeout=30)[0][-3000:]
        assert health["ranker"] == "hybrid"
        hits = httpx.post(f"{url}/search", json={"query": query, "k": k, "exclude": [answer]}, timeout=60).json()
        assert [h["page_id"] for h in hits] == seen == indexes["hybrid"].search_ids(query, k, exclude_page_ids=[answer])
    finally:
        p.terminate()
        p.communicate(timeout=60)


def test_a_run_under_the_dense_ranker_reuses_the_hybrid_runs_vectors(run):
    vectors = (run / "embed" / "vectors.npy").read_bytes()
    r = hopforge("run", "--config", "configs/demo.yaml", "--out", str(run), "--until", "embed",
                 *sets(["tools.ranker=dense", *STUDENT_RUN]))
    assert r.returncode == 0, r.stdout[-4000:]
    stages = _json(run / "reports" / "run.json")["stages"]
    assert stages["embed"]["reused"] and all(s["reused"] for s in stages.values())
    assert (run / "embed" / "vectors.npy").read_bytes() == vectors


def _one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2 and "Traceback" not in r.stdout, r.stdout[-3000:]
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, r.stdout[-3000:]
    return lines[0]


def test_a_bad_model_or_vectors_is_one_line_naming_the_rebuild(run, tmp_path):
    import shutil

    import numpy as np

    from synth.engine.store import atomic_write_json
    from synth.tools.dense import packaged_model, save_npy

    search = ["tools", "search", "--query", "a vessel that sails the sea"]
    line = _one_line_error(hopforge(*search, "--out", str(run), *HYBRID, "--set", "tools.dense.model=/no/such/model"))
    assert line.startswith("error: tools.dense.model: no model folder at /no/such/model")

    other = tmp_path / "other-model"  # the packaged model's weights, another config: another model
    shutil.copytree(packaged_model(), other, copy_function=shutil.copy)
    (other / "config_sentence_transformers.json").write_text('{"note": "another model"}\n')
    line = _one_line_error(hopforge(*search, "--out", str(run), *HYBRID, "--set", f"tools.dense.model={other}"))
    assert "holds the page vectors of model all-MiniLM-L6-v2@" in line and "tools.dense.model is other-model@" in line
    # the command that rebuilds them for this config, the model named
    assert line.endswith(f"rebuild them with `hopforge embed --out {run} --set tools.ranker=hybrid "
                         f"--set tools.dense.model={other}`")

    copy = tmp_path / "copy"  # the run's index, and vectors of another dimension
    shutil.copytree(run / "index", copy / "index")
    shutil.copytree(run / "embed", copy / "embed")
    meta = _json(copy / "embed" / "dense.json")
    save_npy(copy / "embed" / "vectors.npy", np.zeros((meta["pages"], 8), np.float32))
    atomic_write_json(copy / "embed" / "dense.json", dict(meta, dim=8))
    line = _one_line_error(hopforge(*search, "--out", str(copy), *HYBRID))
    assert "holds 8-dimensional vectors" in line and "makes 384-dimensional ones" in line
    assert line.endswith(f"rebuild them with `hopforge embed --out {copy} --set tools.ranker=hybrid`")
