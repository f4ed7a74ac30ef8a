"""``hopforge publish``: layout, card, deterministic shards, the local and Hub targets.

The output folder is made by hand (tables in the record schemas, committed through the
store as the stages that make them, with minimal reports).  The Hub cannot be reached
from here and no local Hub server is available, so the ``hub:`` target is tested with
``HfApi.create_repo`` / ``list_repo_tree`` / ``create_commit`` monkeypatched onto an
in-memory repo: that checks which files would be uploaded or deleted and how the token
is passed, not the Hub's own behaviour.

The questions of the hand-made DIR have fixed splits (``SPLIT_OF``): 7 sft, 3 rl and 2 eval
questions; traces follow their question; ``sft`` and ``longctx`` hold only sft rows and
``rl_pool`` only rl ones, as the stages write them.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from helpers.markdown import code_spans, inline_texts, raw_html, tables
from pydantic import Field

from filters.band import rl_row
from synth.engine.records import LONGCTX_SCHEMA, PREFERENCE_SCHEMA, RL_SCHEMA
from filters.preference import WRONG_ANSWER, preference_row
from filters.sftrows import sft_row
from helpers.traces import make_question, make_trace
from synth.publish.card import prompt_hashes
from flows.config import Config
from synth.publish.publisher import (OWNED_FILE, PublishError, git_blob_sha1, parse_target, publish, shard_count,
                                     shard_of, shard_path)
from synth.publish.config import PublishConfig, ShardRows
from synth.engine.records import SFT_SCHEMA, Question, Trace
from flows.stages import BY_NAME
from synth.engine.store import Store, write_parquet_atomic
from synth.text.markdown import one_line

HF_TOKEN = "hf_TESTTOKEN_do_not_leak_7f3a9c"
OPENAI_KEY = "sk-TESTKEY-do-not-leak-51e0b2"

if "publish" in Config.model_fields:
    RunConfig = Config
else:
    class RunConfig(Config):  # type: ignore[no-redef]
        """The run config with the `publish` section (until flows.config wires it)."""

        publish: PublishConfig = Field(default_factory=PublishConfig)

N_Q, N_SFT, N_PREF = 12, 20, 6
SFT_QS = 7  # q000..q006 are sft questions, q007..q009 rl, q010..q011 eval


def split_of(i: int) -> str:
    """The split of question ``q{i:03d}``."""
    return "sft" if i < SFT_QS else "rl" if i < 10 else "eval"


# rows per split of every config of build_dir (traces t000..t023 answer q{i % 12})
SPLIT_ROWS = {"sft": {"sft": N_SFT}, "preference": {"sft": N_PREF}, "longctx": {"sft": 5}, "rl_pool": {"rl": 3},
              "questions": {"sft": 7, "rl": 3, "eval": 2}, "traces": {"sft": 14, "rl": 6, "eval": 4}}
TEACHER_Q = {"prompt_tokens": 1000, "completion_tokens": 400, "cached_prompt_tokens": 200,
             "cached_completion_tokens": 100, "cost_usd": 0.01, "cost_saved_by_cache_usd": 0.002}
TEACHER_R = {"prompt_tokens": 5000, "completion_tokens": 1100, "cached_prompt_tokens": 0,
             "cached_completion_tokens": 0, "cost_usd": 0.05, "cost_saved_by_cache_usd": 0.0}


def run_config(**rows: int) -> Config:
    return RunConfig(publish=PublishConfig(rows_per_shard=ShardRows(**rows)))


def _commit(store: Store, stage: str, tables: dict[str, pa.Table], report: dict, cfg: Config,
            inputs: tuple[str, ...] = (), tag: str = "1") -> None:
    key = f"{stage}-{tag}"
    for rel, t in tables.items():
        write_parquet_atomic(t, store.partial_dir(stage, key) / rel / "part-00000.parquet")
    entry = {"key": key, "inputs": {u: store.stage_entry(u)["key"] for u in inputs}}
    if stage in BY_NAME:  # as the runner records it: the sections and their hash
        entry["sections"] = list(BY_NAME[stage].sections)
        entry["config"] = cfg.section_hash(*BY_NAME[stage].sections)
    store.commit(stage, key, list(tables), entry, dict(report, stage=stage, key=key))


def sft_table(rubric_of: dict[str, float] | None = None, n: int = N_SFT) -> pa.Table:
    """Kept traces of the sft questions only (the filter stage never keeps another split's)."""
    rows = []
    for i in range(n):
        tr = make_trace(f"t{i:03d}", f"q{i % SFT_QS:03d}", teacher_model="teacher-a", split="sft")
        rows.append(sft_row(tr, (rubric_of or {}).get(tr.trace_id, 1.0)))
    return pa.Table.from_pylist(rows, schema=SFT_SCHEMA)


def preference_table(n: int = N_PREF) -> pa.Table:
    """DPO pairs of sft questions: each kept trace against a wrong-answer rollout of its question."""
    rows = []
    for i in range(n):
        chosen = make_trace(f"t{i:03d}", f"q{i % SFT_QS:03d}", split="sft")
        rejected = make_trace(f"w{i:03d}", f"q{i % SFT_QS:03d}", answer="Echo Town", split="sft")
        rows.append(preference_row(chosen, rejected, WRONG_ANSWER, {chosen.trace_id: 1.0}))
    return pa.Table.from_pylist(rows, schema=PREFERENCE_SCHEMA)


def make_questions(n: int = N_Q, **edits: dict) -> list:
    """``q000..`` with their fixed splits; ``edits`` maps a question id to fields to replace."""
    out = []
    for i in range(n):
        qid = f"q{i:03d}"
        out.append(make_question(qid, split=split_of(i), **edits.get(qid, {})))
    return out


def make_traces(n_q: int = N_Q, **answers: str) -> list:
    """Two traces per question; ``answers`` maps a trace id to another final answer."""
    return [make_trace(f"t{i:03d}", f"q{i % n_q:03d}", sample_index=i // n_q, split=split_of(i % n_q),
                       answer=answers.get(f"t{i:03d}", "Delta City")) for i in range(2 * n_q)]


def longctx_table(n: int = 5) -> pa.Table:
    rows = [{"sample_id": f"q{i:03d}-1024", "question_id": f"q{i:03d}", "target_length": 1024,
             "prompt": "Document [1] ...", "completion": "Delta City", "n_tokens": 900, "doc_page_ids": ["p0"],
             "doc_tiers": [0], "doc_n_tokens": [900], "gold_positions": [0], "truncated_page_id": None,
             "n_gold": 1, "n_tier1": 0, "n_tier2": 0, "answer_aliases": [], "split": "sft"} for i in range(n)]
    return pa.Table.from_pylist(rows, schema=LONGCTX_SCHEMA)


def rl_table(questions: list, which: tuple[int, ...] = (7, 8, 9)) -> pa.Table:
    rl = [rl_row(questions[i], [{"role": "user", "content": "Q?"}], "[]", 2, 1, k) for k, i in enumerate(which)]
    return pa.Table.from_pylist(rl, schema=RL_SCHEMA)


def report(store: Store, stage: str) -> dict:
    return json.loads((store.root / "reports" / f"{stage}.json").read_text())


def recommit(store: Store, cfg: Config, tag: str, **tables: pa.Table) -> None:
    """Commit questions, rollout, filter and assemble again (as a rerun would, with new keys), each with
    its current tables unless ``tables`` replaces one (keys: questions, traces, sft, rl_pool, longctx)."""
    t = lambda name: tables[name] if name in tables else store.read(name)  # noqa: E731
    _commit(store, "questions", {"questions": t("questions")}, report(store, "questions"), cfg,
            ("ingest", "walks"), tag=tag)
    _commit(store, "rollout", {"traces": t("traces")}, report(store, "rollout"), cfg, ("questions",), tag=tag)
    _commit(store, "filter", {"sft": t("sft"), "preference": t("preference"), "rl_pool": t("rl_pool")},
            report(store, "filter"), cfg,
            ("questions", "rollout"), tag=tag)
    if (store.root / "longctx").exists():
        _commit(store, "assemble", {"longctx": t("longctx")}, report(store, "assemble"), cfg, ("questions",),
                tag=tag)


def build_dir(root: Path, cfg: Config, *, longctx: bool = True, stop_before: str | None = None) -> Store:
    """A DIR with ingest, walks, questions, rollout, filter (and assemble) committed."""
    store = Store(root)
    pages = pa.table({"page_id": ["p0"], "title": ["Alpha Station"]})
    _commit(store, "ingest", {"corpus/pages": pages},
            {"input": 100, "output": 100, "dropped": {}, "source": "/home/someone/private-dir/kilt_demo.jsonl",
             "links": {"input": 500, "output": 480, "dropped": {"self_link": 20}}}, cfg)
    _commit(store, "walks", {"walks": pa.table({"walk_id": ["w0"]})}, {"input": 30, "output": 30, "dropped": {}},
            cfg, ("ingest",))
    questions = make_questions()
    _commit(store, "questions", {"questions": Question.to_table(questions)},
            {"input": 30, "output": N_Q, "dropped": {"shortcut": 18}, "teacher": TEACHER_Q}, cfg,
            ("ingest", "walks"))
    if stop_before == "rollout":
        return store
    _commit(store, "rollout", {"traces": Trace.to_table(make_traces())},
            {"input": N_Q, "output": 2 * N_Q, "dropped": {}, "teacher": TEACHER_R}, cfg, ("questions",))
    if stop_before == "filter":
        return store
    _commit(store, "filter", {"sft": sft_table(), "preference": preference_table(), "rl_pool": rl_table(questions)},
            {"input": 24, "output": N_SFT, "dropped": {"wrong_answer": 2, "too_few_steps": 1, "not_best": 1},
             "chain": ["format", "correctness", "low_step"],
             "reason_order": ["format", "wrong_answer", "too_few_steps", "too_many_steps"], "bands": {"rl_pool": 3, "all_wrong": 1, "all_right": 2},
             "band_by": "teacher", "band_model": "teacher:m", "bands_of_splits": ["rl"], "rl_pool_rows": 3,
             "bands_by_split": {"eval": {"rl_pool": 0, "all_wrong": 1, "all_right": 1},
                                "rl": {"rl_pool": 3, "all_wrong": 1, "all_right": 2},
                                "sft": {"rl_pool": 1, "all_wrong": 0, "all_right": 6}},
             # what the student learns: the rows' context and reasoning, how answers were judged, the DPO pairs
             "sft_rows": N_SFT,
             "context": {"policy": "full", "compress_observations": True, "keep_observations": 2},
             "reasoning": {"mode": "inline", "traces": N_SFT, "traces_with_reasoning": 12, "reasoning_tokens": 300,
                           "assistant_tokens": 1200, "share_of_assistant_tokens": 0.25},
             "match": {"page": 18, "f1": 1, "other_page": 2, "qualified": 1, "none": 2},
             "answers": {"corpus": True, "aliases": {"teacher": 4, "kept": 1, "dropped": 3, "dropped_examples": []}},
             "preference": {"pairs": N_PREF, "by_rejected": {"wrong_answer": N_PREF, "lower_rubric": 0},
                            "without_rejected": 14, "prompt_mismatch": 0}},
            cfg, ("questions", "rollout"))
    if longctx:
        _commit(store, "assemble", {"longctx": longctx_table()},
                {"input": 5, "output": 5, "dropped": {}}, cfg, ("questions",))
    return store


def front(card: str) -> dict:
    head, sep, _ = card.removeprefix("---\n").partition("\n---\n")
    assert sep, "no YAML front matter"
    return yaml.safe_load(head)


def files_of(root: Path) -> dict[str, bytes]:
    """The published files (not publish's own list of them, OWNED_FILE)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != OWNED_FILE}


def data_of(root: Path) -> dict[str, bytes]:
    return {n: b for n, b in files_of(root).items() if n.startswith("data/")}


def snippet(card: str) -> str:
    """The card's load snippet (its first ```python block)."""
    return card.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.fixture()
def secrets(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)


# ---- sharding rule -------------------------------------------------------------------------------

def test_shard_rule():
    assert [shard_count(r, 4) for r in (0, 1, 4, 5, 8, 9, 16, 17, 33)] == [1, 1, 1, 2, 2, 4, 4, 8, 16]
    assert shard_path("sft", "sft", 3, 8) == "data/sft/sft-00003-of-00008.parquet"
    assert shard_path("questions", "eval", 0, 1) == "data/questions/eval-00000-of-00001.parquet"
    assert all(0 <= shard_of(f"t{i}", 8) < 8 for i in range(100))
    assert shard_of("t1", 8) == shard_of("t1", 8) and shard_of("x", 1) == 0


# ---- local target --------------------------------------------------------------------------------

def test_local_layout_per_split_and_load_dataset(tmp_path, secrets):
    import datasets

    cfg = run_config(sft=4, traces=10)
    build_dir(tmp_path / "run", cfg)
    pub = tmp_path / "pub"
    s = publish(tmp_path / "run", f"local:{pub}", cfg)
    assert s["rows"] == {"sft": N_SFT, "preference": N_PREF, "longctx": 5, "rl_pool": 3, "questions": N_Q,
                         "traces": 2 * N_Q}
    # traces: sft 14 rows -> 2 shards, rl 6 -> 1, eval 4 -> 1
    assert s["shards"] == {"sft": 8, "preference": 1, "longctx": 1, "rl_pool": 1, "questions": 3, "traces": 4}
    assert {c: {sp: v["rows"] for sp, v in per.items()} for c, per in s["splits"].items()} == SPLIT_ROWS
    assert list(s["splits"]["questions"]) == ["sft", "rl", "eval"]
    assert s["splits"]["traces"] == {"sft": {"rows": 14, "shards": 2}, "rl": {"rows": 6, "shards": 1},
                                     "eval": {"rows": 4, "shards": 1}}
    assert s["skipped"] == {} and s["deleted"] == [] and s["unchanged"] == []
    names = set(files_of(pub))
    assert names == set(s["written"])
    expect_files = {"README.md"} | {shard_path("sft", "sft", i, 8) for i in range(8)} | {
        shard_path("preference", "sft", 0, 1), shard_path("longctx", "sft", 0, 1), shard_path("rl_pool", "rl", 0, 1),
        shard_path("questions", "sft", 0, 1), shard_path("questions", "rl", 0, 1),
        shard_path("questions", "eval", 0, 1), shard_path("traces", "sft", 0, 2), shard_path("traces", "sft", 1, 2),
        shard_path("traces", "rl", 0, 1), shard_path("traces", "eval", 0, 1)}
    assert names == expect_files
    assert not any("/train-" in n for n in names)
    # every shard holds its split's rows only, sorted by id, in the hash bucket of its id
    for n in names - {"README.md"}:
        _, config, base = n.split("/")
        split, i, _, count = base.removesuffix(".parquet").split("-")
        t = pq.read_table(pub / n)
        col = t["extra_info"].combine_chunks().field("split") if config == "rl_pool" else t["split"]
        assert set(col.to_pylist()) == {split}, n
        ids = (t["extra_info"].combine_chunks().field("question_id") if config == "rl_pool"
               else t[{"sft": "trace_id", "traces": "trace_id", "longctx": "sample_id",
                       "preference": "chosen_trace_id"}.get(config, "question_id")])
        ids = ids.to_pylist()
        assert ids == sorted(ids) and {shard_of(k, int(count)) for k in ids} == {int(i)}, n
    shard_rows = [pq.ParquetFile(pub / n).metadata.num_rows for n in names if n.startswith("data/sft/")]
    assert sum(shard_rows) == N_SFT

    card = (pub / "README.md").read_text()
    meta = front(card)
    assert meta["license"] == "cc-by-sa-3.0"
    assert [c["config_name"] for c in meta["configs"]] == ["sft", "preference", "longctx", "rl_pool", "questions",
                                                           "traces"]
    by_name = {c["config_name"]: c for c in meta["configs"]}
    assert by_name["sft"]["data_files"] == [{"split": "sft", "path": "data/sft/sft-*.parquet"}]
    assert by_name["sft"]["default"] is True
    assert by_name["rl_pool"]["data_files"] == [{"split": "rl", "path": "data/rl_pool/rl-*.parquet"}]
    assert by_name["questions"]["data_files"] == [{"split": s, "path": f"data/questions/{s}-*.parquet"}
                                                  for s in ("sft", "rl", "eval")]
    assert "question-answering" in meta["task_categories"] and "wikipedia" in meta["tags"]

    cache = str(tmp_path / "hf-cache")
    for name, per in SPLIT_ROWS.items():
        for split, n in per.items():
            d = datasets.load_dataset(str(pub), name, split=split, cache_dir=cache)
            assert d.num_rows == n, (name, split)
            got = [r["split"] for r in d["extra_info"]] if name == "rl_pool" else d["split"]
            assert set(got) == {split}, (name, split)
        assert set(datasets.load_dataset(str(pub), name, cache_dir=cache)) == set(per)  # no `train` split
    with pytest.raises(ValueError, match="eval"):
        datasets.load_dataset(str(pub), "sft", split="eval", cache_dir=cache)
    held = datasets.load_dataset(str(pub), "questions", split="eval", cache_dir=cache)
    assert sorted(held["question_id"]) == ["q010", "q011"]
    sft = datasets.load_dataset(str(pub), "sft", split="sft", cache_dir=cache)
    assert sft.column_names == SFT_SCHEMA.names
    row = sft[0]
    assert isinstance(row["tools"], str) and isinstance(json.loads(row["tools"]), list)
    assert isinstance(row["messages"], list) and row["messages"][0]["role"] == "system"
    assert isinstance(row["messages"][2]["tool_calls"][0]["function"]["arguments"], str)
    assert sorted(sft["trace_id"]) == [f"t{i:03d}" for i in range(N_SFT)]
    rl = datasets.load_dataset(str(pub), "rl_pool", split="rl", cache_dir=cache)
    assert rl[0]["reward_model"]["ground_truth"]["target"] == ["Delta City"]


def test_card_split_table_and_load_snippet(tmp_path, secrets, monkeypatch):
    import datasets

    cfg = run_config(sft=4, traces=10)
    build_dir(tmp_path / "run", cfg)
    pub = tmp_path / "pub"
    publish(tmp_path / "run", f"local:{pub}", cfg)
    card = (pub / "README.md").read_text()
    assert "ORG/NAME" not in card
    assert "| config | `sft` | `rl` | `eval` | total | holds |" in card
    assert "| `sft` | 20 | - | - | 20 | training data: trajectories of `sft` questions only |" in card
    assert "| `preference` | 6 | - | - | 6 | training data: pairs of rollouts of `sft` questions only |" in card
    # what the student learns from the teacher, from reports/filter.json
    assert "`sft.context` is `full`: every tool observation in full" in card
    assert "12 of 20 kept trajectories carry the teacher's reasoning (`reasoning_content`), trained as " \
           "`sft.reasoning` `inline`; it is 25.0% of the tokens the assistant writes." in card
    assert "another page 2, qualified sibling 1" in card and "3 teacher-written aliases without support" in card
    assert "`preference` holds 6 DPO pairs" in card and "`wrong_answer` 6" in card and "`lower_rubric` 0" in card
    assert 'preference = load_dataset(' in snippet(card)
    assert "| `longctx` | 5 | - | - | 5 | training data: built from `sft` questions only |" in card
    assert "| `rl_pool` | - | 3 | - | 3 | the `rl` questions in the difficulty band |" in card
    # The band by split and by the model that measured it: the pooled split's band is the rows published.
    assert "RL difficulty band, measured by `teacher:m`" in card
    assert "| rl | 1 | 3 | 2 | 3 |" in card and "| sft | 0 | 1 | 6 | not pooled |" in card
    assert "| `questions` | 7 | 3 | 2 | 12 | every split (provenance); evaluate on `eval`, never train on it |" in card
    assert "| `traces` | 14 | 6 | 4 | 24 |" in card
    assert "fractions `sft` 0.7, `rl` 0.2, `eval` 0.1" in card  # the config matches the questions stage
    assert "- `eval`: held-out questions to evaluate on: never trained on" in card
    assert "| `questions` | 12 | 3 | `sft`, `rl`, `eval` |" in card  # rows, shards, splits

    # the snippet names the folder and the real splits, and runs as written
    code = snippet(card)
    where = json.dumps(str(pub.absolute()))
    assert f'sft = load_dataset({where}, "sft", split="sft")' in code
    assert f'rl = load_dataset({where}, "rl_pool", split="rl")' in code
    assert f'eval_questions = load_dataset({where}, "questions", split="eval")' in code
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    scope: dict = {}
    exec(code, scope)
    assert (scope["sft"].num_rows, scope["longctx"].num_rows, scope["rl"].num_rows,
            scope["eval_questions"].num_rows) == (20, 5, 3, 2)

    # a relative local target is shown as the absolute folder (the snippet works from anywhere)
    monkeypatch.chdir(tmp_path)
    publish(tmp_path / "run", "local:rel-pub", cfg)
    assert json.dumps(str(tmp_path / "rel-pub")) in snippet((tmp_path / "rel-pub" / "README.md").read_text())


def test_card_with_shared_rl_pool(tmp_path, secrets):
    cfg = run_config()
    store = build_dir(tmp_path / "run", cfg)
    rep_path = store.root / "reports" / "filter.json"  # the filter of a run with share_sft_rl pools sft questions too
    rep_path.write_text(json.dumps(dict(json.loads(rep_path.read_text()), bands_of_splits=["rl", "sft"])))
    recommit(store, cfg, "2", rl_pool=rl_table(make_questions(), which=(1, 7, 8, 9)))  # share_sft_rl
    pub = tmp_path / "pub"
    s = publish(tmp_path / "run", f"local:{pub}", cfg)
    assert s["splits"]["rl_pool"] == {"sft": {"rows": 1, "shards": 1}, "rl": {"rows": 3, "shards": 1}}
    card = (pub / "README.md").read_text()
    assert "| `rl_pool` | 1 | 3 | - | 4 | the `rl` questions in the difficulty band, plus `sft` questions" in card
    assert "| rl | 1 | 3 | 2 | 3 |" in card and "| sft | 0 | 1 | 6 | 1 |" in card  # the pooled splits' bands
    by_name = {c["config_name"]: c for c in front(card)["configs"]}
    assert [d["split"] for d in by_name["rl_pool"]["data_files"]] == ["sft", "rl"]


def test_card_contents_and_no_secrets(tmp_path, secrets):
    cfg = run_config()
    cfg.teacher.base_url = "http://teacher-host.internal:8000/v1"
    build_dir(tmp_path / "run", cfg)
    pub = tmp_path / "pub"
    publish(tmp_path / "run", f"local:{pub}", cfg)
    card = (pub / "README.md").read_text()
    # the funnel, in chain order, with what is left after each step
    assert "| traces in | | 24 |" in card
    assert "| `wrong_answer` | 2 | 22 |" in card and "| `too_few_steps` | 1 | 21 |" in card
    assert "| `not_best` | 1 | 20 |" in card and "**kept (`sft`)** | | **20**" in card
    assert "| rl | 1 | 3 | 2 | 3 |" in card  # the band of the rl split, beside the rl_pool rows published
    for name, sha in prompt_hashes().items():
        assert f"| `{name}.jinja2` | `{sha}` |" in card
    assert "`abc` (12 rows)" in card  # the prompt hash recorded in the question rows
    # (1000 + 200 + 5000) prompt and (400 + 100 + 1100) completion tokens, (0.012 + 0.05) USD over 20 kept rows
    assert "| **per kept sample** | **310.0** | **0.0** | **80.0** | **0.0031** |" in card  # none server-cached
    assert "| `questions` | `teacher-a` | 12 |" in card and "| `traces` | `teacher-a` | 24 |" in card
    assert "model `oracle-v1`" in card and "api_key_env `OPENAI_API_KEY`" in card
    assert "demo corpus" in card and "Ingested pages: 100; links: 480" in card
    assert "CC BY-SA 3.0" in card and "Wikipedia contributors" in card
    assert "private-dir" not in card and "/home/" not in card and "teacher-host" not in card
    for name, data in files_of(pub).items():
        for secret in (HF_TOKEN, OPENAI_KEY):
            assert secret.encode() not in data, name


HOSTILE = "evil` | x | <script>alert(1)</script>\n# not a heading\n```"


def test_configured_and_recorded_strings_are_text_in_the_card(tmp_path, secrets):
    """A teacher model, a pretty name and a split that hold Markdown and HTML show as written, and break no table."""
    cfg = run_config()
    cfg.teacher.model = HOSTILE
    cfg.publish.pretty_name = HOSTILE
    store = build_dir(tmp_path / "run", cfg)
    questions = make_questions(**{f"q{i:03d}": {"teacher_model": HOSTILE} for i in range(N_Q)})
    recommit(store, cfg, "hostile", questions=Question.to_table(questions))
    pub = tmp_path / "pub"
    publish(store.root, f"local:{pub}", cfg)
    card = (pub / "README.md").read_text()
    body = card.split("\n---\n", 1)[1]
    assert front(card)["pretty_name"] == HOSTILE  # YAML keeps it whole
    assert raw_html(body) == []  # no tag of the strings reaches the Hub's page as markup
    shown = one_line(HOSTILE)
    assert " ".join(inline_texts(body)[0].split()) == " ".join(shown.split())  # the title, on one line
    teacher = next(t for t in tables(body) if t[0] == ["table", "teacher model", "rows"])
    assert teacher[1:] == [["questions", shown, "12"], ["traces", "teacher-a", "24"], ["sft", "teacher-a", "20"]]
    assert code_spans(body).count(shown) == 2  # the table's and the sampling line's model name, each whole
    assert all(len(row) == len(t[0]) for t in tables(body) for row in t)  # every row keeps its columns


def test_card_bills_server_cached_tokens_at_the_cached_rate_and_shows_them_apart(tmp_path, secrets):
    from synth.teacher.config import Price

    cfg = run_config()
    cfg.teacher.price_per_mtok = Price(prompt=2.0, completion=8.0, cached_prompt=0.5)
    store = build_dir(tmp_path / "run", cfg)
    cached = 4000  # of the rollout's 5000 prompt tokens, served from the server's prefix cache
    rollout = dict(report(store, "rollout"), teacher={**TEACHER_R, "calls": 30, "server_cached_prompt_tokens": cached})
    (store.root / "reports" / "rollout.json").write_text(json.dumps(rollout))
    pub = tmp_path / "pub"
    publish(store.root, f"local:{pub}", cfg)
    card = (pub / "README.md").read_text()
    r = TEACHER_R
    want = ((r["prompt_tokens"] - cached) * 2.0 + cached * 0.5 + r["completion_tokens"] * 8.0) / 1e6
    assert f"| rollout | {r['prompt_tokens']:,} | {cached:,} | {r['completion_tokens']:,} | " in card
    row = next(line for line in card.splitlines() if line.startswith("| rollout | 5,000 |"))
    assert float(row.rstrip(" |").rsplit("|", 1)[1]) == pytest.approx(want, abs=1e-6)
    # The headline: the sft split's 14 of the 24 traces, 5 turns (calls) each, over the 20 kept rows.
    assert "### Per kept SFT row, by stage and split" in card and f"| rollout | sft | {14 * 5 / 20:.2f} |" in card
    for name, data in files_of(pub).items():
        for secret in (HF_TOKEN, OPENAI_KEY):
            assert secret.encode() not in data, name


def test_republish_is_byte_identical_and_one_row_touches_one_shard(tmp_path, secrets):
    cfg = run_config(sft=4)
    store = build_dir(tmp_path / "run", cfg)
    pub = tmp_path / "pub"
    first = publish(tmp_path / "run", f"local:{pub}", cfg)
    before = files_of(pub)
    mtimes = {n: (pub / n).stat().st_mtime_ns for n in before}

    again = publish(tmp_path / "run", f"local:{pub}", cfg)
    assert again["written"] == [] and again["deleted"] == []
    assert sorted(again["unchanged"]) == sorted(first["written"])
    assert files_of(pub) == before
    assert {n: (pub / n).stat().st_mtime_ns for n in before} == mtimes

    # a second build into a fresh folder gives the same shards, and the same card but for the folder it names
    other = tmp_path / "pub2"
    publish(tmp_path / "run", f"local:{other}", cfg)
    assert data_of(other) == data_of(pub)
    assert (other / "README.md").read_text().replace(str(other), str(pub)) == (pub / "README.md").read_text()

    # one sft row's rubric changes: only the shard holding it is rewritten (and the card, which names
    # the new filter stage key)
    _commit(store, "filter", {"sft": sft_table({"t007": 0.5}), "preference": store.read("preference"),
             "rl_pool": store.read("rl_pool")},
            report(store, "filter"), cfg, ("questions", "rollout"), tag="2")
    third = publish(tmp_path / "run", f"local:{pub}", cfg)
    assert third["written"] == [shard_path("sft", "sft", shard_of("t007", 8), 8), "README.md"]
    after = files_of(pub)
    assert [n for n in before if before[n] != after[n]] == sorted(third["written"])

    # one sft row more (same shard count): again only its shard changes
    _commit(store, "filter", {"sft": sft_table({"t007": 0.5}, n=N_SFT + 1), "preference": store.read("preference"),
             "rl_pool": store.read("rl_pool")},
            report(store, "filter"), cfg, ("questions", "rollout"), tag="3")
    fourth = publish(tmp_path / "run", f"local:{pub}", cfg)
    assert set(fourth["written"]) == {shard_path("sft", "sft", shard_of(f"t{N_SFT:03d}", 8), 8), "README.md"}


def test_republish_one_split_changes_only_its_shards(tmp_path, secrets):
    cfg = run_config(questions=2, traces=2)  # questions: sft 7 -> 4 shards, rl 3 -> 2, eval 2 -> 1
    store = build_dir(tmp_path / "run", cfg)
    pub = tmp_path / "pub"
    first = publish(tmp_path / "run", f"local:{pub}", cfg)
    assert {s: v["shards"] for s, v in first["splits"]["questions"].items()} == {"sft": 4, "rl": 2, "eval": 1}
    assert {s: v["shards"] for s, v in first["splits"]["traces"].items()} == {"sft": 8, "rl": 4, "eval": 2}
    before = files_of(pub)

    # an eval question and an eval trace are rewritten: only the eval shards holding them change
    recommit(store, cfg, "2", questions=Question.to_table(make_questions(q011={"answer": "Echo Town"})),
             traces=Trace.to_table(make_traces(t023="Echo Town")))
    s = publish(tmp_path / "run", f"local:{pub}", cfg)
    assert s["written"] == [shard_path("questions", "eval", 0, 1), shard_path("traces", "eval", shard_of("t023", 2), 2),
                            "README.md"]
    assert s["deleted"] == []
    after = files_of(pub)
    assert sorted(n for n in before if before[n] != after[n]) == sorted(s["written"])
    assert pq.read_table(pub / shard_path("questions", "eval", 0, 1))["answer"].to_pylist() == ["Delta City",
                                                                                                 "Echo Town"]

    # one rl question edited: only its rl shard (of two)
    recommit(store, cfg, "3", questions=Question.to_table(make_questions(q011={"answer": "Echo Town"},
                                                                         q008={"question": "Which rl city?"})))
    s = publish(tmp_path / "run", f"local:{pub}", cfg)
    assert s["written"] == [shard_path("questions", "rl", shard_of("q008", 2), 2), "README.md"]

    # the eval split doubles (2 -> 4 questions, 1 -> 2 shards): its shards are renamed and the old one removed;
    # the sft and rl shards stay as they are
    before = files_of(pub)
    qs = make_questions(q011={"answer": "Echo Town"}, q008={"question": "Which rl city?"})
    qs += [make_question(f"q9{k:02d}", split="eval") for k in range(2)]
    recommit(store, cfg, "4", questions=Question.to_table(qs))
    s = publish(tmp_path / "run", f"local:{pub}", cfg)
    assert s["splits"]["questions"]["eval"] == {"rows": 4, "shards": 2}
    assert s["deleted"] == [shard_path("questions", "eval", 0, 1)]
    assert set(s["written"]) == {shard_path("questions", "eval", 0, 2), shard_path("questions", "eval", 1, 2),
                                 "README.md"}
    after = files_of(pub)
    assert {n: b for n, b in after.items() if "/eval-" not in n and n != "README.md"} == \
        {n: b for n, b in before.items() if "/eval-" not in n and n != "README.md"}


def test_stale_shards_removed_and_missing_table_skipped(tmp_path, secrets):
    cfg = run_config(sft=4)
    build_dir(tmp_path / "before", cfg)  # an earlier publish had a longctx config
    pub = tmp_path / "pub"
    publish(tmp_path / "before", f"local:{pub}", cfg)
    assert (pub / "data" / "longctx" / "sft-00000-of-00001.parquet").is_file()
    build_dir(tmp_path / "run", cfg, longctx=False)
    (pub / "notes.txt").write_text("mine")
    s = publish(tmp_path / "run", f"local:{pub}", cfg)
    assert s["skipped"] == {"longctx": "no `longctx` table in DIR (the assemble stage has not run)"}
    assert s["deleted"] == ["data/longctx/sft-00000-of-00001.parquet"]
    assert not (pub / "data" / "longctx").exists() and (pub / "notes.txt").read_text() == "mine"
    assert "longctx" not in [c["config_name"] for c in front((pub / "README.md").read_text())["configs"]]
    assert "`longctx` is not published" in (pub / "README.md").read_text()

    s2 = publish(tmp_path / "run", f"local:{pub}", run_config(sft=8))  # 20 rows / 8 -> 4 shards, not 8
    assert len([n for n in s2["deleted"] if n.startswith("data/sft/")]) == 8
    assert sorted(n for n in files_of(pub) if n.startswith("data/sft/")) == \
        [shard_path("sft", "sft", i, 4) for i in range(4)]


def test_old_train_layout_is_replaced(tmp_path, secrets):
    import datasets

    cfg = run_config(sft=4)
    build_dir(tmp_path / "run", cfg)
    pub = tmp_path / "pub"
    old = ["data/sft/train-00000-of-00008.parquet", "data/questions/train-00000-of-00001.parquet",
           "data/rl_pool/train-00000-of-00001.parquet"]
    for rel in old:
        (pub / rel).parent.mkdir(parents=True, exist_ok=True)
        (pub / rel).write_bytes(b"the layout before splits")
    (pub / "README.md").write_text("---\nconfigs: []\n---\nold card\n")
    before = files_of(pub)
    # A folder published before publish listed what it wrote: its files are not known to be publish's own.
    with pytest.raises(PublishError, match=r"4 file\(s\) there were not written by hopforge publish .*README.md, "
                                           r"data/questions/train-00000-of-00001.parquet.*pass --overwrite"):
        publish(tmp_path / "run", f"local:{pub}", cfg)
    assert files_of(pub) == before and not (pub / OWNED_FILE).exists()
    s = publish(tmp_path / "run", f"local:{pub}", cfg, overwrite=True)
    assert s["deleted"] == sorted(old)
    assert not [n for n in files_of(pub) if "/train-" in n]
    assert "old card" not in (pub / "README.md").read_text()
    d = datasets.load_dataset(str(pub), "questions", split="rl", cache_dir=str(tmp_path / "cache"))
    assert sorted(d["question_id"]) == ["q007", "q008", "q009"]


# ---- refusals -------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["", "s3://bucket/x", "local:", "hub:", "hub:noslash", "hub:a/b/c", "hub:../x",
                                 "file:/tmp/x"])
