"""The report's figures and cost: what is drawn is what the run recorded.

The funnel counts one unit per panel in stage order (questions, then traces down to the kept
SFT rows, one bar per filter reason in chain order); pass@n bars sit on k/n; the tool-call
histogram marks T_min; the teacher's cost is priced from recorded tokens at the price
configured when the report runs, so a price set later reruns only the report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.markdown import code_spans, inline_texts, raw_html, tables

from synth.report import plots
from synth.report.stage import TraceFacts, build_report, funnel_steps, main_n, pass_counts, teacher_totals
from synth.teacher.config import Price
from synth.teacher.stats import TeacherUsage
from synth.engine.store import Store

ROOT = Path(__file__).resolve().parents[3]

# A run as its reports record it: big upstream stages (pages, graph links, walks) that the funnel must not show.
REPORTS = {
    "ingest": {"stage": "ingest", "input": 10_033, "output": 10_033, "dropped": {}},
    "graph": {"stage": "graph", "input": 70_475, "output": 70_475, "dropped": {}},
    "walks": {"stage": "walks", "input": 578, "output": 204, "dropped": {"dead_end": 374}},
    "questions": {"stage": "questions", "input": 10, "output": 7, "dropped": {"ambiguous_hop": 2, "prose": 1}},
    "rollout": {"stage": "rollout", "input": 28, "output": 28, "n": 4, "dropped": {}},
    "filter": {"stage": "filter", "input": 28, "output": 5,
               "chain": ["format", "correctness", "low_step"],
               "reason_order": ["format", "wrong_answer", "too_few_steps", "too_many_steps"],
               "dropped": {"wrong_answer": 6, "too_few_steps": 3, "held_out": 8, "not_best": 6}},
}


def _bars(ax) -> list[tuple[str, float]]:
    """(y tick label, bar width) of a horizontal bar chart, top to bottom."""
    labels = {round(t.get_position()[1]): t.get_text() for t in ax.get_yticklabels()}
    bars = sorted(ax.patches, key=lambda p: -(p.get_y() + p.get_height() / 2))
    return [(labels[round(p.get_y() + p.get_height() / 2)], p.get_width()) for p in bars]


# ---- funnel ----------------------------------------------------------------------------------

def test_funnel_steps_are_one_unit_each_in_chain_order() -> None:
    steps = funnel_steps(REPORTS)
    got = [(s["label"], s["count"], s["unit"], s["dropped"]) for s in steps]
    assert got == [
        ("drafted", 10, "questions", None),
        ("accepted by the validators", 7, "questions", 3),
        ("rollouts (n = 4 per question)", 28, "traces", None),
        ("after format", 28, "traces", 0),
        ("after wrong_answer", 22, "traces", 6),
        ("after too_few_steps", 19, "traces", 3),
        ("after too_many_steps", 19, "traces", 0),
        ("after held_out (sft-split questions only)", 11, "traces", 8),
        ("kept: best of n (SFT rows)", 5, "SFT rows", 6),
    ]
    assert steps[1]["note"] == "ambiguous_hop 2, prose 1" and steps[-1]["note"] == "not_best"


def test_funnel_counts_come_from_verdicts_when_the_report_has_none() -> None:
    reports = {"filter": {"stage": "filter", "input": 6, "output": 1}}
    verdicts = ([{"kept": False, "reason": "wrong_answer"}] * 2 + [{"kept": False, "reason": "not_best"}] * 3
                + [{"kept": True, "reason": None}])
    steps = funnel_steps(reports, verdicts)
    assert [(s["label"], s["count"], s["dropped"]) for s in steps] == [
        ("rollouts", 6, None), ("after wrong_answer", 4, 2), ("after held_out (sft-split questions only)", 4, 0),
        ("kept: best of n (SFT rows)", 1, 3)]


def test_funnel_figure_draws_the_steps_on_a_linear_axis_without_graph_stages() -> None:
    steps = funnel_steps(REPORTS)
    fig = plots.funnel_figure(steps)
    q_ax, t_ax = fig.axes
    assert q_ax.get_xscale() == t_ax.get_xscale() == "linear"
    assert q_ax.get_ylabel() == "questions" and t_ax.get_ylabel() == "traces"
    drawn = _bars(q_ax) + _bars(t_ax)
    assert drawn == [(s["label"], s["count"]) for s in steps]
    texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
    labels = " ".join(label for label, _ in drawn)
    for word in ("graph", "edge", "page", "walk", "ingest", "70,475", "10,033"):
        assert word not in labels and word not in texts, word
    # Every bar says its unit, and what its step dropped.
    assert "7 questions  (-3: ambiguous_hop 2, prose 1)" in texts
    assert "22 traces  (-6)" in texts and "5 SFT rows  (-6: not_best)" in texts


def test_report_funnel_caption_and_table(tmp_path: Path) -> None:
    store = Store(tmp_path / "run")
    (store.root / "reports").mkdir(parents=True)
    for name, r in REPORTS.items():
        (store.root / "reports" / f"{name}.json").write_text(json.dumps(r))
    rep = build_report(store, tmp_path / "out")
    index = (tmp_path / "out" / "index.md").read_text()
    shown = " ".join(inline_texts(index))
    assert "format -> correctness -> low_step" in shown and "Linear scale" in shown
    assert "log scale" not in index and "kept SFT samples; log" not in index
    rows = [row for table in tables(index) for row in table]
    assert ["after wrong_answer", "22 traces", "6", "-"] in rows
    assert ["kept: best of n (SFT rows)", "5 SFT rows", "6", "not_best"] in rows
    assert ["graph", "links", "70,475"] in [r[:3] for r in rows]  # the stage table keeps every stage, with its unit
    assert rep.summary["funnel_steps"][-1]["count"] == 5


# ---- pass@n ----------------------------------------------------------------------------------

def test_pass_at_n_bars_sit_on_k_over_n() -> None:
    fig = plots.pass_at_n_figure({0: 2, 3: 5, 4: 9}, 4)
    ax = fig.axes[0]
    centres = [p.get_x() + p.get_width() / 2 for p in ax.patches]
    assert centres == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])
    assert [p.get_height() for p in ax.patches] == [2, 0, 0, 5, 9]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0/4", "1/4", "2/4", "3/4", "4/4"]
    assert ax.get_xticks() == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])
    three = plots.pass_at_n_figure({1: 1}, 3).axes[0]
    assert [p.get_x() + p.get_width() / 2 for p in three.patches] == pytest.approx([0, 1 / 3, 2 / 3, 1])


def _fact(tid: str, qid: str, correct: bool, calls: int = 4, kept: bool | None = None) -> TraceFacts:
    return TraceFacts(tid, qid, "t", calls + 1, calls, [1], True, correct, 10, kept=kept)


def test_pass_counts_group_questions_by_n() -> None:
    facts = ([_fact(f"a{i}", "a", i < 3) for i in range(4)] + [_fact(f"b{i}", "b", True) for i in range(4)]
             + [_fact(f"c{i}", "c", i == 0) for i in range(3)])
    counts = pass_counts(facts)
    assert counts == {3: {1: 1}, 4: {3: 1, 4: 1}}
    assert main_n(counts) == 4


def test_report_pass_at_n_caption_names_left_out_questions(tmp_path: Path) -> None:
    from helpers.filterstore import publish
    from helpers.traces import make_trace
    from synth.engine.records import Trace

    store = Store(tmp_path / "run")
    traces = [make_trace(f"a{i}", "qa", sample_index=i) for i in range(4)]
    traces += [make_trace(f"b{i}", "qb", sample_index=i) for i in range(2)]
    publish(store, "rollout", {"traces": Trace.to_table(traces)})
    build_report(store, tmp_path / "out")
    index = (tmp_path / "out" / "index.md").read_text()
    assert "n = 4 rollouts" in index and "Left out: 1 question with n = 2" in index


def test_recorded_strings_stay_text_in_the_report(tmp_path: Path) -> None:
    """A teacher model name and a run folder that hold Markdown and HTML show as written, and break no table."""
    from helpers.filterstore import publish
    from helpers.traces import make_trace
    from synth.engine.records import Trace
    from synth.text.markdown import one_line

    hostile = "evil` | x | <script>alert(1)</script>\n| injected | row |"
    store = Store(tmp_path / "run`| <b>x</b>")
    traces = [make_trace(f"a{i}", "qa", sample_index=i, teacher_model=hostile) for i in range(4)]
    publish(store, "rollout", {"traces": Trace.to_table(traces)})
    build_report(store, tmp_path / "out")
    index = (tmp_path / "out" / "index.md").read_text()
    assert raw_html(index) == []
    assert code_spans(index)[0] == store.root.name  # the heading names the folder whole
    for header in (["teacher", "traces", "recovered", "median recovery turn"], ["teacher", "answered"]):
        table = next(t for t in tables(index) if t[0][:len(header)] == header)
        assert [row[0] for row in table[1:]] == [one_line(hostile)]  # one row, the name whole in its cell
        assert all(len(row) == len(table[0]) for row in table)


# ---- one value, no histogram ----------------------------------------------------------------

def test_one_value_is_the_value_every_point_of_every_series_has() -> None:
    assert plots.one_value([0, 0, 0]) == 0 and plots.one_value([8], [8, 8]) == 8
    assert plots.one_value([0, 1]) is None and plots.one_value([8, 8], [7]) is None
    assert plots.one_value([]) is None and plots.one_value([], []) is None


def _verdicts_run(root: Path, ungrounded: list[int]) -> Store:
    """Traces of question qa, one per value of ``ungrounded``, with the filter's verdicts on them."""
    import pyarrow as pa
    from helpers.filterstore import publish
    from helpers.traces import make_question, make_trace
    from synth.engine.records import VERDICT_SCHEMA, Question, Trace

    store = Store(root)
    traces = [make_trace(f"t{i}", "qa", sample_index=i) for i in range(len(ungrounded))]
    publish(store, "questions", {"questions": Question.to_table([make_question("qa")])})
    publish(store, "rollout", {"traces": Trace.to_table(traces)})
    verdicts = [{"trace_id": t.trace_id, "question_id": "qa", "teacher_model": "teacher-a", "split": "sft",
                 "rule_correct": True, "em": True, "f1": 1.0, "judge_correct": None, "correct": True, "rubric_raw": 1.0,
                 "rubric": 1.0, "n_tokens": None, "ungrounded_steps": u, "kept": i == 0, "reason": None if i == 0
                 else "not_best"} for i, (t, u) in enumerate(zip(traces, ungrounded))]
    publish(store, "filter", {"filter/verdicts": pa.Table.from_pylist(verdicts, schema=VERDICT_SCHEMA)})
    return store


