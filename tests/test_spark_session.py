import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.databases import unavailable


def test_python_workers_use_the_driver_interpreter(spark):
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    executable = F.udf(lambda _: sys.executable, StringType())
    [row] = spark.range(1).select(executable("id").alias("python")).collect()
    assert row.python == sys.executable


def test_session_defaults_suit_delta(spark):
    assert spark.conf.get("spark.sql.parquet.outputTimestampType") == "TIMESTAMP_MICROS"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


@pytest.mark.spark  # starts Spark in a process of its own
def test_a_jvm_that_cannot_start_is_explained(tmp_path):
    code = ("from framework.config import Settings\n"
            "from framework.spark.session import spark_session\n"
            "from framework.errors import SparkStartError\n"
            "try:\n    spark_session(Settings())\n"
            "except SparkStartError as e:\n    print('SparkStartError:', e)\n")
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java"), "SPARK_HOME": ""}
    env.pop("SPARK_HOME")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert "SparkStartError: Spark could not start its JVM" in done.stdout, done.stderr[-2000:]
    assert "Java 17" in done.stdout


@pytest.mark.spark  # starts Spark in a process of its own
def test_workers_ignore_a_stale_pyspark_python(tmp_path):
    code = ("import sys\n"
            "from framework.config import Settings, SparkSettings\n"
            "from framework.spark.session import spark_session\n"
            "from pyspark.sql import functions as F\n"
            "spark = spark_session(Settings(spark=SparkSettings(master='local[1]')))\n"
            "who = F.udf(lambda _: sys.executable, 'string')\n"
            "print('WORKER', spark.range(1).select(who('id')).first()[0])\n")
    env = {**os.environ, "PYSPARK_PYTHON": "/usr/bin/false"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=180)
    assert f"WORKER {sys.executable}" in done.stdout, done.stderr[-2000:]


def test_absent_local_jars_are_left_out_with_a_warning(tmp_path, caplog):
    from framework.spark.session import _present_jars

    jar = tmp_path / "driver.jar"
    jar.write_bytes(b"")
    kept = _present_jars(f"{jar}, /nope/absent.jar,hdfs://nn/jars/remote.jar")
    assert kept == f"{jar},hdfs://nn/jars/remote.jar"
    assert "spark.jars: /nope/absent.jar does not exist" in caplog.text


@pytest.mark.compat
def test_the_setup_jars_bring_delta_s3a_and_avro_and_nothing_pyspark_ships(spark):
    """The jars are those of the installed pyspark's line: its Delta build (where Delta has
    one), the hadoop-aws of the Hadoop it ships, its spark-avro."""
    import pyspark

    from framework.delta import native_available
    from framework.spark import jars
    from framework.spark.lines import spark_line

    if not jars.installed():
        unavailable("Delta's, S3A's and Avro's jars are not installed (bash .ci/setup.sh "
                    "resolves them with mvn)")
    line = spark_line()
    assert native_available(spark) == (line.delta is not None)
    loader = spark._jvm.java.lang.Thread.currentThread().getContextClassLoader()
    for name in ("org.apache.hadoop.fs.s3a.S3AFileSystem",
                 "org.apache.spark.sql.avro.AvroFileFormat"):
        loader.loadClass(name)
    shipped = {jar.name for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    artifact = re.compile(r"-\d[^/]*\.jar$")
    installed = {j.name for j in jars.installed()}
    assert not {artifact.sub("", name) for name in installed} & {
        artifact.sub("", name) for name in shipped}
    [hadoop] = [name.removeprefix("hadoop-client-api-") for name in shipped
                if name.startswith("hadoop-client-api-")]
    assert f"hadoop-aws-{hadoop}" in installed
    assert f"spark-avro_{line.scala}-{line.avro}.jar" in installed
    if line.delta:
        assert f"{'-'.join(line.delta)}.jar" in installed
    if line.iceberg:  # the tests' session names an Iceberg catalog: it has the extensions
        assert f"{'-'.join(line.iceberg)}.jar" in installed
        assert "IcebergSparkSessionExtensions" in spark.conf.get("spark.sql.extensions")


def test_iceberg_catalogs_get_their_extensions_and_jdbc_drivers_where_iceberg_finds_them(
        tmp_path):
    from framework.config import Settings, SparkSettings
    from framework.iceberg import EXTENSION
    from framework.spark.session import DELTA_EXTENSION, session_conf

    delta, driver = tmp_path / "delta-spark_2.13-4.4.0.jar", tmp_path / "sqlite-jdbc.jar"
    delta.write_bytes(b"")
    driver.write_bytes(b"")
    catalog = {"spark.sql.catalog.cat": "org.apache.iceberg.spark.SparkCatalog",
               "spark.sql.catalog.cat.type": "jdbc",
               "spark.sql.catalog.cat.uri": "jdbc:sqlite:/tmp/catalog.db",
               # the user's jars: deltamark adds none of its own
               "spark.jars": f"{delta},{driver},hdfs://nn/remote.jar",
               "spark.driver.extraClassPath": "/opt/iceberg-spark-runtime-4.1_2.13-1.11.0.jar"}
    conf = session_conf(Settings(spark=SparkSettings(conf=catalog)), master="yarn")
    assert conf["spark.sql.extensions"] == f"{DELTA_EXTENSION},{EXTENSION}"
    assert conf["spark.driver.extraClassPath"].split(":")[1:] == [str(delta), str(driver)]
    no_runtime = {**catalog, "spark.driver.extraClassPath": ""}
    conf = session_conf(Settings(spark=SparkSettings(conf=no_runtime)), master="yarn")
    assert conf["spark.sql.extensions"] == DELTA_EXTENSION  # no class to load
