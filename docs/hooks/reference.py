"""The reference pages of the documentation site, written from the code at build time, so they cannot drift.

An MkDocs hook (``hooks:`` in ``mkdocs.yml``; no plugin needed):

- ``reference/config.md`` and ``reference/config/``: one page per section of the run's config (:class:`flows.config.Config`, the model
  ``hopforge run --config`` loads), every field with its type, default, whether it is operational, and its
  ``description``, recursing into nested models (``tools.dense``, ``teacher.price_per_mtok``, the items of
  ``rl.curriculum``...); the root's own fields (``seed``, ``tokenizer``) and the list of sections on its index.
- ``reference/cli.md`` and ``reference/cli/``: one page per command of ``hopforge`` (a group, ``tools`` or ``corpus``, holds its
  subcommands), from the CLI's own click objects (``typer.main.get_command``): its usage line, its help text
  and each parameter's help record, the text ``--help`` prints, defaults and ``[required]`` included.

The pages are virtual files added in ``on_files`` (MkDocs 1.6's ``File.generated``), never written into
``docs/``: nothing generated is committed, so nothing can be stale, and ``mkdocs serve`` does not see a write
to its own docs folder and rebuild in a loop.  ``on_config`` fills the nav's ``Reference`` entry with the same
pages, so a new section or command gets a page and a nav entry without an edit here, and ``mkdocs build
--strict`` (with ``validation.omitted_files: warn``) still fails for any hand-written page left out of the nav.

``tests/test_docs.py`` renders these pages and checks that every config field and its description is there.
"""

from __future__ import annotations

import html
import json
import re
import types
import typing
from typing import Any, NamedTuple

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

CONFIG_DIR = "reference/config"
CLI_DIR = "reference/cli"


# ---- Markdown text ---------------------------------------------------------------------------------------


def text(s: str) -> str:
    """Prose from the code as Markdown that renders as written: code spans (backticks) kept, and outside them
    the characters Markdown would read as emphasis, links or tags escaped (``k*``, ``2**i``, ``<name>``)."""
    s = re.sub(r"``(.+?)``", r"`\1`", s)  # a docstring's reST literal is a Markdown code span
    parts = s.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code spans
        parts = [s.replace("`", "\\`")]
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"`{part}`")
        else:
            part = html.escape(part, quote=False)
            out.append(re.sub(r"([\\*_\[\]])", r"\\\1", part))
    joined = "".join(out)
    return re.sub(r"^(\s*)([-+#>]|\d+\.)(\s)", r"\1\\\2\3", joined, flags=re.M)  # no list or heading by accident


def code(s: str) -> str:
    """``s`` as one inline code span, whatever backticks it holds."""
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{ticks}{pad}{s}{pad}{ticks}"


def paragraphs(s: str) -> str:
    """A docstring or help text: its paragraphs (blank-line separated), each joined into one line."""
    import inspect

    s = inspect.cleandoc(s or "")
    paras = [" ".join(p.split()) for p in re.split(r"\n\s*\n", s) if p.strip() and p.strip() != "\b"]
    return "\n\n".join(text(p.replace("\b", "").strip()) for p in paras)


# ---- the config --------------------------------------------------------------------------------------------


def type_name(ann: Any) -> str:
    """An annotation as it reads in a config file: ``int | None``, ``Literal['a', 'b']``, ``list[Price]``."""
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if ann is type(None):
        return "None"
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) if isinstance(a, str) else repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]" if args else name
    if isinstance(ann, type):
        return ann.__name__
    return str(ann).replace("typing.", "")


def nested_models(ann: Any) -> list[tuple[type[BaseModel], str]]:
    """The pydantic models an annotation holds, each with the suffix its fields' names take: ``''`` for the
    model itself (``X | None`` too), ``'[]'`` for a list's items, ``'{}'`` for a mapping's values."""
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [(ann, "")]
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    out: list[tuple[type[BaseModel], str]] = []
    if origin in (list, tuple, set, frozenset, typing.Sequence):
        for a in args:
            out += [(m, "[]" + s) for m, s in nested_models(a)]
    elif origin in (dict, typing.Mapping):
        out += [(m, "{}" + s) for m, s in nested_models(args[-1])] if args else []
    else:
        for a in args:
            out += nested_models(a)
    return out


