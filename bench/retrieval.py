"""Retrieval quality: the agents' rankers (``tools.ranker``: bm25, dense, hybrid) against independent baselines,
on queries drawn from a corpus, in one run.

Queries are made from any corpus folder (``DIR/corpus/pages``; by default the demo store, built up to its page
vectors when missing: the stages up to ``embed`` under ``tools.ranker=hybrid``), and the page a query was made from
is the right answer.  The sets, each drawn with a seeded ``random.Random`` over a shuffled copy of the pages:

* ``title``: a page's exact title (an agent searching by name); hit@1 is what counts;
* ``description``: a page's short description ("Cereal grain and staple food");
* ``lead_sentence``: the first sentence of a page's lead with its title's words taken out (a paraphrase-like
  query: what the page says of itself, without its name);
* ``keywords``: 3-6 content words of a page's first sentence, its title's words left out, in a shuffled
  order (an agent looking for a thing it has read a description of: "grain domesticated staple food");
* ``rare_keywords``: the 3 rarest content words of a page's lead (fewest pages holding the word, over the whole
  corpus, lower-cased), its title's words left out, rarest first;
* ``name_attribute``: a page's name (its title without a parenthesised qualifier) and one or two words of
  its description (an agent telling a name apart: "Georgia country", "Mercury planet").

Questions' sub-clues are not a set here: they need the questions stage (a teacher) run first.

Each set is scored for the agents' three rankers, each opened by :func:`synth.tools.rank.open_search` as the
agents open it (``bm25``: the index's ``tool`` ranking, BM25F over title and body with the exact-title bonus;
``dense``: the query's vector against the ``embed`` stage's page vectors; ``hybrid``: both fused by their scores,
:func:`~synth.tools.search.fuse_scores`; under dense and hybrid a query equal to a title returns that page first);
the index's ``body`` ranking (plain BM25 over the body, the question checks' adversary); and three independent
baselines over the same pages: ``rank_bm25`` (``BM25Okapi`` over title plus body with the index's analyzer, no boosts), ``bm25s``
(title plus body, bm25s's own tokenizer, English stop words and PyStemmer's English stemmer, its default
Lucene BM25), and ``faiss`` (a plain FAISS ``IndexFlatIP`` over the ``embed`` stage's vectors, the query embedded
by the same model, no title rule).  Reported: hit@1, hit@10 and MRR (over the top 10).  ``--runs`` samples
(default 3) draw new queries from the evaluation half of the pages (by a hash of the page id); the figures are
the median over the runs.  The dense queries' vectors are computed in batches first
(:meth:`~synth.tools.dense.DenseIndex.search_many`; a text's vector does not depend on its batch,
:mod:`synth.tools.dense`), so the rankers then answer from memory; ranks are the same as one query at a time.

``--calibrate`` builds an index per title weight (1-4) and scores the tool ranking on queries drawn from
the *other* half of the pages (held out from the evaluation), which is how ``TITLE_WEIGHT`` was chosen.

``--fusions`` measures ways of fusing the hybrid's two lists, each as the hybrid asks them (100 deep, the pages
titled as the query pinned first and taken out of the lists), fetched once per query with their scores:
weighted reciprocal rank fusion, z-score fusion, Qdrant's distribution-based score fusion (DBSF), Weaviate's
min-max relative score fusion, each with BM25's weight ``w`` (the dense list's ``1 - w``) from 0.1 to 0.9, and
z-score fusion with the dense list gated by its top cosine similarity (:func:`~synth.tools.search.fuse_scores`'s
``gates``).  Each method's parameters are chosen on queries drawn from the calibration half (seed 1000) by their
worst margin over the better of ``bm25`` and ``dense`` (hit@10 and MRR@10, every set but ``title``), then
measured, at those parameters and at equal weights, on the evaluation half's samples: the reported figures are
of queries never tuned on.  This is how ``synth.tools.rank.HYBRID_WEIGHTS`` and ``HYBRID_GATE`` were chosen.
``--set KEY=VALUE`` passes a demo config override to the build and every ranker (``tools.dense.text=title_lead``
embeds each page's title and lead: a store of its own, ``--out``).

The last line is JSON: {"bench": "retrieval", "sets": {set: {ranking: {hit1, hit10, mrr}}}, "goals", ...}.
Goals: ``bm25`` >= rank_bm25 on hit@10 and MRR for every set but ``title``; ``hybrid`` >= both ``bm25`` and
``dense`` on hit@10 and MRR for every set but ``title``; ``title`` hit@1 >= 0.99 for every ranker.

Usage: python bench/retrieval.py [--out DIR] [--queries 1000] [--runs 3] [--calibrate | --fusions] [--set K=V]
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
from synth.tools.rank import HYBRID_DEPTH, open_search  # noqa: E402
from synth.tools.search import SearchIndex  # noqa: E402

SETS = ("title", "description", "lead_sentence", "keywords", "rare_keywords", "name_attribute")
RANKERS = ("bm25", "dense", "hybrid")  # tools.ranker's values, each opened by open_search
RANKINGS = RANKERS + ("body", "rank_bm25", "bm25s", "faiss")
K = 10
_STOP = set("""a an and are as at be but by for from has had have he her his if in into is it its no not of on or
such that the their then there these they this to was which who will with also""".split())
_WORD = re.compile(r"[^\W\d_][\w'\-]*")
_PARENS = re.compile(r"\s*\([^)]*\)")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


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


def _lead(page: dict) -> str:
    return next(x for x in page["paragraphs"] if x and x.strip())


def page_frequencies(pages: list[dict]) -> dict[str, int]:
    """How many pages' leads hold each word (lower case): what makes a word rare for ``rare_keywords``."""
    df: dict[str, int] = {}
    for p in pages:
        for w in {w.lower() for w in _WORD.findall(_lead(p))}:
            df[w] = df.get(w, 0) + 1
    return df


