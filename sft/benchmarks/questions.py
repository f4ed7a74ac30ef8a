"""Benchmark questions as the harness asks them: read as published, sampled, resolved against the corpus.

A ``--benchmark FORMAT:FILE`` is read by :func:`synth.decontam.formats.read_benchmark` (a malformed file is
one :class:`~synth.engine.errors.InputError` naming the file, the record and the field).  Questions whose answer
is withheld (GAIA's test ``?``, HotpotQA's test set) cannot be graded and are counted apart (``withheld``).
``--limit N`` keeps a seeded sample of N of the rest, in file order; the report says it is a sample.

Each question becomes a :class:`~synth.engine.records.Question` for :func:`synth.rollout.loop.rollout_one`:

- its ``path`` is the corpus pages of the benchmark's *supporting* titles (HotpotQA's and 2Wiki's
  ``supporting_facts``, MuSiQue's supporting paragraphs, FRAMES' Wikipedia links), so the trace records when
  each was first seen (``gold_first_seen``) and the evidence-recovery curve and calibration can be read; a
  title the corpus lacks is counted (``supporting_unresolved``) and left out;
- its answer is resolved to a page of the corpus when one of its forms is a title (exactly, as links and
  ``open`` resolve titles, else after folding) or the one page holding it as an alias: then the answer key
  holds that page's names, and the title of another page is wrong however close (page identity first);
  an answer that names no page (a year, "yes", a phrase) is judged by token F1 alone.

Nothing is masked: a benchmark's answer page is part of the world the model searches, as in the published
setups.  ``--benchmark eval`` adds the run's own eval split as a row of the same table (:func:`eval_split_set`):
there the answer page is masked, as in training and the plain ``hopforge eval``, because those questions were
written from that page.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from synth.corpus.links import title_from_href
from synth.decontam.formats import FORMATS, BenchQuestion, read_benchmark
from synth.decontam.index import coarse_key, corpus_resolver, file_sha256
from synth.engine.errors import InputError
from synth.engine.records import Question, Split
from synth.engine.seeding import derive_seed
from synth.text.answers import AnswerKey, answer_text

# The formats a benchmark row may name (the readers' own ``jsonl`` included: a user's own questions).
BENCH_FORMATS = FORMATS


@dataclass
class BenchSet:
    """One ``--benchmark`` file: what was read, what is asked, and how each question is graded."""

    format: str
    path: Path
    sha256: str
    read: int  # questions in the file
    withheld: int  # of them, without a published answer (not gradable)
    questions: list[Question] = field(default_factory=list)  # the ones asked, in file order
    keys: dict[str, AnswerKey] = field(default_factory=dict)  # question_id -> answer key
    sample: dict[str, Any] | None = None  # {"limit", "seed", "of"} when --limit took a sample
    answer_pages: int = 0  # questions whose answer resolved to a page of the corpus
    supporting_resolved: int = 0
    supporting_unresolved: int = 0
    raw: dict[str, BenchQuestion] = field(default_factory=dict, repr=False)  # question_id -> the record as read
    own: bool = False  # the run's own eval split: keys from the run, the answer page masked as in training

    @property
    def name(self) -> str:
        """``format:file name`` (never the local path: reports travel)."""
        return f"{self.format}:{self.path.name}"

    def summary(self) -> dict[str, Any]:
        """The facts of the file itself, for the report."""
        return {"benchmark": self.format, "file": self.path.name, "sha256": self.sha256, "read": self.read,
                "answer_page_masked": self.own,
                "withheld": self.withheld, "asked": len(self.questions), "sample": self.sample,
                "answers_resolved_to_pages": self.answer_pages,
                "supporting_titles": {"resolved": self.supporting_resolved, "unresolved": self.supporting_unresolved},
                "with_supporting_pages": sum(1 for q in self.questions if q.path)}


def parse_spec(spec: str) -> tuple[str, Path]:
    """``FORMAT:FILE`` -> (format, path); an unknown format or a missing colon is one line naming them."""
    fmt, sep, path = spec.partition(":")
    if not sep or not path:
        raise InputError(f"--benchmark {spec!r}: expected FORMAT:FILE (formats: {', '.join(BENCH_FORMATS)})")
    if fmt not in BENCH_FORMATS:
        raise InputError(f"--benchmark {spec!r}: unknown format {fmt!r} (formats: {', '.join(BENCH_FORMATS)})")
    return fmt, Path(path)


def sample_indices(n: int, limit: int | None, seed: int, sha256: str) -> list[int]:
    """The indices of the questions asked: all, or a sample of ``limit`` drawn from (run seed, file content),
    sorted (the same file and seed give the same sample whatever else is passed)."""
    if limit is None or limit >= n:
        return list(range(n))
    rng = random.Random(derive_seed(seed, "benchmark-sample", sha256))
    return sorted(rng.sample(range(n), limit))


EVAL_SPLIT = "eval"  # ``--benchmark eval``: the run's own eval split, as a row of the same table


def eval_split_set(store: Any, cfg: Any, limit: int | None) -> BenchSet:
    """The run's own eval split (:func:`sft.evaluate.eval_questions`) as a benchmark: its questions' answer keys
    are the run's (:func:`synth.corpus.answerkeys.answer_keys`), their gold chains the supporting pages, and the
    answer page is masked from search as in the teacher's rollouts and the plain ``hopforge eval``."""
    from sft.evaluate import eval_questions
    from synth.corpus.answerkeys import answer_keys

    held = eval_questions(store)
    key = (store.stage_entry("questions") or {}).get("key") or "questions"
    keep = sample_indices(len(held), limit, cfg.seed, key)
    bench = BenchSet("hopforge", Path("eval split"), key, len(held), 0, [held[i] for i in keep], own=True)
    if len(keep) < len(held):
        bench.sample = {"limit": limit, "seed": cfg.seed, "of": len(held)}
    keys = answer_keys(store, cfg.filters.min_f1)
    bench.keys = {q.question_id: keys.key_for(q) for q in bench.questions}
    bench.answer_pages = len(bench.questions)
    bench.supporting_resolved = sum(len(q.path) for q in bench.questions)
    return bench