def test_bad_target(bad):
    with pytest.raises(PublishError, match=r"local:PATH .* hub:ORG/NAME"):
        parse_target(bad)


def _nullable_split(schema: pa.Schema) -> pa.Schema:
    i = schema.get_field_index("split")
    return schema.set(i, schema.field(i).with_nullable(True))


@pytest.mark.parametrize("case", ["bad_value", "null", "empty", "rl_pool_value", "eval_in_sft", "no_column"])
def test_bad_split_is_refused(tmp_path, secrets, case):
    cfg = run_config()
    store = build_dir(tmp_path / "run", cfg)
    pub = tmp_path / "pub"
    publish(tmp_path / "run", f"local:{pub}", cfg)
    before = files_of(pub)
    qs = make_questions()
    if case in ("bad_value", "null", "empty"):
        rows = [q.to_row() for q in qs]
        for i in (4, 9):
            rows[i]["split"] = {"bad_value": "train", "null": None, "empty": ""}[case]
        replaced = {"questions": pa.Table.from_pylist(rows, schema=_nullable_split(Question.SCHEMA))}
        want = {"bad_value": r"table questions: row q004 \(question_id\) has split 'train'; .*sft, rl, eval "
                             r"\(2 bad rows\)",
                "null": r"table questions: row q004 \(question_id\) has no split",
                "empty": r"table questions: row q004 \(question_id\) has split ''"}[case]
    elif case == "rl_pool_value":
        t = rl_table(qs)
        rows = t.to_pylist()
        rows[1]["extra_info"]["split"] = "test"
        replaced = {"rl_pool": pa.Table.from_pylist(rows, schema=RL_SCHEMA)}
        want = r"table rl_pool: row q008 \(extra_info.question_id\) has split 'test'.*`extra_info.split`"
    elif case == "eval_in_sft":
        rows = sft_table().to_pylist()
        rows[3]["split"] = "eval"
        replaced = {"sft": pa.Table.from_pylist(rows, schema=SFT_SCHEMA)}
        want = r"table sft: row t003 \(trace_id\) is a question of the eval split.*never published as training"
    else:
        replaced = {"longctx": longctx_table().drop_columns(["split"])}
        want = r"table longctx: no `split` column"
    recommit(store, cfg, "2", **replaced)
    with pytest.raises(PublishError, match=want):
        publish(tmp_path / "run", f"local:{pub}", cfg)
    assert files_of(pub) == before  # nothing written, nothing removed
    assert not list((tmp_path / "run").glob(".publish-*"))


