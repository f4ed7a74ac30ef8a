"""Benchmark: the downstream stages on a run folder of real size, through the real CLI, against their floors.

Usage: ``python bench/downstream.py [--questions 100000] [--traces 400000] [--repeats 3]
[--demo data/demo] [--work bench/out/downstream] [--stages filter,assemble,report,publish,sft]``

**The folder.**  A run folder in the real schemas is written under ``bench/out/`` (git-ignored)
and reused while its parameters are unchanged (``bench.json``).  Its corpus, search index and
tokenizer are the demo run's (``make demo``: ``--demo``), copied with their manifest entries.
Its ``questions`` and ``traces`` are the demo run's own, replicated to ``--questions`` questions
of ``--traces / --questions`` traces each (the demo's adaptive rollout gives 1-4 traces a
question; here each replica gets the same number, cycling through its question's traces).  Every
replica gets its own ids, and one word in its first assistant message that names the replica,
so no two conversations are the same (the token-count cache is keyed by content); past the first
copy of each demo question, the replica's question and observations name it too, so replicas share
no more text than the traces of different questions do (see ``_mark``), while each keeps the
demo's size: about 47 KB of OpenAI-format JSON and 7,800 tokens, with its real tool
calls, observations, answers and step labels, so every filter takes the paths it takes on the
demo.  Both stages are committed to the manifest as the pipeline commits them.

**The stages**, each its own process, ``python -m flows.cli`` with this checkout's code, one after
the other, ``--repeats`` times each::

    hopforge filter   --force --out DIR        (the token-count cache emptied first: every trace counted)
    hopforge assemble --force --out DIR
    hopforge report   --force --out DIR        (the report and its data explorer)
    hopforge publish  --out DIR --to local:PATH  (PATH emptied first)
    hopforge sft --validate-only --out DIR     (the sft stage's row building and tokenisation: every row
                                                tokenized as TRL does, masks derived and checked;
                                                datasets' cache emptied first)

with ``configs/demo.yaml`` and ``configs/sft/tiny.yaml``.  Each is measured for wall time, CPU
time and the peak RSS of its whole process tree (:mod:`bench.measure`).

**The floors**, each measured the same way in a process of its own: for the tokenising stages
(filter, sft) the raw fast tokenizer over the same conversations on all cores -- every
conversation read, rendered through the chat template with its tools (the sft floor through the
training template) and tokenized by ``encode_batch_fast`` in batches; for the others a plain
pyarrow read of the tables the stage reads and a write of them to a scratch folder.  Each
stage's ratio is floor seconds over its seconds (1.0: the stage costs no more than its floor); the
CPU ratio (floor CPU seconds over the stage's, children included) is printed beside it, as the
steadier figure when other processes share the cores.

Goals: the filter and the sft row building at >= 0.8 of their floor; every stage's peak RSS
<= 4 GiB.  The load average is printed at the start and the end; each figure is the median
of the repeats.  A markdown table is printed, and the last line is JSON::

    {"bench": "downstream", "questions": N, "traces": N, "repeats": R, "loadavg": [...],
     "stages": {"filter": {"wall_s": .., "peak_rss_gib": .., "floor_s": .., "ratio": .., ...}, ...}}
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.measure import Step, gib, run_step, timeline  # noqa: E402

GOAL_GIB = 4.0
GOAL_RATIO = 0.8
CONFIG = "configs/demo.yaml"
RECIPE = "configs/sft/tiny.yaml"
GEN_VERSION = 5  # bump when the generated folder changes shape (5: copies name themselves in their observations)
QUESTIONS_PER_FILE = 256  # as the stages write them: one Parquet file per shard (questions.shard_size)
ROLLOUT_SHARD = 32  # questions per rollout shard (rollout.shard_size), whose traces are one Parquet file
COPIED = ("ingest", "index", "tokenizer")  # stages taken from the demo run as they are
ANCHOR = '"role": "assistant", "content": "'
ENV = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
       "TOKENIZERS_PARALLELISM": "false", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
# What each stage reads, for its I/O floor (the tokenising stages' floor is the tokenizer's).
READS = {
    "assemble": ("questions", "traces", "sft", "corpus/pages"),
    "report": ("traces", "questions", "filter/verdicts", "rejects/filter", "sft", "rl_pool"),
    "publish": ("sft", "longctx", "rl_pool", "questions", "traces"),
}
TOKENIZING = ("filter", "sft")
STAGES = ("filter", "assemble", "report", "publish", "sft")


# ---- the folder ------------------------------------------------------------------------------

def _stage_key(name: str, params: dict) -> str:
    return hashlib.sha256(json.dumps([name, params], sort_keys=True).encode()).hexdigest()[:20]


def _per_question(n_q: int, n_t: int) -> list[int]:
    """Traces of each question: ``n_t`` spread over ``n_q`` as evenly as possible."""
    base, extra = divmod(n_t, n_q)
    return [base + (i < extra) for i in range(n_q)]


def _mark(messages: str, word: str, replica: str | None = None) -> str:
    """The conversation with ``word`` first in its first assistant message (a distinct text, same size).

    With ``replica``, the question and every observation also name the copy (the question's text and every
    text of an observation but its page ids start with it, so the observation stays the JSON the tools wrote):
    copies of one demo trace then share no message and no observed text but the system prompt, while the
    distinct demo samples of one question, copied together, share what they share in the demo.  Without it,
    every copy would repeat its demo trace's pages word for word, and a stage that tokenizes each distinct
    piece once would look faster than it is on a real run."""
    if replica is not None:
        import orjson

        conv = orjson.loads(messages)
        for m in conv:
            content = m.get("content")
            if not isinstance(content, str) or m.get("role") not in ("user", "tool"):
                continue
            if m["role"] == "user":
                m["content"] = f"{replica} {content}"
                continue
            try:
                obs = orjson.loads(content)
            except orjson.JSONDecodeError:
                m["content"] = f"{replica} {content}"
                continue
            m["content"] = json.dumps(_named(obs, replica), ensure_ascii=False)
        messages = json.dumps(conv, ensure_ascii=False)
    at = messages.find(ANCHOR)
    if at < 0:
        return messages
    at += len(ANCHOR)
    return f"{messages[:at]}{word} {messages[at:]}"


def _named(obs, replica: str, key: str = ""):
    """An observation's JSON with ``replica`` before every text in it but page ids (which ``open`` takes as they
    are): titles, snippets and page text then differ between copies, for the tokenizer and the grounding
    analysis alike, and still hold every word, in order, the agent acted on."""
    if isinstance(obs, dict):
        return {k: _named(v, replica, k) for k, v in obs.items()}
    if isinstance(obs, list):
        return [_named(v, replica, key) for v in obs]
    if isinstance(obs, str) and key != "page_id":
        return f"{replica} {obs}"
    return obs


def generate(run: Path, demo: Path, n_q: int, n_t: int, params: dict) -> dict:
    """Write the run folder: the demo's ingest, index and tokenizer, and ``n_q`` questions with ``n_t`` traces."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from synth.engine.records import Question, Trace
    from synth.engine.store import ShardWriter, Store

    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    store = Store(run)
    manifest = json.loads((demo / "manifest.json").read_text())["stages"]
    from flows.stages import BY_NAME

    for name in COPIED:
        entry = manifest.get(name)
        if entry is None:  # a hand-made folder without a corpus: only the stages that read none run on it
            continue
        shutil.copytree(demo / ".stages" / name / entry["key"], store.stage_dir(name, entry["key"]), symlinks=True)
        store.commit(name, entry["key"], BY_NAME[name].outputs, entry, _report(demo, name))

    questions = ds.dataset(demo / "questions", format="parquet").to_table()
    traces = ds.dataset(demo / "traces", format="parquet").to_table()
    traces = traces.sort_by([("question_id", "ascending"), ("sample_index", "ascending")])
    by_q: dict[str, list[int]] = {}
    for i, q in enumerate(traces.column("question_id").to_pylist()):
        by_q.setdefault(q, []).append(i)
    qids = questions.column("question_id").to_pylist()
    bases = [i for i, q in enumerate(qids) if q in by_q]  # questions with traces, in table order
    counts = _per_question(n_q, n_t)

    q_key, r_key = _stage_key("questions", params), _stage_key("rollout", params)
    # Files of the size the sharded stages write (a file per shard), so readers meet the real layout.
    qw = ShardWriter(store.stage_dir("questions", q_key) / "questions", Question.SCHEMA,
                     rows_per_shard=QUESTIONS_PER_FILE)
    tw = ShardWriter(store.stage_dir("rollout", r_key) / "traces", Trace.SCHEMA, rows_per_shard=1)
    msgs = traces.column("messages").to_pylist()
    t_ids, t_qs = traces.column("trace_id").to_pylist(), traces.column("question_id").to_pylist()
    chunk = ROLLOUT_SHARD  # questions per write: one rollout shard, one traces file
    split_counts: dict[str, int] = {}
    for start in range(0, n_q, chunk):
        rows = range(start, min(n_q, start + chunk))
        src = [bases[i % len(bases)] for i in rows]
        q = questions.take(pa.array(src))
        new_qids = [f"{qids[s]}-{i:06d}" for s, i in zip(src, rows)]
        q = q.set_column(q.schema.get_field_index("question_id"), "question_id", pa.array(new_qids, pa.string()))
        qw.write(q)
        idx, tid, qid, sample, text = [], [], [], [], []
        for s, i, nq in zip(src, rows, new_qids):
            own = by_q[qids[s]]
            for k in range(counts[i]):
                t = own[k % len(own)]
                idx.append(t)
                tid.append(f"{t_ids[t]}-{i:06d}-{k}")
                qid.append(nq)
                sample.append(k)
                # A copy of a demo trace names its copy in its question and observations: a replica's samples that
                # are distinct demo samples share their pages as those do, and nothing is shared only for being a
                # copy.
                copy = (i // len(bases), k // len(own))
                text.append(_mark(msgs[t], f"r{i}.{k}", f"r{copy[0]}.{copy[1]}" if copy != (0, 0) else None))
        t = traces.take(pa.array(idx, pa.int64()))
        for name, col in (("trace_id", pa.array(tid, pa.string())), ("question_id", pa.array(qid, pa.string())),
                          ("sample_index", pa.array(sample, pa.int32())), ("messages", pa.array(text, pa.string()))):
            t = t.set_column(t.schema.get_field_index(name), name, col)
        for v, c in zip(*pc.value_counts(t.column("split")).flatten()):
            split_counts[v.as_py()] = split_counts.get(v.as_py(), 0) + c.as_py()
        tw.write(t)  # rows_per_shard=1: every write is its own file
    qw.close()
    tw.close()

    for name, key, outputs, extra in (
            ("questions", q_key, ("questions",), {}),
            ("rollout", r_key, ("traces",), {"questions": n_q, "samples_by_split": split_counts})):
        inputs = {k: v for k, v in manifest[name].get("inputs", {}).items() if k in COPIED and k in manifest}
        entry = dict(manifest[name], key=key, finished_at=time.time(), inputs=inputs)
        report = _report(demo, name)
        report.update(key=key, input=n_q if name == "questions" else n_q, output=n_q if name == "questions" else n_t,
                      dropped={}, **extra)
        store.commit(name, key, outputs, entry, report)
    (run / "bench.json").write_text(json.dumps(params))
    return params


def _report(demo: Path, name: str) -> dict:
    p = demo / "reports" / f"{name}.json"
    return json.loads(p.read_text()) if p.exists() else {"stage": name}


# ---- the floors (each run as its own process: ``--floor KIND DIR``) -----------------------------

def _sft_message(m: dict) -> dict:
    """A raw OpenAI-format message as the SFT row holds it (the five keys the templates read)."""
    return {"role": m["role"], "content": m.get("content") or "", "tool_calls": m.get("tool_calls") or None,
            "tool_call_id": m.get("tool_call_id") if m["role"] == "tool" else None,
            "name": m.get("name") if m["role"] == "tool" else None}


def floor_tokens(run: Path, table: str, batch: int = 256) -> dict:
    """Read every conversation of ``table``, render it with its tools, tokenize the batch on all cores."""
    import pyarrow.dataset as ds

    from synth.tokenizer.tokens import load_tokenizer

    os.environ["TOKENIZERS_PARALLELISM"] = "true"  # the Rust tokenizer's threads, one per core
    tok = load_tokenizer(run / "tokenizer", chat_template=True)
    if table == "sft":  # the training template, as the sft stage renders its rows
        import yaml

        from synth.tokenizer.chat_templates import resolve_template

        tok.chat_template = resolve_template(yaml.safe_load((ROOT / RECIPE).read_text())["chat_template"], tok)[1]
    backend = tok.backend_tokenizer
    n_rows = n_tokens = 0
    for b in ds.dataset(run / table, format="parquet").to_batches(columns=["messages", "tools"], batch_size=batch):
        texts = []
        for m, tools in zip(b.column("messages").to_pylist(), b.column("tools").to_pylist()):
            messages = [_sft_message(x) for x in (json.loads(m) if isinstance(m, str) else m)]
            texts.append(tok.apply_chat_template(messages, tools=json.loads(tools) or None, tokenize=False))
        n_tokens += sum(len(e) for e in backend.encode_batch_fast(texts, add_special_tokens=False))
        n_rows += len(texts)
    return {"rows": n_rows, "tokens": n_tokens}


def floor_io(run: Path, tables: tuple[str, ...], scratch: Path) -> dict:
    """A plain pyarrow read of ``tables`` and a write of them (zstd Parquet) into ``scratch``."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    n_rows = n_bytes = 0
    for name in tables:
        if not (run / name).exists():
            continue
        d = ds.dataset(run / name, format="parquet")
        out = scratch / (name.replace("/", "__") + ".parquet")
        with pq.ParquetWriter(out, d.schema, compression="zstd") as w:
            for b in d.to_batches(batch_size=2_000):
                w.write_batch(b)
                n_rows += b.num_rows
        n_bytes += sum(f.stat().st_size for f in (run / name).resolve().rglob("*.parquet"))
    shutil.rmtree(scratch, ignore_errors=True)
    return {"rows": n_rows, "bytes": n_bytes}


# ---- running ---------------------------------------------------------------------------------

def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "flows.cli", *args]


def _stage_argv(stage: str, run: Path, work: Path) -> list[str]:
    if stage == "publish":
        return _cli("publish", "--config", CONFIG, "--out", str(run), "--to", f"local:{work / 'published'}")
    if stage == "sft":
        return _cli("sft", "--config", RECIPE, "--out", str(run), "--validate-only",
                    "--output-dir", str(work / "sft-check"), "--set", f"dataset_num_proc={os.cpu_count()}")
    # The bench measures what a stage costs, whatever it keeps: a generated folder the filter drops whole is
    # still a measurement, not the broken run the empty-stage rule is there to stop.
    return _cli(stage, "--config", CONFIG, "--out", str(run), "--force", "--set", "runner.allow_empty=true")


def _before(stage: str, run: Path, work: Path) -> None:
    """Empty what would let a repeat skip work: the token-count cache, the publish target, datasets' cache."""
    if stage == "filter":
        shutil.rmtree(run / ".cache" / "token_counts", ignore_errors=True)
    elif stage == "publish":
        shutil.rmtree(work / "published", ignore_errors=True)
    elif stage == "sft":
        shutil.rmtree(run / ".cache" / "datasets", ignore_errors=True)
        shutil.rmtree(work / "sft-check", ignore_errors=True)


def _floor_argv(stage: str, run: Path, work: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--floor", stage, str(run), str(work / "floor-scratch")]


def measure(stage: str, run: Path, work: Path, repeats: int) -> dict:
    """Run the stage and its floor ``repeats`` times each (interleaved); medians, peaks and the stage's report."""
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    ours, floors = [], []
    for r in range(repeats):
        _before(stage, run, work)
        step = Step(stage, _stage_argv(stage, run, work))
        run_step(step, logs / f"{stage}-{r}.log", env=ENV)
        if stage == "sft":
            step.report = json.loads((work / "sft-check" / "mask_report.json").read_text())
        elif stage != "publish":
            step.report = json.loads((run / "reports" / f"{stage}.json").read_text())
        ours.append(step)
        fl = Step(f"{stage}-floor", _floor_argv(stage, run, work))
        run_step(fl, logs / f"{stage}-floor-{r}.log", env=ENV)
        fl.report = json.loads((logs / f"{stage}-floor-{r}.log").read_text().strip().splitlines()[-1])
        floors.append(fl)
        print(f"  {stage} #{r + 1}: {step.wall_s:.1f}s wall, {step.cpu_s:.1f}s CPU, peak {gib(step.peak):.2f} GiB "
              f"RSS, {gib(step.peak_pss):.2f} GiB PSS "
              f"(RSS by twelfths: {timeline(step)}); floor {fl.wall_s:.1f}s, peak {gib(fl.peak):.2f} GiB",
              file=sys.stderr, flush=True)
    wall = statistics.median(s.wall_s for s in ours)
    floor = statistics.median(s.wall_s for s in floors)
    return {"wall_s": round(wall, 2), "runs_s": [round(s.wall_s, 2) for s in ours],
            "cpu_s": round(statistics.median(s.cpu_s for s in ours), 1),
            "peak_rss_gib": round(gib(max(s.peak for s in ours)), 3),
            "peak_pss_gib": round(gib(max(s.peak_pss for s in ours)), 3),
            "floor_s": round(floor, 2), "floor_runs_s": [round(s.wall_s, 2) for s in floors],
            "floor_cpu_s": round(statistics.median(s.cpu_s for s in floors), 1),
            # CPU seconds, floor over stage: steadier than wall time when other processes share the cores.
            "cpu_ratio": round(statistics.median(s.cpu_s for s in floors) / max(statistics.median(
                s.cpu_s for s in ours), 1e-9), 3),
            "floor_peak_rss_gib": round(gib(max(s.peak for s in floors)), 3),
            "ratio": round(floor / wall, 3), "report": ours[-1].report, "floor": floors[-1].report}


def throughput(stage: str, m: dict) -> str:
    """Items (and tokens) per second of the stage, from its report and its floor's counts."""
    rep, fl, s = m["report"], m["floor"], m["wall_s"]
    if stage == "filter":
        return f"{rep['input'] / s:,.0f} traces/s, {fl['tokens'] / s / 1e6:,.2f} M tok/s"
    if stage == "sft":
        return f"{rep['rows'] / s:,.0f} rows/s, {fl['tokens'] / s / 1e6:,.2f} M tok/s"
    if stage == "assemble":
        return f"{rep['output'] / s:,.0f} rows/s, {rep.get('tokens', 0) / s / 1e6:,.2f} M tok/s"
    if stage == "report":
        return f"{rep['input'] / s:,.0f} traces/s"
    return f"{fl['bytes'] / s / 1e6:,.1f} MB/s of Parquet"


def main(argv: list[str] | None = None) -> dict | None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=100_000)
    ap.add_argument("--traces", type=int, default=400_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--demo", type=Path, default=ROOT / "data" / "demo", help="a built demo run folder (make demo)")
    ap.add_argument("--work", type=Path, default=ROOT / "bench" / "out" / "downstream")
    ap.add_argument("--stages", default=",".join(STAGES), help="which stages to time, in this order")
    ap.add_argument("--floor", nargs=3, metavar=("STAGE", "DIR", "SCRATCH"), help=argparse.SUPPRESS)
    ap.add_argument("--generate", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.generate:
        g = json.loads(args.generate)
        p = g["params"]
        generate(Path(g["run"]), Path(g["demo"]), p["questions"], p["traces"], p)
        return None
    if args.floor:
        stage, run, scratch = args.floor[0], Path(args.floor[1]), Path(args.floor[2])
        if stage in TOKENIZING:
            out = floor_tokens(run, "traces" if stage == "filter" else "sft")
        else:
            out = floor_io(run, READS[stage], scratch)
        print(json.dumps(out))
        return None

    load0 = os.getloadavg()
    print(f"load average at the start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} ({os.cpu_count()} cores)",
          flush=True)
    work = args.work.resolve()
    run = work / f"run-{args.questions}-{args.traces}"
    params = {"questions": args.questions, "traces": args.traces, "version": GEN_VERSION,
              "demo_traces": _demo_identity(args.demo)}
    if not (run / "bench.json").exists() or json.loads((run / "bench.json").read_text()) != params:
        t0 = time.monotonic()
        # In a process of its own: the kernel's peak RSS of a child (ru_maxrss) starts from its parent's RSS
        # when it was started, so this process must stay small for the stages' peaks to be theirs.
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--generate", json.dumps(
            {"run": str(run), "demo": str(args.demo.resolve()), "params": params})], check=True)
        print(f"generated {args.questions:,} questions, {args.traces:,} traces in {time.monotonic() - t0:.0f}s "
              f"-> {run}", flush=True)
    else:
        print(f"reusing {run}", flush=True)
    traces_mb = sum(f.stat().st_size for f in (run / "traces").resolve().rglob("*.parquet")) / 1e6
    print(f"traces: {traces_mb:,.0f} MB of Parquet", flush=True)

    results = {}
    for stage in args.stages.split(","):
        print(f"{stage}: {' '.join(_stage_argv(stage, run, work)[1:])}", file=sys.stderr, flush=True)
        results[stage] = measure(stage, run, work, args.repeats)
    load1 = os.getloadavg()
    return summarise(args, results, load0 + load1)


