"""Deterministic randomness: every random choice derives from (run seed, stage, record id).

The same config therefore gives the same rows whatever the concurrency, the sharding
or the order in which records are processed.  Two kinds of generator serve that:

* :func:`derive_seed` / :func:`rng` seed a ``random.Random`` per record, for per-record
  stages (questions, rollouts, assembly);
* the counter-based functions below (:func:`stream_key`, :func:`derive`, :func:`below`,
  :func:`draw_index`) make every draw a pure hash of (run seed, stage, counters), which
  the numba walk kernels inline.  A stateful generator shared by walkers could not give
  the same rows whatever the number of threads or the batch size; a hash of the draw's
  coordinates can.  The hash is the splitmix64 finaliser (Steele, Lea & Flood 2014),
  which passes BigCrush as a counter-mode generator, chained over the coordinates:
  ``draw(key, a, b) = mix(mix(key + G*(a+1)) + G*(b+1))``.
"""

from __future__ import annotations

import hashlib
import random

import numpy as np
from numba import njit





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


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_ONE = np.uint64(1)


def stream_key(seed: int, stage: str) -> np.uint64:
    """The 64-bit key of one stage's random stream under run seed ``seed``.

    Built with sha256 rather than Python's ``hash`` so it is identical across
    processes and interpreter versions (``PYTHONHASHSEED`` salts ``hash``).
    """
    digest = hashlib.sha256(f"hopforge/{int(seed)}/{stage}".encode()).digest()
    return np.uint64(int.from_bytes(digest[:8], "little"))


@njit(cache=True, inline="always")
def mix64(z: np.uint64) -> np.uint64:
    """The splitmix64 finaliser: a bijective avalanche of 64 bits."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@njit(cache=True, inline="always")
def derive(key: np.uint64, counter: np.int64) -> np.uint64:
    """A child key (or a draw) for coordinate ``counter`` under ``key``.

    Chaining ``derive`` over (slot, try, step, ...) gives a counter-based generator
    whose every draw depends only on those coordinates.
    """
    return mix64(key + _GOLDEN * (np.uint64(counter) + _ONE))


@njit(cache=True, inline="always")
def below(r: np.uint64, n: np.int64) -> np.int64:
    """Map a 64-bit draw to ``[0, n)``.

    Modulo bias is at most n / 2**64 (under 1e-12 for any graph we hold), far below
    anything a sample could detect, and ``%`` keeps the kernels branch-free.
    """
    return np.int64(r % np.uint64(n))


def draw_index(key: np.uint64, n: int, *counters: int) -> int:
    """Plain-Python helper: a uniform index in ``[0, n)`` for the given coordinates."""
    r = np.uint64(key)
    for c in counters:
        # numba hands uint64 results back as Python ints; re-wrap so the next call types it as uint64.
        r = np.uint64(derive(r, np.int64(c)))
    return int(below(r, np.int64(n)))
