"""Bench: long-context assembly throughput against the raw tokenizer, side by side.

Builds (or reuses) a store from the demo corpus (~10k real Wikipedia summaries):
ingest, graph and walks run as the real stages; the search index is built with
:func:`synth.tools.search.build_index`.  Questions and traces are *synthetic* (the question
and rollout stages need a teacher): one question per 3-hop walk, whose text names the
walk's entities and whose answer is its last page, and two traces per question whose
``searched_page_ids`` are the top-5 BM25 results of each path title and whose
``opened_page_ids`` are the path — so tier-1 has the shape real traces give it.  The
tokenizer is the run's demo tokenizer (``synth.tokenizer.tokens.train_demo_tokenizer``: a
byte-level BPE of about 8k tokens trained on the corpus) in ``DIR/tokenizer``; where that
module is missing, a byte-level BPE of 32k tokens trained here stands in for it.

Ours: the wall time of the whole ``assemble`` stage (inputs, BM25, page tokenization,
packing, rendering, exact re-measurement of every row, Parquet writing) for
``--samples`` rows at ``--length`` tokens, as assembled tokens per second.  Baseline:
the raw tokenizer batch-encoding the very same texts (prompt + completion of every row)
with ``encode_batch_fast`` in the same batch size — the ceiling, since every row is
tokenized once in full to measure it.  ``transformers``' ``tokenizer(texts)`` on a tenth of
the texts is printed for reference.  The cores here are shared, so wall-clock figures move
with other people's load; the CPU seconds of this process (all threads) are measured too,
and ``cpu_ratio`` (the raw tokenizer's CPU time over ours, on the same tokens) is the
steadier figure of how much work assembly adds to the tokenizer's.

The last line is JSON: {"bench": "assemble", "ours": tok/s, "baseline": tok/s, "ratio": r, "cpu_ratio": c}.
Goal: ratio >= 0.5.

Usage: python bench/assemble.py [--samples 2000] [--length 32768] [--out data/bench-assemble]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

from pydantic import Field

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synth.assemble.config import AssembleConfig  # noqa: E402
from flows.config import Config, load_config  # noqa: E402
from synth.engine.runner import run_stage  # noqa: E402
from synth.engine.stage import Stage  # noqa: E402
from synth.engine.records import Question, ToolCount, Trace  # noqa: E402
from flows.stages import BY_NAME  # noqa: E402
from synth.engine.store import Store, write_parquet_atomic  # noqa: E402


class BenchConfig(Config):
    assemble: AssembleConfig = Field(default_factory=AssembleConfig)


def build_store(out: Path, n_questions: int) -> Store:
    """Demo corpus, graph, walks (real stages), index, tokenizer, synthetic questions and traces."""
    store = Store(out)
    cfg = load_config(ROOT / "configs/demo.yaml", [f"walk.num_walks={int(n_questions * 1.2) + 50}", "walk.hops=3"])
    for name in ("ingest", "graph", "walks"):
        run_stage(BY_NAME[name], cfg, store, progress=False)
    if not (out / "index" / "hopforge.json").exists():
        from synth.tools.search import build_index

        build_index(store.dataset("corpus/pages"), out / "index", heap_mb=128)
    if not (out / "tokenizer" / "tokenizer.json").exists():
        try:
            from synth.tokenizer.tokens import train_demo_tokenizer
        except ImportError:  # not written yet: a stand-in of the same kind
            train_tokenizer(store, out / "tokenizer")
        else:
            train_demo_tokenizer(store.dataset("corpus/pages"), out / "tokenizer")
    have = store.read("questions", columns=["question_id"]).num_rows if (out / "questions").exists() else 0
    if have < n_questions or not (out / "traces").exists():
        synthetic_questions(store, n_questions)
    return store


def train_tokenizer(store: Store, folder: Path, vocab_size: int = 32000) -> None:
    """A byte-level BPE trained on the corpus text, saved as a transformers fast tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from synth.assemble.pack import page_body

    pages = store.read("corpus/pages", columns=["title", "paragraphs"]).to_pylist()
    texts = [p["title"] + "\n" + page_body(p["paragraphs"]) for p in pages]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(str(folder))


