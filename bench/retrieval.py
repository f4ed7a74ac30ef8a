"""Retrieval quality: hopforge's search against a plain BM25, on queries drawn from a corpus, in one run.

Queries are made from any corpus folder (``DIR/corpus/pages``; by default the demo store, built up to
its index when missing), and the page a query was made from is the right answer:

* ``title``: a page's exact title (an agent searching by name); hit@1 is what counts;
* ``description``: a page's short description ("Cereal grain and staple food");
* ``keywords``: 3-6 content words of a page's first sentence, its title's words left out, in a shuffled
  order (an agent looking for a thing it has read a description of: "grain domesticated staple food");
* ``name_attribute``: a page's name (its title without a parenthesised qualifier) and one or two words of
  its description (an agent telling a name apart: "Georgia country", "Mercury planet").

Each set is scored for three rankings: hopforge's tool (``tool``: BM25F over title and body with the
exact-title bonus), its ``body`` ranking (plain BM25 over the body, the question checks' adversary), and an
independent baseline, ``rank_bm25.BM25Okapi`` over title plus body with the same analyzer (the index's
words: lower case, ASCII folding, English stemming; stop words out of queries), no boosts.  Reported:
hit@1, hit@10 and MRR (over the top 10).  ``--runs`` samples (default 3) draw new queries from the
evaluation half of the pages (by a hash of the page id); the figures are the median over the runs.

``--calibrate`` builds an index per title weight (1-4) and scores the tool ranking on queries drawn from
the *other* half of the pages (held out from the evaluation), which is how ``TITLE_WEIGHT`` was chosen.

The last line is JSON: {"bench": "retrieval", "sets": {set: {ranking: {hit1, hit10, mrr}}}, "goal_met", ...}.
Goals: the tool >= the baseline on hit@10 and MRR for every set but ``title``, and ``title`` hit@1 >= 0.99.

Usage: python bench/retrieval.py [--out DIR] [--queries 3000] [--runs 3] [--calibrate]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flows.config import load_config  # noqa: E402
from flows.stages import PIPELINE  # noqa: E402
from synth.engine.runner import run_stage  # noqa: E402
from synth.engine.store import Store  # noqa: E402
from synth.tools.analysis import analyze, query_terms  # noqa: E402
from synth.tools.build import TITLE_WEIGHT, build_index  # noqa: E402
from synth.tools.search import SearchIndex  # noqa: E402

SETS = ("title", "description", "keywords", "name_attribute")
RANKINGS = ("tool", "body", "baseline")
K = 10
_STOP = set("""a an and are as at be but by for from has had have he her his if in into is it its no not of on or
such that the their then there these they this to was which who will with also""".split())
_WORD = re.compile(r"[^\W\d_][\w'\-]*")
_PARENS = re.compile(r"\s*\([^)]*\)")


def load_pages(out: Path) -> list[dict]:
    """Every page with text of ``out/corpus/pages``: id, title, paragraphs, description."""
    t = ds.dataset(str(out / "corpus" / "pages"), format="parquet").to_table(
        columns=["page_id", "title", "paragraphs", "description"])
    return [p for p in t.to_pylist() if any(x and x.strip() for x in p["paragraphs"] or [])]


def held_out(page_id: str) -> bool:
    """Whether a page belongs to the calibration half (the other half is the evaluation's)."""
    return hashlib.blake2b(page_id.encode(), digest_size=2).digest()[0] % 2 == 0


def _content(text: str) -> list[str]:
    return list(dict.fromkeys(w for w in _WORD.findall(text or "") if w.lower() not in _STOP and len(w) > 1))


def query_sets(pages: list[dict], n: int, seed: int) -> dict[str, list[tuple[str, str]]]:
    """``n`` (query, page id) pairs per set (module docstring), drawn with ``seed``."""
    rng = random.Random(seed)
    out: dict[str, list[tuple[str, str]]] = {s: [] for s in SETS}
    order = pages[:]
    rng.shuffle(order)
    for p in order:
        if len(out["title"]) < n:
            out["title"].append((p["title"], p["page_id"]))
        if p["description"] and len(out["description"]) < n:
            out["description"].append((p["description"], p["page_id"]))
        title_words = {w.lower() for w in _WORD.findall(p["title"])}
        lead = next(x for x in p["paragraphs"] if x and x.strip())
        first = re.split(r"(?<=[.!?])\s+(?=[A-Z])", lead.strip())[0]
        words = [w for w in _content(first) if w.lower() not in title_words]
        if len(words) >= 4 and len(out["keywords"]) < n:
            picked = rng.sample(words, rng.randint(3, min(6, len(words))))
            out["keywords"].append((" ".join(picked), p["page_id"]))
        name = _PARENS.sub("", p["title"]).strip()
        attrs = [w for w in _content(p["description"] or "") if w.lower() not in name.lower()]
        if name and attrs and len(out["name_attribute"]) < n:
            picked = rng.sample(attrs, min(len(attrs), rng.randint(1, 2)))
            out["name_attribute"].append((name + " " + " ".join(picked), p["page_id"]))
        if all(len(v) >= n for v in out.values()):
            break
    return out


class Baseline:
    """Plain BM25 (``rank_bm25.BM25Okapi``) over each page's title and body, with the index's analyzer."""

    def __init__(self, pages: list[dict]):
        from rank_bm25 import BM25Okapi

        self.ids = [p["page_id"] for p in pages]
        self.bm25 = BM25Okapi([analyze(p["title"] + " " + " ".join(x for x in p["paragraphs"] if x)) or ["_"]
                               for p in pages])

    def top(self, query: str, k: int = K) -> list[str]:
        terms = query_terms(query)
        if not terms:
            return []
        scores = self.bm25.get_scores(terms)
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.ids[i] for i in order if scores[i] > 0]