def test_refuses_incomplete_or_stale_dir(tmp_path):
    cfg = run_config()
    build_dir(tmp_path / "a", cfg, stop_before="filter")
    with pytest.raises(PublishError, match=r"no filter stage.*hopforge filter"):
        publish(tmp_path / "a", f"local:{tmp_path / 'pa'}", cfg)
    assert not (tmp_path / "pa").exists()

    store = build_dir(tmp_path / "b", cfg)
    traces = store.read("traces")
    _commit(store, "rollout", {"traces": traces}, {"input": N_Q, "output": 24, "dropped": {}}, cfg,
            ("questions",), tag="2")
    with pytest.raises(PublishError, match=r"stage 'filter' was made from the 'rollout' output rollout-1.*"
                                           r"rollout-2.*hopforge filter"):
        publish(tmp_path / "b", f"local:{tmp_path / 'pb'}", cfg)

    with pytest.raises(PublishError, match="no manifest.json"):
        publish(tmp_path / "nothing", f"local:{tmp_path / 'pc'}", cfg)


def test_failed_publish_changes_nothing(tmp_path, secrets):
    cfg = run_config(sft=4)
    store = build_dir(tmp_path / "run", cfg)
    pub = tmp_path / "pub"
    publish(tmp_path / "run", f"local:{pub}", cfg)
    before = files_of(pub)
    # a changed sft row (staged first), then repeated ids in `traces` (the last table): nothing is written
    traces = store.read("traces")
    _commit(store, "rollout", {"traces": pa.concat_tables([traces, traces.slice(0, 1)])},
            {"input": N_Q, "output": 25, "dropped": {}}, cfg, ("questions",), tag="2")
    _commit(store, "filter", {"sft": sft_table({"t007": 0.5}), "preference": store.read("preference"),
             "rl_pool": store.read("rl_pool")},
            json.loads((store.root / "reports" / "filter.json").read_text()), cfg, ("questions", "rollout"), tag="2")
    with pytest.raises(PublishError, match="trace_id is not unique"):
        publish(tmp_path / "run", f"local:{pub}", cfg)
    assert files_of(pub) == before
    assert not list((tmp_path / "run").glob(".publish-*"))


