"""Content keys cover the code a stage can run: found from its entry's imports, not listed by hand."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flows.stages import GRAPH, INGEST, PIPELINE, QUESTIONS, ROLLOUT
from synth.engine.codekey import ROOT, code_hash, import_closure


@pytest.fixture()
def project(tmp_path) -> Path:
    """A copy of the project's packages, to edit."""
    for top in ("synth", "filters", "sft", "flows"):
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _rel(paths, root=ROOT) -> set[str]:
    return {str(p.relative_to(root)) for p in paths}


def test_closure_follows_indirect_and_lazy_imports():
    sources, data = import_closure(ROLLOUT.module)
    rel = _rel(sources)
    # rollout.stage -> rollout.loop -> engine.seeding: reached only indirectly.
    assert "synth/engine/seeding.py" in rel and "synth/rollout/loop.py" in rel
    # The teacher client, and the backends it names only as "module:function" strings.
    assert {"synth/teacher/client.py", "synth/teacher/oracle/model.py", "synth/teacher/openai_compat.py"} <= rel
    assert "synth/rollout/__init__.py" in rel and "synth/__init__.py" in rel
    assert "synth/teacher/prompts/agent.jinja2" in _rel(data)
    # Nothing of a higher layer, and nothing another concern alone uses.
    assert not any(r.startswith(("filters/", "sft/", "flows/")) for r in rel)
    assert "synth/corpus/ingest.py" not in rel


def test_every_stage_entry_resolves():
    for stage in PIPELINE:
        sources, _ = import_closure(stage.module)
        assert any(str(p).endswith(stage.module.replace(".", "/") + ".py") for p in sources), stage.name


def test_indirect_edit_changes_only_the_stages_that_reach_it(project):
    before = {s.name: code_hash(s.module, project) for s in PIPELINE}
    seeding = project / "synth" / "engine" / "seeding.py"
    seeding.write_text(seeding.read_text().replace("digest_size=8)", "digest_size=8)  # edited"))
    after = {s.name: code_hash(s.module, project) for s in PIPELINE}
    assert after[ROLLOUT.name] != before[ROLLOUT.name]
    assert after[QUESTIONS.name] != before[QUESTIONS.name]
    assert after[INGEST.name] == before[INGEST.name] and after[GRAPH.name] == before[GRAPH.name]


def test_a_prompt_file_is_part_of_the_key(project):
    before = code_hash(QUESTIONS.module, project), code_hash(GRAPH.module, project)
    prompt = project / "synth" / "teacher" / "prompts" / "question.jinja2"
    prompt.write_text(prompt.read_text() + "\n")
    after = code_hash(QUESTIONS.module, project), code_hash(GRAPH.module, project)
    assert after[0] != before[0] and after[1] == before[1]


def test_the_key_follows_the_copy_not_the_checkout(project):
    assert code_hash(ROLLOUT.module, project) == code_hash(ROLLOUT.module)


def test_parses_are_kept_between_processes_and_redone_for_an_edited_file(project, tmp_path, monkeypatch):
    """What each file yields is stored in the user's cache folder; a fresh process reads it instead of parsing, an
    edited file is parsed again (its new import followed), and a damaged store costs only the parse."""
    import ast

    from synth.engine import codekey

    root = project.resolve()
    monkeypatch.setattr(codekey, "ROOT", root)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def fresh_process() -> None:
        codekey._Stored._one = None
        codekey._parse.cache_clear()

    fresh_process()
    expected = code_hash(ROLLOUT.module, root)
    before = {str(f) for f in import_closure(ROLLOUT.module, root)[0]}
    stored = list((tmp_path / "cache" / "hopforge").glob("codekey-*.json"))
    assert len(stored) == 1 and "synth/engine/seeding.py" in stored[0].read_text()

    fresh_process()
    real_parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda *a, **k: pytest.fail("a stored file was parsed again"))
    assert code_hash(ROLLOUT.module, root) == expected

    seeding = root / "synth" / "engine" / "seeding.py"
    seeding.write_text(seeding.read_text() + "\nimport synth.corpus.ingest  # edited\n")
    parsed = []

    def counting_parse(src, *a, **k):
        parsed.append(k.get("filename"))
        return real_parse(src, *a, **k)

    monkeypatch.setattr(ast, "parse", counting_parse)
    fresh_process()
    assert code_hash(ROLLOUT.module, root) != expected
    # The edited file, then only the files its new import brought in: nothing stored was parsed again.
    assert parsed[0] == str(seeding) and not set(parsed[1:]) & before and len(parsed) > 1
    assert "synth/corpus/ingest.py" in _rel(import_closure(ROLLOUT.module, root)[0], root)

    stored[0].write_text("{not json")
    fresh_process()
    monkeypatch.setattr(ast, "parse", real_parse)
    seeding.write_text(seeding.read_text().replace("\nimport synth.corpus.ingest  # edited\n", ""))
    assert code_hash(ROLLOUT.module, root) == expected
