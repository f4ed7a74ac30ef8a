"""Question synthesis: walks (and subgraphs) -> verified multi-hop questions.

For each walk the teacher gets ``prompts/question.jinja2`` (the path's entities and
the evidence of every hop) and must return JSON with the question, the answer and
its aliases, and one ``{sub_question, bridge}`` per hop.  For each subgraph it gets
``prompts/subgraph_question.jinja2`` and must chain several of the subgraph's links
(OpenSeeker-v2).  Parsing never raises: bad output is kept in ``rejects/questions``
with its reason.  Every check below is a counted drop reason:

(A call that failed after its retries is no drop: the source is counted as failed, with the reason,
and the next run retries it; see :class:`synth.questions.write.Funnel`.)
``empty`` / ``truncated`` / ``prose`` / ``invalid_json``  no readable JSON object in the reply
                   (:data:`synth.teacher.prompting.PARSE_REASONS`)
``schema_error``   JSON without the required keys and types
``hop_missing``    a bridging entity missing, unknown or out of order
``wrong_answer``   the answer is not the last entity's title or alias
``answer_leak``    the answer, an alias, or a distinctive token of them (a year, a number, a
                   symbol: :func:`synth.text.question_text.answer_tokens`) appears in the question
``length``         the question is too short or too long
``no_clue``        the teacher found no clue for some hop that only the previous page resolves, and said so
``no_chain``       the teacher found no chain long enough through a subgraph, and said so
``duplicate``      the same question as an earlier one, after normalisation
``answer_repeat``  its answer page already answers ``walk.max_answer_repeats`` earlier questions (source order)
``too_easy`` / ``unsolvable`` / ``obfuscate_failed`` / ``shortcut``  the optional checks
``contaminated_path`` / ``contaminated_entity``  the walk or subgraph retraces a benchmark question; no question
                   is requested (:mod:`synth.questions.decontam`, ``questions.decontaminate``)
``contaminated_text`` the written question shares an n-gram with a benchmark question; dropped before rollout

The validators that need the corpus (``answer_description``, ``skippable_hop``,
``ambiguous_hop``, ``clue_shortcut``) are in :mod:`synth.questions.validate`; a question
that fails one of them, or one of the checks above it can be fixed by a rewrite, gets
one repair request (:mod:`synth.questions.write`).
"""

from __future__ import annotations

import hashlib
from typing import Any

import pyarrow.compute as pc

from synth.text.answers import names_of, normalize_answer
from synth.text.question_text import leaked
from synth.engine.stage import StageContext
from synth.teacher.tasks import Source, Task
from synth.engine.records import SPLITS, Hop, Question, Subgraph, Walk
from synth.engine.seeding import derive_seed

# ---- parsing and validation -------------------------------------------------------------

def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def parse_question(src: Source, reply: Any, qcfg, teacher_model: str,
                   task: Task) -> tuple[Question | None, str | None, str]:
    """Parse and validate a reply (its text, or the whole response) into a :class:`Question`, or
    ``(None, reason, detail)``. Never raises."""
    obj, reason, detail = task.format_output(reply)
    if obj is None:
        return None, reason, detail
    if "question" not in obj:
        # A teacher may decline, as the prompts allow: a hop with no clue only its previous page resolves, or
        # (a subgraph) no chain of links long enough.
        if "no_clue" in obj:
            return None, "no_clue", f"hop {obj.get('no_clue')}: {obj.get('why') or 'no clue fits'}"
        if "no_chain" in obj:
            return None, "no_chain", str(obj.get("why") or "no chain of links long enough")
    q, ans, aliases, hops = obj.get("question"), obj.get("answer"), obj.get("answer_aliases", []), obj.get("hops")
    if not (isinstance(q, str) and q.strip() and isinstance(ans, str) and ans.strip() and _is_str_list(aliases)
            and isinstance(hops, list) and hops
            and all(isinstance(h, dict) and isinstance(h.get("bridge"), str) and isinstance(h.get("sub_question"), str) for h in hops)):
        return None, "schema_error", "needs question, answer, answer_aliases[str], hops[{sub_question, bridge}]"
    if src.kind == "walk":
        chain, why = _walk_chain(src, hops)
    else:
        chain, why = _subgraph_chain(src, obj.get("start"), hops, qcfg.min_subgraph_hops)
    if chain is None:
        return None, "hop_missing", why
    target = chain[-1]
    if normalize_answer(ans) not in {normalize_answer(n) for n in names_of(target)}:
        return None, "wrong_answer", f"answer {ans!r} is not {target['title']!r}"
    all_aliases = list(dict.fromkeys([a.strip() for a in aliases if a.strip()] + names_of(target)[1:]))
    all_aliases = [a for a in all_aliases if normalize_answer(a) != normalize_answer(target["title"])]
    leak = leaked(q, target, [ans, *all_aliases], named=[chain[0]["title"]])
    if leak is not None:
        return None, "answer_leak", f"question gives away {leak!r}"
    n_words = len(q.split())
    if not qcfg.min_words <= n_words <= qcfg.max_words:
        return None, "length", f"{n_words} words, allowed {qcfg.min_words}..{qcfg.max_words}"
    question = Question(
        question_id=src.question_id, kind=src.kind, source_id=src.source_id,
        path=[e["page_id"] for e in chain], titles=[e["title"] for e in chain], question=q.strip(),
        answer=target["title"], answer_aliases=all_aliases, answer_page_id=target["page_id"],
        hops=[Hop(h["sub_question"], e["title"], e["page_id"]) for h, e in zip(hops, chain[1:])],
        teacher_model=teacher_model, prompt_sha=task.sha, seed=src.seed,
        split=split_of(target["page_id"], qcfg.splits),
    )
    return question, None, ""