def test_a_histogram_of_one_value_is_one_line_not_a_figure(tmp_path: Path) -> None:
    """Every trace has 0 ungrounded steps (the demo's 482 do): the report says so in one line and draws no
    one-bar histogram; with two values the figure is drawn."""
    out = tmp_path / "out"
    (out).mkdir()
    (out / "ungrounded.png").write_bytes(b"an earlier report's figure")
    rep = build_report(_verdicts_run(tmp_path / "flat", [0, 0, 0, 0, 0]), out)
    index = (out / "index.md").read_text()
    assert "Ungrounded steps per trace: one value, 0, for all 5 traces; no histogram is drawn." in inline_texts(index)
    assert "ungrounded.png" not in rep.figures and "ungrounded.png" not in index
    assert not (out / "ungrounded.png").exists()  # no stale figure beside the report either
    assert rep.summary["one_value_figures"]["ungrounded.png"] == {"value": 0, "count": 5}
    assert "hops.png" not in rep.figures and "Hops per question: one value, 3, for the only question" in index

    rep = build_report(_verdicts_run(tmp_path / "mixed", [0, 0, 2, 0, 1]), tmp_path / "out2")
    assert "ungrounded.png" in rep.figures and (tmp_path / "out2" / "ungrounded.png").stat().st_size > 1000
    assert "ungrounded.png" not in rep.summary.get("one_value_figures", {})