# ---- what the user owns ---------------------------------------------------------------------------

def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_refuses_a_target_inside_the_run_folder(tmp_path, secrets):
    """`--to local:DIR/sft` wrote README.md and data/ into the committed sft stage and broke the run."""
    import pyarrow.dataset as pds

    cfg = run_config()
    run = tmp_path / "run"
    build_dir(run, cfg)
    before = _tree(run)
    (tmp_path / "link").symlink_to(run / "sft")
    for target in (run / "sft", run, run / "new" / "place", tmp_path / "link"):
        with pytest.raises(PublishError, match=rf"refusing to publish to local:{target}: it is inside the output "
                                               rf"folder {run}, whose committed stages it would overwrite"):
            publish(run, f"local:{target}", cfg)
    assert _tree(run) == before and not (run / "new").exists()
    assert pds.dataset(run / "sft").count_rows() == N_SFT
    # a run folder named data/, published to the folder above it: the shards would land in its stages
    store = build_dir(tmp_path / "above" / "data", cfg)
    with pytest.raises(PublishError, match="lies inside its data/ folder"):
        publish(store.root, f"local:{tmp_path / 'above'}", cfg)
    assert not (tmp_path / "above" / "README.md").exists()


def test_refuses_to_replace_files_it_did_not_write(tmp_path, secrets):
    """The user's own README.md was overwritten silently; now only publish's own files are replaced."""
    cfg = run_config(sft=4)
    store = build_dir(tmp_path / "run", cfg)
    pub = tmp_path / "pub"
    pub.mkdir()
    (pub / "README.md").write_text("# my own notes\n")
    (pub / "keep.txt").write_text("mine")
    with pytest.raises(PublishError, match=r"refusing to publish to local:.*/pub: 1 file\(s\) there were not written "
                                           r"by hopforge publish \(or changed since\) and would be replaced or "
                                           r"removed: README.md; pass --overwrite"):
        publish(store.root, f"local:{pub}", cfg)
    assert _tree(pub) == {"README.md": b"# my own notes\n", "keep.txt": b"mine"}  # nothing written

    # into a non-empty folder without a clash: written, and publish lists what it wrote
    (pub / "README.md").unlink()
    first = publish(store.root, f"local:{pub}", cfg)
    owned = json.loads((pub / OWNED_FILE).read_text())
    assert set(owned["files"]) == set(first["written"]) and owned["pending"] == {}
    assert owned["files"]["README.md"] == hashlib.sha256((pub / "README.md").read_bytes()).hexdigest()
    assert (pub / "keep.txt").read_text() == "mine"

    # a republish replaces publish's own files (a changed shard, the card) without --overwrite
    _commit(store, "filter", {"sft": sft_table({"t007": 0.5}), "preference": store.read("preference"),
             "rl_pool": store.read("rl_pool")},
            report(store, "filter"), cfg, ("questions", "rollout"), tag="2")
    again = publish(store.root, f"local:{pub}", cfg)
    assert "README.md" in again["written"] and len(again["written"]) == 2

    # a file publish wrote but the user edited since is theirs now; so is a shard-named file of theirs
    (pub / "README.md").write_text((pub / "README.md").read_text() + "\nmy edit\n")
    mine = pub / "data" / "sft" / "sft-00000-of-00064.parquet"
    mine.write_bytes(b"the user's")
    recommit(store, cfg, "3", sft=sft_table({"t007": 0.25}))
    with pytest.raises(PublishError, match=r"2 file\(s\).*README.md, data/sft/sft-00000-of-00064.parquet"):
        publish(store.root, f"local:{pub}", cfg)
    assert "my edit" in (pub / "README.md").read_text() and mine.read_bytes() == b"the user's"
    forced = publish(store.root, f"local:{pub}", cfg, overwrite=True)
    assert "README.md" in forced["written"] and "data/sft/sft-00000-of-00064.parquet" in forced["deleted"]
    assert "my edit" not in (pub / "README.md").read_text() and (pub / "keep.txt").read_text() == "mine"


