"""The search index by what it holds, for comparing two builds (``hopforge verify``, the determinism test).

tantivy names its segments at random and splits the documents among them by writer thread, so two builds
of the same pages differ in their files.  They hold the same documents and rank alike: BM25's statistics
are the whole index's, and :mod:`synth.tools.search` breaks ties by page id.  So the index is compared by
its metadata (``hopforge.json``) and every stored document (page id, title, lead and meta; the whole bodies
of ``index/long``), order aside, through :mod:`synth.engine.sameness`.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import tantivy

from synth.engine.errors import DamagedFile, first_sentence
from synth.engine.sameness import MISSING, Digest, canonical, json_digest
from synth.tools.build import LONG_DIR, META_FILE


def _documents(index_dir: Path) -> tuple[int, str]:
    """How many documents an index stores, and a hash of them (each one's canonical JSON, sorted);
    :class:`DamagedFile` when tantivy cannot open it (a segment file cut or overwritten)."""
    try:
        searcher = tantivy.Index.open(str(index_dir)).searcher()
    except ValueError as e:  # tantivy's IoError: a footer's magic bytes, a missing segment
        said = re.search(r'error: "([^"]+)"', str(e))
        raise DamagedFile(index_dir, first_sentence(said.group(1) if said else str(e)[:200]),
                          kind="search index") from None
    n = searcher.num_docs
    hits = searcher.search(tantivy.Query.all_query(), limit=n, count=False).hits if n else []
    rows = sorted(hashlib.blake2b(canonical(searcher.doc(addr).to_dict()), digest_size=16).digest()
                  for _, addr in hits)
    h = hashlib.sha256()
    for r in rows:
        h.update(r)
    return len(rows), h.hexdigest()[:20]


def index_digest(index_dir: Path) -> Digest:
    """The index in ``index_dir`` by what it holds (module docstring): its parts are ``hopforge.json``, the
    documents and the long bodies, so a difference names which."""
    index_dir = Path(index_dir)
    if not (index_dir / META_FILE).is_file():
        return MISSING
    parts = {META_FILE: json_digest(index_dir / META_FILE)}
    n, sha = _documents(index_dir)
    parts["documents"] = Digest("documents", sha, rows=n)
    if (index_dir / LONG_DIR).is_dir():
        n, sha = _documents(index_dir / LONG_DIR)
        parts[f"{LONG_DIR}/documents"] = Digest("documents", sha, rows=n)
    h = hashlib.sha256()
    for name in sorted(parts):
        h.update(f"{name}\0{parts[name].sha}\n".encode())
    return Digest("index", h.hexdigest()[:20], rows=parts["documents"].rows, parts=parts)


__all__ = ["index_digest"]