# ---- tool calls ------------------------------------------------------------------------------

def _line(ax, gid: str):
    found = [ln for ln in ax.get_lines() if ln.get_gid() == gid]
    return found[0] if found else None


def test_tool_calls_histogram_marks_t_min_and_t_max() -> None:
    calls = [5, 6, 6, 7, 9]
    kept = [True, False, True, True, False]
    ax = plots.tool_calls_figure(calls, kept, t_min=3, t_max=60).axes[0]
    t_min = _line(ax, "t_min")
    assert list(t_min.get_xdata()) == [2.5, 2.5]  # between the dropped bin 2 and the kept bin 3
    assert ax.get_xlim()[0] <= 2.5 <= ax.get_xlim()[1]
    assert _line(ax, "t_max") is None  # 60 is far off this data: named in the legend instead
    assert any("T_max = 60" in t.get_text() for t in ax.get_legend().get_texts())
    # Stacked kept / not kept: the heights per bin add up to the traces with that many calls.
    heights: dict[float, float] = {}
    for p in ax.patches:
        heights[p.get_x() + p.get_width() / 2] = heights.get(p.get_x() + p.get_width() / 2, 0) + p.get_height()
    assert heights[6] == 2 and heights[9] == 1 and heights[3] == 0

    near = plots.tool_calls_figure(calls, None, t_min=6, t_max=8).axes[0]
    assert list(_line(near, "t_min").get_xdata()) == [5.5, 5.5]
    assert list(_line(near, "t_max").get_xdata()) == [8.5, 8.5]


