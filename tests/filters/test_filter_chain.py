"""Each filter's drop reason fires on a trace built to violate it, and a clean trace passes them all."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from filters.base import FilterContext, FilterRunner, available, build_chain, normalise_verdict
from filters.config import DEFAULT_CHAIN, FiltersConfig
from filters.correctness import grade
from filters.decontaminate import EvalSet
from helpers.tinytok import save_tokenizer
from helpers.traces import call, make_question, make_trace
from synth.engine.config import ConfigError
from synth.engine.errors import InputError
from synth.engine.records import Trace


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from synth.tokenizer.tokens import load_tokenizer

    return load_tokenizer(save_tokenizer(tmp_path_factory.mktemp("tok") / "tok"))


# make_trace's observations are placeholders; this question names everything its default calls act on,
# so a trace asking it passes the grounded filter (tests/filters/test_filter_grounded.py tests that filter).
GROUNDED = "Start at Alpha Station; its page p1 leads to p2, and on to Delta City. Which city?"


def run_chain(traces: list[Trace], tokenizer=None, **cfg):
    if tokenizer is None:
        # Without a tokenizer, the chain less `length`, and less `grounded` (these traces are not grounded).
        cfg.setdefault("chain", [n for n in DEFAULT_CHAIN if n not in ("length", "grounded")])
    fcfg = FiltersConfig(**cfg)
    q = make_question()
    ctx = FilterContext({q.question_id: q}, tokenizer=tokenizer)
    runner = FilterRunner(build_chain(fcfg.chain, fcfg))
    kept = list(runner.run(traces, ctx))
    return kept, runner, ctx


def only_reason(trace: Trace, tokenizer=None, **cfg) -> tuple[str | None, str | None]:
    kept, runner, _ = run_chain([trace], tokenizer, **cfg)
    if kept:
        return None, None
    (_, reason, detail), = runner.rejects
    assert runner.dropped == {reason: 1}
    return reason, detail


def test_registry_has_every_family() -> None:
    assert set(available()) == set(DEFAULT_CHAIN)
    for name, cls in available().items():
        assert cls.name == name and cls.reasons


def test_clean_trace_passes_the_whole_default_chain(tokenizer, tmp_path: Path) -> None:
    evals = tmp_path / "eval.txt"
    evals.write_text("Who wrote the novel about a white whale hunted by a captain?\n")
    kept, runner, ctx = run_chain([make_trace(question=GROUNDED)], tokenizer, decontaminate=[str(evals)],
                                  max_tokens=100_000)
    assert len(kept) == 1 and runner.dropped == {} and runner.input == runner.output == 1
    assert ctx.measures["t1"]["n_tokens"] > 0


def test_a_failed_trajectory_is_never_called_malformed() -> None:
    """A trace cut by a teacher failure (which the rollout stage no longer commits) that reaches the filter
    anyway is dropped as what it is, with the teacher's reason, not as ``format``."""
    msgs = json.loads(make_trace().messages)[:3]  # the question and one assistant turn, then the call failed
    failed = replace(make_trace(), messages=json.dumps(msgs), stop_reason="teacher_failed",
                     error="http_400: maximum context length is 4096 tokens", final_answer=None)
    assert only_reason(failed) == ("teacher_failed", "the teacher call failed: http_400: maximum context length is "
                                                     "4096 tokens")


def test_format_reasons() -> None:
    base = make_trace()
    msgs = json.loads(base.messages)

    def with_messages(m):
        return replace(make_trace(), messages=json.dumps(m))

    assert only_reason(replace(base, messages="{not json"))[0] == "format"
    bad_role = [dict(m) for m in msgs]
    bad_role[1]["role"] = "human"
    assert only_reason(with_messages(bad_role)) == ("format", "message 1 has role 'human'")
    unknown = json.loads(base.messages)
    unknown[2]["tool_calls"][0]["function"]["name"] = "browse"
    assert "unknown tool 'browse'" in only_reason(with_messages(unknown))[1]
    not_obj = json.loads(base.messages)
    not_obj[2]["tool_calls"][0]["function"]["arguments"] = json.dumps(["Alpha"])
    assert "not a JSON object" in only_reason(with_messages(not_obj))[1]
    dict_args = json.loads(base.messages)
    dict_args[2]["tool_calls"][0]["function"]["arguments"] = {"query": "x"}
    assert "not a JSON string" in only_reason(with_messages(dict_args))[1]
    orphan = json.loads(base.messages)
    orphan[3]["tool_call_id"] = "nope"
    assert "answers 'nope'" in only_reason(with_messages(orphan))[1]
    unanswered = json.loads(base.messages)
    del unanswered[3]
    assert "not answered" in only_reason(with_messages(unanswered))[1]
    no_answer = make_trace(final_text="I think it is Delta City.")
    assert only_reason(no_answer) == ("format", "the last turn has no <answer>...</answer>")
    assert only_reason(replace(base, tools="{}"))[0] == "format"


def test_wrong_answer_and_aliases() -> None:
    assert only_reason(make_trace(answer="Echo Town"))[0] == "wrong_answer"
    assert only_reason(make_trace(answer=None, final_text="<answer></answer>"))[0] == "format"
    assert only_reason(make_trace(answer="the delta city!")) == (None, None)  # normalised exact match
    q = make_question(aliases=["Delta"])
    assert grade("DELTA", q, 0.8).rule_correct
    assert grade("Delta City", q, 0.8).em
    g = grade("Delta City centre", make_question(), 0.8)  # F1 = 0.8 (precision 2/3, recall 1)
    assert not g.em and g.f1 == pytest.approx(0.8) and g.rule_correct
    assert not grade("Delta City centre", make_question(), 0.81).rule_correct


