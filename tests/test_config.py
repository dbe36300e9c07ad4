
import pytest

from framework.config import load_settings
from framework.errors import ConfigError


def test_defaults_without_a_conf_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("DELTAMARK_STATE_ROOT", raising=False)
    settings = load_settings(conf_dir=tmp_path)
    assert settings.delta == "auto"
    assert settings.state_root == "data/state"
    assert settings.spark.master == "local[*]"


def test_local_file_and_environment_override(tmp_path, monkeypatch):
    (tmp_path / "deltamark.yaml").write_text(
        "delta: embedded\nspark:\n  master: local[2]\n  conf: {a.b: 1, c.d: true}\n")
    (tmp_path / "local.yaml").write_text("spark:\n  conf: {a.b: 2}\n")
    monkeypatch.setenv("DELTAMARK_STATE_ROOT", "/tmp/elsewhere")
    settings = load_settings(conf_dir=tmp_path)
    assert settings.delta == "embedded"
    assert settings.spark.master == "local[2]"
    assert settings.spark.conf == {"a.b": "2", "c.d": "true"}
    assert settings.state_root == "/tmp/elsewhere"
    assert load_settings(conf_dir=tmp_path, state_root="x").state_root == "x"


def test_every_problem_is_reported_at_once_naming_the_file(tmp_path):
    (tmp_path / "deltamark.yaml").write_text(
        "delta: sometimes\nstate_rot: x\nspark:\n  masterr: y\n  conf: [1]\n")
    with pytest.raises(ConfigError) as error:
        load_settings(conf_dir=tmp_path)
    assert error.value.path == str(tmp_path / "deltamark.yaml")
    assert len(error.value.problems) == 4
    message = str(error.value)
    for fragment in ("delta: 'sometimes'", "'state_rot'", "'spark.masterr'", "spark.conf"):
        assert fragment in message
    assert "\n" not in message


def test_invalid_yaml_names_the_file(tmp_path):
    (tmp_path / "deltamark.yaml").write_text("delta: [unclosed\n")
    with pytest.raises(ConfigError) as error:
        load_settings(conf_dir=tmp_path)
    assert error.value.path.endswith("deltamark.yaml")
    assert "not valid YAML" in str(error.value)
