"""Bench: rollout throughput against a local OpenAI-compatible server with 100 ms latency.

A scripted ReAct model (in a subprocess, as a real endpoint would be) searches for
``--turns - 1`` turns and then answers; every search runs for real on a tantivy index
of synthetic pages, with snippets and source masking.  With ``concurrency`` calls in
flight and a fixed latency, Little's law caps throughput at concurrency / latency
(64 / 0.1 s = 640 steps/s): that is the baseline.  hopforge's overhead per step (the
client, the cache, the tool call, the trace bookkeeping; not the model) is measured
separately at concurrency 1 against a zero-latency server, and also shown as what
the gap to Little's law implies.

Last line: {"bench": "rollout", "ours": steps_per_s, "baseline": limit, "ratio": r, "overhead_ms_per_step": ...}.
Goals: ratio >= 0.85, overhead per step < 5 ms.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from search import synthetic_pages  # noqa: E402  (bench/search.py's corpus)
from flows.config import load_config  # noqa: E402
from synth.engine.records import Question  # noqa: E402
from synth.rollout.loop import rollout_one  # noqa: E402
from synth.tools.search import SearchIndex, build_index  # noqa: E402
from synth.teacher.client import Teacher  # noqa: E402
from synth.tools.toolbox import Toolbox  # noqa: E402

import pyarrow.dataset as ds  # noqa: E402


@contextmanager
def server(latency: float, turns: int):
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests/helpers/openai_server.py"), "--latency", str(latency),
                             "--react", str(turns)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline().split()[1])
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.stdin.close()
        proc.wait(10)


def questions(titles: list[str], n: int) -> list[Question]:
    out = []
    for i in range(n):
        a, b = i % len(titles), (i * 7 + 3) % len(titles)
        out.append(Question(question_id=f"q{i}", kind="walk", walk_id=f"w{i}", path=[f"p{a}", f"p{b}"],
                            titles=[titles[a], titles[b]], question=f"Which page follows {titles[a]} and then "
                            f"{titles[b]} in the chain of related topics?", answer=titles[b], answer_aliases=[],
                            answer_page_id=f"p{b}", hops=[], teacher_model="m", prompt_sha="x", seed=i,
                            split="sft"))
    return out


def run(base_url: str, index: SearchIndex, qs: list[Question], concurrency: int, cache: Path) -> tuple[float, int]:
    cfg = load_config(None, ["teacher.backend=openai", f"teacher.base_url={base_url}", "teacher.model=bench",
                             f"teacher.concurrency={concurrency}", "teacher.max_retries=0", "rollout.n=1",
                             "rollout.max_turns=50"])
    teacher = Teacher(cfg.teacher, cache)

    async def one(q: Question):
        return await rollout_one(teacher, Toolbox(index, cfg.tools, mask_page_ids=[q.answer_page_id]), q, 0, cfg)

    t0 = time.perf_counter()
    traces = teacher.map(one, qs)  # the stage default: 2 x concurrency rollouts in flight
    wall = time.perf_counter() - t0
    teacher.close()
    assert all(t.stop_reason == "answer" for t in traces), {t.stop_reason for t in traces}
    return wall, sum(t.n_turns for t in traces)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=20_000)
    ap.add_argument("--questions", type=int, default=640)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()
    import os

    os.environ.setdefault("OPENAI_API_KEY", "bench")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        titles, _ = synthetic_pages(args.pages, tmp / "pages")
        build_index(ds.dataset(tmp / "pages"), tmp / "index")
        index = SearchIndex.open(tmp / "index")
        qs = questions(titles, args.questions)
        with server(args.latency, args.turns) as url:
            wall, steps = run(url, index, qs, args.concurrency, tmp / "c1.sqlite")
        limit = args.concurrency / args.latency
        ours = steps / wall
        with server(0.0, args.turns) as url:
            wall0, steps0 = run(url, index, qs[:100], 1, tmp / "c2.sqlite")
        overhead_ms = 1000 * wall0 / steps0
        implied_ms = 1000 * (args.concurrency / ours - args.latency)
    print(f"rollouts: {len(qs)} x {args.turns} turns at concurrency {args.concurrency}, latency {args.latency * 1000:.0f} ms")
    print(f"  ours:          {ours:8.1f} steps/s ({steps} steps in {wall:.2f} s)")
    print(f"  Little's law:  {limit:8.1f} steps/s  ratio {ours / limit:.3f}")
    print(f"  overhead/step: {overhead_ms:.2f} ms measured at concurrency 1 with a zero-latency server "
          f"(server time included); {implied_ms:.2f} ms implied by the gap at concurrency {args.concurrency}")
    print(json.dumps({"bench": "rollout", "ours": round(ours, 1), "baseline": limit, "ratio": round(ours / limit, 3),
                      "overhead_ms_per_step": round(overhead_ms, 3)}))


if __name__ == "__main__":
    main()