def query_sets(pages: list[dict], n: int, seed: int, df: dict[str, int] | None = None) -> dict[str, list[tuple[str, str]]]:
    """``n`` (query, page id) pairs per set (module docstring), drawn with ``seed``; ``df``: the word page
    frequencies of the whole corpus (:func:`page_frequencies`; default: of ``pages``)."""
    df = df if df is not None else page_frequencies(pages)
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
        lead = _lead(p)
        first = _SENTENCE.split(lead.strip())[0]
        words = [w for w in _content(first) if w.lower() not in title_words]
        if len(words) >= 4 and len(out["keywords"]) < n:
            picked = rng.sample(words, rng.randint(3, min(6, len(words))))
            out["keywords"].append((" ".join(picked), p["page_id"]))
        if len(words) >= 3 and len(out["lead_sentence"]) < n:
            # The sentence as written, less the words of the title (and the brackets they leave empty).
            rest = _WORD.sub(lambda m: "" if m.group(0).lower() in title_words else m.group(0), first)
            rest = re.sub(r"\(\s*[,;]*\s*\)", "", rest)
            out["lead_sentence"].append((" ".join(rest.split()), p["page_id"]))
        rare = sorted((w for w in {w.lower() for w in _content(lead)} if w not in title_words and w not in _STOP),
                      key=lambda w: (df.get(w, 0), w))
        if len(rare) >= 3 and len(out["rare_keywords"]) < n:
            out["rare_keywords"].append((" ".join(rare[:3]), p["page_id"]))
        name = _PARENS.sub("", p["title"]).strip()
        attrs = [w for w in _content(p["description"] or "") if w.lower() not in name.lower()]
        if name and attrs and len(out["name_attribute"]) < n:
            picked = rng.sample(attrs, min(len(attrs), rng.randint(1, 2)))
            out["name_attribute"].append((name + " " + " ".join(picked), p["page_id"]))
        if all(len(v) >= n for v in out.values()):
            break
    return out


def page_text(p: dict) -> str:
    return p["title"] + " " + " ".join(x for x in p["paragraphs"] if x)


