"""The student checkpoint as two runs' students are compared (:mod:`synth.engine.sameness`).

The weights, the model and generation configs, the tokenizer and template, the loss curve and the
training and mask reports (without their run facts, paths relative to the run folder) are the student's
data.  ``training_args.bin`` is not: it is transformers' pickle of the trainer's arguments, which holds the
output folder's absolute path and a logging folder named by the clock.
"""

from __future__ import annotations

from pathlib import Path

from synth.engine.sameness import NOT_DATA, Digest

NOT_COMPARED = frozenset({"training_args.bin"})


def student_file_digest(path: Path, rel: str) -> Digest | None:
    """:data:`NOT_DATA` for the trainer's pickled arguments; None (the default rule) for every other file."""
    return NOT_DATA if rel in NOT_COMPARED else None


__all__ = ["NOT_COMPARED", "student_file_digest"]
