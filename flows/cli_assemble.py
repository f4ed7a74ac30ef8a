"""``hopforge assemble``: tiered long-context rows into ``DIR/longctx``.

For each accepted question and each target length in ``assemble.lengths``, one row with
the gold documents, tier-1 distractors (pages the traces retrieved) and tier-2 fill
(BM25 neighbours, then random pages), shuffled, within ``[L - slack, L]`` tokens of the
run's tokenizer (see :mod:`synth.assemble`).  It needs the ``questions``, ``traces``,
``sft``, ``index``, ``tokenizer`` and ``corpus/pages`` outputs in DIR.

This module registers the command on :data:`flows.cli.app` itself, when imported:
``flows/cli.py`` imports it on its last line (``import flows.cli_assemble``), since this
module imports ``_guard``, ``_load`` and ``_run_stages`` from there.  Registering here
keeps the import cycle harmless whichever of the two modules is imported first.
"""

from __future__ import annotations

from pathlib import Path

from flows.cli import DEFAULT_CONFIG, ConfigOpt, ForceOpt, OutOpt, SetOpt, _guard, _load, _run_stages
from flows.cli import app as _root_app


@_guard
def assemble(config: ConfigOpt = Path(DEFAULT_CONFIG), set_: SetOpt = None, out: OutOpt = Path("data/demo"),
             force: ForceOpt = False) -> None:
    """Assemble long-context rows (gold + tier-1 + tier-2 documents to each length L) into DIR/longctx."""
    cfg = _load(config, set_)
    _run_stages(["assemble"], cfg, out, force)


if not any(c.name == "assemble" for c in _root_app.registered_commands):
    _root_app.command("assemble")(assemble)

__all__ = ["assemble"]
