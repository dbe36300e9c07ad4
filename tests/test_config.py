
import pytest

from framework.config import load_settings
from framework.errors import ConfigError


def test_defaults_without_a_conf_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("DELTAMARK_STATE_ROOT", raising=False)
    settings = load_settings(conf_dir=tmp_path)
    assert settings.delta == "auto"
    assert settings.state_root == "data/state"
    assert settings.spark.master == "local[*]"
    assert settings.state_retention_hours == 1


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


def test_a_spark_connect_server_is_named_in_conf_or_by_spark_remote(tmp_path, monkeypatch):
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert load_settings(conf_dir=tmp_path).spark.remote_url() is None
    monkeypatch.setenv("SPARK_REMOTE", "sc://spark.internal:15002")
    assert load_settings(conf_dir=tmp_path).spark.remote_url() == "sc://spark.internal:15002"
    (tmp_path / "deltamark.yaml").write_text("spark: {remote: 'sc://other:443/;use_ssl=true'}\n")
    assert load_settings(conf_dir=tmp_path).spark.remote_url() == "sc://other:443/;use_ssl=true"
    (tmp_path / "deltamark.yaml").write_text("spark: {remote: 'http://other:15002'}\n")
    with pytest.raises(ConfigError, match=r"spark.remote: 'http://other:15002' is not a Spark "
                       r"Connect URL \(sc://host:port\)"):
        load_settings(conf_dir=tmp_path)


def test_every_problem_is_reported_at_once_naming_the_file(tmp_path):
    (tmp_path / "deltamark.yaml").write_text(
        "delta: sometimes\nstate_rot: x\nspark:\n  masterr: y\n  conf: [1]\n"
        "state_retention_hours: 1h\nstate_commit_timeout_seconds: -5\n"
        "catalog: {sales: {location: x}, sales.orders: "
        "{location: /data, format: excel, partitions: [day]}}\n")
    with pytest.raises(ConfigError) as error:
        load_settings(conf_dir=tmp_path)
    assert error.value.path == str(tmp_path / "deltamark.yaml")
    assert len(error.value.problems) == 9
    message = str(error.value)
    for fragment in ("delta: 'sometimes'", "'state_rot'", "'spark.masterr'", "spark.conf",
                     "state_retention_hours: '1h' is not a whole number of hours",
                     "state_commit_timeout_seconds: '-5' is not a whole number of seconds",
                     "catalog.sales: name a table as database.table",
                     "unknown key 'catalog.sales.orders.partitions'",
                     "catalog.sales.orders.format: 'excel' is not one of delta, json"):
        assert fragment in message
    assert "\n" not in message


def test_invalid_yaml_names_the_file(tmp_path):
    (tmp_path / "deltamark.yaml").write_text("delta: [unclosed\n")
    with pytest.raises(ConfigError) as error:
        load_settings(conf_dir=tmp_path)
    assert error.value.path.endswith("deltamark.yaml")
    assert "not valid YAML" in str(error.value)


def test_per_bucket_s3_options_are_checked_and_reach_every_s3_client(tmp_path):
    from framework import storage

    (tmp_path / "deltamark.yaml").write_text(
        "buckets:\n  s3://lake: {region: x}\n  raw: {endpoint: http://h}\n"
        "  archive: {endpoint_url: minio:9000, region: ''}\n")
    with pytest.raises(ConfigError) as error:
        load_settings(conf_dir=tmp_path)
    assert [p.split(":")[0] for p in error.value.problems] == [
        "buckets.s3", "unknown key 'buckets.raw.endpoint' (known", "buckets.archive.endpoint_url",
        "buckets.archive.region"]

    (tmp_path / "deltamark.yaml").write_text(
        "buckets:\n  archive: {endpoint_url: 'http://127.0.0.1:9', region: eu-west-1}\n")
    settings = load_settings(conf_dir=tmp_path)
    assert settings.buckets["archive"].region == "eu-west-1"
    assert storage.delta_options("s3://archive/t", environ={}) == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "eu-west-1",
        "AWS_ALLOW_HTTP": "true"}
    assert storage.spark_conf(buckets=settings.buckets, environ={})[
        "spark.hadoop.fs.s3a.bucket.archive.endpoint"] == "http://127.0.0.1:9"
    assert load_settings(conf_dir=tmp_path / "none").buckets == {}
    assert storage.delta_options("s3://archive/t", environ={}) == {}  # replaced by the next


def test_a_job_s_tombstone_retention_is_a_positive_number_of_hours(tmp_path):
    from datetime import timedelta

    from framework.run.spec import load_job

    (tmp_path / "jobs").mkdir()
    job = tmp_path / "jobs" / "cdc.yaml"
    job.write_text("class: jobs.customers_cdc:CustomersCdc\ntombstone_retention_hours: 0\n")
    settings = load_settings(conf_dir=tmp_path)
    with pytest.raises(ConfigError, match="tombstone_retention_hours: '0' is not a positive"):
        load_job(settings, "cdc")
    job.write_text("class: jobs.customers_cdc:CustomersCdc\ntombstone_retention_hours: 36\n")
    assert load_job(settings, "cdc").tombstone_retention == timedelta(hours=36)
