"""The persistent teacher call cache: one SQLite file, one row per completed call.

Every completed call is written the moment it completes, in its own short
transaction, so a run killed half-way and restarted never pays for a call twice.
Failures are never written.  The file is in WAL mode: readers never block the
writer, and writers from other threads and processes queue on ``busy_timeout``.

Keys are content hashes of what the server sees (backend, model, messages, tools,
sampling parameters) plus the sample index, never of the endpoint URL, the key or
the oracle's hint: moving to another host serving the same model keeps the cache.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from synth.engine.errors import InputError

SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    response BLOB NOT NULL,
    created REAL NOT NULL
) WITHOUT ROWID
"""


def canonical_json(obj: Any) -> bytes:
    """Deterministic JSON: sorted keys, no whitespace, UTF-8; the same value always hashes the same.

    orjson (about ten times faster than ``json.dumps(sort_keys=True)``) matters here: every call
    hashes its whole context twice (cache key, derived seed).
    """
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def cache_key(*, backend: str, model: str, messages: list[dict], tools: list[dict] | None, temperature: float,
              top_p: float | None, max_tokens: int, extra_body: dict, sample_index: int) -> str:
    """The cache key of one call: sha256 of the canonical JSON of everything that shapes the answer."""
    payload = {
        "backend": backend, "model": model, "messages": messages, "tools": tools or None,
        "temperature": temperature, "top_p": top_p, "max_tokens": max_tokens,
        "extra_body": extra_body or {}, "sample_index": sample_index,
    }
    return hashlib.sha256(canonical_json(payload)).hexdigest()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class CallCache:
    """A key -> response store over one SQLite file, safe across threads and processes.

    Each thread gets its own connection (sqlite3 connections must not be shared while
    in use); a forked child drops its parent's connections and opens fresh ones.
    """

    def __init__(self, path: str | Path, busy_timeout_ms: int = 60_000):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._busy_ms = busy_timeout_ms
        self._local = threading.local()
        self._all: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._all_lock = threading.Lock()
        self._pid = os.getpid()
        self._init_file()
        self._file = _identity(self.path)

    def is_current(self) -> bool:
        """Whether the file at this cache's path is still the one it opened."""
        return _identity(self.path) == self._file

    def _init_file(self) -> None:
        # WAL is a property of the file: set once, every later connection inherits it.  Setting
        # it needs an exclusive lock, so it is only asked for when the file is not in WAL yet
        # (many caches opened at once over a busy file would otherwise collide); a collision
        # between two first openers is retried, since SQLite reports some of them at once
        # instead of waiting.
        deadline = time.monotonic() + self._busy_ms / 1000
        while True:
            try:
                conn = self._conn()
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode=WAL")
                if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'calls'").fetchone() is None:
                    conn.execute(SCHEMA)
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
            except sqlite3.DatabaseError as e:  # not a database, or a damaged one
                raise InputError(f"the teacher call cache {self.path} is not a readable SQLite database ({e}): "
                                 "move it aside and rerun (calls it held are then paid again)") from None

    def _conn(self) -> sqlite3.Connection:
        if os.getpid() != self._pid:  # forked: the parent's handles are not ours to use
            self._local = threading.local()
            self._all, self._pid = [], os.getpid()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # Autocommit (isolation_level=None): each INSERT is its own short transaction.
            conn = sqlite3.connect(self.path, timeout=self._busy_ms / 1000, isolation_level=None,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout={int(self._busy_ms)}")
            # NORMAL in WAL mode survives a process crash (only an OS crash can lose the last
            # commits); FULL would fsync on every call for no gain here.
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
            with self._all_lock:
                # Threads come and go (a pool per stage); close what finished threads left open.
                for thread, old in [x for x in self._all if not x[0].is_alive()]:
                    old.close()
                self._all = [x for x in self._all if x[0].is_alive()] + [(threading.current_thread(), conn)]
        return conn

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored response record for ``key``, or None."""
        row = self._conn().execute("SELECT response FROM calls WHERE key = ?", (key,)).fetchone()
        return orjson.loads(row[0]) if row else None

    def discard(self, key: str) -> None:
        """Forget the entry of ``key`` (one that no longer reads as an answer), so the next answer is kept."""
        self._conn().execute("DELETE FROM calls WHERE key = ?", (key,))

    def put(self, key: str, model: str, record: dict[str, Any]) -> None:
        """Store a completed call.  A key already present is kept: the first answer wins."""
        self._conn().execute(
            "INSERT OR IGNORE INTO calls (key, model, response, created) VALUES (?, ?, ?, ?)",
            (key, model, orjson.dumps(record), time.time()),
        )

    def __len__(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def integrity_ok(self) -> bool:
        """Whether SQLite's own integrity check passes."""
        return self._conn().execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    def close(self) -> None:
        """Close every connection this object opened."""
        with self._all_lock:
            conns, self._all = [c for _, c in self._all], []
        for c in conns:
            try:
                c.close()
            except sqlite3.Error:
                pass
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"CallCache({str(self.path)!r})"