def test_a_publish_cut_short_is_resumed_without_overwrite(tmp_path, secrets, monkeypatch):
    """The list of what publish wrote is rewritten before the files (new hashes pending), so a publish that
    dies half-way leaves files the next publish still knows as its own."""
    import shutil as _shutil

    cfg = run_config(sft=4)
    store = build_dir(tmp_path / "run", cfg)
    pub = tmp_path / "pub"
    publish(store.root, f"local:{pub}", cfg)
    recommit(store, cfg, "2", sft=sft_table({f"t{i:03d}": 0.5 for i in range(N_SFT)}))
    real, copies = _shutil.copyfile, []

    def dies_on_the_second(src, dst, *a, **kw):
        copies.append(dst)
        if len(copies) == 2:
            raise OSError(28, "No space left on device", str(dst))
        return real(src, dst, *a, **kw)

    monkeypatch.setattr("synth.publish.publisher.shutil.copyfile", dies_on_the_second)
    with pytest.raises(OSError):
        publish(store.root, f"local:{pub}", cfg)
    assert json.loads((pub / OWNED_FILE).read_text())["pending"]
    monkeypatch.setattr("synth.publish.publisher.shutil.copyfile", real)
    s = publish(store.root, f"local:{pub}", cfg)
    assert s["written"] and json.loads((pub / OWNED_FILE).read_text())["pending"] == {}
    assert not [p for p in pub.rglob("*.tmp")]