class Baseline:
    """Plain BM25 (``rank_bm25.BM25Okapi``) over each page's title and body, with the index's analyzer."""

    def __init__(self, pages: list[dict]):
        from rank_bm25 import BM25Okapi

        self.ids = [p["page_id"] for p in pages]
        self.bm25 = BM25Okapi([analyze(page_text(p)) or ["_"] for p in pages])

    def top(self, query: str, k: int = K) -> list[str]:
        terms = query_terms(query)
        if not terms:
            return []
        scores = self.bm25.get_scores(terms)
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.ids[i] for i in order if scores[i] > 0]


class BM25S:
    """bm25s over each page's title and body: its own tokenizer (English stop words) and PyStemmer's English
    stemmer, its default BM25 (Lucene's).  :meth:`top` asks one query; :meth:`top_many` a batch."""

    def __init__(self, pages: list[dict]):
        import bm25s
        import Stemmer

        self.bm25s, self.stemmer = bm25s, Stemmer.Stemmer("english")
        self.ids = [p["page_id"] for p in pages]
        t0 = time.perf_counter()
        tokens = bm25s.tokenize([page_text(p) for p in pages], stopwords="en", stemmer=self.stemmer,
                                show_progress=False)
        self.retriever = bm25s.BM25()
        self.retriever.index(tokens, show_progress=False)
        self.build_seconds = time.perf_counter() - t0

    def top_many(self, queries: list[str], k: int = K) -> list[list[str]]:
        tokens = self.bm25s.tokenize(queries, stopwords="en", stemmer=self.stemmer, show_progress=False,
                                     return_ids=False)
        docs, scores = self.retriever.retrieve(tokens, k=k, show_progress=False)
        return [[self.ids[d] for d, s in zip(drow, srow) if s > 0] for drow, srow in zip(docs.tolist(), scores.tolist())]

    def top(self, query: str, k: int = K) -> list[str]:
        return self.top_many([query], k)[0]


class FlatBaseline:
    """A plain FAISS ``IndexFlatIP`` over the ``embed`` stage's vectors, queries embedded by the same model (cut
    at the same ``query_max_tokens``), no title rule."""

    def __init__(self, embed_dir: Path, embedder, query_max_tokens: int):
        import faiss
        import pyarrow.parquet as pq

        from synth.tools.dense import PAGES_FILE, VECTORS_FILE

        self.ids = pq.read_table(embed_dir / PAGES_FILE, columns=["page_id"]).column("page_id").to_pylist()
        vectors = np.ascontiguousarray(np.load(embed_dir / VECTORS_FILE), dtype=np.float32)
        self.index = faiss.IndexFlatIP(vectors.shape[1])
        self.index.add(vectors)
        self.embedder, self.query_max_tokens = embedder, query_max_tokens

    def top_many(self, queries: list[str], k: int = K) -> list[list[str]]:
        vectors = self.embedder.encode_queries(queries, max_tokens=self.query_max_tokens)
        _, rows = self.index.search(vectors, k)
        return [[self.ids[r] for r in row if r >= 0] for row in rows.tolist()]

    def top(self, query: str, k: int = K) -> list[str]:
        return self.top_many([query], k)[0]


def rank_of(ranked: list[str], pid: str) -> int | None:
    """The 1-based rank of ``pid`` in the top :data:`K` of ``ranked`` (None: not there)."""
    ranked = ranked[:K]
    return ranked.index(pid) + 1 if pid in ranked else None


def metrics(ranks: list[int | None]) -> dict:
    """hit@1, hit@10 and MRR@10 from each query's rank of its right page (None: not in the top 10)."""
    n = max(len(ranks), 1)
    return {"hit1": round(sum(r == 1 for r in ranks) / n, 3),
            "hit10": round(sum(r is not None and r <= K for r in ranks) / n, 3),
            "mrr": round(sum(1 / r for r in ranks if r is not None and r <= K) / n, 3)}


def score(top, queries: list[tuple[str, str]]) -> dict:
    """hit@1, hit@10 and MRR@10 of a ranking (``top(query) -> page ids``) on (query, page id) pairs."""
    return metrics([rank_of(top(q), pid) for q, pid in queries])


