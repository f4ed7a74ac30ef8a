"""The ``oracle`` teacher: the offline default backend, a closed package.

:mod:`~synth.teacher.oracle.model` is the backend (:func:`make_oracle`); it writes questions
(:mod:`~synth.teacher.oracle.writer`, clues from :mod:`~synth.teacher.oracle.clues`, sentences
from :mod:`~synth.teacher.oracle.frames`) and rolls out as a ReAct agent
(:mod:`~synth.teacher.oracle.agent` and the modules it names).  Nothing outside this package
imports its parts: the rest of hopforge talks to it through the teacher client, like any backend.
"""

from synth.teacher.oracle.model import OracleModel, make_oracle

__all__ = ["OracleModel", "make_oracle"]