def _demo_identity(demo: Path) -> str:
    """Which demo run the folder was made from (its rollout key), so a rebuilt demo regenerates it."""
    try:
        return json.loads((demo / "manifest.json").read_text())["stages"]["rollout"]["key"]
    except (FileNotFoundError, KeyError) as e:
        sys.exit(f"{demo} is not a built demo run folder ({e}): run `make demo` or pass --demo")


def summarise(args, results: dict, loadavg: tuple) -> dict:
    """Print the markdown table and the goals; return (and print, last) the JSON result."""
    print(f"\ndownstream: {args.questions:,} questions, {args.traces:,} traces; median of {args.repeats}; "
          f"load average {loadavg[0]:.2f} {loadavg[1]:.2f} {loadavg[2]:.2f} at the start, "
          f"{loadavg[3]:.2f} {loadavg[4]:.2f} {loadavg[5]:.2f} at the end; {os.cpu_count()} cores\n")
    print("| stage | wall s | CPU s | peak RSS GiB (PSS) | throughput | floor | floor s (CPU s) | floor / stage: "
          "wall (CPU) |")
    print("| --- | ---: | ---: | ---: | --- | --- | ---: | ---: |")
    for stage, m in results.items():
        kind = "raw tokenizer, all cores" if stage in TOKENIZING else "pyarrow read + write"
        print(f"| {stage} | {m['wall_s']:,.1f} | {m['cpu_s']:,.1f} | {m['peak_rss_gib']:.2f} ({m['peak_pss_gib']:.2f}) | "
              f"{throughput(stage, m)} | {kind} | {m['floor_s']:,.1f} ({m['floor_cpu_s']:,.1f}) | {m['ratio']:.2f} "
              f"({m['cpu_ratio']:.2f}) |")
    peak = max(m["peak_rss_gib"] for m in results.values())
    print(f"\npeak RSS <= {GOAL_GIB:.0f} GiB at every stage: {'met' if peak <= GOAL_GIB else 'NOT met'} "
          f"(max {peak:.2f} GiB)")
    for stage in TOKENIZING:
        if stage in results:
            r = results[stage]["ratio"]
            print(f"{stage} at >= {GOAL_RATIO} of the raw tokenizer: {'met' if r >= GOAL_RATIO else 'NOT met'} "
                  f"({r:.2f})")
    out = {"bench": "downstream", "questions": args.questions, "traces": args.traces, "repeats": args.repeats,
           "loadavg": [round(x, 2) for x in loadavg], "cores": os.cpu_count(),
           "stages": {s: {k: v for k, v in m.items() if k not in ("report", "floor")} for s, m in results.items()}}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