def test_low_step_reasons() -> None:
    few = make_trace(calls=[call("search", query="Alpha"), call("open", page="p1")])
    assert only_reason(few)[0] == "too_few_steps"
    many = make_trace(calls=[call("search", query=f"q{i}") for i in range(5)])
    assert only_reason(many, max_tool_calls=4) == ("too_many_steps", "5 tool calls > 4")
    assert only_reason(many, max_tool_calls=5) == (None, None)


def test_repeated_calls_use_canonical_arguments() -> None:
    calls = [call("search", query="Alpha", k=5), call("open", page="p1"), call("search", k=5, query="Alpha")]
    reason, detail = only_reason(make_trace(calls=calls))
    assert reason == "repeated_calls" and "made 2 times" in detail
    assert only_reason(make_trace(calls=calls), max_repeats=2) == (None, None)
    distinct = [call("search", query="Alpha"), call("search", query="Alpha", k=3), call("open", page="p1")]
    assert only_reason(make_trace(calls=distinct)) == (None, None)


def test_too_long_is_dropped_never_truncated(tokenizer) -> None:
    trace = make_trace(question=GROUNDED)
    _, _, ctx = run_chain([trace], tokenizer)
    n = ctx.measures["t1"]["n_tokens"]
    assert only_reason(trace, tokenizer, max_tokens=n) == (None, None)
    assert only_reason(trace, tokenizer, max_tokens=n - 1) == ("too_long", f"{n} tokens > {n - 1}")


def test_contaminated_ngrams_and_short_texts(tmp_path: Path) -> None:
    q = make_question()
    text = q.question
    words = text.split()
    (tmp_path / "e.jsonl").write_text(json.dumps({"question": "Unrelated: " + " ".join(words[2:11]) + " etc"}) + "\n")
    reason, detail = only_reason(make_trace(), decontaminate=[str(tmp_path / "e.jsonl")], ngram=8)
    assert reason == "contaminated" and detail
    (tmp_path / "far.txt").write_text("A completely different question about rivers and mountains of Chile?\n")
    assert only_reason(make_trace(), decontaminate=[str(tmp_path / "far.txt")]) == (None, None)
    pq.write_table(pa.table({"question": ["Alpha   STATION, and follow"]}), tmp_path / "short.parquet")
    # An evaluation question shorter than n words contaminates every question containing it.
    assert only_reason(make_trace(), decontaminate=[str(tmp_path / "short.parquet")])[0] == "contaminated"
    ev = EvalSet(["The quick brown fox jumps over the lazy dog near the river bank"], n=8)
    assert ev.match("brown fox jumps") == "brown fox jumps"  # a short question inside an evaluation one
    assert ev.match("fox brown jumps") is None
    assert ev.match("a QUICK brown fox jumps over the lazy dog near here") == "quick brown fox jumps over lazy dog near"


def test_eval_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="filters.decontaminate"):
        only_reason(make_trace(), decontaminate=[str(tmp_path / "missing.txt")])
    (tmp_path / "bad.jsonl").write_text('{"q": 1}\n')
    with pytest.raises(InputError, match="line 1"):
        only_reason(make_trace(), decontaminate=[str(tmp_path / "bad.jsonl")])


def test_runner_stops_at_first_drop_and_keeps_rejects() -> None:
    rows = [make_trace("ok"), make_trace("few", calls=[call("open", page="p1")], answer="Nope"),
            make_trace("wrong", answer="Echo")]
    kept, runner, _ = run_chain(rows)
    assert [t.trace_id for t in kept] == ["ok"]
    # "few" is wrong too, but correctness comes first in the chain, so that is its one reason.
    assert [(t.trace_id, reason) for t, reason, _ in runner.rejects] == [("few", "wrong_answer"),
                                                                           ("wrong", "wrong_answer")]
    assert runner.input == runner.output + sum(runner.dropped.values())


def test_verdict_shapes() -> None:
    assert normalise_verdict(True, "x") == (True, None, None)
    assert normalise_verdict((False, "r"), "x") == (False, "r", None)
    assert normalise_verdict((False, "r", "why"), "x") == (False, "r", "why")
    assert normalise_verdict(False, "x") == (False, "x", None)
    with pytest.raises(TypeError):
        normalise_verdict("yes", "x")


def test_config_names_the_bad_filter() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="unknown filter 'lenght'"):
        FiltersConfig(chain=["format", "lenght"])
    with pytest.raises(ValidationError, match="min_tool_calls"):
        FiltersConfig(min_tool_calls=9, max_tool_calls=3)


def test_a_filter_reads_its_thresholds_from_the_keys_its_fields_name() -> None:
    cfg = FiltersConfig(min_tool_calls=5, max_tool_calls=9, max_repeats=3, min_f1=0.5)
    chain = {f.name: f for f in build_chain(["low_step", "repeats", "correctness"], cfg)}
    assert (chain["low_step"].min_tool_calls, chain["low_step"].max_tool_calls) == (5, 9)
    assert chain["repeats"].max_repeats == 3 and chain["correctness"].min_f1 == 0.5
    assert set(available()) >= {"format", "low_step", "repeats", "correctness"}


def test_register_refuses_a_filter_without_reasons_or_with_a_taken_name() -> None:
    from filters.base import REGISTRY, BaseFilter, register

    with pytest.raises(ValueError, match="at least one drop reason"):
        register("nameless_reasons")
    with pytest.raises(ValueError, match="two filters are named 'format'"):
        register("format", "format")(type("Again", (BaseFilter,), {}))
    assert REGISTRY["format"].__name__ == "FormatFilter"