def score_many(top_many, queries: list[tuple[str, str]]) -> dict:
    """:func:`score` for a ranking that answers a batch (``top_many(queries) -> [page ids]``)."""
    found = top_many([q for q, _ in queries]) if queries else []
    return metrics([rank_of(ranked, pid) for ranked, (_, pid) in zip(found, queries)])


OVERRIDES: list[str] = []  # --set: demo config overrides (tools.dense.text=title_lead), for every ranker and build


def config(ranker: str = "hybrid"):
    return load_config(str(ROOT / "configs" / "demo.yaml"), [*OVERRIDES, f"tools.ranker={ranker}"])


def build(out: Path, upto: str = "embed") -> Store:
    """The demo store up to its page vectors (``embed`` under ``tools.ranker=hybrid``; reused when current)."""
    cfg = config("hybrid")
    store = Store(out)
    for stage in PIPELINE.upto(upto):
        run_stage(stage, cfg, store, progress=False)
    return store


def dense_of(ranking):
    """The :class:`~synth.tools.dense.DenseIndex` inside a ranking that :func:`open_search` registered."""
    todo = [ranking]
    while todo:
        r = todo.pop()
        if hasattr(r, "dense"):
            return r.dense
        todo += [x for x in [getattr(r, "inner", None), *getattr(r, "rankings", [])] if x is not None]
    return None


def open_rankers(store: Store) -> dict[str, SearchIndex]:
    """The agents' index under each ranker, as :func:`open_search` opens it for them."""
    return {r: open_search(store, config(r).tools) for r in RANKERS}


def prewarm(indexes: dict[str, SearchIndex], texts: list[str]) -> None:
    """Embed every query in batches into the dense rankings' memory, at the depth each will ask for
    (``dense``: the top :data:`K`; ``hybrid``: :data:`HYBRID_DEPTH`)."""
    for name, depth in (("dense", K), ("hybrid", HYBRID_DEPTH)):
        dense = dense_of(indexes[name].ranking(name))
        texts_ok = [t for t in dict.fromkeys(texts) if query_terms(t)]
        for a in range(0, len(texts_ok), 2048):
            dense.search_many(texts_ok[a:a + 2048], depth)


def evaluate(indexes: dict[str, SearchIndex], baselines: dict, pages: list[dict], n: int, runs: int,
             df: dict[str, int]) -> dict:
    """Median over ``runs`` samples of every set's figures per ranking."""
    samples = [query_sets(pages, n, seed, df) for seed in range(runs)]
    prewarm(indexes, [q for sets in samples for qs in sets.values() for q, _ in qs])
    per_run = []
    for sets in samples:
        res = {}
        for name, queries in sets.items():
            res[name] = {r: score(lambda q, r=r: indexes[r].search_ids(q, K), queries) for r in RANKERS}
            res[name]["body"] = score(lambda q: indexes["bm25"].search_ids(q, K, ranking="body"), queries)
            res[name]["rank_bm25"] = score(baselines["rank_bm25"].top, queries)
            res[name]["bm25s"] = score_many(baselines["bm25s"].top_many, queries)
            res[name]["faiss"] = score_many(baselines["faiss"].top_many, queries)
            res[name]["queries"] = len(queries)
        per_run.append(res)
    med: dict = {}
    for name in SETS:
        med[name] = {"queries": per_run[0][name]["queries"],
                     "examples": [q for q, _ in samples[0][name][:2]]}
        for r in RANKINGS:
            med[name][r] = {m: statistics.median(run[name][r][m] for run in per_run) for m in ("hit1", "hit10", "mrr")}
    return med


FUSION_METHODS = ("rrf", "zscore", "dbsf", "minmax")  # what --fusions measures (rrf: weighted reciprocal rank)
FUSION_WEIGHTS = tuple(round(0.1 + 0.05 * i, 2) for i in range(17))  # BM25's weight w, the dense list's 1 - w
GATED_WEIGHTS = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5)  # z-score fusion with the dense list gated by its top cosine
GATE_LO, GATE_HI = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75), (0.8, 0.85, 0.9, 0.95, 1.0)
_PINNED_MAX = 16  # the lists are fetched this much deeper than HYBRID_DEPTH, so the pinned pages can be dropped


