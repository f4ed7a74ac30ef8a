"""Bench: the report's data explorer at 100k questions against a plain one-table page, in headless Chromium.

Generates a synthetic run folder (``--questions`` questions of 2-4 hops with their walks,
``--traces`` traces each whose conversations are a few KB of OpenAI-format JSON with search
and open observations naming the gold pages, filter verdicts with their reasons, rejected
traces' details, ``rl_pool`` and 5% more questions dropped by the questions stage), reused
when it exists.  Then:

- ours: :func:`synth.report.explorer.write_explorer` into a report folder (wall, CPU and the
  peak RSS of the writing process, a child of this one), then the page opened from file:// in
  Debian's headless Chromium (``/usr/bin/chromium`` through ``/usr/bin/chromedriver``);
- baseline: the naive page, one HTML table of every question with the same columns (a plain
  generated table, as ``DataFrame.to_html`` would write it), filtered by hiding rows.

Measured in the page with ``performance.now()``, each the median of 3: time to the first
interactive table (from navigation start to the table drawn, after the next paint), time to
apply a filter (the split select), time to search by title, and for ours the time to open a
question (its shard loaded and its detail drawn); each action is timed to the paint after it.
Prints the ratios and ``os.getloadavg()``; the last line is JSON:
{"bench": "explorer", "ours": {...}, "baseline": {...}, "ratio": {...}, "loadavg": [...]}.

Usage: python bench/explorer.py [--questions 100000] [--traces 4] [--out data/bench-explorer]
"""

from __future__ import annotations

import argparse
import html
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402

from synth.engine.records import REJECT_SCHEMA, VERDICT_SCHEMA, Question, Trace, Walk  # noqa: E402
from synth.engine.store import ShardWriter, Store  # noqa: E402

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
         "--enable-precise-memory-info", "--js-flags=--expose-gc", "--window-size=1500,1100"]
WORDS = ("river harbour station planet city valley castle bridge island forest empire treaty museum opera "
         "festival railway canal abbey mountain glacier desert lagoon temple palace market colony garrison "
         "observatory library cathedral university province duchy republic kingdom monastery lighthouse").split()
SYSTEM = ("You are a research agent with tools over a local copy of Wikipedia: `search` finds pages, `open` reads a "
          "page, `find` locates a text inside a page. Questions need several hops: find each entity in turn, read its "
          "page, and follow the clue to the next one. Give the final answer inside <answer>...</answer>.")
REASONS = ("wrong_answer", "too_few_steps", "repeated_calls", "ungrounded")
Q_REASONS = ("ambiguous_hop", "clue_shortcut", "prose", "answer_leak")


# ---- the synthetic run ---------------------------------------------------------------------------

_POOLS: dict[int, list[str]] = {}


def _text(rng: random.Random, n_words: int) -> str:
    """A sentence of ``n_words`` words, one of 256 made per length (so generating stays fast)."""
    pool = _POOLS.get(n_words)
    if pool is None:
        pool = _POOLS[n_words] = [" ".join(rng.choice(WORDS) for _ in range(n_words)).capitalize() + "."
                                  for _ in range(256)]
    return rng.choice(pool)


