"""A test hook for crash-resume tests: kill this process at a named point.

When ``HOPFORGE_CRASH_AT`` lists a point (comma-separated), reaching it sends SIGKILL
to the process itself: no cleanup, no flush, exactly like a machine going down.
The points sit where a crash is most likely to leave damage: right after a shard is
marked done (``shard:<stage>:<i>``), right after a stage's output folder is renamed
into place, before its public links and manifest entry (``commit:<stage>``), and right
after this process's N-th paid teacher call reached the ledger (``ledger:<N>``), which
lands anywhere inside a teacher stage's shards.  Tests kill at these progress points,
never after a wall-clock delay, so they hold on a loaded machine.
"""

from __future__ import annotations

import os
import signal


# The run's main process when this is one of its local worker processes (synth.engine.workers): a crash there
# takes the whole run down, as a machine going down would.
RUN_PID: int | None = None


def crash_point(name: str) -> None:
    """SIGKILL this process (and, in a worker process, the run's main process) if ``HOPFORGE_CRASH_AT`` names
    ``name``."""
    spec = os.environ.get("HOPFORGE_CRASH_AT")
    if spec and name in spec.split(","):
        if RUN_PID is not None:
            os.kill(RUN_PID, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