def load_set(spec: str, limit: int | None, seed: int) -> BenchSet:
    """Read one ``FORMAT:FILE`` and take its sample (not yet resolved: :func:`resolve`)."""
    fmt, path = parse_spec(spec)
    read = read_benchmark(path, fmt)
    gradable = [q for q in read if q.answers]
    sha = file_sha256(path)
    keep = sample_indices(len(gradable), limit, seed, sha)
    bench = BenchSet(fmt, path, sha, len(read), len(read) - len(gradable))
    if len(keep) < len(gradable):
        bench.sample = {"limit": limit, "seed": seed, "of": len(gradable)}
    seen: dict[str, int] = {}
    for i in keep:  # ids are the file's, under its name; a repeated id gets a suffix rather than a silent merge
        qid = gradable[i].qid
        seen[qid] = seen.get(qid, 0) + 1
        bench.questions.append(_question(f"{path.name}:{qid}" + (f"#{seen[qid]}" if seen[qid] > 1 else ""),
                                         gradable[i]))
    bench.raw = {q.question_id: gradable[i] for q, i in zip(bench.questions, keep)}
    if not bench.questions:
        raise InputError(f"{path}: no question with a published answer to evaluate ({bench.withheld} withheld)")
    return bench


def _question(qid: str, q: BenchQuestion) -> Question:
    return Question(question_id=qid, kind="benchmark", source_id=q.qid, path=[], titles=[],
                    question=q.question, answer=q.answers[0], answer_aliases=list(q.answers[1:]),
                    answer_page_id="", hops=[], teacher_model="", prompt_sha="", seed=0, split=str(Split.EVAL))