def default_of(field: Any) -> str | None:
    """A field's default as JSON (YAML reads it back), or None for a required field."""
    if field.default is PydanticUndefined and field.default_factory is None:
        return None
    try:
        value = field.get_default(call_default_factory=True, validated_data={})
    except TypeError:  # a factory that needs the other fields
        return "(computed from the other fields)"
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def is_operational(field: Any) -> bool:
    extra = field.json_schema_extra
    return isinstance(extra, dict) and bool(extra.get("operational"))


class FieldDoc(NamedTuple):
    """One field of the config, as its reference page shows it."""

    dotted: str  # e.g. ``tools.dense.model``, ``rl.curriculum[].name``
    type: str
    default: str | None  # JSON; None: required, or a nested section (``nested``) whose fields give theirs
    nested: bool  # holds a model whose fields follow
    operational: bool
    description: str
    depth: int  # 0: a section's own field


def fields_of(model: type[BaseModel], prefix: str, depth: int = 0) -> list[FieldDoc]:
    """Every field of ``model`` under ``prefix``, each nested model's fields after the field that holds it."""
    out: list[FieldDoc] = []
    for name, field in model.model_fields.items():
        dotted = f"{prefix}{name}"
        nested = nested_models(field.annotation)
        whole = bool(nested) and field.default_factory is not None and not field.is_required() and \
            isinstance(field.get_default(call_default_factory=True, validated_data={}), BaseModel)
        out.append(FieldDoc(dotted, type_name(field.annotation), None if whole else default_of(field), bool(nested),
                            is_operational(field), field.description or "", depth))
        for sub, suffix in nested:
            out += fields_of(sub, f"{dotted}{suffix}.", depth + 1)
    return out


def sections() -> list[tuple[str, type[BaseModel], Any]]:
    """The root config's sections: (name, model, the root's field that holds it)."""
    from flows.config import Config

    return [(name, f.annotation, f) for name, f in Config.model_fields.items()
            if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel)]


def field_block(f: FieldDoc) -> str:
    level = "#" * min(2 + f.depth, 6)
    facts = [f"type {code(f.type)}"]
    if f.default is not None:
        facts.append(f"default {code(f.default)}")
    elif f.nested:
        facts.append("default: its fields' defaults, below")
    else:
        facts.append("required")
    if f.operational:
        facts.append("**operational** (not part of any content key)")
    return f"{level} {code(f.dotted)}\n\n{' · '.join(facts)}\n\n{text(f.description)}\n"


def config_pages() -> dict[str, str]:
    """{path under docs/: Markdown} for the config reference: an index and one page per section."""
    from flows.config import Config

    pages: dict[str, str] = {}
    rows = []
    for name, model, _ in sections():
        body = [f"# {code(name)}\n", paragraphs(model.__doc__ or ""), ""]
        body += [field_block(f) for f in fields_of(model, f"{name}.")]
        pages[f"{CONFIG_DIR}/{name}.md"] = "\n".join(body)
        first = paragraphs(model.__doc__ or "").split("\n\n")[0]
        count = len(fields_of(model, ""))
        rows.append(f"| [{code(name)}](config/{name}.md) | {count} | {first.replace('|', '&#124;')} |")
    root_fields = [f for f in fields_of(Config, "") if f.depth == 0 and
                   f"{CONFIG_DIR}/{f.dotted}.md" not in pages]
    index = ["# Configuration reference\n",
             "Generated from the config models at build time (`docs/hooks/reference.py`): every field of every "
             "section, with its type, default and description as the code declares them. A YAML file given to "
             "`--config` holds these keys; `--set dotted.key=value` overrides one. Fields marked operational change "
             "how a stage runs, not what it writes, and stay out of content keys.\n",
             paragraphs(Config.__doc__ or ""), "",
             "## Sections\n", "| section | fields | what it configures |", "| --- | ---: | --- |", *rows, "",
             "## The root's own fields\n"]
    index += [field_block(f) for f in root_fields]
    pages[f"{CONFIG_DIR}.md"] = "\n".join(index)
    return pages