def variant_name(v: tuple) -> str:
    """``method@w``, and ``gate lo-hi`` for a gated dense list: a fusion variant ``(method, w, gate)``."""
    method, w, gate = v
    return f"{method}@{w}" + (f" gate {gate[0]}-{gate[1]}" if gate else "")


def family(v: tuple) -> str:
    return v[0] + ("+gate" if v[2] else "")


class FusionInputs:
    """Per distinct query, what the hybrid fuses, fetched once: the pages titled as the query (the title rule puts
    them first) and the BM25 and dense lists, each :data:`HYBRID_DEPTH` deep with the pinned pages taken out, as
    the hybrid ranking asks its lists (:class:`~synth.tools.rank.TitleFirst` excludes what it pinned)."""

    def __init__(self, indexes: dict[str, SearchIndex], texts: list[str]):
        from synth.tools.rank import DenseRanking

        index = indexes["bm25"]
        tool, dense = index.ranking("tool"), dense_of(indexes["hybrid"].ranking("hybrid"))
        texts = [t for t in dict.fromkeys(texts) if query_terms(t)]
        for a in range(0, len(texts), 2048):
            dense.scored_many(texts[a:a + 2048], HYBRID_DEPTH)  # embedded in batches, then answered from memory
        by_meaning = DenseRanking(dense)
        self.inputs: dict[str, tuple] = {}
        for t in texts:
            pinned = index.title_page_ids(t)[:K]
            ex = frozenset(pinned)
            self.inputs[t] = (pinned, tool.scored(t, HYBRID_DEPTH, ex), by_meaning.scored(t, HYBRID_DEPTH, ex),
                              tool.floor, by_meaning.floor)

    def top(self, query: str, method: str, w: float, gate: tuple | None = None) -> list[str]:
        """The top :data:`K` of the hybrid fusing its lists by ``method`` with weights ``(w, 1 - w)``, the dense
        list gated by ``gate`` (:func:`~synth.tools.search.fuse_scores`)."""
        from synth.tools.search import fuse_scores, reciprocal_rank_fusion

        if query not in self.inputs:
            return []
        pinned, bm25, dense, f_bm25, f_dense = self.inputs[query]
        n = K - len(pinned)
        if n <= 0:
            return pinned[:K]
        if method == "rrf":
            rest = reciprocal_rank_fusion([[p for p, _ in bm25], [p for p, _ in dense]], n, [w, 1 - w])
        else:
            rest = fuse_scores([bm25, dense], n, [w, 1 - w], method, HYBRID_DEPTH, [f_bm25, f_dense], [None, gate])
        return pinned + rest


def fusion_table(inputs: FusionInputs, samples: list[dict], indexes: dict[str, SearchIndex],
                 variants: list[tuple]) -> dict:
    """Median over ``samples`` of every set's hit@1 / hit@10 / MRR@10 for each fusion variant ``(method, w,
    gate)``, and of ``bm25`` and ``dense`` (the agents' rankers) beside them."""
    per_run = []
    for sets in samples:
        res = {}
        for name, queries in sets.items():
            res[name] = {v: score(lambda q, v=v: inputs.top(q, *v), queries) for v in variants}
            for r in ("bm25", "dense"):
                res[name][r] = score(lambda q, r=r: indexes[r].search_ids(q, K), queries)
        per_run.append(res)
    return {name: {v: {m: statistics.median(run[name][v][m] for run in per_run) for m in ("hit1", "hit10", "mrr")}
                   for v in per_run[0][name]} for name in SETS}