def generate(root: Path, n_q: int, per_q: int, seed: int = 7) -> dict:
    """Write the run folder's tables (plain folders of Parquet shards, as the store reads them)."""
    rng = random.Random(seed)
    n_pages = max(1000, n_q // 2)
    titles = [f"{rng.choice(WORDS).capitalize()} {rng.choice(WORDS)} {i}" for i in range(n_pages)]
    pid = [str(100000 + i) for i in range(n_pages)]
    w = {name: ShardWriter(root / name, schema, rows_per_shard=20_000) for name, schema in (
        ("questions", Question.SCHEMA), ("walks", Walk.SCHEMA), ("traces", Trace.SCHEMA),
        ("filter/verdicts", VERDICT_SCHEMA), ("rejects/questions", REJECT_SCHEMA))}
    rejects_filter = ShardWriter(root / "rejects/filter", pa.schema([
        pa.field("trace_id", pa.string()), pa.field("question_id", pa.string()), pa.field("reason", pa.string()),
        pa.field("detail", pa.string())]), rows_per_shard=100_000)
    rl_rows, counts = [], {"kept": 0, "dropped": {}}
    tools = json.dumps([{"type": "function", "function": {"name": n, "parameters": {}}} for n in ("search", "open", "find")])
    buf: dict[str, list] = {k: [] for k in w}
    buf["rejects/filter"] = []

    def flush(force: bool = False) -> None:
        for k, rows in buf.items():
            if rows and (force or len(rows) >= 2000):
                (w[k] if k in w else rejects_filter).write(rows)
                rows.clear()

    for i in range(n_q + n_q // 20):
        qid = f"q-{rng.getrandbits(64):016x}"
        k = rng.choice((2, 3, 3, 4))
        path = rng.sample(range(n_pages), k + 1)
        pt = [titles[p] for p in path]
        walk_id = f"w-{i:08d}"
        hops = [{"src_id": pid[a], "dst_id": pid[b], "paragraph_id": 1, "anchor_text": titles[b],
                 "paragraph": f"{titles[a]} {_text(rng, 18)} It is linked to {titles[b]}, {_text(rng, 14)}"}
                for a, b in zip(path, path[1:])]
        buf["walks"].append({"walk_id": walk_id, "path": [pid[p] for p in path], "titles": pt, "hops": hops,
                             "slot": i})
        text = f"Start at the article {pt[0]}. " + " ".join(
            f"Then the page says \"{_text(rng, 8)[:-1]} ___ {rng.choice(WORDS)}\"; follow the blank." for _ in range(k)) + \
            " Which page does the last link open?"
        if i >= n_q:  # dropped by the questions stage
            reason = rng.choice(Q_REASONS)
            buf["rejects/questions"].append({"record_id": qid, "source_id": walk_id, "reason": reason,
                                             "detail": f"hop {rng.randint(1, k)}: {reason}",
                                             "raw": json.dumps({"question": text, "answer": pt[-1]})})
            flush()
            continue
        split = rng.choices(("sft", "rl", "eval"), (8, 1, 1))[0]
        buf["questions"].append({
            "question_id": qid, "kind": "walk", "source_id": walk_id, "path": [pid[p] for p in path], "titles": pt,
            "question": text, "answer": pt[-1], "answer_aliases": [], "answer_page_id": pid[path[-1]],
            "hops": [{"sub_question": f"Which page does {pt[j]} link in the clue?", "bridge": pt[j + 1],
                      "page_id": pid[path[j + 1]]} for j in range(k)],
            "teacher_model": "bench-teacher", "prompt_sha": "abc", "seed": i, "split": split})
        correct_n, kept_one = 0, False
        for s in range(per_q):
            tid = f"t-{rng.getrandbits(64):016x}"
            n_calls = rng.randint(3, 7)
            msgs: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]
            seen = [-1] * (k + 1)
            for t in range(1, n_calls + 1):
                j = min(t - 1, k)
                if seen[j] < 0:
                    seen[j] = t
                cid = f"call_{t}"
                if t % 2:
                    args = {"query": f"{pt[j]} {rng.choice(WORDS)}"}
                    obs = json.dumps([{"page_id": pid[q], "title": titles[q], "snippet": _text(rng, 16)}
                                      for q in (path[j], rng.randrange(n_pages), rng.randrange(n_pages))])
                    name = "search"
                else:
                    args = {"page": pt[j]}
                    obs = json.dumps({"page_id": pid[path[j]], "title": pt[j], "offset": 0,
                                      "text": f"{pt[j]}\n\n{_text(rng, 60)}"})
                    name = "open"
                msgs.append({"role": "assistant", "content": f"Turn {t}: {_text(rng, 20)}", "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
                msgs.append({"role": "tool", "tool_call_id": cid, "name": name, "content": obs})
            correct = rng.random() < 0.75
            answer = pt[-1] if correct else titles[rng.randrange(n_pages)]
            msgs.append({"role": "assistant", "content": f"Done. <answer>{answer}</answer>"})
            buf["traces"].append(Trace.from_row({  # the record fills the columns a rollout always writes
                "trace_id": tid, "question_id": qid, "sample_index": s, "messages": json.dumps(msgs), "tools": tools,
                "final_answer": answer, "stop_reason": "answer", "n_turns": n_calls + 1, "n_tool_calls": n_calls,
                "tool_counts": [{"name": "search", "calls": (n_calls + 1) // 2}, {"name": "open", "calls": n_calls // 2},
                                {"name": "find", "calls": 0}], "n_tool_errors": 0,
                "searched_page_ids": [], "opened_page_ids": [], "gold_page_ids": [pid[p] for p in path],
                "gold_first_seen": seen, "prompt_tokens": 5000, "completion_tokens": 400, "latency_s": 3.0,
                "teacher_model": "bench-teacher", "error": None, "split": split, "tool_protocol": "native"}).to_row())
            correct_n += correct
            if not correct:
                reason = "wrong_answer"
            elif rng.random() < 0.1:
                reason = rng.choice(REASONS[1:])
            elif split != "sft":
                reason = "held_out"
            elif not kept_one:
                reason, kept_one = None, True
            else:
                reason = "not_best"
            buf["filter/verdicts"].append({
                "trace_id": tid, "question_id": qid, "teacher_model": "bench-teacher", "split": split,
                "rule_correct": correct, "em": correct, "f1": 1.0 if correct else 0.0, "judge_correct": None,
                "correct": correct, "rubric_raw": 1.0 if reason is None else None, "rubric": 1.0 if reason is None else None,
                "n_tokens": None, "ungrounded_steps": 0, "kept": reason is None, "reason": reason})
            if reason is None:
                counts["kept"] += 1
            else:
                counts["dropped"][reason] = counts["dropped"].get(reason, 0) + 1
                buf["rejects/filter"].append({"trace_id": tid, "question_id": qid, "reason": reason,
                                              "detail": f"{reason}: synthetic detail"})
        if split == "rl" and 0 < correct_n < per_q:
            rl_rows.append({"extra_info": {"question_id": qid}})
        flush()
    flush(force=True)
    for x in (*w.values(), rejects_filter):
        x.close()
    rl = ShardWriter(root / "rl_pool", pa.schema([pa.field("extra_info", pa.struct([pa.field("question_id", pa.string())]))]))
    rl.write(rl_rows)
    rl.close()
    reports = root / "reports"
    reports.mkdir(exist_ok=True)
    n_drop_q = n_q // 20
    for name, rep in {
        "walks": {"input": n_q + n_drop_q, "output": n_q + n_drop_q, "dropped": {}},
        "questions": {"input": n_q + n_drop_q, "output": n_q, "dropped": {"ambiguous_hop": n_drop_q}},
        "rollout": {"input": n_q, "output": n_q * per_q, "dropped": {}},
        "filter": {"input": n_q * per_q, "output": counts["kept"], "dropped": counts["dropped"],
                   "chain": ["format", "correctness", "low_step", "repeats", "grounded"]},
    }.items():
        (reports / f"{name}.json").write_text(json.dumps(dict(rep, stage=name)))
    meta = {"questions": n_q, "traces_per_question": per_q, "seed": seed}
    (root / "bench.json").write_text(json.dumps(meta))
    return meta


def figures(out: Path) -> list[str]:
    """Two small PNGs, as the report would leave beside the page."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    for name, ys in (("funnel.png", [105, 100, 400, 80]), ("hops.png", [25, 50, 25])):
        fig, ax = plt.subplots(figsize=(5, 3), dpi=80)
        ax.bar(range(len(ys)), ys)
        ax.set_title(name)
        fig.savefig(out / name)
        plt.close(fig)
        names.append(name)
    return names


def naive_page(root: Path, out: Path) -> int:
    """One HTML table of every question (the explorer's columns), and a filter that hides rows."""
    import pyarrow.dataset as ds

    store = Store(root)
    verdicts = store.read("filter/verdicts", columns=["question_id", "correct", "kept", "reason"]).to_pylist()
    cn: dict[str, list[int]] = {}
    outcome: dict[str, str] = {}
    for v in verdicts:
        c = cn.setdefault(v["question_id"], [0, 0])
        c[0] += bool(v["correct"])
        c[1] += 1
        if v["kept"]:
            outcome[v["question_id"]] = "kept"
        else:
            outcome.setdefault(v["question_id"], f"dropped: {v['reason']}")
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>questions</title></head><body>",
             "<input id='search'><select id='split'><option value=''>all</option><option>sft</option>"
             "<option>rl</option><option>eval</option></select>",
             "<table border='1' class='dataframe'><thead><tr><th>question_id</th><th>question</th><th>answer</th>"
             "<th>split</th><th>hops</th><th>outcome</th><th>c/n</th></tr></thead><tbody>"]
    q = ds.dataset(root / "questions", format="parquet")
    for batch in q.to_batches(columns=["question_id", "question", "answer", "split", "path", "titles"]):
        for r in batch.to_pylist():
            c, n = cn.get(r["question_id"], [0, 0])
            parts.append(f"<tr><td>{html.escape(r['question_id'])}</td><td>{html.escape(r['question'][:140])}</td>"
                         f"<td>{html.escape(r['answer'])}</td><td>{r['split']}</td><td>{len(r['path']) - 1}</td>"
                         f"<td>{outcome.get(r['question_id'], 'no traces')}</td><td>{c}/{n}</td></tr>")
    parts.append("""</tbody></table><script>
window.naiveFilter = function (split) {
  var rows = document.querySelector('table tbody').rows;
  for (var i = 0; i < rows.length; i++) rows[i].style.display = (!split || rows[i].cells[3].textContent === split) ? '' : 'none';
};
window.naiveSearch = function (q) {
  q = q.toLowerCase();
  var rows = document.querySelector('table tbody').rows;
  for (var i = 0; i < rows.length; i++) rows[i].style.display = rows[i].textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
};
window.addEventListener('load', function () {
  document.body.offsetHeight;
  window.__readyAt = performance.now();
  requestAnimationFrame(function () { setTimeout(function () { window.__paintedAt = performance.now(); }, 0); });
});
</script></body></html>""")
    data = "".join(parts).encode()
    (out / "naive.html").write_bytes(data)
    return len(data)


# ---- the browser -------------------------------------------------------------------------------

def browser(profile: Path):
    os.environ.setdefault("SE_OFFLINE", "true")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS + [f"--user-data-dir={profile}"]:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    d.set_page_load_timeout(300)
    d.set_script_timeout(300)
    return d


def until(driver, script: str, timeout: float = 300) -> object:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        v = driver.execute_script(script)
        if v:
            return v
        time.sleep(0.02)
    raise TimeoutError(script)


# The page's JS heap after a full collection.
HEAP = "if (window.gc) gc(); return performance.memory ? performance.memory.usedJSHeapSize : null"
# An action, then the time to the paint after it (the page's own clock).
TIMED = """
const done = arguments[arguments.length - 1];
const t0 = performance.now();
(%s)();
requestAnimationFrame(() => setTimeout(() => done(performance.now() - t0), 0));
"""
# Open a question by its link; resolves once its detail is drawn and painted.
OPEN = """
const done = arguments[arguments.length - 1], id = arguments[0];
const t0 = performance.now();
location.hash = '#q=' + encodeURIComponent(id);
(function poll() {
  const d = document.getElementById('detail');
  if (d.dataset.qid === id && d.dataset.state === 'ready')
    requestAnimationFrame(() => setTimeout(() => done(performance.now() - t0), 0));
  else setTimeout(poll, 1);
})();
"""


def measure_ours(driver, page: Path, ids: list[str], terms: list[str]) -> dict:
    load, filt, search, opened, heap, search_ready = [], [], [], [], [], []
    for run in range(3):
        driver.get("about:blank")
        driver.get(page.as_uri())
        until(driver, "return window.__hopforge && window.__hopforge.paintedAt")
        load.append(driver.execute_script("return window.__hopforge.paintedAt"))
        heap.append(driver.execute_script(HEAP))
        split = ("rl", "eval", "sft")[run]
        filt.append(driver.execute_async_script(TIMED % (
            "() => { const s = document.getElementById('f-split'); "
            "s.value = String(__hopforge.state.data.splits.indexOf('%s')); s.dispatchEvent(new Event('change')); }" % split)))
        driver.execute_script("const s = document.getElementById('f-split'); s.value = '-1'; s.dispatchEvent(new Event('change'));")
        # The search text of every row is built in idle time after the first paint; a search before that
        # builds the rest at once.  Timed here once built: the steady state a person typing meets.
        until(driver, "return window.__hopforge.searchReadyAt")
        search_ready.append(driver.execute_script("return __hopforge.searchReadyAt - __hopforge.paintedAt"))
        search.append(driver.execute_async_script(TIMED % (
            "() => { const s = document.getElementById('search'); s.value = %s; s.dispatchEvent(new Event('input')); }"
            % json.dumps(terms[run]))))
        opened.append(driver.execute_async_script(OPEN, ids[run]))
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    errors += driver.execute_script("return window.__hopforge.errors")
    assert not errors, errors
    rows = driver.execute_script("return document.querySelectorAll('#rows tr').length")
    return {"load_ms": load, "filter_ms": filt, "search_ms": search, "open_ms": opened, "heap_bytes": heap,
            "search_ready_ms": search_ready, "rows": rows}


def measure_naive(driver, page: Path, terms: list[str]) -> dict:
    load, filt, search, heap = [], [], [], []
    for run in range(3):
        driver.get("about:blank")
        driver.get(page.as_uri())
        until(driver, "return window.__paintedAt")
        load.append(driver.execute_script("return window.__paintedAt"))
        heap.append(driver.execute_script(HEAP))
        split = ("rl", "eval", "sft")[run]
        filt.append(driver.execute_async_script(TIMED % f"() => naiveFilter('{split}')"))
        driver.execute_async_script(TIMED % "() => naiveFilter('')")
        search.append(driver.execute_async_script(TIMED % f"() => naiveSearch({json.dumps(terms[run])})"))
    rows = driver.execute_script("return document.querySelector('table tbody').rows.length")
    return {"load_ms": load, "filter_ms": filt, "search_ms": search, "heap_bytes": heap, "rows": rows}


def med(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 1) if xs else None


def write_child(root: Path, out: Path, figs: list[str]) -> None:
    """``--write-only``: write the explorer (in its own process, so its peak RSS is its own)."""
    from synth.report.explorer import write_explorer

    c0 = time.process_time()
    t0 = time.perf_counter()
    info = write_explorer(Store(root), out, figs, {"questions": "bench"})
    info["wall_s"] = round(time.perf_counter() - t0, 2)
    info["cpu_s"] = round(time.process_time() - c0, 2)
    print(json.dumps(info))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=100_000)
    ap.add_argument("--traces", type=int, default=4, help="traces per question")
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "bench-explorer")
    ap.add_argument("--write-only", nargs=2, type=Path, metavar=("RUN", "REPORT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write_only:
        write_child(args.write_only[0], args.write_only[1], ["funnel.png", "hops.png"])
        return
    for p in (CHROMIUM, CHROMEDRIVER):
        if not Path(p).exists():
            sys.exit(f"{p} not found: run `bash scripts/ensure_chromium.sh` first")
    load0 = os.getloadavg()
    run = args.out / "run"
    want = {"questions": args.questions, "traces_per_question": args.traces, "seed": 7}
    if not (run / "bench.json").exists() or json.loads((run / "bench.json").read_text()) != want:
        shutil.rmtree(run, ignore_errors=True)
        t0 = time.perf_counter()
        generate(run, args.questions, args.traces)
        print(f"generated {args.questions:,} questions x {args.traces} traces in {time.perf_counter() - t0:.1f}s")
    data_mb = sum(f.stat().st_size for f in run.rglob("*.parquet")) / 1e6
    report = args.out / "report"
    shutil.rmtree(report, ignore_errors=True)
    report.mkdir(parents=True)
    figs = figures(report)

    child = subprocess.run([sys.executable, __file__, "--write-only", str(run), str(report)], check=True,
                           capture_output=True, text=True)
    info = json.loads(child.stdout.strip().splitlines()[-1])
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"write_explorer: {info['questions']:,} questions, {info['traces']:,} traces ({data_mb:,.0f} MB of Parquet) "
          f"in {info['wall_s']:.1f}s wall, {info['cpu_s']:.1f}s CPU, peak RSS {peak_mib:,.0f} MiB; index "
          f"{info['index_bytes'] / 1e6:.1f} MB, {info['shards']:,} shards {info['shard_bytes'] / 1e6:,.0f} MB")
    t0 = time.perf_counter()
    naive_bytes = naive_page(run, report)
    print(f"naive page: {naive_bytes / 1e6:.1f} MB of HTML in {time.perf_counter() - t0:.1f}s")

    index = json.loads((report / "explorer" / "index-data.js").read_text()[len("hopforgeIndex("):-3])
    ids = index["cols"]["id"]
    picks = [ids[len(ids) // 7], ids[len(ids) // 2], ids[-len(ids) // 5]]  # three shards, far apart
    titles = index["cols"]["titles"]
    terms = [titles[len(ids) // 3].split(" → ")[0].lower(), "harbour 12", "castle"]
    with tempfile.TemporaryDirectory() as prof:
        d = browser(Path(prof))
        try:
            ours = measure_ours(d, report / "index.html", picks, terms)
            naive = measure_naive(d, report / "naive.html", terms)
        finally:
            d.quit()
    load1 = os.getloadavg()
    o = {k: med(ours[k]) for k in ("load_ms", "filter_ms", "search_ms", "open_ms", "search_ready_ms", "heap_bytes")}
    b = {k: med(naive[k]) for k in ("load_ms", "filter_ms", "search_ms", "heap_bytes")}
    ratio = {k: round(b[k] / o[k], 1) for k in ("load_ms", "filter_ms", "search_ms") if o[k] and b[k]}
    print(f"ours  (median of 3): first interactive table {o['load_ms']:,.0f} ms, filter {o['filter_ms']:,.1f} ms, "
          f"search {o['search_ms']:,.1f} ms (its text built in idle time {o['search_ready_ms']:,.0f} ms after the first "
          f"paint), open a question {o['open_ms']:,.1f} ms; JS heap "
          f"{(o['heap_bytes'] or 0) / 2**20:,.0f} MiB; runs {ours}")
    print(f"naive (median of 3): first interactive table {b['load_ms']:,.0f} ms, filter {b['filter_ms']:,.1f} ms, "
          f"search {b['search_ms']:,.1f} ms, open a question n/a; JS heap {(b['heap_bytes'] or 0) / 2**20:,.0f} MiB; "
          f"runs {naive}")
    print(f"naive / ours: load {ratio.get('load_ms')}x, filter {ratio.get('filter_ms')}x, search {ratio.get('search_ms')}x; "
          f"load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} at the start, "
          f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} at the end")
    print(json.dumps({"bench": "explorer", "questions": info["questions"], "traces": info["traces"],
                      "write": {"wall_s": info["wall_s"], "cpu_s": info["cpu_s"], "peak_rss_mib": round(peak_mib),
                                "index_mb": round(info["index_bytes"] / 1e6, 1), "shards": info["shards"],
                                "shard_mb": round(info["shard_bytes"] / 1e6)},
                      "ours": o, "baseline": b | {"html_mb": round(naive_bytes / 1e6, 1)}, "ratio": ratio,
                      "loadavg": [round(x, 2) for x in load0 + load1]}))


if __name__ == "__main__":
    main()
