"""The built-in agent tools, one module each; :data:`BUILTIN` is their registration, in schema order.

A new tool is a module here that builds a :class:`~synth.tools.registry.ToolSpec` and one entry in
:data:`BUILTIN` (the order is the order of the schemas the teacher is shown and SFT rows store).  An
optional tool (``ToolSpec.optional``: offered only where ``tools.extra_tools`` names it) comes after the
others, so the schemas of a run that offers none are unchanged.
"""

from synth.tools.agent import find, multi_search, open_page, search

BUILTIN = (search.SPEC, open_page.SPEC, find.SPEC, multi_search.SPEC)

__all__ = ["BUILTIN"]
