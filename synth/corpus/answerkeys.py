"""Answer keys from the corpus: which strings name a question's answer page, and which name another page.

A teacher answers with a page, so an answer is judged by page identity (:func:`synth.text.answers.judge`)
against an :class:`~synth.text.answers.AnswerKey` built here, once per run, for every question:

- **names**: the answer page's title, its title without a "(qualifier)", its aliases in the corpus
  (``corpus/pages.aliases``, Wikidata's), and the aliases the teacher wrote that the corpus supports.
  A teacher alias is supported when, after folding and normalisation (:func:`~synth.text.answers.answer_text`),
  it is one of the page's own names or the text of a link to the page somewhere in the corpus (an anchor:
  what the encyclopedia's writers call the page, as a redirect would).  An unsupported alias is dropped
  from the key and counted (``aliases.dropped``, with examples): trusted unchecked, it would widen what
  counts as correct to whatever the teacher said.
- **other titles**: the titles of other pages whose token F1 against a name reaches ``min_f1``, the ones
  the F1 fallback would otherwise accept ("New York City" for New York, "List of rivers of Germany" for
  "...of France").  Found by a set-similarity join over every title: a title that reaches the threshold
  shares at least ``ceil(f·n / (2 − f))`` of a name's ``n`` words, so it holds one of that name's rarest
  words (prefix filtering); only titles holding one are scored.  At most :data:`MAX_OTHER_TITLES` per
  question are kept, closest first (``other_titles.capped`` counts the questions cut).

The keys are cached in ``DIR/.cache/answer_keys/`` under a digest of the questions' and the corpus's
stage keys, ``min_f1`` and this code, so the rollout, filter (and its workers), eval and rl_band stages of
a run build them once, and a stage's shards read them once per process (``ctx.shared``).  A store without a corpus (a hand-made one) gets keys of the question's answer and
aliases alone.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from synth.text.answers import AnswerKey, _f1, answer_text, names_of

log = logging.getLogger("hopforge")

MAX_OTHER_TITLES = 200
MAX_EXAMPLES = 20
CACHE_FOLDER = Path(".cache") / "answer_keys"
_SCHEMA = pa.schema([("question_id", pa.string()), ("names", pa.list_(pa.string())),
                     ("other_titles", pa.list_(pa.string()))])
_BATCH = 65_536


class AnswerKeys(Mapping):
    """question_id -> :class:`~synth.text.answers.AnswerKey`, with ``stats`` (what the build found) and
    ``min_f1`` (the threshold the other titles were gathered at)."""

    def __init__(self, keys: dict[str, AnswerKey], stats: dict[str, Any], min_f1: float):
        self._keys, self.stats, self.min_f1 = keys, stats, min_f1

    def __getitem__(self, qid: str) -> AnswerKey:
        return self._keys[qid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def key_for(self, question: Any) -> AnswerKey:
        """The key of ``question`` (a :class:`~synth.engine.records.Question`); one of its answer and aliases
        alone when the build did not see it."""
        key = self._keys.get(question.question_id)
        return key if key is not None else AnswerKey.of(question.golds)


def answer_keys(store: Any, min_f1: float, shared: Callable[..., Any] | None = None) -> AnswerKeys:
    """The answer keys of every question in ``store``'s ``questions`` table at ``min_f1`` (see the module
    docstring): read from the run's cache, or built (and cached).  ``shared`` (a stage run's ``ctx.shared``)
    keeps them for the run's other shards in this process."""
    if shared is not None:
        return shared(f"answer-keys:{min_f1!r}", lambda: answer_keys(store, min_f1))
    digest = _digest(store, min_f1)
    keys = _read_cache(store, digest, min_f1) if digest else None
    if keys is None:
        keys = build(store, min_f1)
        if digest:
            _write_cache(store, digest, keys)
    return keys


def _digest(store: Any, min_f1: float) -> str | None:
    """The cache digest: the questions' and the corpus's stage keys, ``min_f1`` and this code; None for a store
    whose questions or corpus no stage wrote (nothing to key a cache by)."""
    q, c = store.stage_entry("questions"), store.stage_entry("ingest")
    if not q or not c or not q.get("key") or not c.get("key"):
        return None
    h = hashlib.sha256(f"{q['key']} {c['key']} {min_f1!r} {MAX_OTHER_TITLES}".encode())
    from synth.text import answers

    for module in (__file__, answers.__file__):
        h.update(Path(module).read_bytes())
    return h.hexdigest()[:24]


def _read_cache(store: Any, digest: str, min_f1: float) -> AnswerKeys | None:
    path = Path(store.root) / CACHE_FOLDER / f"{digest}.parquet"
    if not path.is_file():
        return None
    try:
        table = pq.read_table(path)
        stats = json.loads((table.schema.metadata or {})[b"stats"])
    except (OSError, KeyError, ValueError, pa.ArrowException):
        return None  # a damaged cache file is built again
    keys = {qid: AnswerKey(tuple(names), tuple(others), min_f1) for qid, names, others in
            zip(table.column("question_id").to_pylist(), table.column("names").to_pylist(),
                table.column("other_titles").to_pylist())}
    return AnswerKeys(keys, stats, min_f1)


