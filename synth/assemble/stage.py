"""The ``assemble`` stage: accepted questions -> ``longctx`` (tiered long-context rows).

For each accepted question and each target length L (``assemble.lengths``) one row
holds the gold documents (every page of the path, whole), tier-1 distractors (the
non-gold pages the question's traces retrieved, in order of first retrieval), and
tier-2 fill (BM25 neighbours of the question, then random pages) up to L tokens,
shuffled globally with a seed from (run seed, "assemble", question id, L)
(tiered long-context assembly).

Inputs.
  * ``questions``; the *accepted* ones are those with a row in ``sft`` (a kept trace)
    when ``DIR/sft`` exists, else every question.
  * ``traces``: tier-1 comes from the kept traces (trace ids in ``sft``) or from all of
    the question's traces (``assemble.tier1_from``).  Within a trace, pages count in
    the order they were retrieved — search results, then pages opened without having
    been seen in results; across traces, a page's rank is its earliest position in any
    trace (ties by sample index), i.e. the traces are merged turn by turn.
  * ``corpus/pages`` for the text, ``DIR/index`` for the BM25 neighbours, and the
    tokenizer at ``DIR/tokenizer`` (``AutoTokenizer.from_pretrained``; it must be fast).

Rows.  ``prompt`` is the preamble, the documents (``Document [i] (Title)`` + text) and
the question block, joined by ``doc_separator``; ``completion`` is the answer.
``n_tokens`` is ``len(tokenizer(prompt + completion, add_special_tokens=False))`` —
measured on the final text, no chat template, no special tokens — and always lies in
``[L - slack, L]``.  Token accounting and the fill rules are in
:mod:`synth.assemble.pack`.

Funnel.  Input: (accepted question, L) pairs; output: rows.  Drops, each written to
``rejects/assemble``: ``missing_gold`` (a path page is not in the corpus),
``gold_too_long`` (the gold documents with the prompt frame alone measure more than
L), ``underfilled`` (every candidate page together cannot reach L - slack).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from synth.assemble.config import AssembleConfig
from synth.assemble.pack import Job, Packer, Plan, RandomPages, TokenCounter, page_body
from synth.engine.stage import StageContext, StageResult
from synth.engine.records import LONGCTX_SCHEMA, REJECT_SCHEMA, Reject
from synth.engine.seeding import rng
from synth.engine.store import MissingInput, Store
from synth.engine.tables import RowMapping
from synth.tokenizer.tokens import load_tokenizer

log = logging.getLogger("hopforge")

STAGE = "assemble"
MAX_ATTEMPTS = 6  # plan / render / measure rounds per row; one is the rule, two the rare seam error



# ---- inputs -------------------------------------------------------------------------------------
def accepted_questions(store: Store, cfg: AssembleConfig) -> tuple[pa.Table, str]:
    """Accepted questions sorted by question id (at most ``max_questions``), and where acceptance came from.

    Only questions of the sft split are ever assembled: long-context rows are training data.  The table stays
    in Arrow (about a tenth of the same rows as Python dicts); each pass converts its own slice."""
    cols = ["question_id", "question", "answer", "answer_aliases", "path", "split"]
    table = store.read("questions", columns=cols, hint="questions")
    table = table.filter(pc.equal(table.column("split"), "sft"))
    source = "questions"
    if store.exists("sft"):
        kept = pc.unique(store.read("sft", columns=["question_id"]).column("question_id"))
        table = table.filter(pc.is_in(table.column("question_id"), value_set=kept))
        source = "sft"
    table = table.sort_by("question_id")
    if cfg.max_questions is not None:
        table = table.slice(0, cfg.max_questions)
    return table.combine_chunks(), source


class RetrievedPages(RowMapping):
    """Question id -> the pages its traces retrieved, in order of first retrieval: a read-only mapping over
    an Arrow table of ``(question_id, pages)``, each list built when it is asked for."""

    def __init__(self, table: pa.Table):
        super().__init__(table, "question_id", lambda row: row["pages"] or [], cache=0)


RANK_ROWS = 4096  # traces turned into Python objects at a time while ranking the retrieved pages


def _first_retrieval(rows: list[dict]) -> dict[str, list[str]]:
    """The rule, for rows holding all the traces of their questions: within a trace a page's rank is its
    position among the trace's distinct pages (search results, then pages opened); across a question's
    traces a page takes its smallest ``(rank, sample_index, trace_id)``, and the pages are ordered by it."""
    first: dict[str, dict[str, tuple[int, int, str]]] = {}
    for r in rows:
        seen = first.setdefault(r["question_id"], {})
        order = dict.fromkeys([*(r["searched_page_ids"] or []), *(r["opened_page_ids"] or [])])
        for rank, pid in enumerate(order):
            key = (rank, r["sample_index"], r["trace_id"])
            if pid not in seen or key < seen[pid]:
                seen[pid] = key
    return {q: sorted(pages, key=pages.__getitem__) for q, pages in first.items()}


def retrieved_pages(store: Store, question_ids: Iterable[str] | pa.Array, mode: str) -> RetrievedPages:
    """Pages each question's traces retrieved, in order of first retrieval (gold included): the traces merged
    turn by turn (:func:`_first_retrieval`).

    The id columns of the traces are read into Arrow and sorted by question, then ranked a few thousand
    traces at a time, whole questions together, into an Arrow table: memory holds the id columns and the
    result (7.5 MB for 17,836 questions at 100,000 traces, against 49 MB as lists), never every trace's
    page ids as Python objects at once."""
    ids = question_ids if isinstance(question_ids, (pa.Array, pa.ChunkedArray)) else pa.array(
        sorted(question_ids), pa.string())
    schema = pa.schema([("question_id", pa.string()), ("pages", pa.list_(pa.string()))])
    if not store.exists("traces") or len(ids) == 0:
        return RetrievedPages(schema.empty_table())
    cols = ["trace_id", "question_id", "sample_index", "searched_page_ids", "opened_page_ids"]
    t = store.read("traces", columns=cols)
    t = t.filter(pc.is_in(t.column("question_id"), value_set=pa.array(ids, pa.string())))
    if mode == "kept" and store.exists("sft"):
        kept = pc.unique(store.read("sft", columns=["trace_id"]).column("trace_id"))
        t = t.filter(pc.is_in(t.column("trace_id"), value_set=kept))
    t = t.take(pc.sort_indices(t, [("question_id", "ascending")]))
    qids = t.column("question_id").to_pylist()
    parts: list[pa.Table] = []
    start = 0
    while start < len(qids):
        end = min(start + RANK_ROWS, len(qids))
        while end < len(qids) and qids[end] == qids[end - 1]:
            end += 1  # a question's traces are ranked together
        ranked = _first_retrieval(t.slice(start, end - start).to_pylist())
        parts.append(pa.table({"question_id": list(ranked), "pages": list(ranked.values())}, schema=schema))
        start = end
    return RetrievedPages(pa.concat_tables(parts) if parts else schema.empty_table())


class Corpus:
    """``corpus/pages``: the tier-2 population and the text of pages loaded on demand."""

    def __init__(self, dataset: ds.Dataset):
        self.dataset = dataset
        cols = ["page_id", "n_chars"] if "n_chars" in dataset.schema.names else ["page_id"]
        t = dataset.to_table(columns=cols)
        if "n_chars" in cols:
            t = t.filter(pc.greater(pc.fill_null(t.column("n_chars"), 0), 0))
        # Sorted, so the random order depends on the pages, not on how they are sharded.
        self.population: list[str] = t.sort_by("page_id").column("page_id").to_pylist()
        self.loads = 0

    def load(self, ids: set[str], batch_rows: int = 4096) -> Iterator[tuple[list[str], list[str], list[str]]]:
        """(ids, titles, bodies) of the pages among ``ids``, in batches (one scan of the corpus)."""
        if not ids:
            return
        self.loads += 1
        filt = pc.field("page_id").isin(pa.array(sorted(ids), pa.string()))
        for b in self.dataset.to_batches(columns=["page_id", "title", "paragraphs"], filter=filt,
                                         batch_size=batch_rows):
            if b.num_rows:
                yield (b.column("page_id").to_pylist(), b.column("title").to_pylist(),
                       [page_body(p) for p in b.column("paragraphs").to_pylist()])


# ---- the stage ----------------------------------------------------------------------------------
class Assembler:
    """Plans, renders and measures the rows of one run; page counts persist across passes."""

    def __init__(self, cfg: AssembleConfig, seed: int, tokenizer: Any, corpus: Corpus, index: Any = None):
        self.cfg, self.seed, self.corpus, self.index = cfg, seed, corpus, index
        self.counter = TokenCounter(tokenizer)
        self.packer = Packer(cfg, self.counter)
        self.stats: Counter = Counter()

    def load(self, ids) -> None:
        """Make the text (and count) of these pages available to the packer."""
        todo = self.packer.unloaded(ids)
        for batch in self.corpus.load(todo):
            self.packer.add_pages(*batch)
        self.packer.mark_absent(todo)

    def neighbours(self, question: str, exclude: list[str]) -> list[str]:
        """BM25 neighbours of the question text, excluded pages masked."""
        k = self.cfg.tier2_bm25_k
        if self.index is None or k <= 0:
            return []
        if hasattr(self.index, "search_ids"):  # the same ranking without snippets
            return self.index.search_ids(question, k, exclude_page_ids=exclude)
        return [h["page_id"] for h in self.index.search(question, k, exclude_page_ids=exclude)]

    def jobs(self, questions: list[dict], retrieved: dict[str, list[str]]) -> list[Job]:
        """One job per question with its candidates loaded; a job whose gold page is missing has ``gold=[]``."""
        jobs = []
        for q in questions:
            gold = list(dict.fromkeys(q["path"]))
            gs = set(gold)
            t1 = [p for p in retrieved.get(q["question_id"], []) if p not in gs]
            bm = self.neighbours(q["question"], gold + t1)
            excl = gs | set(t1) | set(bm)
            stream = RandomPages(self.corpus.population, rng(self.seed, STAGE, q["question_id"], "tier2"), excl)
            jobs.append(Job(q["question_id"], q["question"], q["answer"], list(q["answer_aliases"] or []),
                            gold, t1, bm, stream))
        self.load({p for j in jobs for p in (*j.gold, *j.tier1, *j.bm25)})
        usable = self.packer.usable
        for j in jobs:
            if not all(self.packer.loaded(g) for g in j.gold):
                j.gold = []
            self.stats["tier1_unusable"] += sum(not usable(p) for p in j.tier1)
            j.tier1 = [p for p in j.tier1 if usable(p)]
            j.bm25 = [p for p in j.bm25 if usable(p)]
        self.packer.frames(jobs)
        return jobs

    def plan(self, job: Job, length: int, error: int = 0) -> Plan:
        """A plan whose random candidates are all loaded (drawing and loading more as needed)."""
        while True:
            p = self.packer.plan(job, length, error)
            if not p.need:
                return p
            job.random.extend(p.need)
            self.load(job.random.ids)

    def prefetch(self, pairs: list[tuple[Job, int]]) -> None:
        """Draw and load the random candidates every pair needs, with one corpus scan per round."""
        while pairs:
            grown: dict[int, Job] = {}
            more = []
            for job, length in pairs:
                p = self.packer.plan(job, length)
                if p.need:
                    if id(job) not in grown:  # the other lengths of a job wait for this round's load
                        job.random.extend(p.need)
                        grown[id(job)] = job
                    more.append((job, length))
            self.load({pid for job in grown.values() for pid in job.random.ids})
            pairs = more

    def rows(self, pairs: list[tuple[Job, int]]) -> Iterator[tuple[str, dict]]:
        """("row", row) or (reason, reject) for each pair, measured exactly in batches.

        A row that misses the window is first repaired in place (the cut page, or the last
        tier-2 page, lengthened or shortened by the miss, aiming at the window's middle);
        when that page cannot take it, the pair is planned again with the band shifted by
        the seam error just measured.
        """
        cfg = self.cfg
        state: list[tuple] = [(job, length, 0, None, {}) for job, length in pairs]
        for attempt in range(MAX_ATTEMPTS):
            built = []
            for job, length, err, fixed, tried in state:
                p = fixed or self.plan(job, length, err)
                prompt, docs, toks, cut = self.packer.render(job, p, rng(self.seed, STAGE, job.question_id, length))
                built.append((job, length, p, prompt, docs, toks, cut, tried))
            measured = self.counter.count([b[3] + b[0].answer for b in built])
            state = []
            for (job, length, p, prompt, docs, toks, cut, tried), n in zip(built, measured):
                lo = length - cfg.slack
                if lo <= n <= length:
                    self.stats["attempts_" + str(attempt + 1)] += 1
                    self.stats["rows_cut"] += cut
                    self.stats["tokens"] += n
                    yield "row", self._row(job, length, prompt, docs, toks, p.cut[0] if cut else None, n)
                elif n > length and p.gold_only:
                    yield "gold_too_long", self.reject(job, length, "gold_too_long", n)
                elif n < lo and p.exhausted:
                    yield "underfilled", self.reject(job, length, "underfilled", n)
                elif attempt == MAX_ATTEMPTS - 1:
                    reason = "underfilled" if n < lo else "no_fit"
                    yield reason, self.reject(job, length, reason, n)
                else:
                    self.stats["retries"] += 1
                    fixed = self.packer.adjust(p, n, length - cfg.slack // 2, tried)
                    state.append((job, length, n - p.est, fixed, tried))

    def _row(self, job: Job, length: int, prompt: str, docs, toks, cut_id: str | None, n: int) -> dict:
        pos = {pid: i for i, (pid, _) in enumerate(docs)}
        tiers = [t for _, t in docs]
        return {
            "sample_id": f"{job.question_id}-{length}", "question_id": job.question_id, "target_length": length,
            "prompt": prompt, "completion": job.answer, "n_tokens": n,
            "doc_page_ids": [pid for pid, _ in docs], "doc_tiers": tiers, "doc_n_tokens": toks,
            "gold_positions": [pos[g] for g in job.gold],
            "truncated_page_id": cut_id,
            "n_gold": tiers.count(0), "n_tier1": tiers.count(1), "n_tier2": tiers.count(2),
            "answer_aliases": job.answer_aliases, "split": "sft",
        }

    def end_pass(self) -> None:
        """Forget this pass's page text; token counts carry over to the next pass."""
        self.packer.drop_texts()

    def reject(self, job: Job, length: int, reason: str, n: int | None) -> Reject:
        """The ``rejects/assemble`` record of a (question, length) pair that makes no row."""
        detail = f"L={length} slack={self.cfg.slack} measured={n}" if n is not None else f"L={length}"
        return Reject(f"{job.question_id}-{length}", job.question_id, reason, detail)


def _chunks(items: list, n: int) -> Iterator[list]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


# With worker processes: about PASSES_PER_WORKER passes a worker, at least MIN_PASS questions each.  Always: no more
# row text than PASS_TEXT_BYTES per pass (a worker hands a pass's rows back at once).
PASSES_PER_WORKER, MIN_PASS, PASS_TEXT_BYTES = 4, 8, 64 << 20
LONGCTX_ROW_GROUP = 64  # rows of a longctx row group (up to 64 x 0.5 MB at the default 131,072 tokens)


def pass_size(cfg: AssembleConfig, n_questions: int, workers: int = 1) -> int:
    """Questions per pass: ``questions_per_pass`` at most, fewer so that ``workers`` processes share the passes.

    The tables do not depend on it: a question's rows and rejects depend on the question alone (its random
    pages are a permutation seeded by its id, drawn in order however many a pass loads), and a pass writes
    them in question order, so only the number of corpus scans changes."""
    size = min(cfg.questions_per_pass, max(1, PASS_TEXT_BYTES // (4 * sum(cfg.lengths))))  # about 4 bytes a token
    if workers > 1:
        size = min(size, max(MIN_PASS, -(-n_questions // (PASSES_PER_WORKER * workers))))
    return max(1, size)


@dataclass
class _PassOut:
    """One pass's rows and rejects, in the order one process writes them, and what it counted."""

    rows: list[dict]
    rejects: list[Reject]
    dropped: Counter
    stats: Counter
    pairs: int
    pages_counted: int
    corpus_scans: int


def _pass_setup(cfg: Any, root: str) -> Assembler:
    """A process's assembler: the tokenizer, the BM25 index and the page population, loaded once."""
    store = Store(root)
    index = None
    if cfg.assemble.tier2_bm25_k > 0:
        from synth.tools.search import SearchIndex

        index = SearchIndex.open(store.path("index"))
    corpus = Corpus(store.dataset("corpus/pages", hint="ingest"))
    return Assembler(cfg.assemble, cfg.seed, load_tokenizer(store), corpus, index)


def _pass_step(asm: Assembler, item: tuple[list[dict], dict[str, list[str]]]) -> _PassOut:
    """Assemble one pass of questions: every row and reject depends on its question only (seeded by its id)."""
    questions, retrieved = item
    stats0, counted0, scans0 = Counter(asm.stats), asm.packer.pages_counted, asm.corpus.loads
    lengths = sorted(asm.cfg.lengths)
    out = _PassOut([], [], Counter(), Counter(), 0, 0, 0)
    jobs = asm.jobs(questions, retrieved)
    pairs = []
    for job in jobs:
        for length in lengths:
            if job.gold:
                pairs.append((job, length))
            else:
                out.dropped["missing_gold"] += 1
                out.rejects.append(asm.reject(job, length, "missing_gold", None))
    asm.prefetch(pairs)
    for batch in _chunks(pairs, asm.cfg.verify_batch):
        for kind, rec in asm.rows(batch):
            if kind == "row":
                out.rows.append(rec)
            else:
                out.dropped[kind] += 1
                out.rejects.append(rec)
    asm.end_pass()
    # In question order, then length order, as one pass of all the questions would write them.
    order = {(q["question_id"], length): k for k, (q, length) in enumerate(
        (q, length) for q in questions for length in lengths)}
    out.rejects.sort(key=lambda r: order[(r.source_id, int(r.record_id.rsplit("-", 1)[1]))])
    out.pairs = len(jobs) * len(lengths)
    out.stats = asm.stats - stats0
    out.pages_counted, out.corpus_scans = asm.packer.pages_counted - counted0, asm.corpus.loads - scans0
    return out


def _pass_name(i: int, item: tuple[list[dict], dict]) -> str:
    qs = item[0]
    return f"pass {i} ({len(qs)} questions, {qs[0]['question_id']} .. {qs[-1]['question_id']})" if qs else f"pass {i}"


def run_assemble(ctx: StageContext) -> StageResult:
    """Assemble ``longctx`` from the accepted questions; see the module docstring.

    The passes run in worker processes (:mod:`synth.engine.workers`) and are written in pass order, so the
    rows come in question order however many processes there are (:func:`pass_size`)."""
    cfg: AssembleConfig = ctx.cfg.assemble
    store = ctx.store
    load_tokenizer(store)  # a missing tokenizer stops the stage here, before any worker starts
    questions, source = accepted_questions(store, cfg)
    retrieved = retrieved_pages(store, questions.column("question_id"), cfg.tier1_from)
    lengths = sorted(cfg.lengths)
    n = questions.num_rows
    workers = ctx.cpu_workers(max(-(-n // pass_size(cfg, n)), -(-n // MIN_PASS)))
    size = pass_size(cfg, n, workers)
    passes = -(-n // size)
    workers = min(workers, max(1, passes))

    def items() -> Iterator[tuple[list[dict], dict[str, list[str]]]]:
        """Each pass's questions and retrieved pages, converted from Arrow when the pass is handed out."""
        for start in range(0, n, size):
            chunk = questions.slice(start, size).to_pylist()
            yield chunk, {q["question_id"]: retrieved[q["question_id"]] for q in chunk
                          if q["question_id"] in retrieved}

    work = ctx.cpu_work(_pass_setup, (ctx.cfg, str(store.root)), _pass_step, _pass_name)
    # Rows of up to `lengths` tokens each (131,072 by default, about 0.5 MB of text): written as they come,
    # a row group at a time, so the parent never holds a 4,096-row shard of them.
    out = ctx.writer("longctx", LONGCTX_SCHEMA, rows_per_shard=4096, row_group_rows=LONGCTX_ROW_GROUP)
    rejects = ctx.writer("rejects/assemble", REJECT_SCHEMA)
    dropped: Counter = Counter()
    st: Counter = Counter()
    n_rows = pages_counted = corpus_scans = 0
    with ctx.bar("rows", n * len(lengths), "rows") as bar:
        for done in ctx.cpu_map(work, items(), workers):
            rejects.write([r.to_row() for r in done.rejects])
            out.write(done.rows)
            n_rows += len(done.rows)
            dropped.update(done.dropped)
            st.update(done.stats)
            pages_counted += done.pages_counted
            corpus_scans += done.corpus_scans
            bar.update(done.pairs)
    out.close()
    rejects.close()
    log.info("assemble: %d rows, %d tokens, dropped %s, %d retries", n_rows, st["tokens"], dict(dropped), st["retries"])
    extra = {
        "accepted_from": source,
        "questions": n,
        "tokens": st["tokens"],
        "rows_cut": st["rows_cut"],
        "retries": st["retries"],
        "tier1_unusable": st["tier1_unusable"],
        # Operational (not part of the tables): how the work was spread; each process counts the pages it needs.
        "passes": passes,
        "workers": workers,
        "pages_counted": pages_counted,
        "corpus_scans": corpus_scans,
    }
    return StageResult(input=n * len(lengths), output=n_rows, dropped=dict(dropped), extra=extra)


__all__ = ["run_assemble", "LONGCTX_SCHEMA", "Assembler", "Corpus", "RetrievedPages", "accepted_questions",
           "retrieved_pages",
]
