"""A teacher server that reports prompt tokens served from its prefix cache
(``usage.prompt_tokens_details.cached_tokens``) is billed at ``teacher.price_per_mtok.cached_prompt``,
through a real rollout stage run, and the report, the Prefect cost artifact and the CLI's teacher table
show prompt, server-cached prompt and completion tokens apart."""

from __future__ import annotations

import json

import pyarrow.dataset as ds
import pytest

from helpers.openai_server import Reply, serve
from helpers.walkstore import commit_stage, make_chain_store
from flows.artifacts import PER_KEPT, cost_table, report_markdown
from flows.cli_common import TEACHER_COLUMNS, run_headline, teacher_rows
from flows.config import load_config
from flows.stages import INDEX, REPORT, ROLLOUT
from synth.engine.records import Hop, Question, Walk
from synth.engine.runner import run_stage
from synth.engine.stage import StageOutcome

PROMPT, CACHED, COMPLETION = 1000, 800, 50
USAGE = {"prompt_tokens": PROMPT, "completion_tokens": COMPLETION, "prompt_tokens_details": {"cached_tokens": CACHED}}
PRICE = {"prompt": 2.0, "completion": 8.0, "cached_prompt": 0.5}
KEPT = 3


def _call_usd() -> float:
    """One request's bill by hand: the uncached prompt, the cached prompt and the completion at their rates."""
    return ((PROMPT - CACHED) * PRICE["prompt"] + CACHED * PRICE["cached_prompt"]
            + COMPLETION * PRICE["completion"]) / 1e6


def _question(w: Walk) -> Question:
    return Question(question_id=f"q-{w.walk_id}", kind="walk", source_id=w.walk_id, path=w.path, titles=w.titles,
                    question=f"Start from the article on {w.titles[0]}. Which page do you reach last?",
                    answer=w.titles[-1], answer_aliases=[], answer_page_id=w.path[-1],
                    hops=[Hop("clue", t, p) for t, p in zip(w.titles[1:], w.path[1:])],
                    teacher_model="hand", prompt_sha="-", seed=0, split="sft")


def test_server_cached_tokens_are_priced_at_the_cached_rate_and_shown_apart(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    store = make_chain_store(tmp_path, n=3, hops=2, extra_pages=10)
    run_stage(INDEX, load_config(None, []), store)
    walks = [Walk.from_row(r) for r in store.read("walks").to_pylist()]
    commit_stage(store, "questions", "questions", Question.to_table([_question(w) for w in walks]))
    price = "{prompt: %g, completion: %g, cached_prompt: %g}" % (PRICE["prompt"], PRICE["completion"],
                                                                PRICE["cached_prompt"])
    with serve(handler=lambda req: Reply(content="<answer>somewhere</answer>", usage=USAGE)) as srv:
        cfg = load_config(None, ["rollout.n=2", "teacher.backend=openai", f"teacher.base_url={srv.base_url}",
                                 "teacher.model=m", "teacher.max_retries=0", "teacher.tool_protocol=native",
                                 f"teacher.price_per_mtok={price}"])
        rollout = run_stage(ROLLOUT, cfg, store)
        sent = srv.count
    assert sent > 0
    recorded = json.loads((store.root / "reports" / "rollout.json").read_text())["teacher"]
    assert (recorded["prompt_tokens"], recorded["server_cached_prompt_tokens"], recorded["completion_tokens"]) == (
        sent * PROMPT, sent * CACHED, sent * COMPLETION)
    assert recorded["cost_usd"] == pytest.approx(sent * _call_usd(), abs=1e-6)
    traces = ds.dataset(store.root / "traces").to_table().to_pylist()
    assert sum(t["server_cached_prompt_tokens"] for t in traces) == sent * CACHED

    # The kept rows, as a filter stage would report them; the report stage is the production one.
    (store.root / "reports" / "filter.json").write_text(json.dumps({"stage": "filter", "input": len(traces),
                                                                    "output": KEPT, "dropped": {}}))
    run_stage(REPORT, cfg, store)
    summary = json.loads((store.root / "reports" / "report.json").read_text())["summary"]
    assert summary["teacher"]["rollout"]["cost_usd"] == pytest.approx(sent * _call_usd(), abs=1e-6)
    assert summary["price_per_mtok"]["cached_prompt"] == PRICE["cached_prompt"]
    headline = {(c["stage"], c["split"]): c for c in summary["headline"]["cells"]}
    assert headline["rollout", "sft"]["per_kept_sft_row"]["cost_usd"] == pytest.approx(sent * _call_usd() / KEPT,
                                                                                      abs=1e-6)
    assert headline["rollout", "sft"]["server_cached_prompt_tokens"] == sent * CACHED
    index = (store.root / "report" / "index.md").read_text()
    apart = (f"{sent * PROMPT:,}", f"{sent * CACHED:,}", f"{sent * COMPLETION:,}")
    cost_part = index.split("## Teacher cost", 1)[1]
    row = next(line for line in cost_part.splitlines() if line.startswith("| rollout |"))
    assert all(f" {x} |" in row for x in apart)
    assert "0.5 per million server-cached prompt tokens" in index

    # The Prefect cost artifact and the report artifact.
    outcomes = [rollout]
    p = cfg.teacher.price_per_mtok
    rows = {r["stage"]: r for r in cost_table(store.root, outcomes, p) if r["status"] != PER_KEPT}
    r = rows["rollout"]
    assert (r["prompt tokens"], r["server-cached prompt tokens"], r["completion tokens"]) == (
        sent * PROMPT, sent * CACHED, sent * COMPLETION)
    assert r["cost_usd"] == pytest.approx(sent * _call_usd(), abs=1e-6)
    per_kept = [x for x in cost_table(store.root, outcomes, p) if x["status"] == PER_KEPT]
    assert any(x["stage"] == "rollout" and x["split"] == "sft" and x["cost_with_cache_usd"] == pytest.approx(
        sent * _call_usd() / KEPT, abs=1e-6) for x in per_kept)
    md = report_markdown(store.root, cfg, outcomes)
    md_row = next(line for line in md.splitlines() if line.startswith("| rollout | ran |"))
    assert all(f" {x} |" in md_row for x in apart) and "## Per kept SFT row" in md

    # The CLI's teacher table and the run summary's headline.
    table = dict(zip(TEACHER_COLUMNS, teacher_rows([StageOutcome("rollout", "k", False, 0.0,
                                                                 {"teacher": recorded})])[0]))
    assert (table["prompt tokens"], table["server-cached prompt tokens"], table["completion tokens"]) == (
        sent * PROMPT, sent * CACHED, sent * COMPLETION)
    h = run_headline(store.root, cfg)
    assert h.per_kept(h.total)["calls"] == pytest.approx(recorded["calls"] / KEPT)