def _write_cache(store: Any, digest: str, keys: AnswerKeys) -> None:
    from synth.engine.store import write_parquet_atomic

    qids = sorted(keys)
    table = pa.table({"question_id": qids, "names": [list(keys[q].names) for q in qids],
                      "other_titles": [list(keys[q].other_titles) for q in qids]}, schema=_SCHEMA)
    table = table.replace_schema_metadata({"stats": json.dumps(keys.stats)})
    try:
        write_parquet_atomic(table, Path(store.root) / CACHE_FOLDER / f"{digest}.parquet")
    except OSError as e:  # a cache: a folder that cannot take it costs a rebuild, not the run
        log.warning("answer keys: not cached (%s)", e)


def build(store: Any, min_f1: float) -> AnswerKeys:
    """Build the answer keys of every question of ``store`` at ``min_f1`` (see the module docstring)."""
    qt = store.read("questions", columns=["question_id", "answer", "answer_aliases", "answer_page_id"],
                    hint="questions")
    questions = qt.to_pylist()
    if not store.exists("corpus/pages"):
        keys = {r["question_id"]: AnswerKey.of([r["answer"], *(r["answer_aliases"] or [])]) for r in questions}
        return AnswerKeys(keys, {"questions": len(keys), "corpus": False}, min_f1)
    pages = _answer_pages(store, {r["answer_page_id"] for r in questions})
    own = {pid: [n for n in names_of(p) if n] for pid, p in pages.items()}
    unsupported: dict[str, set[str]] = defaultdict(set)  # page id -> teacher alias forms the page's names lack
    for r in questions:
        forms = {answer_text(n) for n in own.get(r["answer_page_id"], [r["answer"]])}
        for a in r["answer_aliases"] or []:
            if a and answer_text(a) and answer_text(a) not in forms:
                unsupported[r["answer_page_id"]].add(answer_text(a))
    anchors = _anchor_forms(store, unsupported)
    names: dict[str, tuple[str, ...]] = {}
    teacher = kept = 0
    dropped: list[dict] = []
    n_dropped = 0
    for r in questions:
        pid = r["answer_page_id"]
        page_names = own.get(pid) or [r["answer"]]
        forms = {answer_text(n) for n in page_names}
        out = [r["answer"], *page_names]
        for a in r["answer_aliases"] or []:
            f = answer_text(a) if a else ""
            if not f or f in forms:
                out.append(a)
                continue
            teacher += 1
            if f in anchors.get(pid, ()):
                kept += 1
                out.append(a)
            else:
                n_dropped += 1
                if len(dropped) < MAX_EXAMPLES:
                    dropped.append({"question_id": r["question_id"], "answer": r["answer"], "alias": a})
        names[r["question_id"]] = tuple(dict.fromkeys(n for n in out if n))
    others, capped = _other_titles(store, {r["question_id"]: (r["answer_page_id"], names[r["question_id"]])
                                           for r in questions}, min_f1)
    keys = {qid: AnswerKey(ns, tuple(others.get(qid, ())), min_f1) for qid, ns in names.items()}
    stats = {"questions": len(keys), "corpus": True,
             "aliases": {"teacher": teacher, "kept": kept, "dropped": n_dropped, "dropped_examples": dropped},
             "other_titles": {"questions": sum(1 for k in keys.values() if k.other_titles),
                              "titles": sum(len(k.other_titles) for k in keys.values()), "capped": capped,
                              "min_f1": min_f1}}
    if n_dropped:
        log.info("answer keys: %d of %d teacher-written aliases have no support in the corpus and are not accepted "
                 "as answers (e.g. %r for %r)", n_dropped, teacher, dropped[0]["alias"], dropped[0]["answer"])
    return AnswerKeys(keys, stats, min_f1)


def keys_for_pages(store: Any, answers: Mapping[str, tuple[str | None, list[str]]], min_f1: float
                   ) -> dict[str, AnswerKey]:
    """Answer keys for questions the pipeline did not write (benchmark questions): ``answers`` maps an id to
    ``(answer page id or None, the question's own answers)``.  A resolved page adds its names (title, the title
    without its qualifier, its corpus aliases); the other titles are gathered as for the run's questions, so the
    same rule (page identity first, then F1) judges both.  Not cached: the caller keeps what it needs."""
    pages = _answer_pages(store, {p for p, _ in answers.values() if p}) if store.exists("corpus/pages") else {}
    names = {}
    for qid, (pid, golds) in answers.items():
        own = [n for n in names_of(pages[pid]) if n] if pid in pages else []
        names[qid] = tuple(dict.fromkeys(n for n in [*golds, *own] if n))
    if not store.exists("corpus/pages"):
        return {qid: AnswerKey(ns) for qid, ns in names.items()}
    others, _ = _other_titles(store, {qid: (answers[qid][0] or "", ns) for qid, ns in names.items()}, min_f1)
    return {qid: AnswerKey(ns, tuple(others.get(qid, ())), min_f1) for qid, ns in names.items()}