def resolve(store: Any, benches: list[BenchSet], min_f1: float) -> None:
    """Resolve every set's answers and supporting titles against ``store``'s corpus and build its answer keys
    (see the module docstring), in place."""
    from synth.corpus.answerkeys import keys_for_pages

    raws: dict[str, BenchQuestion] = {qid: r for b in benches for qid, r in b.raw.items()}
    titles = {t for r in raws.values() for t in (*r.supporting, *r.answers) if t.strip()}
    exact = corpus_resolver(store)(sorted({title_from_href(t) for t in titles}))
    folded = _folded_pages(store, {answer_text(a) for r in raws.values() for a in r.answers} - {""})
    wanted: dict[str, tuple[str | None, list[str]]] = {}
    for b in benches:
        for q in b.questions if not b.own else ():
            r = raws[q.question_id]
            page = next((exact[title_from_href(a)] for a in r.answers if title_from_href(a) in exact), None)
            if page is None:
                page = next((folded[answer_text(a)] for a in r.answers if answer_text(a) in folded), None)
            support = []
            for t in dict.fromkeys(r.supporting):
                pid = exact.get(title_from_href(t))
                if pid is None:
                    b.supporting_unresolved += 1
                elif pid not in support:
                    b.supporting_resolved += 1
                    support.append(pid)
            q.path, q.titles = support, []
            q.answer_page_id = page or ""
            b.answer_pages += page is not None
            wanted[q.question_id] = (page, list(r.answers))
    keys = keys_for_pages(store, wanted, min_f1) if wanted else {}
    for b in benches:
        if not b.own:
            b.keys = {q.question_id: keys[q.question_id] for q in b.questions}


def _folded_pages(store: Any, forms: set[str]) -> dict[str, str]:
    """Answer form -> the page whose title (or, when only one page holds it, alias) has that folded form.  Titles
    and aliases are prefiltered in Arrow by :func:`_key` and checked exactly in Python."""
    if not forms or not store.exists("corpus/pages"):
        return {}
    import pyarrow as pa

    coarse = pc.unique(_key(pa.array(sorted(forms), pa.string())))
    by_title: dict[str, list[str]] = {}
    by_alias: dict[str, set[str]] = {}
    pages = store.dataset("corpus/pages", hint="ingest")
    cols = ["page_id", "title"] + (["aliases"] if "aliases" in pages.schema.names else [])
    for batch in pages.to_batches(columns=cols, batch_size=65_536):
        hit = pc.is_in(_key(batch.column("title")), value_set=coarse)
        for pid, t in zip(batch.column("page_id").filter(hit).to_pylist(), batch.column("title").filter(hit).to_pylist()):
            f = answer_text(t or "")
            if f in forms:
                by_title.setdefault(f, []).append(pid)
        if "aliases" in cols:  # flattened, prefiltered the same way: only candidate aliases reach Python
            lists = batch.column("aliases")
            flat, owner = pc.list_flatten(lists), pc.list_parent_indices(lists)
            hit = pc.is_in(_key(flat), value_set=coarse)
            owners = batch.column("page_id").take(owner.filter(hit)).to_pylist()
            for pid, a in zip(owners, flat.filter(hit).to_pylist()):
                f = answer_text(a or "")
                if f in forms:
                    by_alias.setdefault(f, set()).add(pid)
    out = {f: next(iter(ids)) for f, ids in by_alias.items() if len(ids) == 1}
    out.update({f: min(ids, key=_page_order) for f, ids in by_title.items()})  # a title beats an alias
    return out


def _key(names: Any) -> Any:
    """:func:`~synth.decontam.index.coarse_key` of the names decomposed first (NFKD, "ß" as "ss"), so a name and its
    folded form (:func:`~synth.text.answers.answer_text`: "Zürich", "zurich") share a key."""
    return coarse_key(pc.replace_substring(pc.utf8_normalize(names, "NFKD"), "ß", "ss"))


def _page_order(pid: str) -> tuple[int, int | str]:
    """Ids compared as numbers, as KILT's are (the page a shared title names)."""
    return (0, int(pid)) if pid.isdigit() else (1, pid)


__all__ = ["BENCH_FORMATS", "BenchSet", "EVAL_SPLIT", "eval_split_set", "load_set", "parse_spec", "resolve", "sample_indices"]
