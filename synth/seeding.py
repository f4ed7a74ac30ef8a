"""Deterministic randomness: every random choice derives from (run seed, stage, record id).

The same config therefore gives the same rows whatever the concurrency, the
sharding or the order in which records are processed.
"""

from __future__ import annotations

import hashlib
import random


def derive_seed(run_seed: int, stage: str, record_id: str | int, *more: object) -> int:
    """A 63-bit seed from the run seed, the stage name, the record id and any extra parts."""
    h = hashlib.blake2b(repr((run_seed, stage, record_id, *more)).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little") >> 1


def rng(run_seed: int, stage: str, record_id: str | int, *more: object) -> random.Random:
    """A ``random.Random`` seeded by :func:`derive_seed`."""
    return random.Random(derive_seed(run_seed, stage, record_id, *more))


def short_hash(*parts: object, n: int = 16) -> str:
    """A stable hex id from parts (content-addressed record ids)."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()[:n]
