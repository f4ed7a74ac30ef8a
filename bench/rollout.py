"""Bench: rollout throughput at a realistic operating point, against a bare openai client.

A real teacher answers in 1-2 s and a rollout stage keeps hundreds of calls in flight, so the
operating point is concurrency 512 and 2 s a step: Little's law caps throughput at
concurrency / latency = 512 / 2 s = 256 steps/s, and what hopforge adds per step (its client,
the call cache, the gate, the tool call, the trace) shows as the gap to that.

Three kinds of process, so no part measures another's work:

* the fake server (``--serve``), a latency-only asyncio handler (a ``Protocol``; each answer is
  scheduled with ``call_later``).  It plays a ReAct agent: a ``search`` call per turn for
  ``--turns - 1`` turns, then an answer; the query is drawn from the question's words, so both
  arms make the same tool calls.  It answers hopforge's tool-protocol probe
  (:mod:`synth.teacher.probe`: ``teacher.tool_protocol`` is ``auto``, the default, so the openai
  backend asks the endpoint once per process what it does with tools) as a server with native tool
  calls, after the same latency, and counts it apart from the rollout steps: each ``ours`` run must
  send it exactly once, the ``bare`` client never.  Its own ceiling is checked in the same run: the
  CPU it spent per request while the arms ran, and the requests/s a raw keep-alive client gets from
  its zero-latency path with the largest request body it saw;
* one process per measured run (``--arm ours|bare``): ``ours`` is hopforge's rollout
  (``synth.rollout.loop.rollout_one`` under ``Teacher.map``, the call cache in SQLite, the
  real toolbox over a tantivy index of synthetic pages, as the rollout stage runs it);
  ``bare`` is the official ``openai.AsyncOpenAI`` client alone (typed ``create``, a
  semaphore of the same concurrency, a connection pool of that size) driving the same
  prompts and the same toolbox calls, with no cache and no trace;
* this one, which starts them and reads the server's clock of answers.

Throughput is steps/s in the steady state: the answers sent between the 10th and the 90th
percentile of a run (the first answers come one latency after the start, and the last rollouts
drain one by one: neither is the operating point); end to end (steps / wall) is shown too.
Each arm runs ``--repeats`` times, alternating, and the median is reported, with the load
average around each run and each arm's peak RSS.

Last line: {"bench": "rollout", "ours": steps_per_s, "baseline": bare_steps_per_s, "ratio": ours / bare,
"little": concurrency / latency, "ratio_little": ours / little, ...}.  Goal: ratio_little >= 0.9.

Usage: python bench/rollout.py [--concurrency 512] [--latency 2] [--questions 1536] [--turns 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

FAST = "/fast"  # path prefix of the server's zero-latency answers (the capacity probe)


# ---- the fake server (its own process) ------------------------------------------------------------

def is_probe(req: dict) -> bool:
    """Whether ``req`` is one of hopforge's probes of the endpoint (tools, or ``response_format``), not a step."""
    from synth.teacher.probe import FORMAT_PROBE_MESSAGES, TOOL_PROBE_MESSAGES

    return req.get("messages") in (TOOL_PROBE_MESSAGES, FORMAT_PROBE_MESSAGES)


def _reply(req: dict, turns: int, n: int) -> bytes:
    import orjson

    msgs = req.get("messages") or []
    if is_probe(req):  # a server with native tool calls: it calls the tool the probe offers
        msg = {"role": "assistant", "content": None, "tool_calls": [{"id": "probe", "type": "function", "function": {
            "name": "get_weather", "arguments": orjson.dumps({"city": "Paris"}).decode()}}]}
        return orjson.dumps({"id": f"chatcmpl-probe-{n}", "object": "chat.completion", "created": 0,
                             "model": req.get("model", "bench"),
                             "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls"}],
                             "usage": {"prompt_tokens": 60, "completion_tokens": 20, "total_tokens": 80}})
    turn = sum(1 for m in msgs if m.get("role") == "assistant") + 1
    if turn >= turns:
        msg = {"role": "assistant", "content": "Found it. <answer>done</answer>"}
        finish = "stop"
    else:
        words = (msgs[1].get("content") or "").split() if len(msgs) > 1 else []
        query = " ".join(words[(turn * 2) % max(len(words), 1):][:3]) or "page"
        msg = {"role": "assistant", "content": f"Step {turn}: searching.",
               "tool_calls": [{"id": f"c{turn}", "type": "function",
                               "function": {"name": "search", "arguments": orjson.dumps({"query": query}).decode()}}]}
        finish = "tool_calls"
    return orjson.dumps({"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0,
                         "model": req.get("model", "bench"),
                         "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                         "usage": {"prompt_tokens": 1000 + 300 * turn, "completion_tokens": 30,
                                   "total_tokens": 1030 + 300 * turn}})


