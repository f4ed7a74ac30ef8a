"""Which page a title names when several pages hold it: the one rule, for links and for ``open``.

A KILT dump has one page per title, but a corpus made elsewhere may repeat a title under
different ids.  Every such page is kept (the ingest report counts them, as
``duplicate_titles``), and the title names the page first in :func:`page_order`: the
smallest id, ids compared as numbers when they are digits without leading zeros (as
KILT's are), that is shorter first and then character by character.  Link resolution
(:mod:`synth.corpus.links`, in DuckDB: :data:`PAGE_ORDER_SQL`) and the ``open`` tool
(:meth:`synth.tools.search.SearchIndex.get_page`) both follow it; the other pages are
reached by their id.
"""

from __future__ import annotations


def page_order(page_id: str) -> tuple[int, str]:
    """The sort key of a page id under the rule above (the smallest key wins a shared title)."""
    return len(page_id), page_id


# page_order as a DuckDB expression over a `page_id` column: a string that sorts the same way.
PAGE_ORDER_SQL = "lpad(CAST(length(page_id) AS VARCHAR), 12, '0') || page_id"

__all__ = ["page_order", "PAGE_ORDER_SQL"]
