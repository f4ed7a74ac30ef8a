"""When the teacher's endpoint itself is failing: which failures say so, the breaker that stops a
stage on them, and the one-line message that names the fix.

A rejected key, an unknown model or nothing listening fail every item the same way, so a
stage must stop (nothing committed, finished shards kept) instead of dropping every item as
its own failure.  :class:`Breaker` counts such failures in a row per endpoint and process;
:class:`synth.teacher.client.Teacher` consults it on every attempt.  An exhausted quota, and a
server asking to wait longer than ``teacher.max_wait_s``, stop the stage at the first attempt
(:data:`AT_ONCE`): no retry can succeed before the user acts.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Callable

from synth.engine.errors import StageFailed
from synth.teacher.config import TeacherConfig


# Kinds that trip the breaker at their first attempt, whatever abort_after and abort_grace_s say.
# ``wait`` is not a reason's kind: the client names it when a Retry-After exceeds teacher.max_wait_s.
AT_ONCE = frozenset({"quota", "wait"})

# How providers say that the account has no quota or credit left (OpenAI `insufficient_quota`,
# "You exceeded your current quota, please check your plan and billing details"; Anthropic
# "Your credit balance is too low"; OpenRouter 402 "Insufficient credits"; Gemini "Quota exceeded").
_QUOTA = re.compile(r"insufficient[_ ]quota|quota[_ ](?:exceeded|exhausted)|exceeded (?:your |the )?(?:current )?quota|"
                    r"credit balance is too low|insufficient (?:credits?|balance|funds)|billing|payment required",
                    re.I)
# A rate limit worded with the quota words (Gemini: "Quota exceeded for quota metric ... per minute")
# passes with time, so it stays a retried 429.
_PER_MINUTE = re.compile(r"per[_ ]minute|per[_ ]second|rate[_ ]limit", re.I)


def says_quota(text: str) -> bool:
    """Whether a server's error (its message, type and code) says the account's quota or credit is used
    up, in any provider's words, rather than a rate limit that passes with time."""
    return bool(_QUOTA.search(text)) and not _PER_MINUTE.search(text)


def failure_kind(reason: str) -> str | None:
    """Whether a failed attempt says the endpoint itself is failing, and how: ``auth`` (401/403),
    ``model`` (404: the model is not served), ``unreachable`` (nothing accepted the connection),
    ``quota`` (the account has no quota left), ``server`` (5xx, timeouts, dropped connections);
    None for a failure of the item alone."""
    if reason == "quota":
        return "quota"
    if reason in ("http_401", "http_403"):
        return "auth"
    if reason == "http_404":
        return "model"
    if reason == "unreachable":
        return "unreachable"
    if reason.startswith("http_5") or reason in ("timeout", "connection"):
        return "server"
    return None


class TeacherUnavailable(StageFailed):
    """The teacher's endpoint is failing as a whole, so the stage stops: nothing of it is committed,
    finished shards are kept, and the message says what to fix.  Not a :class:`TeacherError`: it is
    never dropped as an item's failure."""


class Breaker:
    """Trips once ``threshold`` failures in a row were the endpoint's own (see :func:`failure_kind`)
    and it has not answered for ``grace_s`` seconds (or ever), or at once for a kind of
    :data:`AT_ONCE`.  One per endpoint and process, shared by every teacher of it, like the gate."""

    def __init__(self, threshold: int, grace_s: float, clock: Callable[[], float] = time.monotonic):
        self.threshold, self.grace_s, self.clock = threshold, grace_s, clock
        self._lock = threading.Lock()
        self.consecutive = 0
        self.last_success: float | None = None
        self.tripped: tuple[str, str, str] | None = None  # (kind, reason, detail) that tripped it

    def success(self) -> None:
        """An attempt was answered."""
        with self._lock:
            self.consecutive = 0
            self.last_success = self.clock()

    def failure(self, kind: str, reason: str, detail: str) -> bool:
        """Count a failed attempt of kind ``kind``; True once the breaker has tripped."""
        with self._lock:
            if self.tripped is None:
                self.consecutive += 1
                recent = self.last_success is not None and self.clock() - self.last_success < self.grace_s
                if kind in AT_ONCE or (self.consecutive >= self.threshold and not recent):
                    self.tripped = (kind, reason, detail)
            return self.tripped is not None


def unavailable_message(cfg: TeacherConfig, kind: str, reason: str, detail: str) -> str:
    """One line: what failed, at which endpoint and model, and the setting that fixes it."""
    where = f"teacher endpoint {cfg.display_url()} (model {cfg.model!r})"
    detail = " ".join(detail.split())[:200]
    if kind == "auth":
        return (f"{where} rejected the API key ({reason}: {detail}): check the key in ${cfg.api_key_env} "
                "(teacher.api_key_env)")
    if kind == "model":
        return (f"{where} does not serve model {cfg.model!r} ({reason}: {detail}): set teacher.model to a name the "
                "server lists at GET /models")
    if kind == "unreachable":
        return (f"nothing answers at {where} ({detail}): start the server or set teacher.base_url")
    if kind == "quota":
        return (f"{where} says the account has no quota or credit left ({reason}: {detail}): add credit or raise "
                "the quota with the provider, then rerun (finished shards are kept)")
    if kind == "wait":
        return (f"{where}: {detail} ({reason}): rerun later, or raise teacher.max_wait_s to wait that long "
                "(finished shards are kept)")
    return (f"{where} keeps failing ({reason}: {detail}) after {cfg.max_retries} retries per call: check the server, "
            "then rerun (finished shards are kept)")