def serve(latency: float, turns: int) -> None:
    """Serve until stdin closes; prints ``PORT n``.  GET /stats: answers' send times (monotonic
    clock, shared with every process of this machine), request count (rollout steps; ``probes`` apart) and
    CPU seconds; POST /reset."""
    import orjson

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    state: dict[str, Any] = {"times": array("d"), "n": 0, "probes": 0, "sample": b"", "cpu0": time.process_time()}

    def http(status: str, payload: bytes) -> bytes:
        return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
                .encode() + payload)

    class Conn(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.t = transport
            self.buf = bytearray()

        def data_received(self, data: bytes) -> None:
            self.buf += data
            while True:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = bytes(self.buf[:end]).lower()
                i = head.find(b"content-length:")
                size = int(head[i + 15:].split(b"\r\n", 1)[0]) if i >= 0 else 0
                if len(self.buf) < end + 4 + size:
                    return
                body = bytes(self.buf[end + 4:end + 4 + size])
                del self.buf[:end + 4 + size]
                self.handle(head.split(b" ", 2), body)

        def handle(self, line: list[bytes], body: bytes) -> None:
            method, path = line[0], line[1] if len(line) > 1 else b"/"
            if path == b"/stats":
                out = {"n": state["n"], "probes": state["probes"], "times": state["times"].tolist(),
                       "cpu_s": time.process_time() - state["cpu0"], "rss_mib": peak_rss_mib()}
                self.t.write(http("200 OK", orjson.dumps(out)))
                return
            if path == b"/reset":
                state["times"], state["n"], state["probes"], state["cpu0"] = array("d"), 0, 0, time.process_time()
                self.t.write(http("200 OK", b"{}"))
                return
            if path == b"/sample":
                self.t.write(http("200 OK", state["sample"]))
                return
            req = orjson.loads(body) if body else {}
            fast = path.startswith(FAST.encode())
            probe = not fast and is_probe(req)
            if probe:
                state["probes"] += 1
            elif not fast:
                state["n"] += 1
                if len(body) > len(state["sample"]):
                    state["sample"] = body
            payload = http("200 OK", _reply(req, turns, state["n"]))
            if fast:
                self.t.write(payload)
            else:
                loop.call_later(latency, self.send, payload, not probe)

        def send(self, payload: bytes, step: bool) -> None:
            if not self.t.is_closing():
                self.t.write(payload)
                if step:  # the steady rate counts rollout steps only
                    state["times"].append(time.monotonic())

    server = loop.run_until_complete(loop.create_server(Conn, "127.0.0.1", 0, backlog=4096))
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    done = loop.create_future()
    loop.add_reader(sys.stdin.fileno(), lambda: done.done() or (os.read(sys.stdin.fileno(), 1) or done.set_result(None)))
    loop.run_until_complete(done)
    server.close()


@contextmanager
def server(latency: float, turns: int) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", "--latency", str(latency), "--turns", str(turns)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline().split()[1])
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.stdin.close()
        proc.wait(10)


def control(url: str, path: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(urllib.request.Request(url + path, method="POST" if path == "/reset" else "GET"),
                                timeout=30) as r:
        return r.read()


def capacity(url: str, connections: int, seconds: float) -> float:
    """Requests/s of the server's zero-latency path for a raw keep-alive HTTP/1.1 client (its own process)."""
    body = control(url, "/sample") or b'{"model":"bench","messages":[{"role":"user","content":"hi"}]}'
    port = int(url.rsplit(":", 1)[1])
    req = (b"POST " + FAST.encode() + b"/v1/chat/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: "
           b"application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))

    async def go() -> float:
        loop = asyncio.get_running_loop()
        done = [0]
        stop = time.perf_counter() + seconds
        finished = loop.create_future()
        open_ = [connections]

        class Client(asyncio.Protocol):
            def connection_made(self, t: asyncio.BaseTransport) -> None:
                self.t, self.buf = t, bytearray()
                t.write(req)

            def data_received(self, data: bytes) -> None:
                self.buf += data
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = bytes(self.buf[:end]).lower()
                i = head.find(b"content-length:")
                size = int(head[i + 15:].split(b"\r\n", 1)[0])
                if len(self.buf) < end + 4 + size:
                    return
                del self.buf[:end + 4 + size]
                done[0] += 1
                if time.perf_counter() < stop:
                    self.t.write(req)
                else:
                    self.t.close()
                    open_[0] -= 1
                    if open_[0] == 0 and not finished.done():
                        finished.set_result(None)

        t0 = time.perf_counter()
        for _ in range(connections):
            await loop.create_connection(Client, "127.0.0.1", port)
        await finished
        return done[0] / (time.perf_counter() - t0)

    return asyncio.run(go())


# ---- one measured run (its own process) -------------------------------------------------------------

def peak_rss_mib() -> float:
    """This process's peak RSS (VmHWM: unlike ru_maxrss, it does not carry over the parent's across fork and exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def questions(titles: list[str], n: int) -> list:
    from synth.engine.records import Question

    out = []
    for i in range(n):
        a, b = i % len(titles), (i * 7 + 3) % len(titles)
        out.append(Question(question_id=f"q{i}", kind="walk", source_id=f"w{i}", path=[f"p{a}", f"p{b}"],
                            titles=[titles[a], titles[b]], question=f"Which page follows {titles[a]} and then "
                            f"{titles[b]} in the chain of related topics?", answer=titles[b], answer_aliases=[],
                            answer_page_id=f"p{b}", hops=[], teacher_model="m", prompt_sha="x", seed=i,
                            split="sft"))
    return out


def arm(kind: str, url: str, work: Path, n_questions: int, concurrency: int, turns: int) -> dict:
    """One run of one arm; returns steps, wall, start/end on the monotonic clock, CPU and peak RSS."""
    import gc

    from flows.config import load_config
    from synth.tools.search import SearchIndex
    from synth.tools.toolbox import Toolbox

    os.environ.setdefault("OPENAI_API_KEY", "EMPTY")
    titles = json.loads((work / "titles.json").read_text())
    qs = questions(titles, n_questions)
    cfg = load_config(None, ["teacher.backend=openai", f"teacher.base_url={url}/v1", "teacher.model=bench",
                             f"teacher.concurrency={concurrency}", "teacher.max_retries=0", "teacher.timeout_s=120",
                             "teacher.max_tokens=512", "rollout.n=1", f"rollout.max_turns={turns + 2}"])
    index = SearchIndex.open(work / "index", snippet_chars=cfg.tools.snippet_chars)
    import openai  # noqa: F401  (imports are not what is measured)
    import synth.rollout.loop  # noqa: F401
    import synth.teacher.openai_compat  # noqa: F401

    gc.collect()
    cpu0, t0 = time.process_time(), time.monotonic()
    if kind == "ours":
        from synth.rollout.loop import rollout_one
        from synth.teacher.client import Teacher

        teacher = Teacher(cfg.teacher, work / f"cache-{os.getpid()}.sqlite")

        async def one(q):
            return await rollout_one(teacher, Toolbox(index, cfg.tools, mask_page_ids=[q.answer_page_id]), q, 0, cfg)

        traces = teacher.map(one, qs)  # as the rollout stage runs a shard: 2 x concurrency rollouts in flight
        t1 = time.monotonic()
        teacher.close()
        bad = {getattr(t, "stop_reason", repr(t)) for t in traces} - {"answer"}
        steps = sum(t.n_turns for t in traces if hasattr(t, "n_turns"))
        tool_calls = sum(t.n_tool_calls for t in traces if hasattr(t, "n_tool_calls"))
    else:
        steps, tool_calls, bad, t1 = asyncio.run(bare(url, index, cfg, qs, concurrency, turns))
    return {"arm": kind, "steps": steps, "tool_calls": tool_calls, "t0": t0, "t1": t1, "wall_s": t1 - t0,
            "cpu_s": time.process_time() - cpu0, "bad": sorted(bad),
            "rss_mib": peak_rss_mib()}


async def bare(url: str, index, cfg, qs: list, concurrency: int, turns: int):
    """The bare client: the same prompts and toolbox calls, ``create`` under a semaphore, no cache, no trace."""
    import httpx2
    import openai

    from synth.teacher.tasks import AGENT
    from synth.tools.toolbox import Toolbox

    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    client = openai.AsyncOpenAI(api_key="EMPTY", base_url=url + "/v1", max_retries=0, timeout=120,
                                http_client=openai.DefaultAsyncHttpxClient(limits=limits))
    sem = asyncio.Semaphore(concurrency)
    steps = calls = 0
    bad: set[str] = set()

    async def rollout(q) -> None:
        nonlocal steps, calls
        box = Toolbox(index, cfg.tools, mask_page_ids=[q.answer_page_id])
        tools = box.schemas()
        messages = AGENT.format_input(question=q.question, max_turns=cfg.rollout.max_turns)
        for _ in range(cfg.rollout.max_turns):
            async with sem:
                r = await client.chat.completions.create(model="bench", messages=messages, tools=tools,
                                                         temperature=cfg.teacher.temperature, max_tokens=512)
            steps += 1
            msg = r.choices[0].message
            if not msg.tool_calls:
                if "<answer>" not in (msg.content or ""):
                    bad.add("no_answer")
                return
            messages.append(msg.model_dump(exclude_none=True))
            for tc in msg.tool_calls:
                obs, _ = box.call(tc.function.name, tc.function.arguments)
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": obs})
                calls += 1
        bad.add("max_turns")

    todo = iter(qs)

    async def worker() -> None:
        for q in todo:
            await rollout(q)

    await asyncio.gather(*[worker() for _ in range(2 * concurrency)])  # as Teacher.map: 2 x concurrency rollouts
    t1 = time.monotonic()
    await client.close()
    return steps, calls, bad, t1


# ---- the driver ---------------------------------------------------------------------------------

def steady_rate(times: list[float], t0: float, t1: float, lo: float = 0.1, hi: float = 0.9) -> float:
    """Answers/s between the ``lo`` and ``hi`` quantiles of the answers sent in [t0, t1]."""
    ts = sorted(t for t in times if t0 <= t <= t1 + 1.0)
    if len(ts) < 10:
        return float("nan")
    a, b = int(lo * (len(ts) - 1)), int(hi * (len(ts) - 1))
    return (b - a) / (ts[b] - ts[a])


def wait_for_quiet(max_load: float, wait_s: float) -> tuple[float, float, float]:
    """Wait (up to ``wait_s``) for the 1-minute load average to fall under ``max_load``; returns it."""
    deadline = time.monotonic() + wait_s
    while os.getloadavg()[0] >= max_load and time.monotonic() < deadline:
        time.sleep(5)
    return os.getloadavg()


def run_arm(kind: str, url: str, work: Path, args: argparse.Namespace) -> dict:
    control(url, "/reset")
    load0 = os.getloadavg()
    out = subprocess.run([sys.executable, __file__, "--arm", kind, "--url", url, "--work", str(work),
                          "--questions", str(args.questions), "--concurrency", str(args.concurrency),
                          "--turns", str(args.turns)], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{kind} run failed:\n{out.stderr[-3000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    stats = json.loads(control(url, "/stats"))
    r["steady"] = steady_rate(stats["times"], r["t0"], r["t1"])
    r["end_to_end"] = r["steps"] / r["wall_s"]
    r["server_cpu_us"] = 1e6 * stats["cpu_s"] / max(stats["n"], 1)
    r["server_rss_mib"] = stats["rss_mib"]
    r["load"] = [round(x, 2) for x in load0]
    r["load_after"] = [round(x, 2) for x in os.getloadavg()]
    r["probes"] = stats["probes"]
    if r["bad"] or stats["n"] != r["steps"]:
        raise SystemExit(f"{kind} run: stop reasons {r['bad']}, {stats['n']} answers for {r['steps']} steps")
    if r["probes"] != (1 if kind == "ours" else 0):  # auto probes once per process and endpoint, never per rollout
        raise SystemExit(f"{kind} run: {r['probes']} tool-protocol probes (expected {1 if kind == 'ours' else 0})")
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=20_000)
    ap.add_argument("--questions", type=int, default=1536)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--latency", type=float, default=2.0)
    ap.add_argument("--concurrency", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-load", type=float, default=1.0, help="wait for the 1-minute load average to fall under this")
    ap.add_argument("--wait", type=float, default=300, help="seconds to wait for a quiet machine before going on")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--arm", choices=["ours", "bare"], help=argparse.SUPPRESS)
    ap.add_argument("--capacity", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve(args.latency, args.turns)
    if args.arm:
        print(json.dumps(arm(args.arm, args.url, Path(args.work), args.questions, args.concurrency, args.turns)))
        return
    if args.capacity:
        print(json.dumps({"rps": capacity(args.url, args.concurrency, 5.0)}))
        return

    import pyarrow.dataset as ds

    from search import synthetic_pages
    from synth.tools.search import build_index

    little = args.concurrency / args.latency
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        titles, _ = synthetic_pages(args.pages, work / "pages")
        build_index(ds.dataset(work / "pages"), work / "index")
        (work / "titles.json").write_text(json.dumps(titles))
        quiet = wait_for_quiet(args.max_load, args.wait)
        print(f"load average before: {quiet[0]:.2f} {quiet[1]:.2f} {quiet[2]:.2f} "
              f"({'quiet' if quiet[0] < args.max_load else f'NOT quiet: over {args.max_load} after waiting {args.wait:.0f} s'})")
        runs: dict[str, list[dict]] = {"ours": [], "bare": []}
        with server(args.latency, args.turns) as url:
            for i in range(args.repeats):
                for kind in (("ours", "bare") if i % 2 == 0 else ("bare", "ours")):
                    r = run_arm(kind, url, work, args)
                    runs[kind].append(r)
                    print(f"  run {i + 1} {kind:4s}: steady {r['steady']:6.1f} steps/s, end to end "
                          f"{r['end_to_end']:6.1f} ({r['steps']} steps in {r['wall_s']:.1f} s), CPU {r['cpu_s']:.1f} s, "
                          f"RSS {r['rss_mib']:.0f} MiB, server {r['server_cpu_us']:.0f} us/request, "
                          f"tool-protocol probes {r['probes']}, load {r['load']}",
                          flush=True)
            cap = subprocess.run([sys.executable, __file__, "--capacity", "--url", url, "--concurrency",
                                  str(min(args.concurrency, 256))], capture_output=True, text=True, check=True)
            server_rps = json.loads(cap.stdout.strip().splitlines()[-1])["rps"]
            sample = len(control(url, "/sample"))
        server_cpu_us = statistics.median(r["server_cpu_us"] for rs in runs.values() for r in rs)
        server_rss = max(r["server_rss_mib"] for rs in runs.values() for r in rs)
    load_end = os.getloadavg()

    def med(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[kind])

    ours, base = med("ours", "steady"), med("bare", "steady")
    ours_e2e, base_e2e = med("ours", "end_to_end"), med("bare", "end_to_end")
    cpu_ours = med("ours", "cpu_s") / med("ours", "steps") * 1000
    cpu_bare = med("bare", "cpu_s") / med("bare", "steps") * 1000
    rss_ours, rss_bare = max(r["rss_mib"] for r in runs["ours"]), max(r["rss_mib"] for r in runs["bare"])
    loads = [r["load"][0] for rs in runs.values() for r in rs]
    print(f"rollouts: {args.questions} x {args.turns} turns (a search a turn, then an answer), concurrency "
          f"{args.concurrency}, latency {args.latency:g} s; median of {args.repeats} runs each")
    print(f"  Little's law:   {little:7.1f} steps/s")
    print(f"  hopforge:       {ours:7.1f} steps/s steady ({ours / little:.3f} of Little's law), {ours_e2e:.1f} end to "
          f"end; client CPU {cpu_ours:.2f} ms/step; peak RSS {rss_ours:.0f} MiB")
    print(f"  bare openai:    {base:7.1f} steps/s steady ({base / little:.3f} of Little's law), {base_e2e:.1f} end to "
          f"end; client CPU {cpu_bare:.2f} ms/step; peak RSS {rss_bare:.0f} MiB")
    print(f"  hopforge / bare: {ours / base:.3f} steady, {ours_e2e / base_e2e:.3f} end to end")
    print(f"  server: {server_cpu_us:.0f} us CPU a request (one core: {1e6 / server_cpu_us:,.0f} req/s); a raw client "
          f"got {server_rps:,.0f} req/s from it with {sample // 1024} KiB bodies ({server_rps / little:.1f}x the "
          f"target); peak RSS {server_rss:.0f} MiB")
    print(f"  load average (1 min) at the start of each run: {min(loads):.2f}-{max(loads):.2f}; at the end "
          f"{load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
    print(json.dumps({"bench": "rollout", "ours": round(ours, 1), "baseline": round(base, 1),
                      "ratio": round(ours / base, 3), "little": little, "ratio_little": round(ours / little, 3),
                      "baseline_ratio_little": round(base / little, 3), "ours_end_to_end": round(ours_e2e, 1),
                      "baseline_end_to_end": round(base_e2e, 1), "cpu_ms_per_step": round(cpu_ours, 3),
                      "baseline_cpu_ms_per_step": round(cpu_bare, 3), "rss_mib": round(rss_ours),
                      "baseline_rss_mib": round(rss_bare), "server_rps": round(server_rps),
                      "server_cpu_us": round(server_cpu_us), "load_avg_runs": [min(loads), max(loads)],
                      "load_avg_end": [round(x, 2) for x in load_end], "repeats": args.repeats,
                      "probes_per_run": {k: sorted({r["probes"] for r in rs}) for k, rs in runs.items()}}))


if __name__ == "__main__":
    main()
