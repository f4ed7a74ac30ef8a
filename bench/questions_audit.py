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

The last line is JSON with the counts.  Usage: python bench/questions_audit.py DIR
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import pyarrow.dataset as ds

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synth.tools.search import SearchIndex  # noqa: E402

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


def main(root: Path) -> dict:
    qs = ds.dataset(root / "questions").to_table().to_pylist()
    pages = {r["page_id"]: r for r in ds.dataset(root / "corpus/pages").to_table(
        columns=["page_id", "title", "description", "aliases"]).to_pylist()}
    out_links, in_links = defaultdict(set), defaultdict(set)
    for r in ds.dataset(root / "corpus/links").to_table(columns=["src_id", "dst_id"]).to_pylist():
        out_links[r["src_id"]].add(r["dst_id"])
        in_links[r["dst_id"]].add(r["src_id"])
    index = SearchIndex.open(root / "index")
    n = defaultdict(int)
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
        tokens = [t for t in re.findall(r"\w+", ans["title"] + " " + (ans["description"] or "")) if t.isdigit()]
        tokens += re.findall(r"\(([A-Z][a-z]?)\)", ans["description"] or "")
        n["answer_leak"] += any(has(q["question"], x) for x in leak) or any(
            re.search(rf"(?<!\w){re.escape(t)}(?!\w)", body) for t in tokens)
        core = re.split(r"[(;,]", ans["description"] or "", maxsplit=1)[0]
        n["answer_description"] += len(norm(core).split()) >= 2 and has(q["question"], core)
    result = {"questions": len(qs), **dict(n)}
    result["final_sentence_share"] = round(n["final_sentence_top5"] / max(1, len(qs)), 4)
    return result


if __name__ == "__main__":
    res = main(Path(sys.argv[1]))
    for k, v in res.items():
        print(f"{k:>24}: {v}")
    print(json.dumps(res))