def test_tool_mix_is_not_the_tool_call_histogram() -> None:
    ax = plots.tool_mix_figure({"correct": {"search": 2, "open": 3, "find": 1, "errors": 0},
                                "wrong": {"search": 4, "open": 1, "find": 0, "errors": 2}}).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["search", "open", "find", "tool errors"]
    assert sorted(p.get_height() for p in ax.patches) == [0, 0, 1, 1, 2, 2, 3, 4]


# ---- cost ------------------------------------------------------------------------------------

def test_priced_usage_from_recorded_tokens() -> None:
    t = {"calls": 10, "requests": 6, "prompt_tokens": 2_000_000, "completion_tokens": 500_000,
         "cached_prompt_tokens": 1_000_000, "cached_completion_tokens": 100_000}
    u = TeacherUsage.from_report(t).priced(Price(prompt=1.0, completion=4.0))
    assert u.cost_usd == pytest.approx(2.0 + 2.0)
    assert u.cost_with_cache_usd == pytest.approx(3.0 + 2.4)
    assert "cost_usd" not in TeacherUsage.from_report(t).priced().as_dict()  # no price now, none recorded: no cost
    recorded = TeacherUsage.from_report({**t, "cost_usd": 0.7, "cost_saved_by_cache_usd": 0.1}).priced()
    assert recorded.cost_usd == 0.7 and recorded.cost_with_cache_usd == pytest.approx(0.8)
    per = teacher_totals({"questions": {"teacher": t}, "rollout": {"teacher": {**t, "cost_usd": 1.0}}})
    assert "cost_usd" not in per["total"]  # one stage unpriced: no total