# ---- the CLI -----------------------------------------------------------------------------------------------


def _command_block(cmd: Any, ctx: Any, level: int) -> list[str]:
    path = ctx.command_path
    out = [f"{'#' * level} {code(path)}\n", "```\n" + cmd.get_usage(ctx) + "\n```\n", paragraphs(cmd.help or ""), ""]
    if cmd.epilog:
        out += [paragraphs(cmd.epilog), ""]
    records = [r for r in (p.get_help_record(ctx) for p in cmd.get_params(ctx)) if r]
    if records:
        out.append("**Parameters**\n")
        out += [f"- {code(opts)}: {text(' '.join(help_.split()))}" for opts, help_ in records]
        out.append("")
    if hasattr(cmd, "commands"):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            out += _command_block(sub, sub.context_class(sub, info_name=name, parent=ctx), level + 1)
    return out


def cli_pages() -> dict[str, str]:
    """{path under docs/: Markdown} for the CLI reference: an index and one page per top-level command."""
    import typer

    from flows.cli import app

    root = typer.main.get_command(app)
    rctx = root.context_class(root, info_name="hopforge")
    pages: dict[str, str] = {}
    rows = []
    for name in root.list_commands(rctx):
        cmd = root.get_command(rctx, name)
        if cmd is None or cmd.hidden:
            continue
        ctx = cmd.context_class(cmd, info_name=name, parent=rctx)
        pages[f"{CLI_DIR}/hopforge-{name}.md"] = "\n".join(_command_block(cmd, ctx, 1))  # not index.md: `hopforge index`
        summary = paragraphs(cmd.help or "").split("\n\n")[0]
        rows.append(f"| [{code('hopforge ' + name)}](cli/hopforge-{name}.md) | {summary.replace('|', '&#124;')} |")
    index = ["# CLI reference\n",
             "Generated from the CLI's own help (`hopforge COMMAND --help`) at build time "
             "(`docs/hooks/reference.py`). Every command takes `--config`, `--set` and `--out` as "
             "[Commands](../commands.md) describes.\n",
             "```\n" + root.get_usage(rctx) + "\n```\n", paragraphs(root.help or ""), "",
             "| command | what it does |", "| --- | --- |", *rows, ""]
    pages[f"{CLI_DIR}.md"] = "\n".join(index)
    return pages


# ---- the hook ----------------------------------------------------------------------------------------------

_pages: dict[str, str] = {}


def _nav_titles(pages: dict[str, str], folder: str) -> list:
    """Nav entries for a folder's pages: its overview (``FOLDER.md``) first, then each page in the order made."""
    return [f"{folder}.md"] + [{k.rsplit("/", 1)[1][:-3].replace("-", " ", 1 if "/cli/" in k else 0): k}
                               for k in pages if k.startswith(folder + "/")]


def on_config(config: Any) -> Any:
    _pages.clear()
    _pages.update(config_pages())
    _pages.update(cli_pages())
    reference = [{"Configuration": _nav_titles(_pages, CONFIG_DIR)}, {"CLI": _nav_titles(_pages, CLI_DIR)}]
    nav = config.nav or []
    for i, entry in enumerate(nav):
        if isinstance(entry, dict) and "Reference" in entry:
            nav[i] = {"Reference": reference}
            break
    else:
        raise ValueError("mkdocs.yml's nav has no `Reference` entry for the generated reference pages")
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, content in _pages.items():
        files.append(File.generated(config, path, content=content))
    return files