def _answer_pages(store: Any, ids: set[str]) -> dict[str, dict]:
    """``page_id -> {title, aliases}`` of the answer pages."""
    if not ids:
        return {}
    t = store.dataset("corpus/pages", hint="ingest").to_table(
        columns=["page_id", "title", "aliases"], filter=pc.field("page_id").isin(sorted(ids)))
    return {r["page_id"]: r for r in t.to_pylist()}


def _anchor_forms(store: Any, wanted: dict[str, set[str]]) -> dict[str, set[str]]:
    """Per page, those of its ``wanted`` forms that some link into the page has as its anchor text."""
    if not wanted or not store.exists("corpus/links"):
        return {}
    links = store.dataset("corpus/links", hint="ingest")
    if "anchor_text" not in links.schema.names:
        return {}
    found: dict[str, set[str]] = defaultdict(set)
    for batch in links.to_batches(columns=["dst_id", "anchor_text"], batch_size=_BATCH,
                                  filter=pc.field("dst_id").isin(sorted(wanted))):
        for dst, text in zip(batch.column("dst_id").to_pylist(), batch.column("anchor_text").to_pylist()):
            if text:
                f = answer_text(text)
                if f in wanted[dst]:
                    found[dst].add(f)
    return found


def min_overlap(n: int, min_f1: float) -> int:
    """The fewest words a title must share with a name of ``n`` words for its token F1 to reach ``min_f1``:
    ``F1 = 2s / (|t| + n) >= f`` with ``|t| >= s`` gives ``s >= f·n / (2 − f)``."""
    if min_f1 <= 0:
        return 0
    return max(1, math.ceil(min_f1 * n / (2 - min_f1) - 1e-9))


def _titles(store: Any) -> Iterator[tuple[list[str], list[str]]]:
    for batch in store.dataset("corpus/pages", hint="ingest").to_batches(columns=["page_id", "title"],
                                                                       batch_size=_BATCH):
        yield batch.column("page_id").to_pylist(), batch.column("title").to_pylist()


def _other_titles(store: Any, questions: dict[str, tuple[str, tuple[str, ...]]], min_f1: float
                  ) -> tuple[dict[str, list[str]], int]:
    """Per question, the titles of other pages within ``min_f1`` of a name (closest first, at most
    :data:`MAX_OTHER_TITLES`), and how many questions were cut there.  Two passes over the titles: the
    document frequency of the names' words, then the titles that hold one of a name's rarest words."""
    forms = {qid: [f for f in dict.fromkeys(answer_text(n) for n in ns) if f] for qid, (_, ns) in questions.items()}
    words = {w for fs in forms.values() for f in fs for w in f.split()}
    df: Counter[str] = Counter()
    for _, titles in _titles(store):
        for t in titles:
            for w in set(answer_text(t).split()) & words if t else ():
                df[w] += 1
    probe: dict[str, list[str]] = defaultdict(list)  # a rare word -> the questions one of whose names holds it
    for qid, fs in forms.items():
        prefix: set[str] = set()
        for f in fs:
            counts = Counter(f.split())
            left, need = sum(counts.values()), min_overlap(sum(counts.values()), min_f1)
            for w in sorted(counts, key=lambda w: (df[w], w)):
                if left < need:
                    break
                prefix.add(w)
                left -= counts[w]
        for w in prefix:
            probe[w].append(qid)
    found: dict[str, dict[str, float]] = defaultdict(dict)
    for pids, titles in _titles(store):
        for pid, t in zip(pids, titles):
            if not t:
                continue
            f = answer_text(t)
            hits = {qid for w in set(f.split()) if w in probe for qid in probe[w]}
            for qid in hits:
                if pid == questions[qid][0] or f in forms[qid]:
                    continue
                score = max(_f1(f, g) for g in forms[qid])
                if score >= min_f1:
                    found[qid][t] = max(score, found[qid].get(t, 0.0))
    out, capped = {}, 0
    for qid, scores in found.items():
        ranked = sorted(scores, key=lambda t: (-scores[t], t))
        capped += len(ranked) > MAX_OTHER_TITLES
        out[qid] = ranked[:MAX_OTHER_TITLES]
    return out, capped


__all__ = ["AnswerKeys", "MAX_OTHER_TITLES", "answer_keys", "build", "keys_for_pages", "min_overlap"]
