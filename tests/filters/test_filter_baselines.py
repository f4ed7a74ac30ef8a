"""The dual reward's baselines made by the pipeline (``rl.baselines``), and the ``gain`` mode scored on them.

A copy of the RL world's run folder (``helpers.rlrun``: the demo corpus, the oracle teacher) is filtered
again with ``rl.baselines: true``: every ``rl_pool`` row then holds the teacher's closed-book answer and its
naive-RAG answer (one search for the question, answer page masked, then an answer from those results),
each with its scores, and the ``gain`` reward reads them.
"""

from __future__ import annotations

import json
import shutil

import pyarrow.dataset as ds
import pytest

from filters.baselines import rag_pages
from filters.correctness import grade_answer
from filters.reward import compute_score
from flows.config import load_config
from helpers.filterstore import stages
from helpers.rlrun import RUN_ARGS
from synth.engine.records import Question
from synth.engine.runner import run_stage
from synth.engine.store import Store
from synth.text.answers import f1_score
from synth.tools.config import ToolsConfig
from synth.tools.search import SearchIndex
from synth.tools.toolbox import Toolbox


@pytest.fixture(scope="module")
def with_baselines(rl_run, tmp_path_factory):
    root = tmp_path_factory.mktemp("baselines") / "run"
    shutil.copytree(rl_run, root, symlinks=True)
    cfg = load_config(None, [a for a in RUN_ARGS if a != "--set"] + ["rl.baselines=true"])
    filt, _ = stages()
    outcome = run_stage(filt, cfg, Store(root))
    rows = ds.dataset(root / "rl_pool").to_table().to_pylist()
    return root, outcome.report, rows


def test_every_rl_pool_row_holds_its_closed_book_and_rag_answers(with_baselines, rl_rows, rl_questions) -> None:
    root, report, rows = with_baselines
    # the same pool as without baselines: the baselines add a field, not rows
    assert [r["extra_info"]["question_id"] for r in rows] == [r["extra_info"]["question_id"] for r in rl_rows]
    assert report["baselines"]["asked"] == len(rows) and report["baselines"]["failed"] == 0
    assert report["teacher"]["calls"] == 2 * len(rows)  # two teacher calls a row, reported as the stage's usage
    index = SearchIndex.open(root / "index")
    for r in rows:
        q = Question.from_row(rl_questions[r["extra_info"]["question_id"]])
        b = r["extra_info"]["baselines"]
        assert set(b) == {"closed_book", "rag"}
        for entry in b.values():  # the scores are the run's rule on the stored answer
            assert entry["acc"] == float(grade_answer(entry["answer"], q.golds, 0.8).rule_correct)
            best = max((f1_score(entry["answer"], g) for g in q.golds), default=0.0) if entry["answer"] else 0.0
            assert entry["f1"] == pytest.approx(best)
        # naive RAG reads one search for the question, the answer page masked as in the rollouts
        box = Toolbox(index, ToolsConfig(), mask_page_ids=[q.answer_page_id])
        shown = json.loads(box.call("search", {"query": q.question, "k": 5})[0])
        assert q.answer_page_id not in [x["page_id"] for x in shown]
        assert [p["title"] for p in rag_pages(box, q, 5)] == [x["title"] for x in shown]


def test_gain_scores_a_rollout_against_the_stored_baselines(with_baselines) -> None:
    _, _, rows = with_baselines
    for r in rows:
        gt, extra = r["reward_model"]["ground_truth"], r["extra_info"]
        base = max(extra["baselines"]["closed_book"]["acc"], extra["baselines"]["rag"]["acc"])
        call = '<tool_call>\n{"name": "search", "arguments": {"query": "x"}}\n</tool_call>'
        obs = 'user\n<tool_response>\n[]\n</tool_response>\nassistant\n'
        right = f"{call}{obs}<answer>{gt['target'][0]}</answer>"
        wrong = f"{call}{obs}<answer>Nowhere In Particular</answer>"
        assert compute_score(r["data_source"], right, gt, extra, mode="gain")["score"] == 1.5 - 0.5 * base
        assert compute_score(r["data_source"], wrong, gt, extra, mode="gain")["score"] == 0.5 - 0.5 * base
