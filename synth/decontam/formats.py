"""Benchmark files read as their authors publish them (``questions.decontaminate[*].format``).

Every reader yields :class:`BenchQuestion` records: the question, its answers (with aliases),
the titles of its *supporting* pages (those its answer is read from: the path level compares
consecutive walk entities with them) and of its *linked* pages (every page the record names:
the entity level looks there).

=============  ==============================================================================
format         what is read (file layouts accepted)
=============  ==============================================================================
``hotpotqa``   ``question``, ``answer``; supporting: ``supporting_facts`` titles; linked: ``context``
               titles (JSON array as released, JSONL, or the Hub's Parquet with dict-of-lists fields)
``2wiki``      as HotpotQA, plus the subjects and objects of ``evidences`` triples as linked pages
``musique``    ``question``, ``answer``, ``answer_aliases``; ``paragraphs[*].title`` (supporting when
               ``is_supporting``) (JSONL)
``frames``     ``Prompt``, ``Answer``; supporting: the Wikipedia URLs of ``wiki_links`` (a list, or its
               Python/JSON text as in ``test.tsv``), else the ``wikipedia_link_*`` columns (TSV, CSV)
``browsecomp`` ``problem``, ``answer``, decrypted (CSV as released once decrypted, JSONL, Parquet)
``gaia``       ``Question``, ``Final answer`` (``metadata.jsonl``; a ``?`` answer is none)
``jsonl``      ``question``, ``answer``, optional ``titles`` (supporting) (JSONL)
=============  ==============================================================================

A malformed file is one :class:`~synth.engine.errors.InputError` naming the file, the record
(``line N`` of JSONL, ``record N`` of a JSON array, ``row N`` of a table) and the field.
"""

from __future__ import annotations

import ast
import base64
import binascii
import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlparse

from synth.engine.errors import InputError, json_problem, not_a_file

FORMATS = ("hotpotqa", "2wiki", "musique", "frames", "browsecomp", "gaia", "jsonl")


@dataclass(slots=True)
class BenchQuestion:
    """One benchmark question: its text, answers, and the titles of the pages it rests on."""

    qid: str
    question: str
    answers: list[str] = field(default_factory=list)  # the answer first, then aliases; empty: withheld
    supporting: list[str] = field(default_factory=list)  # titles of the pages the answer is read from
    linked: list[str] = field(default_factory=list)  # other titles the record names (context, evidence)


class _Record:
    """One raw record and where it is, so that every error names the file, the record and the field."""

    __slots__ = ("path", "where", "obj")

    def __init__(self, path: Path, where: str, obj: Any):
        self.path, self.where, self.obj = path, where, obj

    def fail(self, name: str, why: str) -> InputError:
        return InputError(f"{self.path}: {self.where}: field `{name}`: {why}")

    def get(self, name: str, required: bool = True) -> Any:
        if not isinstance(self.obj, dict):
            raise InputError(f"{self.path}: {self.where}: expected an object, got {type(self.obj).__name__}")
        if name not in self.obj or self.obj[name] is None:
            if required:
                raise self.fail(name, "missing")
            return None
        return self.obj[name]

    def text(self, name: str, required: bool = True) -> str | None:
        v = self.get(name, required)
        if v is None:
            return None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return str(v)  # GAIA and FRAMES answers are sometimes bare numbers
        if not isinstance(v, str):
            raise self.fail(name, f"expected a string, got {type(v).__name__}")
        return v

    def question(self, name: str) -> str:
        """The question's text: required, and refused like a missing one when it is empty or only whitespace (a
        model asked nothing is paid for nothing)."""
        v = self.text(name)
        if not v.strip():
            raise self.fail(name, "empty or only whitespace (a question needs text)")
        return v

    def strings(self, name: str, required: bool = True) -> list[str]:
        v = self.get(name, required)
        if v is None:
            return []
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.fail(name, "expected a list of strings")
        return v

    def pair_titles(self, name: str, second: str, required: bool = True) -> list[str]:
        """Titles of a ``[[title, x], ...]`` field, or of the Hub's ``{"title": [...], second: [...]}``."""
        v = self.get(name, required)
        if v is None:
            return []
        if isinstance(v, dict):  # the Hugging Face copy stores the pairs as parallel lists
            titles = v.get("title")
            if not isinstance(titles, list) or not all(isinstance(t, str) for t in titles):
                raise self.fail(name, f"expected {{title: [str], {second}: [...]}}")
            return list(titles)
        if not isinstance(v, list):
            raise self.fail(name, f"expected a list of [title, {second}] pairs")
        out = []
        for i, pair in enumerate(v):
            if not (isinstance(pair, (list, tuple)) and len(pair) >= 2 and isinstance(pair[0], str)):
                raise self.fail(f"{name}[{i}]", f"expected [title, {second}]")
            out.append(pair[0])
        return out