def split_of(answer_page_id: str, fractions) -> str:
    """The question's split: a stable hash of its *answer page* placed on the configured fractions (sft, rl,
    eval) -- a group split by answer entity.

    Questions that share an answer share a split, so no eval question's answer is the answer of a
    training question (a student cannot score on eval by remembering answers it was trained on).  It
    depends on the answer page alone, so rewriting, filtering or re-rolling a question never moves it
    between splits, and no training table can take an eval question."""
    u = int(hashlib.blake2b(("answer:" + answer_page_id).encode(), digest_size=8).hexdigest(), 16) / 2.0 ** 64
    edge = 0.0
    for name in SPLITS:
        edge += getattr(fractions, name)
        if u < edge:
            return name
    return SPLITS[-1]


def _walk_chain(src: Source, hops: list[dict]) -> tuple[list[dict] | None, str]:
    if len(hops) != len(src.links):
        return None, f"{len(hops)} hops for a {len(src.links)}-hop path"
    for i, (h, e) in enumerate(zip(hops, src.entities[1:])):
        if normalize_answer(h["bridge"]) not in {normalize_answer(n) for n in names_of(e)}:
            return None, f"hop {i + 1} bridges {h['bridge']!r}, expected {e['title']!r}"
    return list(src.entities), ""


def _subgraph_chain(src: Source, start: Any, hops: list[dict], min_hops: int) -> tuple[list[dict] | None, str]:
    if not isinstance(start, str) or src.entity(start) is None:
        return None, f"start {start!r} is not an entity of the subgraph"
    if len(hops) < min_hops:
        return None, f"{len(hops)} hops, at least {min_hops} needed"
    chain = [src.entity(start)]
    edges = {(l.src_id, l.dst_id) for l in src.links}
    for i, h in enumerate(hops):
        e = src.entity(h["bridge"])
        if e is None:
            return None, f"hop {i + 1} bridges {h['bridge']!r}, not an entity of the subgraph"
        a, b = chain[-1]["page_id"], e["page_id"]
        if (a, b) not in edges and (b, a) not in edges:
            return None, f"hop {i + 1}: no link between {chain[-1]['title']!r} and {e['title']!r}"
        if any(b == c["page_id"] for c in chain):
            return None, f"hop {i + 1} revisits {e['title']!r}"
        chain.append(e)
    return chain, ""


# ---- loading sources --------------------------------------------------------------------

def load_sources(ctx: StageContext) -> list[Source]:
    """Walks (then subgraphs, when present) with the metadata of every page they touch."""
    store, qcfg, seed = ctx.store, ctx.cfg.questions, ctx.cfg.seed
    walks = ([Walk.from_row(r) for r in store.read("walks", hint="walk").to_pylist()]
             if qcfg.from_walks else [])
    subs = ([Subgraph.from_row(r) for r in store.read("subgraphs").to_pylist()]
            if qcfg.from_subgraphs and store.exists("subgraphs") else [])
    ids = {pid for w in walks for pid in w.path} | {pid for s in subs for pid in s.nodes}
    meta = page_meta(store, ids)
    out = [Source("walk", w.walk_id, [meta[p] for p in w.path], w.hops, derive_seed(seed, "questions", w.walk_id))
           for w in walks]
    out += [Source("subgraph", s.subgraph_id, [meta[p] for p in s.nodes], s.edges,
                   derive_seed(seed, "questions", s.subgraph_id)) for s in subs]
    return out


def page_meta(store, ids: set[str], columns: tuple[str, ...] = ("page_id", "title", "description", "aliases")) -> dict[str, dict]:
    """Rows of ``corpus/pages`` for the given page ids, keyed by id."""
    if not ids:
        return {}
    ds = store.dataset("corpus/pages", hint="ingest")
    t = ds.to_table(columns=list(columns), filter=pc.field("page_id").isin(sorted(ids)))
    return {r["page_id"]: r for r in t.to_pylist()}


__all__ = ["parse_question", "load_sources", "page_meta", "split_of"]