SMALL = ["questions.route=false", "walk.num_walks=60", "walk.hops=3", "expand.num_subgraphs=2", "rollout.n=2"]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The pipeline up to the report on the demo corpus, without a price."""
    from flows.config import load_config
    from flows.stages import PIPELINE
    from synth.corpus.demo import build_demo_corpus

    src = tmp_path_factory.mktemp("source") / "kilt_demo.jsonl"
    build_demo_corpus(src)
    overrides = [*SMALL, f"corpus.source={src}"]
    store = Store(tmp_path_factory.mktemp("run"))
    first = PIPELINE.run(PIPELINE.upto("report"), load_config(str(ROOT / "configs" / "demo.yaml"), overrides), store)
    return store, overrides, first


def test_a_price_set_later_reruns_only_the_report_and_prices_the_recorded_tokens(demo_run) -> None:
    from flows.config import load_config
    from flows.stages import PIPELINE

    store, overrides, first = demo_run
    assert all(not o.reused for o in first) and sum(o.teacher_calls for o in first) > 0
    summary = json.loads((store.root / "reports" / "report.json").read_text())["summary"]
    assert "cost_usd" not in summary["teacher"]["total"] and summary["price_per_mtok"] is None
    index = (store.root / "report" / "index.md").read_text()
    assert "teacher.price_per_mtok is not set" in index

    cfg = load_config(str(ROOT / "configs" / "demo.yaml"),
                      [*overrides, "teacher.price_per_mtok={prompt: 2.0, completion: 8.0}"])
    second = {o.name: o for o in PIPELINE.run(PIPELINE.upto("report"), cfg, store)}
    assert sum(o.teacher_calls for o in second.values()) == 0
    assert [n for n, o in second.items() if not o.reused] == ["report"]
    assert second["questions"].reused and second["rollout"].reused

    reports = {s: json.loads((store.root / "reports" / f"{s}.json").read_text()) for s in ("questions", "rollout")}
    want = sum((r["teacher"]["prompt_tokens"] * 2.0 + r["teacher"]["completion_tokens"] * 8.0) / 1e6
               for r in reports.values())
    assert want > 0 and all("cost_usd" not in r["teacher"] for r in reports.values())  # nothing was recorded
    summary = json.loads((store.root / "reports" / "report.json").read_text())["summary"]
    assert summary["teacher"]["total"]["cost_usd"] == pytest.approx(want, abs=1e-5)
    kept = json.loads((store.root / "reports" / "filter.json").read_text())["output"]
    assert summary["per_kept_sample"]["cost_usd"] == pytest.approx(want / kept, abs=1e-5)
    index = (store.root / "report" / "index.md").read_text()
    assert "2 per million prompt tokens, 8 per million completion tokens" in index
    # Effective depth against nominal: every question kept needs every hop, and the drafts checked are shown too.
    assert "## Effective depth" in index and "| kept |" in index and "100.0% |" in index
    for png in ("funnel.png", "pass_at_n.png", "tool_calls.png", "tools.png"):
        assert (store.root / "report" / png).stat().st_size > 1000, png
    # Every draft of these 3-hop walks needs all 3 hops: one value, said in a line rather than drawn as one bar.
    assert "Effective against nominal depth (questions checked): one value, 3, for all " in index
    assert not (store.root / "report" / "effective_depth.png").exists()
    assert not (store.root / "report" / "turns.png").exists()


def test_dataset_card_prices_recorded_tokens_with_the_price_set_now() -> None:
    from synth.publish.card import teacher_usage

    reports = {"rollout": {"teacher": {"prompt_tokens": 1_000_000, "completion_tokens": 100_000,
                                       "cached_prompt_tokens": 1_000_000, "cached_completion_tokens": 0}}}
    assert teacher_usage(reports, ("rollout",))["rollout"]["cost_usd"] is None  # not priced
    u = teacher_usage(reports, ("rollout",), Price(prompt=0.5, completion=10.0))["rollout"]
    assert u == {"prompt_tokens": 2_000_000, "server_cached_prompt_tokens": 0, "completion_tokens": 100_000,
                 "cost_usd": pytest.approx(2.0)}