def score(top, queries: list[tuple[str, str]]) -> dict:
    """hit@1, hit@10 and MRR@10 of a ranking (``top(query) -> page ids``) on (query, page id) pairs."""
    h1 = h10 = rr = 0.0
    for q, pid in queries:
        ranked = top(q)[:K]
        if pid in ranked:
            r = ranked.index(pid) + 1
            h1 += r == 1
            h10 += 1
            rr += 1 / r
    n = max(len(queries), 1)
    return {"hit1": round(h1 / n, 3), "hit10": round(h10 / n, 3), "mrr": round(rr / n, 3)}


def build(out: Path) -> Store:
    """The demo store up to its index (reused when current)."""
    cfg = load_config(str(ROOT / "configs" / "demo.yaml"), [])
    store = Store(out)
    for stage in PIPELINE.upto("index"):
        run_stage(stage, cfg, store, progress=False)
    return store


def evaluate(index: SearchIndex, baseline: Baseline, pages: list[dict], n: int, runs: int) -> dict:
    """Median over ``runs`` samples of every set's figures per ranking."""
    per_run = []
    for seed in range(runs):
        sets = query_sets(pages, n, seed)
        res = {}
        for name, queries in sets.items():
            res[name] = {"tool": score(lambda q: index.search_ids(q, K), queries),
                         "body": score(lambda q: index.search_ids(q, K, ranking="body"), queries),
                         "baseline": score(baseline.top, queries), "queries": len(queries)}
        per_run.append(res)
    med: dict = {}
    for name in SETS:
        med[name] = {"queries": per_run[0][name]["queries"]}
        for r in RANKINGS:
            med[name][r] = {m: statistics.median(run[name][r][m] for run in per_run) for m in ("hit1", "hit10", "mrr")}
    return med


def calibrate(out: Path, pages: list[dict], n: int) -> dict:
    """The tool ranking's figures on held-out queries for title weights 1-4 (a fresh index each), and each
    weight's worst margin over the baseline's MRR across the sets (the goal is to beat it on every set)."""
    held = [p for p in pages if held_out(p["page_id"])]
    sets = query_sets(held, n, seed=1000)
    baseline = Baseline(pages)
    base = {name: score(baseline.top, qs) for name, qs in sets.items()}
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for w in (1, 2, 3, 4):
            d = Path(tmp) / f"w{w}"
            build_index(out / "corpus" / "pages", d, title_weight=w)
            index = SearchIndex.open(d)
            res[w] = {name: score(lambda q: index.search_ids(q, K), qs) for name, qs in sets.items()}
            res[w]["mean_mrr"] = round(statistics.mean(res[w][s]["mrr"] for s in SETS), 4)
            res[w]["worst_margin"] = round(min(res[w][s]["mrr"] - base[s]["mrr"] for s in SETS if s != "title"), 4)
    res["baseline"] = base
    return res


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "bench-retrieval",
                    help="a run folder with corpus/pages (its index is rebuilt when missing or stale)")
    ap.add_argument("--queries", type=int, default=3000,
                    help="queries per set and sample (3000: most of the evaluation half)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--calibrate", action="store_true")
    args = ap.parse_args(argv)
    load = os.getloadavg()
    t0 = time.perf_counter()
    store = build(args.out)
    pages = load_pages(store.root)
    if args.calibrate:
        cal = calibrate(store.root, pages, args.queries)
        print("| title weight | " + " | ".join(f"{s} MRR" for s in SETS)
              + " | title hit@1 | mean MRR | worst margin over plain BM25 |")
        print("| ---: |" + " ---: |" * (len(SETS) + 3))
        for w, r in cal.items():
            print(f"| {w} | " + " | ".join(f"{r[s]['mrr']:.3f}" for s in SETS)
                  + f" | {r['title']['hit1']:.3f} | {r.get('mean_mrr', float('nan')):.4f} | "
                  + (f"{r['worst_margin']:+.4f} |" if "worst_margin" in r else "|"))
        best = max((w for w in cal if w != "baseline"), key=lambda w: (cal[w]["worst_margin"], cal[w]["mean_mrr"], -w))
        line = {"bench": "retrieval", "mode": "calibrate", "weights": cal, "best": best, "in_use": TITLE_WEIGHT}
        print(json.dumps(line))
        return line
    evaluation = [p for p in pages if not held_out(p["page_id"])]
    index = SearchIndex.open(store.root / "index")
    baseline = Baseline(pages)
    med = evaluate(index, baseline, evaluation, args.queries, args.runs)
    print(f"{len(pages):,} pages; {args.runs} samples of {args.queries} queries a set from the evaluation half; "
          f"median over the samples; load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")
    print("| queries | tool hit@1 | tool hit@10 | tool MRR | body hit@1 | body hit@10 | body MRR "
          "| plain BM25 hit@1 | plain BM25 hit@10 | plain BM25 MRR |")
    print("| --- |" + " ---: |" * 9)
    for name in SETS:
        r = med[name]
        cells = [f"{r[k][m]:.3f}" for k in RANKINGS for m in ("hit1", "hit10", "mrr")]
        print(f"| {name} ({r['queries']}) | " + " | ".join(cells) + " |")
    goals = {name: (med[name]["tool"]["hit1"] >= 0.99) if name == "title" else
             (med[name]["tool"]["hit10"] >= med[name]["baseline"]["hit10"]
              and med[name]["tool"]["mrr"] >= med[name]["baseline"]["mrr"]) for name in SETS}
    line = {"bench": "retrieval", "pages": len(pages), "queries": args.queries, "runs": args.runs,
            "sets": med, "goals": goals, "goal_met": all(goals.values()),
            "loadavg": [round(x, 2) for x in load], "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(line))
    return line


if __name__ == "__main__":
    main()
