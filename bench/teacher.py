"""Bench: teacher throughput against a local OpenAI-compatible server with 200 ms latency.

With ``concurrency`` requests in flight and a fixed server latency, Little's law caps
throughput at ``concurrency / latency`` (64 / 0.2 s = 320 requests/s); that is the
baseline.  Whatever the client adds per call (building the request, the openai
client, JSON, the cache lookup and write, the gate) shows as the gap to it.  Every
call is a distinct prompt against a fresh cache, so every call is sent and stored.

The server runs in a subprocess by default (as a real endpoint would), so its work
does not compete with the client's for the GIL; ``--inprocess`` runs it in a thread.
Two reference figures are measured in the same run: the bare ``openai.AsyncOpenAI``
client under an ``asyncio.Semaphore`` (what the teacher's cache, gate, retries and
accounting cost on top of it) and the server's own capacity with a raw HTTP/1.1
client at twice the connections (showing the server is not the limit).
The last line printed is JSON: ``{"bench": "teacher", "ours": rps, "baseline": 320.0, "ratio": r}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from helpers.openai_server import serve  # noqa: E402
from synth.teacher.client import Teacher, TeacherConfig, TeacherError  # noqa: E402


@contextmanager
def server(latency: float, inprocess: bool) -> Iterator[str]:
    """A server with fixed latency; yields its base URL."""
    if inprocess:
        with serve(latency=latency, record=False) as srv:
            yield srv.base_url
        return
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests/helpers/openai_server.py"), "--latency", str(latency)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().split()
        yield f"http://127.0.0.1:{int(line[1])}/v1"
    finally:
        proc.stdin.close()
        proc.wait(10)


def run(n: int, concurrency: int, latency: float, inprocess: bool, cache: bool) -> dict:
    """Send ``n`` distinct calls; return throughput and per-call client overhead."""
    os.environ.setdefault("HOPFORGE_BENCH_KEY", "EMPTY")
    with server(latency, inprocess) as url, tempfile.TemporaryDirectory() as tmp:
        cfg = TeacherConfig(backend="openai", base_url=url, model="bench", api_key_env="HOPFORGE_BENCH_KEY",
                            concurrency=concurrency, max_retries=0, max_tokens=64)
        teacher = Teacher(cfg, Path(tmp) / "teacher.sqlite" if cache else None)
        prompts = [[{"role": "system", "content": "You write multi-hop questions."},
                    {"role": "user", "content": f"Question {i} about page {i * 7919 % 100003}."}] for i in range(n)]

        async def ask(msgs: list[dict]) -> float:
            return (await teacher.chat(msgs)).latency_s

        # Warm-up on other prompts (these would be cache hits otherwise): imports and code paths.
        # Connections belong to each map's event loop, so the measured map opens its own.
        teacher.map(ask, [[{"role": "user", "content": f"warm-up {i}"}] for i in range(concurrency * 2)])
        teacher.stats.reset()
        t0 = time.perf_counter()
        out = teacher.map(ask, prompts, limit=concurrency)
        wall = time.perf_counter() - t0
        assert teacher.stats.as_dict()["requests"] == n, "every measured call must be sent"
        failed = sum(isinstance(x, TeacherError) for x in out)
        over = sorted((x - latency) * 1000 for x in out if not isinstance(x, TeacherError))
        teacher.close()
    return {"n": n, "failed": failed, "wall_s": wall, "rps": n / wall,
            "overhead_ms_p50": statistics.median(over), "overhead_ms_p99": over[int(0.99 * (len(over) - 1))],
            "stats": teacher.stats.as_dict()}


def bare_client(url: str, n: int, concurrency: int) -> float:
    """Requests/s of the official client alone (typed ``create``), same server, same prompts."""
    import openai

    async def go() -> float:
        client = openai.AsyncOpenAI(api_key="EMPTY", base_url=url, max_retries=0, timeout=120)
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with sem:
                await client.chat.completions.create(model="bench", max_tokens=64, messages=[
                    {"role": "system", "content": "You write multi-hop questions."},
                    {"role": "user", "content": f"Question {i}."}])

        await asyncio.gather(*[one(i) for i in range(concurrency * 2)])  # warm-up
        t0 = time.perf_counter()
        await asyncio.gather(*[one(i) for i in range(n)])
        rps = n / (time.perf_counter() - t0)
        await client.close()
        return rps

    return asyncio.run(go())


def server_capacity(url: str, connections: int, seconds: float = 2.0) -> float:
    """Requests/s the server sustains for a minimal keep-alive HTTP/1.1 client."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    body = b'{"model":"bench","messages":[{"role":"user","content":"hi"}],"max_tokens":8}'
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
           b"content-length: %d\r\n\r\n%s" % (len(body), body))

    async def conn(stop: float, done: list[int]) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while time.perf_counter() < stop:
            writer.write(req)
            head = await reader.readuntil(b"\r\n\r\n")
            size = next(int(ln.split(b":")[1]) for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length"))
            await reader.readexactly(size)
            done[0] += 1
        writer.close()

    async def go() -> float:
        done, t0 = [0], time.perf_counter()
        await asyncio.gather(*[conn(t0 + seconds, done) for _ in range(connections)])
        return done[0] / (time.perf_counter() - t0)

    return asyncio.run(go())


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the bench, print figures and the JSON summary line."""
    ap = argparse.ArgumentParser(description="teacher client throughput vs Little's-law limit")
    ap.add_argument("--n", type=int, default=3200, help="calls to send")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.2, help="server latency in seconds")
    ap.add_argument("--inprocess", action="store_true", help="run the server in a thread of this process")
    ap.add_argument("--no-cache", action="store_true", help="disable the call cache (no SQLite writes)")
    args = ap.parse_args(argv)
    r = run(args.n, args.concurrency, args.latency, args.inprocess, not args.no_cache)
    with server(args.latency, args.inprocess) as url:
        bare = bare_client(url, args.n, args.concurrency)
        capacity = server_capacity(url, 2 * args.concurrency)
    baseline = args.concurrency / args.latency
    print(f"calls: {r['n']}  failed: {r['failed']}  wall: {r['wall_s']:.2f}s  "
          f"server: {'in-process thread' if args.inprocess else 'subprocess'}  cache: {not args.no_cache}")
    print(f"throughput: {r['rps']:.1f} req/s   Little's-law limit {args.concurrency}/{args.latency:g}s = {baseline:.1f} req/s")
    print(f"client overhead per call (latency - {args.latency * 1000:.0f} ms): "
          f"p50 {r['overhead_ms_p50']:.2f} ms  p99 {r['overhead_ms_p99']:.2f} ms")
    print(f"reference: bare openai client (typed create, semaphore) {bare:.1f} req/s; server capacity with "
          f"{2 * args.concurrency} raw connections {capacity:.0f} req/s")
    print(json.dumps({"bench": "teacher", "ours": round(r["rps"], 1), "baseline": baseline,
                      "ratio": round(r["rps"] / baseline, 3)}))


if __name__ == "__main__":
    main()
