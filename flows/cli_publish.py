"""``hopforge publish``: DIR's datasets as Parquet shards plus a dataset card, on disk or on the Hub.

``hopforge publish --out DIR --to local:PATH`` writes the Hub layout into a folder;
``hopforge publish --out DIR --to hub:ORG/NAME`` uploads what changed (token from
``HF_TOKEN``).  A local PATH may not lie inside DIR, and publish replaces there only the files it
wrote itself unless ``--overwrite`` is given.  See :mod:`synth.publish.publisher` for the layout,
the sharding rule and the checks.

Importing this module registers the command on :data:`flows.cli_common.app`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flows.cli_common import DEFAULT_CONFIG, ConfigOpt, OutOpt, SetOpt, guard, load
from flows.cli_common import app as _root_app

ToOpt = Annotated[str, typer.Option("--to", "-t", help="Where to publish: local:PATH (a folder outside DIR) or "
                                                     "hub:ORG/NAME (a Hugging Face dataset repo; token from HF_TOKEN).")]
OverwriteOpt = Annotated[bool, typer.Option("--overwrite", help="local:PATH only: replace files there that "
                                                               "publish did not write (e.g. your own README.md).")]


@guard
def publish_cmd(to: ToOpt, config: ConfigOpt = Path(DEFAULT_CONFIG), set_: SetOpt = None,
                out: OutOpt = Path("data/demo"), overwrite: OverwriteOpt = False) -> None:
    """Publish sft, longctx, rl_pool, questions and traces as Parquet shards (data/<config>/<split>-*.parquet)
    with a dataset card; only new or changed files are written or uploaded, stale shards are removed.
    A local target never lies inside DIR, and files there that publish did not write are replaced only
    with --overwrite."""
    from synth.engine.progress import print_line, print_table
    from synth.publish.publisher import parse_target, publish

    parse_target(to)  # a bad target fails before the config is read
    cfg = load(config, set_)
    s = publish(out, to, cfg, overwrite=overwrite)
    rows = [[name, s["rows"][name], s["shards"][name]] for name in s["rows"]]
    rows += [[name, "skipped", why] for name, why in s["skipped"].items()]
    print_table(f"publish -> {s['target']}", ["config", "rows", "shards"], rows)
    verb = "uploaded" if s["target"].startswith("hub:") else "written"
    print_line(f"{len(s['written'])} files {verb}, {len(s['unchanged'])} unchanged, "
               f"{len(s['deleted'])} stale removed" + (f"; commit {s['commit_url']}" if s["commit_url"] else ""))


def register(app: typer.Typer) -> None:
    """Add ``publish`` to ``app`` (once)."""
    if "publish" not in {c.name for c in app.registered_commands}:
        app.command("publish")(publish_cmd)


register(_root_app)

__all__ = ["publish_cmd", "register"]
