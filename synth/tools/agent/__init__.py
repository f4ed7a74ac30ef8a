"""The built-in agent tools, one module each; :data:`BUILTIN` is their registration, in schema order.

A new tool is a module here that builds a :class:`~synth.tools.registry.ToolSpec` and one entry in
:data:`BUILTIN` (the order is the order of the schemas the teacher is shown and SFT rows store).
"""

from synth.tools.agent import find, open_page, search

BUILTIN = (search.SPEC, open_page.SPEC, find.SPEC)

__all__ = ["BUILTIN"]
