"""The content digest of every table, artefact and report of one or more run folders, side by side.

Each output of each committed stage is digested as ``hopforge verify`` compares it (tables by their rows
after sorting, reports without run facts, the index by its documents: :mod:`synth.engine.sameness`,
:func:`flows.verify.run_digests`), and one Markdown table is printed: a row per output, a column per run
(the first 12 hex digits of its digest, and its rows for a table), and whether every run agrees.  Nothing
is re-derived and no folder is written.  Exit code 0 when every run holds the same data, 1 when not.

Usage: python scripts/run_digests.py DIR [DIR ...] [--until STAGE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    """Print the table for the folders in ``argv``; 0 when every run holds the same data."""
    from flows.verify import run_digests
    from synth.engine.errors import InputError

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run folders (the --out of hopforge run)")
    ap.add_argument("--until", help="only the stages up to this one")
    args = ap.parse_args(argv)
    try:
        digests = [run_digests(r, args.until) for r in args.runs]
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    names = list(dict.fromkeys(k for d in digests for k in d))
    print("| stage | output | " + " | ".join(r.name for r in args.runs) + " | same |")
    print("| --- | --- |" + " --- |" * len(args.runs) + " --- |")
    same_everywhere = True
    for name in names:
        got = [d.get(name) for d in digests]
        same = all(g is not None for g in got) and len({g.sha for g in got}) == 1
        same_everywhere &= same
        cells = [("-" if g is None else (f"{g.sha[:12]} ({g.rows:,} rows)" if g.rows is not None else g.sha[:12]))
                 for g in got]
        print(f"| {name[0]} | {name[1]} | " + " | ".join(cells) + f" | {'yes' if same else 'NO'} |")
    print(f"\n{len(names)} outputs of {len(args.runs)} runs: "
          + ("every run holds the same data" if same_everywhere else "the runs differ"))
    return 0 if same_everywhere else 1


if __name__ == "__main__":
    sys.exit(main())
