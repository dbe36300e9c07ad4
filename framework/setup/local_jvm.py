"""The set-up of the local JVM extras that ``framework.spark.local_jvm`` describes:
``python -m framework.setup.local_jvm`` (run by ``.ci/setup.sh``) compiles the local file
system and writes the class archive, each once.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from pyspark import SparkContext

from framework.config import Settings
from framework.delta import delta_engine
from framework.errors import SparkStartError
from framework.spark.local_jvm import (
    FILE_SYSTEM_SOURCE,
    add_java_option,
    class_archive,
    file_system_jar,
    java_tool,
)
from framework.spark.session import session_conf, spark_session, to_arrow

__all__ = ["build_file_system_jar", "write_class_archive"]


def build_file_system_jar() -> Path | None:
    """Compile the local file system into ``file_system_jar()``, replacing jars of older
    sources. Returns None when there is no javac (a Java runtime without its compiler).

    Raises:
        RuntimeError: javac failed; the message is its first error.
    """
    import pyspark

    jar = file_system_jar()
    if jar.exists():
        return jar
    javac = java_tool("javac")
    if javac is None:
        return None
    spark_jars = Path(pyspark.__file__).parent / "jars" / "*"
    with tempfile.TemporaryDirectory() as classes:
        compiled = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-cp", str(spark_jars), "-d", classes,
             str(FILE_SYSTEM_SOURCE)], capture_output=True, text=True)
        if compiled.returncode:
            raise RuntimeError(f"javac: {(compiled.stderr or compiled.stdout).strip()[:500]}")
        _replace(jar, lambda partial: _zip(Path(classes), partial), stale="local-fs-*.jar")
    return jar


def write_class_archive() -> Path | None:
    """Write the class archive for a default local session (with the set-up's jars and the
    local file system when they are there): start a JVM that records the classes a small
    Spark workload loads and archives them as it exits (Java 13+). Run it in a process
    without a JVM yet. Returns the archive, or None if this Java could not write one.
    """
    default = session_conf(Settings(), master="local[*]")
    archive = class_archive(default.get("spark.driver.extraClassPath", ""))
    if archive.exists():
        return archive
    if SparkContext._gateway is not None:
        raise SparkStartError("the class archive is written by a JVM of its own: run "
                              "python -m framework.spark.local_jvm in a process without Spark")

    def record(partial: Path) -> None:
        java_options: dict[str, str] = {}
        add_java_option(java_options, f"-XX:ArchiveClassesAtExit={partial}")
        spark = spark_session(Settings(), master="local[*]",
                              app_name="deltamark class archive", conf=java_options)
        with tempfile.TemporaryDirectory() as scratch:
            rows = spark.range(1000).selectExpr("id", "CAST(id AS STRING) AS name",
                                                "current_timestamp() AS at")
            rows.write.parquet(f"{scratch}/parquet")
            rows.write.json(f"{scratch}/json")
            spark.read.parquet(f"{scratch}/parquet").groupBy("name").count().collect()
            spark.createDataFrame(to_arrow(spark.read.json(f"{scratch}/json"))
                                  .to_pandas()).count()
            engine = delta_engine(spark)  # native where Delta's jars are: its classes too
            for _ in range(2):  # a table's first commit, then an append
                engine.write(rows, f"{scratch}/delta")
            engine.read(f"{scratch}/delta").count()
        gateway = SparkContext._gateway
        assert gateway is not None  # the session's gateway, to this JVM's process
        jvm = gateway.proc
        spark.stop()
        jvm.stdin.close()  # the gateway exits at the end of its input, writing the archive
        jvm.wait()

    _replace(archive, record, stale="spark-*.jsa")
    return archive if archive.exists() else None


def _replace(target: Path, write: Callable[[Path], object], *, stale: str) -> None:
    """Write ``target`` through a partial file (``write(partial)``), then remove the
    files matching ``stale`` that it supersedes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    write(partial)
    if partial.exists():
        for old in target.parent.glob(stale):
            old.unlink()
        partial.rename(target)


def _zip(classes: Path, jar: Path) -> None:
    with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(classes.rglob("*.class")):
            archive.write(file, file.relative_to(classes).as_posix())


if __name__ == "__main__":  # the set-up: python -m framework.setup.local_jvm
    try:
        jar = build_file_system_jar()
        print(f"local file system: {jar}" if jar else
              "local file system: no javac here; Spark's writes start chmod processes")
    except RuntimeError as exc:
        print(f"local file system: not built ({exc})")
    archive = write_class_archive()
    print(f"Spark class archive: {archive}" if archive else
          "Spark class archive: this Java cannot write one (Spark starts without it)")