def worst_margin(table: dict, v) -> float:
    """The smallest margin of variant ``v`` over the better of ``bm25`` and ``dense``, on hit@10 and on MRR@10,
    across the sets but ``title`` (the goal is a margin >= 0 on each)."""
    return round(min(table[s][v][m] - max(table[s]["bm25"][m], table[s]["dense"][m])
                     for s in SETS if s != "title" for m in ("hit10", "mrr")), 4)


def fusions(indexes: dict[str, SearchIndex], pages: list[dict], n: int, runs: int, df: dict[str, int]) -> dict:
    """Each fusion's parameters (its BM25 weight; gated, the gate too) chosen on queries of the calibration half
    (seed 1000; by worst margin over the better of bm25 and dense, then mean MRR@10 over the sets), then every
    fusion at its chosen parameters and at equal weights measured on the evaluation half's samples (seeds 0 to
    ``runs - 1``, the main table's queries): the reported figures were never tuned on."""
    held = [p for p in pages if held_out(p["page_id"])]
    evaluation = [p for p in pages if not held_out(p["page_id"])]
    calibration = [query_sets(held, n, 1000, df)]
    samples = [query_sets(evaluation, n, seed, df) for seed in range(runs)]
    texts = [q for sets in calibration + samples for qs in sets.values() for q, _ in qs]
    prewarm(indexes, texts)
    inputs = FusionInputs(indexes, texts)
    grid = [(m, w, None) for m in FUSION_METHODS for w in FUSION_WEIGHTS]
    grid += [("zscore", w, (lo, hi)) for w in GATED_WEIGHTS for lo in GATE_LO for hi in GATE_HI]
    cal = fusion_table(inputs, calibration, indexes, grid)
    mean_mrr = lambda t, v: statistics.mean(t[s][v]["mrr"] for s in SETS)  # noqa: E731
    chosen: dict[str, tuple] = {}
    for v in grid:
        best = chosen.get(family(v))
        rank = lambda v: (worst_margin(cal, v), mean_mrr(cal, v), -abs(v[1] - 0.5))  # noqa: E731
        if best is None or rank(v) > rank(best):
            chosen[family(v)] = v
    variants = list(dict.fromkeys([(m, 0.5, None) for m in FUSION_METHODS] + list(chosen.values())))
    ev = fusion_table(inputs, samples, indexes, variants)
    return {"calibration": {variant_name(v): {"worst_margin": worst_margin(cal, v),
                                              "mean_mrr": round(mean_mrr(cal, v), 4)} for v in grid},
            "chosen": {f: variant_name(v) for f, v in chosen.items()},
            "evaluation": {variant_name(v): {"worst_margin": worst_margin(ev, v), **{s: ev[s][v] for s in SETS}}
                           for v in variants},
            "rankers": {r: {s: ev[s][r] for s in SETS} for r in ("bm25", "dense")}}


def goals_of(med: dict) -> dict:
    """Each goal (module docstring) per set: met or not."""
    out = {}
    for name in SETS:
        r = med[name]
        if name == "title":
            out[name] = {f"{x}_hit1>=0.99": r[x]["hit1"] >= 0.99 for x in RANKERS}
            continue
        ge = lambda a, b: r[a]["hit10"] >= r[b]["hit10"] and r[a]["mrr"] >= r[b]["mrr"]  # noqa: E731
        out[name] = {"bm25>=rank_bm25": ge("bm25", "rank_bm25"), "hybrid>=bm25": ge("hybrid", "bm25"),
                     "hybrid>=dense": ge("hybrid", "dense")}
    return out


def calibrate(out: Path, pages: list[dict], n: int) -> dict:
    """The tool ranking's figures on held-out queries for title weights 1-4 (a fresh index each), and each
    weight's worst margin over the baseline's MRR across the sets (the goal is to beat it on every set)."""
    held = [p for p in pages if held_out(p["page_id"])]
    sets = query_sets(held, n, seed=1000, df=page_frequencies(pages))
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


