"""The Spark lines deltamark supports: what each resolves, and what is refused (no Spark)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from framework.config import Settings
from framework.errors import SparkFeatureError, SparkVersionError
from framework.spark import jars
from framework.spark import lines as spark_lines
from framework.spark.lines import LINES, line_of
from framework.spark.session import spark_session
from tests.databases import unavailable

pytestmark = pytest.mark.compat
POM = "{http://maven.apache.org/POM/4.0.0}"


@pytest.mark.parametrize(("version", "line"), [
    ("3.5.0", "3.5"), ("3.5.7", "3.5"), ("4.0.1", "4.0"), ("4.1.1", "4.1"), ("4.2.0", "4.2"),
    ("4.3.0", "4.3"), ("4.1.0.dev1", "4.1")])
def test_each_supported_version_has_its_line(version, line):
    assert line_of(version).name == line


@pytest.mark.parametrize("version", ["3.4.4", "4.4.0", "2.4.8", "master"])
def test_a_spark_outside_the_range_is_refused_in_one_line_naming_it(version):
    with pytest.raises(SparkVersionError) as refused:
        line_of(version)
    message = str(refused.value)
    assert message.startswith(f"Spark {version} is not supported: deltamark runs on Spark "
                              "3.5 to 4.3") and "\n" not in message


def test_a_session_is_refused_before_anything_starts_on_an_unsupported_or_missing_pyspark(
        monkeypatch):
    monkeypatch.setattr(spark_lines, "installed_version", lambda: "3.4.1")
    with pytest.raises(SparkVersionError, match=r"Spark 3.4.1 is not supported"):
        spark_session(Settings())
    monkeypatch.setattr(spark_lines, "installed_version", lambda: None)
    with pytest.raises(SparkVersionError, match=r"pyspark is not installed: .* pip install "
                                                r"'deltamark\[spark\]'"):
        spark_session(Settings())


def test_a_feature_of_a_newer_line_is_refused_naming_both_versions(monkeypatch):
    monkeypatch.setattr(spark_lines, "installed_version", lambda: "3.5.7")
    with pytest.raises(SparkFeatureError) as refused:
        spark_lines.require("XML files", since="4.0")
    assert str(refused.value) == "XML files: needs Spark 4.0 or newer (this is Spark 3.5.7)"
    monkeypatch.setattr(spark_lines, "installed_version", lambda: "4.1.1")
    spark_lines.require("XML files", since="4.0")


def _dependencies(line, *, hadoop: str | None = None) -> dict[str, str]:
    project = ET.fromstring(jars.pom(line, hadoop=hadoop))
    return {d.find(f"{POM}artifactId").text: d.find(f"{POM}version").text
            for d in project.iterfind(f"{POM}dependencies/{POM}dependency")}


@pytest.mark.parametrize("name", list(LINES))
def test_each_line_resolves_its_delta_its_hadoop_s_s3a_and_its_avro(name):
    line = LINES[name]
    found = _dependencies(line)
    assert found["hadoop-aws"] == line.hadoop
    assert found[f"spark-avro_{line.scala}"] == line.avro
    delta = [artifact for artifact in found if artifact.startswith("delta-spark")]
    if line.delta is None:
        assert delta == []
    else:
        [artifact] = delta
        assert artifact.endswith(f"_{line.scala}") and (artifact, found[artifact]) == line.delta
        assert f"_{name}_" in artifact or name == "3.5"  # Delta 4.1+ names its Spark line


def test_the_hadoop_a_pyspark_ships_is_the_one_s3a_gets():
    assert _dependencies(LINES["4.1"], hadoop="3.4.3")["hadoop-aws"] == "3.4.3"


def test_a_cluster_gets_the_jar_set_of_its_spark_version_for_spark_submit(tmp_path):
    """``python -m framework.spark.jars --spark 3.5.4 --into DIR`` (another line than this
    virtualenv's, most often): Delta 3.3 for Scala 2.12, S3A of Hadoop 3.3.4 with the AWS
    SDK it was built against, Iceberg's runtime for 3.5, and nothing every Spark ships."""
    if jars.shutil.which("mvn") is None:
        unavailable("mvn is not installed (the set-up's apt-get install maven)")
    (tmp_path / "jars").mkdir()
    (tmp_path / "jars" / "mine.jar").write_bytes(b"")  # a file of the user's, kept
    done = subprocess.run([sys.executable, "-m", "framework.spark.jars", "--spark", "3.5.4",
                           "--into", str(tmp_path / "jars")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    names = {path.rsplit("/", 1)[1] for path in done.stdout.strip().split(",")}
    assert {"delta-spark_2.12-3.3.2.jar", "delta-storage-3.3.2.jar", "hadoop-aws-3.3.4.jar",
            "spark-avro_2.12-3.5.7.jar", "iceberg-spark-runtime-3.5_2.12-1.11.0.jar"} <= names
    assert any(name.startswith("aws-java-sdk-bundle-") for name in names)
    assert not [name for name in names if name.startswith(("scala-", "spark-tags", "antlr"))]
    assert names | {"mine.jar"} == {path.name for path in (tmp_path / "jars").glob("*.jar")}


def test_installing_deltamark_brings_no_pyspark_of_its_own():
    """A cluster's or platform's pyspark is kept: pyspark comes only with deltamark[spark],
    as a range of the supported lines."""
    requires = importlib.metadata.requires("deltamark") or []
    spark = [r for r in requires if r.startswith(("pyspark", "delta-spark"))]
    assert spark == ['pyspark<4.4,>=3.5; extra == "spark"'], spark


def test_the_jar_command_refuses_an_unsupported_spark_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "framework.spark.jars", "--spark", "3.3.2",
                           "--into", str(tmp_path / "jars")], capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Spark jars (Delta, S3A, Avro, Iceberg) for Spark 3.3.2: not installed (Spark 3.3.2 "
        "is not supported: deltamark runs on Spark 3.5 to 4.3. Install a pyspark of those "
        "lines, or run on a cluster of one); the native Delta path, s3:// on Spark, Spark's "
        "Avro reader and Iceberg tables need them, the embedded path works"]


def test_the_support_table_of_the_docs_is_the_code_s():
    """docs/spark-versions.md's table says, line by line, what ``LINES`` holds."""
    page = (Path(__file__).parents[1] / "docs" / "spark-versions.md").read_text()
    rows = {cells[0]: cells for line in page.splitlines() if line.startswith("| ")
            and (cells := [c.strip() for c in line.strip("|").split("|")])[0] in LINES}
    assert set(rows) == set(LINES)
    for name, line in LINES.items():
        _, scala, native, embedded, pythons, *_ = rows[name]
        assert (scala, embedded, pythons) == (line.scala, "yes", line.pythons)
        if line.delta is None:
            assert native.startswith("none")
        else:
            assert native == f"Delta {line.delta[1]} (`{line.delta[0]}`)"
