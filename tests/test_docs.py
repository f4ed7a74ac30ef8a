"""The documentation: a README a newcomer can read, and reference pages that say what the code says.

The reference pages are made by the site's build hook (``docs/hooks/reference.py``); here they are rendered
with the Markdown extensions ``mkdocs.yml`` names, as the site renders them, and read as text, so a field
whose description Markdown would swallow (``<name>``, ``k*``) fails as surely as a missing one.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import typing
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def hook():
    spec = importlib.util.spec_from_file_location("hopforge_docs_reference", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _rendered_text(markdown_text: str) -> str:
    """A page as its reader sees it: rendered with mkdocs.yml's Markdown extensions, tags dropped, whitespace
    collapsed."""
    import markdown

    site = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    extensions, configs = [], {}
    for ext in site["markdown_extensions"]:
        name, conf = next(iter(ext.items())) if isinstance(ext, dict) else (ext, None)
        extensions.append(name)
        if conf:
            configs[name] = {k: (v == "true" if v in ("true", "false") else v) for k, v in conf.items()}
    parser = _Text()
    parser.feed(markdown.markdown(markdown_text, extensions=extensions, extension_configs=configs))
    return " ".join("".join(parser.parts).split())


def _prose(s: str) -> str:
    """A description as it reads once rendered: code spans lose their backticks."""
    return " ".join(s.replace("`", "").split())


def _models(ann) -> list[tuple[type[BaseModel], str]]:
    """The models an annotation holds, with the suffix their fields' names take (``[]`` for a list's items)."""
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [(ann, "")]
    origin, out = typing.get_origin(ann), []
    for arg in typing.get_args(ann):
        out += [(m, ("[]" if origin is list else "{}" if origin is dict else "") + s) for m, s in _models(arg)]
    return out


def _fields(model: type[BaseModel], prefix: str) -> list[tuple[str, str]]:
    """(dotted name, description) of every field of ``model``, nested models' fields included."""
    out = []
    for name, field in model.model_fields.items():
        out.append((prefix + name, field.description or ""))
        for sub, suffix in _models(field.annotation):
            out += _fields(sub, f"{prefix}{name}{suffix}.")
    return out


def test_the_readme_is_short_and_starts_with_the_two_commands_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    first_block = readme.split("```", 2)[1]
    assert first_block.strip() == "make demo\nmake test"
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_the_readmes_links_name_files_that_exist() -> None:
    """mkdocs checks the site's links; the README is no page of the site, so its own are checked here."""
    readme = (ROOT / "README.md").read_text()
    links = [link for link in re.findall(r"\]\(([^)#\s]+)", readme) if "://" not in link]
    assert links and [link for link in links if not (ROOT / link).exists()] == []


def test_the_config_reference_lists_every_field_of_every_section_with_its_description(hook) -> None:
    from flows.config import Config

    pages = hook.config_pages()
    sections = {name: f.annotation for name, f in Config.model_fields.items()
                if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel)}
    assert len(sections) >= 15
    checked = 0
    for name, model in sections.items():
        page = f"{hook.CONFIG_DIR}/{name}.md"
        assert page in pages, f"config section {name!r} has no reference page"
        text = _rendered_text(pages[page])
        for dotted, description in _fields(model, f"{name}."):
            assert description, f"{dotted} has no description in the code"
            assert re.search(rf"^#+ `{re.escape(dotted)}`$", pages[page], re.M), f"{dotted} has no heading on {page}"
            assert _prose(description) in text, f"{dotted}'s description is not on {page} as written"
            checked += 1
    root = _rendered_text(pages[f"{hook.CONFIG_DIR}.md"])
    for dotted, description in _fields(Config, ""):
        if dotted.split(".", 1)[0] not in sections:
            assert dotted in root and _prose(description) in root, dotted
        elif "." not in dotted:
            assert f"config/{dotted}.md" in pages[f"{hook.CONFIG_DIR}.md"], f"the index does not link {dotted}"
    assert checked > 150


def test_every_cli_command_has_a_reference_page_with_its_help(hook) -> None:
    import typer

    from flows.cli import app

    pages = hook.cli_pages()
    root = typer.main.get_command(app)
    rctx = root.context_class(root, info_name="hopforge")

    def walk(cmd, ctx, page: str) -> None:
        text = _rendered_text(pages[page])
        assert ctx.command_path in text and _prose(cmd.help or "") in text, ctx.command_path
        for param in cmd.get_params(ctx):
            record = param.get_help_record(ctx)
            if record:
                assert _prose(record[0]) in text and _prose(record[1]) in text, (ctx.command_path, record)
        for name in getattr(cmd, "commands", {}):
            sub = cmd.commands[name]
            walk(sub, sub.context_class(sub, info_name=name, parent=ctx), page)

    for name, cmd in root.commands.items():
        page = f"{hook.CLI_DIR}/hopforge-{name}.md"
        assert page in pages, f"hopforge {name} has no reference page"
        walk(cmd, cmd.context_class(cmd, info_name=name, parent=rctx), page)


def test_the_nav_holds_the_reference_and_every_hand_written_page(hook) -> None:
    """mkdocs --strict fails on a page left out of the nav only when the nav is checked; the hook fills it."""
    site = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    assert site["validation"]["nav"]["omitted_files"] == "warn" and site["validation"]["links"]["not_found"] == "warn"

    def pages(nav) -> list[str]:
        out = []
        for entry in nav:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            out += pages(value) if isinstance(value, list) else [value]
        return out

    class Cfg(dict):
        nav = site["nav"]

    cfg = Cfg()
    hook.on_config(cfg)
    listed = pages(cfg.nav)
    on_disk = sorted(str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")
                     if "hooks" not in p.parts)
    assert sorted(set(listed) - set(hook._pages)) == on_disk
    assert set(hook._pages) <= set(listed)