def print_fusions(res: dict, args, load, t0) -> dict:
    """--fusions' tables (Markdown) and its JSON line."""
    print(f"fusions: BM25 weight w (dense 1 - w; gated: the gate too) chosen per method on the calibration half "
          f"(seed 1000, {args.queries} queries a set); figures: median of {args.runs} evaluation samples; overrides "
          f"{args.overrides or 'none'}; load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")
    print("chosen on the calibration half: " + ", ".join(res["chosen"].values()))
    rows = {**{r: res["rankers"][r] for r in ("bm25", "dense")}, **res["evaluation"]}
    print("\n| ranking (hit@10 / MRR@10) | " + " | ".join(s for s in SETS if s != "title")
          + " | title hit@1 | worst margin |")
    print("| --- |" + " ---: |" * len(SETS) + " ---: |")
    for name, r in rows.items():
        print(f"| {name} | " + " | ".join(f"{r[s]['hit10']:.3f} / {r[s]['mrr']:.3f}" for s in SETS if s != "title")
              + f" | {r['title']['hit1']:.3f} | {r.get('worst_margin', '')} |")
    line = {"bench": "retrieval", "mode": "fusions", "queries": args.queries, "runs": args.runs,
            "overrides": args.overrides, **res, "loadavg": [round(x, 2) for x in load],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()], "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(line))
    return line


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "bench-retrieval",
                    help="a run folder with corpus/pages (its index and page vectors are rebuilt when missing or stale)")
    ap.add_argument("--queries", type=int, default=1000,
                    help="queries per set and sample (each dense query costs a model call)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--calibrate", action="store_true")
    ap.add_argument("--fusions", action="store_true",
                    help="measure the hybrid's fusion methods (RRF, z-score, DBSF, min-max), each with its BM25 "
                         "weight chosen on the calibration half, on the evaluation half's queries")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="a demo config override for every ranker and the build (tools.dense.text=title_lead)")
    args = ap.parse_args(argv)
    OVERRIDES[:] = args.overrides
    load = os.getloadavg()
    t0 = time.perf_counter()
    store = build(args.out, "index" if args.calibrate else "embed")
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
    indexes = open_rankers(store)
    if args.fusions:
        return print_fusions(fusions(indexes, pages, args.queries, args.runs, page_frequencies(pages)), args, load, t0)
    cfg = config("dense")
    bm25s_baseline = BM25S(pages)
    baselines = {"rank_bm25": Baseline(pages), "bm25s": bm25s_baseline,
                 "faiss": FlatBaseline(Path(store.path("embed")), dense_of(indexes["dense"].ranking("dense")).embedder,
                                       cfg.tools.dense.query_max_tokens)}
    med = evaluate(indexes, baselines, evaluation, args.queries, args.runs, page_frequencies(pages))
    print(f"{len(pages):,} pages; {args.runs} samples of {args.queries} queries a set from the evaluation half "
          f"(seeds 0-{args.runs - 1}); median over the samples; load average {load[0]:.2f} / {load[1]:.2f} / "
          f"{load[2]:.2f}")
    for name in SETS:
        print(f"  {name} ({med[name]['queries']}), e.g. " + " | ".join(repr(q) for q in med[name]["examples"]))
    for metric, label in (("hit1", "hit@1"), ("hit10", "hit@10"), ("mrr", "MRR@10")):
        print(f"\n{label}\n| queries | " + " | ".join(RANKINGS) + " |")
        print("| --- |" + " ---: |" * len(RANKINGS))
        for name in SETS:
            print(f"| {name} | " + " | ".join(f"{med[name][r][metric]:.3f}" for r in RANKINGS) + " |")
    goals = goals_of(med)
    print()
    for name, g in goals.items():
        missed = [k for k, ok in g.items() if not ok]
        print(f"goals, {name}: " + ("met" if not missed else "MISSED " + ", ".join(missed)))
    line = {"bench": "retrieval", "pages": len(pages), "queries": args.queries, "runs": args.runs,
            "sets": med, "goals": goals, "goal_met": all(all(g.values()) for g in goals.values()),
            "loadavg": [round(x, 2) for x in load], "loadavg_end": [round(x, 2) for x in os.getloadavg()],
            "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(line))
    return line

if __name__ == "__main__":
    main()
