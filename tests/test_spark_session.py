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
            "from framework.spark import spark_session\n"
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
            "from framework.spark import spark_session\n"
            "from pyspark.sql import functions as F\n"
            "spark = spark_session(Settings(spark=SparkSettings(master='local[1]')))\n"
            "who = F.udf(lambda _: sys.executable, 'string')\n"
            "print('WORKER', spark.range(1).select(who('id')).first()[0])\n")
    env = {**os.environ, "PYSPARK_PYTHON": "/usr/bin/false"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=180)
    assert f"WORKER {sys.executable}" in done.stdout, done.stderr[-2000:]


def test_absent_local_jars_are_left_out_with_a_warning(tmp_path, caplog):
    from framework.spark import _present_jars

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

    from framework import jars
    from framework.delta import native_available
    from framework.spark_lines import spark_line

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


def test_a_local_session_maps_the_class_archive_the_setup_wrote(spark):
    from framework.local_jvm import class_archive

    archive = class_archive(spark.sparkContext.getConf().get("spark.driver.extraClassPath", ""))
    if not archive.exists():
        unavailable(f"no Spark class archive at {archive} (bash .ci/setup.sh writes it)")
    runtime = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert f"-XX:SharedArchiveFile={archive}" in list(runtime.getInputArguments())


def test_local_writes_set_permissions_without_chmod_processes(spark, tmp_path):
    from framework.local_jvm import FILE_SYSTEM_CLASS, file_system_jar

    if not file_system_jar().exists():
        unavailable(f"no local file system jar at {file_system_jar()} (bash .ci/setup.sh "
                    "builds it with javac)")
    jvm = spark._jvm
    hadoop = spark._jsc.hadoopConfiguration()
    fs = jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}").getFileSystem(hadoop)
    assert fs.getClass().getName() == FILE_SYSTEM_CLASS

    spark.range(3).write.parquet(str(tmp_path / "table"))
    written = sorted((tmp_path / "table").glob("part-*.parquet"))
    assert written
    assert oct((tmp_path / "table").stat().st_mode & 0o7777) == oct(0o755)
    assert {oct(file.stat().st_mode & 0o7777) for file in written} == {oct(0o644)}
    assert spark.read.parquet(str(tmp_path / "table")).count() == 3

    sticky = jvm.org.apache.hadoop.fs.permission.FsPermission("1777")
    fs.setPermission(jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}/table"), sticky)
    assert oct((tmp_path / "table").stat().st_mode & 0o7777) == oct(0o1777)  # via chmod