def synthetic_questions(store: Store, n: int) -> None:
    """One question per walk and two traces per question (see the module docstring)."""
    from synth.tools.search import SearchIndex

    index = SearchIndex.open(store.path("index"))
    walks = store.read("walks", columns=["walk_id", "path", "titles"]).to_pylist()[:n]
    questions, traces = [], []
    for w in walks:
        qid = "q" + w["walk_id"]
        titles = w["titles"]
        text = (f"Starting from {titles[0]}, follow the links through {', '.join(titles[1:-1])}: "
                f"which entity do you reach last?")
        questions.append(Question(qid, "walk", w["walk_id"], w["path"], titles, text, titles[-1], [titles[-1]],
                                  w["path"][-1], [], "synthetic", "", 0, "sft"))
        for s in range(2):
            searched = []
            for t in titles[s:]:
                searched += index.search_ids(t, 5)
            traces.append(Trace(f"{qid}-{s}", qid, s, "[]", "[]", titles[-1], "answer", len(titles), len(titles),
                                [ToolCount("search", len(titles)), ToolCount("open", len(titles))], 0, list(dict.fromkeys(searched)), w["path"],
                                w["path"], [1] * len(titles), 0, 0, 0.0, "synthetic", None, "sft"))
    write_parquet_atomic(Question.to_table(questions), store.path("questions") / "part-00000.parquet")
    write_parquet_atomic(Trace.to_table(traces), store.path("traces") / "part-00000.parquet")


def _cpu() -> float:
    """CPU seconds of this process, all threads (other processes' load on shared cores does not count)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--length", type=int, default=32768)
    ap.add_argument("--out", type=Path, default=ROOT / "data/bench-assemble")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    store = build_store(args.out, args.samples)
    print(f"store ready in {time.perf_counter() - t0:.1f}s: {args.out}")
    cfg = BenchConfig(seed=0, assemble=AssembleConfig(lengths=[args.length], max_questions=args.samples))
    from synth.assemble.stage import run_assemble

    stage = Stage(name="assemble", entry=run_assemble, sections=("assemble",),
                  outputs=("longctx", "rejects/assemble"))
    w0, c0 = time.perf_counter(), _cpu()
    outcome = run_stage(stage, cfg, store, force=True, progress=False)
    ours_s, ours_cpu = time.perf_counter() - w0, _cpu() - c0
    report = outcome.report
    rows = store.read("longctx", columns=["prompt", "completion", "n_tokens"])
    texts = [p + c for p, c in zip(rows.column("prompt").to_pylist(), rows.column("completion").to_pylist())]
    tokens = sum(rows.column("n_tokens").to_pylist())
    print(f"assemble: {report['output']} rows of {args.length} tokens, dropped {report['dropped']}, "
          f"{tokens:,} tokens in {ours_s:.2f}s ({ours_cpu:.2f} CPU s); retries {report['retries']}, "
          f"cut {report['rows_cut']}, pages counted {report['pages_counted']}, corpus scans {report['corpus_scans']}")

    from synth.tokenizer.tokens import load_tokenizer

    hf = load_tokenizer(store)
    backend = hf.backend_tokenizer
    batch = cfg.assemble.verify_batch
    w0, c0 = time.perf_counter(), _cpu()
    raw = 0
    for i in range(0, len(texts), batch):
        raw += sum(len(e) for e in backend.encode_batch_fast(texts[i:i + batch], add_special_tokens=False))
    raw_s, raw_cpu = time.perf_counter() - w0, _cpu() - c0
    assert raw == tokens, (raw, tokens)
    sub = texts[: max(batch, len(texts) // 10)]
    w0 = time.perf_counter()
    sub_tokens = sum(len(x) for i in range(0, len(sub), batch)
                     for x in hf(sub[i:i + batch], add_special_tokens=False)["input_ids"])
    hf_s = time.perf_counter() - w0
    ours, baseline = tokens / ours_s, tokens / raw_s
    cpu_ratio = raw_cpu / ours_cpu
    print(f"raw tokenizer, encode_batch_fast on the same texts: {baseline:,.0f} tok/s ({tokens / raw_cpu:,.0f} "
          f"per CPU s); transformers tokenizer(texts) on a tenth: {sub_tokens / hf_s:,.0f} tok/s")
    print(f"assemble: {ours:,.0f} tok/s ({tokens / ours_cpu:,.0f} per CPU s); wall ratio {ours / baseline:.3f}, "
          f"CPU ratio {cpu_ratio:.3f}")
    result = {"bench": "assemble", "ours": round(ours), "baseline": round(baseline), "ratio": round(ours / baseline, 3),
              "cpu_ratio": round(cpu_ratio, 3)}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
