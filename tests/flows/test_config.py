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


def test_operational_fields_do_not_change_the_hash():
    a = load_config(None, ["corpus.batch_mb=4"])
    b = load_config(None, ["corpus.batch_mb=64"])
    c = load_config(None, ["corpus.strict=true"])
    assert a.section_hash("corpus") == b.section_hash("corpus")
    assert a.section_hash("corpus") != c.section_hash("corpus")
    assert a.section_hash("walk.hops") != load_config(None, ["walk.hops=2"]).section_hash("walk.hops")