def test_refuses_a_secret_in_the_card(tmp_path, secrets):
    cfg = RunConfig(publish=PublishConfig(pretty_name=f"data {OPENAI_KEY}"))
    build_dir(tmp_path / "run", cfg)
    with pytest.raises(PublishError, match=r"value of \$OPENAI_API_KEY") as err:
        publish(tmp_path / "run", f"local:{tmp_path / 'pub'}", cfg)
    assert OPENAI_KEY not in str(err.value)
    assert not (tmp_path / "pub").exists()


# ---- hub target (HfApi monkeypatched) -------------------------------------------------------------

class FakeHub:
    """An in-memory dataset repo behind monkeypatched HfApi methods; records every call."""

    def __init__(self, monkeypatch):
        from huggingface_hub import HfApi

        self.files: dict[str, bytes] = {".gitattributes": b"*.parquet filter=lfs diff=lfs merge=lfs -text\n",
                                        "notes/extra.parquet": b"not ours"}
        self.calls: list[tuple[str, dict]] = []
        self.commits: list[dict] = []
        self.fail_with: str | None = None
        hub = self

        def create_repo(api, repo_id, **kw):
            hub.calls.append(("create_repo", dict(kw, repo_id=repo_id)))
            return f"https://huggingface.co/datasets/{repo_id}"

        def list_repo_tree(api, repo_id, path_in_repo=None, **kw):
            from huggingface_hub.hf_api import RepoFile

            hub.calls.append(("list_repo_tree", dict(kw, repo_id=repo_id)))
            for path, data in sorted(hub.files.items()):
                lfs = path.endswith(".parquet")
                yield RepoFile(path=path, size=len(data), oid=hashlib.sha1(data).hexdigest() if lfs
                               else git_blob_sha1(data),
                               lfs={"size": len(data), "oid": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
                               if lfs else None)

        def create_commit(api, repo_id, operations, **kw):
            from huggingface_hub import CommitOperationAdd, CommitOperationDelete

            hub.calls.append(("create_commit", dict(kw, repo_id=repo_id)))
            if hub.fail_with:
                raise RuntimeError(hub.fail_with)
            added, deleted = [], []
            for op in operations:
                if isinstance(op, CommitOperationAdd):
                    hub.files[op.path_in_repo] = Path(op.path_or_fileobj).read_bytes()
                    added.append(op.path_in_repo)
                elif isinstance(op, CommitOperationDelete):
                    del hub.files[op.path_in_repo]
                    deleted.append(op.path_in_repo)
            hub.commits.append({"added": added, "deleted": deleted, "message": kw.get("commit_message")})
            url = f"https://huggingface.co/datasets/{repo_id}/commit/{len(hub.commits)}"
            return type("CommitInfo", (), {"commit_url": url})()

        monkeypatch.setattr(HfApi, "create_repo", create_repo)
        monkeypatch.setattr(HfApi, "list_repo_tree", list_repo_tree)
        monkeypatch.setattr(HfApi, "create_commit", create_commit)


def test_hub_uploads_only_changed_shards(tmp_path, secrets, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    hub = FakeHub(monkeypatch)
    cfg = run_config(sft=4)
    store = build_dir(tmp_path / "run", cfg)
    hub.files["data/sft/train-00000-of-00016.parquet"] = b"stale"  # from the layout before splits
    hub.files["data/traces/eval-00000-of-00004.parquet"] = b"stale"  # from an older, bigger eval split

    s = publish(tmp_path / "run", "hub:my-org/hop-data", cfg)
    assert [c[0] for c in hub.calls] == ["create_repo", "list_repo_tree", "create_commit"]
    create = hub.calls[0][1]
    assert create["repo_type"] == "dataset" and create["exist_ok"] is True and create["private"] is True
    assert all(kw["token"] == HF_TOKEN for _, kw in hub.calls)
    assert hub.commits[0]["deleted"] == ["data/sft/train-00000-of-00016.parquet",
                                         "data/traces/eval-00000-of-00004.parquet"]
    assert sorted(hub.commits[0]["added"]) == sorted(s["written"])
    assert "notes/extra.parquet" in hub.files  # not a shard of ours: left alone
    code = snippet(hub.files["README.md"].decode())
    assert 'sft = load_dataset("my-org/hop-data", "sft", split="sft")' in code
    assert 'eval_questions = load_dataset("my-org/hop-data", "questions", split="eval")' in code
    assert hub.commits[0]["message"] == ("hopforge 0.1.0: publish sft=20 preference=6 longctx=5 rl_pool=3 "
                                         "questions=12 traces=24")
    assert s["commit_url"].endswith("/commit/1")
    local = tmp_path / "pub"
    publish(tmp_path / "run", f"local:{local}", cfg)
    ours = {k: v for k, v in hub.files.items() if k.startswith("data/")}
    assert ours == {k: v for k, v in files_of(local).items() if k.startswith("data/")}

    hub.calls.clear()
    s2 = publish(tmp_path / "run", "hub:my-org/hop-data", cfg)
    assert s2["written"] == [] and s2["deleted"] == [] and s2["commit_url"] is None
    assert [c[0] for c in hub.calls] == ["create_repo", "list_repo_tree"]  # nothing changed: no commit

    _commit(store, "filter", {"sft": sft_table({"t007": 0.5}), "preference": store.read("preference"),
             "rl_pool": store.read("rl_pool")},
            json.loads((store.root / "reports" / "filter.json").read_text()), cfg, ("questions", "rollout"), tag="2")
    s3 = publish(tmp_path / "run", "hub:my-org/hop-data", cfg)
    assert hub.commits[-1]["added"] == [shard_path("sft", "sft", shard_of("t007", 8), 8), "README.md"] == \
        s3["written"]
    assert hub.commits[-1]["deleted"] == []
    assert HF_TOKEN not in caplog.text


def test_hub_needs_hf_token(tmp_path, monkeypatch):
    hub = FakeHub(monkeypatch)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    cfg = run_config()
    build_dir(tmp_path / "run", cfg)
    with pytest.raises(PublishError, match="HF_TOKEN"):
        publish(tmp_path / "run", "hub:my-org/hop-data", cfg)
    assert hub.calls == []


def test_hub_error_is_scrubbed(tmp_path, secrets, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    hub = FakeHub(monkeypatch)
    hub.fail_with = f"401 Unauthorized for token {HF_TOKEN}"
    cfg = run_config()
    build_dir(tmp_path / "run", cfg)
    with pytest.raises(PublishError) as err:
        publish(tmp_path / "run", "hub:my-org/hop-data", cfg)
    assert "create_commit failed" in str(err.value) and "***" in str(err.value)
    assert HF_TOKEN not in str(err.value) and HF_TOKEN not in caplog.text


# ---- the folder lock ------------------------------------------------------------------------------

def test_publish_waits_for_no_run_and_holds_the_folder_while_it_reads(tmp_path, secrets, monkeypatch):
    """Publish takes the run lock that `run` and `report` take: during a run it stops at once, naming the run;
    while it reads, no run can start on the folder."""
    from flows.stages import PIPELINE
    from synth.engine.store import FolderInUse, RunLock
    import synth.publish.card as card

    cfg = run_config()
    store = build_dir(tmp_path / "run", cfg)
    pub = tmp_path / "pub"
    run = RunLock(store.root)
    run.acquire("hopforge run")
    try:
        with pytest.raises(FolderInUse, match=r"in use by pid \d+ since .* \(hopforge run\)"):
            publish(store.root, f"local:{pub}", cfg)
    finally:
        run.release()
    assert not pub.exists()  # refused before anything was read or written

    during: list[str] = []
    render = card.render_card

    def render_and_try_a_run(facts):  # publish is reading the folder now: a run tries to start on it
        try:
            with PIPELINE.start(cfg, Store(store.root)):
                during.append("a run started")
        except FolderInUse as e:
            during.append(str(e))
        return render(facts)

    monkeypatch.setattr(card, "render_card", render_and_try_a_run)
    publish(store.root, f"local:{pub}", cfg)
    assert len(during) == 1 and "(hopforge publish)" in during[0]
    free = RunLock(store.root)
    free.acquire()  # and publish let go of it when it finished
    free.release()


# ---- CLI ------------------------------------------------------------------------------------------

def test_cli(tmp_path, secrets):
    from typer.testing import CliRunner

    import flows.cli_publish  # noqa: F401  (registers `publish` until flows/cli.py imports it)
    from flows.cli import app

    cfg = run_config()
    build_dir(tmp_path / "run", cfg)
    demo = Path(__file__).resolve().parents[3] / "configs" / "demo.yaml"
    runner = CliRunner()
    ok = runner.invoke(app, ["publish", "--out", str(tmp_path / "run"), "--to", f"local:{tmp_path / 'pub'}",
                             "--config", str(demo)])
    assert ok.exit_code == 0, ok.output
    assert "files written" in ok.output and (tmp_path / "pub" / "README.md").is_file()
    bad = runner.invoke(app, ["publish", "--out", str(tmp_path / "run"), "--to", "s3://x", "--config", str(demo)])
    assert bad.exit_code == 2 and "hub:ORG/NAME" in bad.output
    inside = runner.invoke(app, ["publish", "--out", str(tmp_path / "run"), "--to",
                                 f"local:{tmp_path / 'run' / 'sft'}", "--config", str(demo)])
    assert inside.exit_code == 2 and not (tmp_path / "run" / "sft" / "README.md").exists()
    assert [ln for ln in inside.output.splitlines() if ln.strip()] == [
        f"error: refusing to publish to local:{tmp_path / 'run' / 'sft'}: it is inside the output folder "
        f"{tmp_path / 'run'}, whose committed stages it would overwrite; publish to a folder outside it"]
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "README.md").write_text("mine")
    refused = runner.invoke(app, ["publish", "--out", str(tmp_path / "run"), "--to", f"local:{theirs}",
                                  "--config", str(demo)])
    assert refused.exit_code == 2 and "pass --overwrite" in refused.output
    assert (theirs / "README.md").read_text() == "mine"
    forced = runner.invoke(app, ["publish", "--out", str(tmp_path / "run"), "--to", f"local:{theirs}",
                                 "--config", str(demo), "--overwrite"])
    assert forced.exit_code == 0, forced.output
    assert (theirs / "README.md").read_text() != "mine"


def test_spill_passes_and_empty_table(tmp_path, secrets, monkeypatch):
    import datasets

    import synth.publish.publisher as P

    cfg = run_config(sft=4, traces=4)
    store = build_dir(tmp_path / "run", cfg)
    publish(tmp_path / "run", f"local:{tmp_path / 'a'}", cfg)
    monkeypatch.setattr(P, "MAX_OPEN_SPILLS", 3)  # 8 shards in three passes over the table
    monkeypatch.setattr(P, "BATCH_ROWS", 5)
    publish(tmp_path / "run", f"local:{tmp_path / 'b'}", cfg)
    assert data_of(tmp_path / "a") == data_of(tmp_path / "b")  # the cards differ only in the folder named
    assert not list((tmp_path / "run").glob(".publish-*"))  # the spill folder is gone

    _commit(store, "filter", {"sft": store.read("sft"), "preference": store.read("preference"),
                              "rl_pool": RL_SCHEMA.empty_table()},
            json.loads((store.root / "reports" / "filter.json").read_text()), cfg, ("questions", "rollout"), tag="2")
    s = publish(tmp_path / "run", f"local:{tmp_path / 'a'}", cfg)  # `datasets` cannot load an empty config
    assert s["skipped"] == {"rl_pool": "the table has no rows"} and "rl_pool" not in s["rows"]
    assert s["deleted"] == ["data/rl_pool/rl-00000-of-00001.parquet"]
    assert "rl_pool" not in [c["config_name"] for c in front((tmp_path / "a" / "README.md").read_text())["configs"]]
    sft = datasets.load_dataset(str(tmp_path / "a"), "sft", split="sft", cache_dir=str(tmp_path / "cache"))
    assert sft.num_rows == N_SFT


def test_corpus_facts():
    from synth.publish.card import corpus_facts

    kilt = corpus_facts("/mnt/big/kilt_knowledgesource.json", "ab" * 32, {"output": 5_903_530})
    assert kilt["kind"] == "kilt" and "2019-08-01" in kilt["label"] and "/mnt" not in kilt["label"]
    assert kilt["identity"] == "ab" * 8 and kilt["pages"] == 5_903_530
    hf = corpus_facts("hf:facebook/kilt_wikipedia", "hf:facebook/kilt_wikipedia", {})
    assert hf["kind"] == "kilt" and "`hf:facebook/kilt_wikipedia`" in hf["label"] and hf["identity"] is None
    assert corpus_facts("hf:https://user:pw@host/x", None, {})["label"].startswith("`hf:<dataset>`")
    assert corpus_facts("/home/me/data/kilt_demo.jsonl", None, {})["kind"] == "demo"
    other = corpus_facts("/home/me/wiki.jsonl", None, {})
    assert other["kind"] == "other" and "`wiki.jsonl`" in other["label"] and "/home" not in other["label"]


def test_the_card_states_effective_depth_from_the_questions_report():
    from synth.publish.card import _depth_section

    depth = {"kept": {"questions": 199, "mean_nominal": 6.7, "mean_effective": 6.7, "ratio": 1.0, "full_depth_share": 1.0},
             "checked": {"questions": 281, "mean_nominal": 6.7, "mean_effective": 6.27, "ratio": 0.9347,
                         "full_depth_share": 0.7082}}
    text = "\n".join(_depth_section({"depth": depth}))
    assert "## Effective depth" in text and "Of the 199 questions kept" in text and "100% need every hop" in text
    assert "the ratio was 0.9347 and 70.8% needed every hop" in text
    assert _depth_section({}) == []  # a run without the measure says nothing of it


def test_the_card_describes_the_step_labels_and_rl_fields_the_published_rows_hold(tmp_path, secrets):
    from synth.publish.signals import LABEL_FIELDS, RL_FIELDS
    from synth.rollout.labels import evidence_states

    cfg = run_config()
    build_dir(tmp_path / "run", cfg)
    pub = tmp_path / "pub"
    publish(tmp_path / "run", f"local:{pub}", cfg)
    card = (pub / "README.md").read_text()
    section = card.split("## Step labels and RL signals", 1)[1].split("\n## ", 1)[0]
    sft = pq.read_table(sorted((pub / "data" / "sft").glob("*.parquet"))).to_pylist()
    rl_files = sorted((pub / "data" / "rl_pool").glob("*.parquet"))
    rl_type = pq.read_schema(rl_files[0]).field("extra_info").type
    label_names = [f.name for f in pq.read_schema(sorted((pub / "data" / "sft").glob("*.parquet"))[0])
                   .field("step_labels").type.value_type]
    # every label the card names is a field of the published rows, and every field is described
    assert [name for name, _ in LABEL_FIELDS] == label_names
    for name, _ in LABEL_FIELDS + RL_FIELDS:
        assert f"`{name}`" in section
    for name, _ in RL_FIELDS:
        head, _, sub = name.partition(".")
        field_type = rl_type.field(head).type
        assert not sub or field_type.get_field_index(sub) >= 0
    assert "`rubric`" in section and "positive-only" in section and "rho_pf^N" in section
    # the published SFT rows carry their traces' labels: E_t from the traces' gold_first_seen
    for row in sft:  # (sft_table's traces are make_trace's, with its gold_first_seen)
        t = make_trace(row["trace_id"], row["question_id"])
        assert [lab["evidence_state"] for lab in row["step_labels"]] == evidence_states(t.gold_first_seen, t.n_turns)
