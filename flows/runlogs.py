"""Send the ``hopforge`` logger's lines to the Prefect run they belong to.

Stage code logs through ``logging.getLogger("hopforge")`` (progress lines, teacher
warnings, resumed shards).  Prefect only ships its own loggers to the API, and
``PREFECT_LOGGING_EXTRA_LOGGERS`` has to be set before Prefect configures logging and
drops lines logged outside a run context; the teacher logs from helper threads that
have none.  So a flow attaches :class:`HopforgeRunHandler` for its run: a record logged
inside a flow or task run context is attributed to that run by Prefect as usual; one
from a thread without context goes to the flow run that attached the handler.
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Iterator
from uuid import UUID

from prefect.logging.handlers import APILogHandler

log = logging.getLogger("hopforge")
_LOCK = threading.Lock()


class HopforgeRunHandler(APILogHandler):
    """An API log handler with a fallback flow run id for records logged outside a run context."""

    def __init__(self, flow_run_id: UUID | str | None = None):
        super().__init__()
        self.flow_run_id = flow_run_id

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "flow_run_id", None) is None and not _in_run_context():
            if self.flow_run_id is None:
                return
            record = logging.makeLogRecord({**record.__dict__, "flow_run_id": self.flow_run_id})
        super().emit(record)


def _in_run_context() -> bool:
    from prefect.context import FlowRunContext, TaskRunContext

    return FlowRunContext.get() is not None or TaskRunContext.get() is not None


def _ensure_level() -> None:
    # Under Prefect's logging config the root logger sits at WARNING; stage progress is INFO.
    if log.level == logging.NOTSET or log.level > logging.INFO:
        log.setLevel(logging.INFO)


@contextmanager
def hopforge_logs_to_run(flow_run_id: UUID | str | None) -> Iterator[None]:
    """While the block runs, ``hopforge`` log lines reach flow run ``flow_run_id`` (and its tasks)."""
    handler = HopforgeRunHandler(flow_run_id)
    with _LOCK:
        old_level = log.level
        _ensure_level()
        log.addHandler(handler)
    try:
        yield
    finally:
        with _LOCK:
            log.removeHandler(handler)
            log.setLevel(old_level)


_WORKER_HANDLER: HopforgeRunHandler | None = None


def attach_in_worker(flow_run_id: UUID | str | None) -> None:
    """In a task runner's worker process (Dask, Ray): attach the handler once, aimed at ``flow_run_id``."""
    global _WORKER_HANDLER
    with _LOCK:
        if any(isinstance(h, HopforgeRunHandler) and h is not _WORKER_HANDLER for h in log.handlers):
            return  # the flow's own process: its handler is already there
        if _WORKER_HANDLER is None:
            _WORKER_HANDLER = HopforgeRunHandler(flow_run_id)
            _ensure_level()
            log.addHandler(_WORKER_HANDLER)
        else:
            _WORKER_HANDLER.flow_run_id = flow_run_id


def run_logger() -> logging.Logger | logging.LoggerAdapter:
    """The current run's Prefect logger; the ``hopforge`` logger outside a run (a flow's ``.fn()`` in tests)."""
    from prefect import get_run_logger
    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:
        return log
