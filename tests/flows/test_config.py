"""Config loading: YAML, dotted overrides, and errors that name the key."""

import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.config import ConfigError, load_config


def test_defaults_and_yaml(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("seed: 3\nwalk:\n  hops: 5\n")
    cfg = load_config(p)
    assert cfg.seed == 3 and cfg.walk.hops == 5
    assert cfg.walk.chordless is True  # default kept


def test_overrides_parse_yaml_values(tmp_path):
    cfg = load_config(None, ["walk.hops=3", "seed=7", "walk.chordless=false", "walk.exclude_patterns=[a, b]"])
    assert cfg.walk.hops == 3 and cfg.seed == 7 and cfg.walk.chordless is False
    assert cfg.walk.exclude_patterns == ["a", "b"]


@pytest.mark.parametrize(
    "override, needle",
    [
        ("walk.hopz=3", "walk.hopz"),
        ("nope=1", "nope"),
        ("walk.hops=many", "walk.hops"),
        ("walk.hops=0", "walk.hops"),
        ("seed.x=1", "seed"),
        ("walk.exclude_patterns=['(']", "walk.exclude_patterns"),
    ],
)
def test_bad_key_or_value_names_the_key(override, needle):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert needle in str(e.value)


def test_unknown_key_in_yaml_names_it(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("walk:\n  hops: 2\n  colour: red\n")
    with pytest.raises(ConfigError, match=r"walk\.colour"):
        load_config(p)


def test_cli_exits_2_naming_the_key(tmp_path):
    r = CliRunner().invoke(app, ["walk", "--config", "configs/demo.yaml", "--set", "walk.hopz=3", "--out", str(tmp_path)])
    assert r.exit_code == 2
    assert "walk.hopz" in r.output


def test_a_bad_set_is_told_as_the_set_and_a_bad_file_as_the_file(tmp_path):
    """`--set` errors blamed the config file ("config configs/demo.yaml: bad value ..."): an error in what an
    override set names the override, in the preflight (`check`) and a plain stage command alike, under the
    flow as an override; an error in the file names the file; a folder or FIFO given as the file says so."""
    import os

    from flows.preflight import check

    bad_file = tmp_path / "c.yaml"
    bad_file.write_text("corpus:\n  source: demo\nwalk:\n  hops: 0\n")
    for override, needle in [("walk.hops=abc", "bad value for config key 'walk.hops'"),
                             ("walk=3", "walk: expected a mapping"), ("nosuch.key=1", "unknown config key 'nosuch'"),
                             ("walk.hops.x=1", "is a value, not a section"), ("=3", "empty key")]:
        assert check("configs/demo.yaml", [override], via="cli", network=False) == [f"--set {override}: " + (
            str(_error("configs/demo.yaml", override)))]
        assert needle in str(_error("configs/demo.yaml", override))
        assert check("configs/demo.yaml", [override], via="flow", network=False)[0].startswith(
            f"config override {override!r}: ")
        r = CliRunner().invoke(app, ["walk", "--set", override, "--out", str(tmp_path / "out")])
        assert r.exit_code == 2 and f"error: --set {override}: " in r.output and "configs/demo.yaml" not in r.output
    # A value the file holds is the file's, even when an override sets another key of its section.
    said = check(str(bad_file), ["walk.chordless=false"], via="cli", network=False)
    assert said == [f"config {bad_file}: bad value for config key 'walk.hops': Input should be greater than or equal "
                    "to 1 (got 0)"]
    # An override that sets the file's bad value right is no error; one that sets it wrong again is the override's.
    assert check(str(bad_file), ["walk.hops=2"], via="cli", network=False) == []
    assert check(str(bad_file), ["walk.hops=-1"], via="cli", network=False)[0].startswith("--set walk.hops=-1: ")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path, why in [(tmp_path, "a folder, not a file"), (fifo, "a FIFO (named pipe), not a regular file")]:
        assert check(str(path), [], via="cli", network=False) == [f"config file {path}: {why}"]


def _error(config, override) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        load_config(config, [override])
    assert e.value.override == override
    return e.value


def test_operational_fields_do_not_change_the_hash():
    a = load_config(None, ["corpus.batch_mb=4"])
    b = load_config(None, ["corpus.batch_mb=64"])
    c = load_config(None, ["corpus.strict=true"])
    assert a.section_hash("corpus") == b.section_hash("corpus")
    assert a.section_hash("corpus") != c.section_hash("corpus")
    assert a.section_hash("walk.hops") != load_config(None, ["walk.hops=2"]).section_hash("walk.hops")


# ---- relative paths: the current directory's, else the project's ---------------------------
ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_relative_paths_are_found_in_the_project_from_anywhere(tmp_path, monkeypatch):
    sets = ["sft.config=configs/sft/smoke.yaml", "filters.decontaminate=[configs/sft/tiny.yaml, here.txt]"]
    monkeypatch.chdir(ROOT)
    at_root = load_config("configs/demo.yaml", sets)
    assert at_root.sft.config == "configs/sft/smoke.yaml"  # present here: kept as written
    monkeypatch.chdir(tmp_path)
    away = load_config("configs/demo.yaml", sets)
    assert away.sft.config == str(ROOT / "configs/sft/smoke.yaml")
    assert away.filters.decontaminate == [str(ROOT / "configs/sft/tiny.yaml"), "here.txt"]  # found nowhere: as is
    assert away.corpus.source == "demo" and away.tokenizer == "demo"  # not paths of the project: untouched
    # Keys hash what was written, not where the command ran.
    for section in ("sft", "sft.config", "filters", "filters.decontaminate"):
        assert away.section_hash(section) == at_root.section_hash(section), section
    assert away.section_hash("sft") != load_config(None, ["sft.config=configs/sft/tiny.yaml"]).section_hash("sft")
    # A file of the current directory wins over the project's.
    (tmp_path / "configs" / "sft").mkdir(parents=True)
    (tmp_path / "configs" / "sft" / "smoke.yaml").write_text("max_steps: 1\n")
    own = load_config("configs/demo.yaml", ["sft.config=configs/sft/smoke.yaml"])
    assert own.sft.config == "configs/sft/smoke.yaml"


def test_a_missing_config_file_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="config file not found: configs/nope.yaml") as e:
        load_config("configs/nope.yaml")
    assert str(tmp_path) in str(e.value) and str(ROOT) in str(e.value)


def test_the_old_runner_section_name_still_works_and_names_the_new_key(tmp_path, caplog):
    p = tmp_path / "old.yaml"
    p.write_text("synth:\n  shard_workers: 3\n  allow_empty: true\n")
    with caplog.at_level("WARNING", logger="hopforge"):
        cfg = load_config(p, ["synth.dask_workers=5"])
    assert cfg.runner.shard_workers == 3 and cfg.runner.allow_empty is True and cfg.runner.dask_workers == 5
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "synth.shard_workers -> runner.shard_workers" in said and "runner.dask_workers" in said
    new = load_config(None, ["runner.shard_workers=3", "runner.allow_empty=true", "runner.dask_workers=5"])
    assert new.section_hash("runner") == cfg.section_hash("runner") and new.runner == cfg.runner


def test_both_names_of_a_section_is_an_error(tmp_path):
    p = tmp_path / "both.yaml"
    p.write_text("synth:\n  shard_workers: 3\nrunner:\n  shard_workers: 2\n")
    with pytest.raises(ConfigError, match="both 'synth:' and 'runner:'"):
        load_config(p)


def test_a_checked_run_loads_its_config_once(tmp_path, caplog):
    """The run is handed the config the preflight looked at: one load, one rename warning."""
    from flows.preflight import load_checked

    p = tmp_path / "old.yaml"
    p.write_text("corpus:\n  source: demo\nsynth:\n  shard_workers: 3\n")
    with caplog.at_level("WARNING", logger="hopforge"):
        cfg = load_checked(p, [], tmp_path / "out", via="cli", network=False)
    assert cfg.runner.shard_workers == 3
    said = [r.getMessage() for r in caplog.records if "runner.shard_workers" in r.getMessage()]
    assert len(said) == 1, said


def test_question_checks_search_as_deep_as_the_agents_tool():
    from synth.questions.config import search_depth

    cfg = load_config(None, [])
    assert search_depth(cfg.questions, cfg.tools) == cfg.tools.search_max_k
    cfg = load_config(None, ["tools.search_max_k=7", "tools.search_k=3"])
    assert search_depth(cfg.questions, cfg.tools) == 7
    cfg = load_config(None, ["questions.shortcut_k=30"])
    assert search_depth(cfg.questions, cfg.tools) == 30
    # Checking fewer results than an agent may ask for would let it see pages no check looked at.
    with pytest.raises(ConfigError) as e:
        load_config(None, ["questions.shortcut_k=5", "tools.search_max_k=20"])
    assert "questions.shortcut_k (5)" in str(e.value) and "tools.search_max_k (20)" in str(e.value)
    assert "config key ''" not in str(e.value)


def test_the_questions_key_follows_the_agents_search_depth():
    from flows.stages import QUESTIONS

    a, b = load_config(None, []), load_config(None, ["tools.search_max_k=12"])
    c = load_config(None, ["tools.snippet_chars=500"])
    assert a.section_hash(*QUESTIONS.sections) != b.section_hash(*QUESTIONS.sections)
    assert a.section_hash(*QUESTIONS.sections) == c.section_hash(*QUESTIONS.sections)
