"""Errors a user can act on, as opposed to bugs.

The CLI prints each as one line: :class:`InputError` and the config and missing-input
errors exit 2 (the message names the record, field or setting); :class:`StageFailed`
exits 1 (the message says what outside hopforge failed and how to fix it).  Neither is
ever committed as a finished stage.
"""


class InputError(ValueError):
    """Bad input data, e.g. a malformed line in strict mode (``line N: why``)."""


class StageFailed(RuntimeError):
    """A stage cannot finish for a reason outside its code: the teacher's endpoint is down or
    rejects the key, or every item failed.  Finished shards are kept for the rerun."""