# ---- file layouts ----------------------------------------------------------------------------

def _json_records(path: Path) -> Iterator[_Record]:
    with path.open(encoding="utf-8") as f:
        head = f.read(4096).lstrip()
    if head.startswith("["):  # HotpotQA and 2Wiki ship one JSON array
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: line {e.lineno}: not JSON ({json_problem(e)})") from None
        for i, obj in enumerate(data):
            yield _Record(path, f"record {i}", obj)
        return
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}: line {lineno}: not JSON ({json_problem(e)})") from None
            yield _Record(path, f"line {lineno}", obj)


def _table_records(path: Path) -> Iterator[_Record]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(path)
        except Exception as e:  # pyarrow raises several types for a damaged footer
            raise InputError(f"{path}: not a readable Parquet file ({e})") from None
        i = 0
        for batch in pf.iter_batches(batch_size=4096):
            for obj in batch.to_pylist():
                yield _Record(path, f"row {i}", obj)
                i += 1
        return
    csv.field_size_limit(1 << 28)  # FRAMES rows hold long link lists
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t" if path.suffix == ".tsv" else ",")
        for i, row in enumerate(reader):
            if None in row:  # more cells than header names: a broken row
                raise InputError(f"{path}: row {i} (line {reader.line_num}): more cells than columns")
            yield _Record(path, f"row {i} (line {reader.line_num})", {k: (v if v != "" else None)
                                                                       for k, v in row.items()})


def records(path: Path) -> Iterator[_Record]:
    """The raw records of a benchmark file, by its suffix: JSON / JSONL, Parquet, TSV / CSV."""
    if path.suffix in (".parquet", ".tsv", ".csv"):
        return _table_records(path)
    return _json_records(path)


# ---- one reader per format -------------------------------------------------------------------

def _qid(r: _Record, *names: str) -> str:
    for n in names:
        v = r.get(n, required=False)
        if isinstance(v, (str, int)) and not isinstance(v, bool):
            return str(v)
    return r.where


def _answers(*values: str | None) -> list[str]:
    return list(dict.fromkeys(v.strip() for v in values if v and v.strip()))


def _hotpot(r: _Record) -> BenchQuestion:
    support = r.pair_titles("supporting_facts", "sent_id", required=False)  # the test set withholds them
    context = r.pair_titles("context", "sentences", required=False)
    return BenchQuestion(_qid(r, "_id", "id"), r.question("question"), _answers(r.text("answer", False)),
                         support, context)


def _2wiki(r: _Record) -> BenchQuestion:
    q = _hotpot(r)
    ev = r.get("evidences", required=False) or []
    if not isinstance(ev, list):
        raise r.fail("evidences", "expected a list of [subject, relation, object] triples")
    for i, t in enumerate(ev):
        if not (isinstance(t, (list, tuple)) and len(t) == 3 and all(isinstance(x, str) for x in t)):
            raise r.fail(f"evidences[{i}]", "expected [subject, relation, object]")
        q.linked += [t[0], t[2]]
    return q


def _musique(r: _Record) -> BenchQuestion:
    paras = r.get("paragraphs")
    if not isinstance(paras, list):
        raise r.fail("paragraphs", "expected a list of {title, paragraph_text, is_supporting}")
    support, linked = [], []
    for i, p in enumerate(paras):
        if not isinstance(p, dict) or not isinstance(p.get("title"), str):
            raise r.fail(f"paragraphs[{i}].title", "missing or not a string")
        (support if p.get("is_supporting") is True else linked).append(p["title"])
    return BenchQuestion(_qid(r, "id"), r.question("question"),
                         _answers(r.text("answer", False), *r.strings("answer_aliases", False)), support, linked)


def _frames(r: _Record) -> BenchQuestion:
    links = r.get("wiki_links", required=False)
    if isinstance(links, str):  # test.tsv holds the list's Python text
        try:
            links = ast.literal_eval(links.strip())
        except (ValueError, SyntaxError):
            raise r.fail("wiki_links", "expected a list of Wikipedia URLs") from None
    if links is None:
        obj = r.obj if isinstance(r.obj, dict) else {}
        links = [v for k, v in obj.items() if k.startswith("wikipedia_link_") and isinstance(v, str) and v]
    if not isinstance(links, list) or not all(isinstance(u, str) for u in links):
        raise r.fail("wiki_links", "expected a list of Wikipedia URLs")
    titles = []
    for u in links:
        parts = urlparse(u.strip())
        if "/wiki/" not in parts.path:
            raise r.fail("wiki_links", f"not a Wikipedia article URL: {u[:120]!r}")
        titles.append(parts.path.split("/wiki/", 1)[1] + (f"#{parts.fragment}" if parts.fragment else ""))
    return BenchQuestion(_qid(r, "Unnamed: 0", "id"), r.question("Prompt"), _answers(r.text("Answer", False)), titles)


def _looks_encrypted(text: str) -> bool:
    # BrowseComp ships base64 ciphertext (XOR with the canary's hash): long, no spaces, valid base64.
    if " " in text or len(text) < 24:
        return False
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _browsecomp(r: _Record) -> BenchQuestion:
    problem = r.question("problem")
    if _looks_encrypted(problem):
        raise r.fail("problem", "looks encrypted (base64); decrypt the file with its canary first")
    return BenchQuestion(_qid(r, "id"), problem, _answers(r.text("answer", False)))


def _gaia(r: _Record) -> BenchQuestion:
    answer = r.text("Final answer", False)
    return BenchQuestion(_qid(r, "task_id"), r.question("Question"), _answers(None if answer == "?" else answer))


def _jsonl(r: _Record) -> BenchQuestion:
    return BenchQuestion(_qid(r, "id", "_id"), r.question("question"), _answers(r.text("answer", False)),
                         r.strings("titles", False))


READERS: dict[str, Callable[[_Record], BenchQuestion]] = {
    "hotpotqa": _hotpot, "2wiki": _2wiki, "musique": _musique, "frames": _frames, "browsecomp": _browsecomp,
    "gaia": _gaia, "jsonl": _jsonl,
}


def read_benchmark(path: str | Path, fmt: str) -> list[BenchQuestion]:
    """Every question of one benchmark file in format ``fmt`` (see the module docstring)."""
    p = Path(path)
    if fmt not in READERS:
        raise InputError(f"{p}: unknown benchmark format {fmt!r} (allowed: {', '.join(FORMATS)})")
    if (why := not_a_file(p)) is not None:
        raise InputError(f"{p}: {why}: give a benchmark file ({fmt})")
    try:
        return [READERS[fmt](r) for r in records(p)]
    except UnicodeDecodeError as e:
        raise InputError(f"{p}: not UTF-8 text ({e.reason} at byte {e.start})") from None


__all__ = ["BenchQuestion", "FORMATS", "READERS", "read_benchmark", "records"]
