"""What the set-up prepares for local Spark JVMs, and how a local session uses it.

``python -m framework.local_jvm`` (run by ``.ci/setup.sh``) writes two files into the
virtualenv's ``share/deltamark``. A local session uses each one that exists; Spark works
without them, only slower:

- a Hadoop local file system that sets permissions through java.nio
  (``java/deltamark/NioLocalFileSystem.java``, compiled with javac). Without Hadoop's native
  library, which pyspark does not ship, Hadoop starts a ``chmod`` process for every file and
  directory it creates: ~7 ms each, ~50-70 ms per Spark write;
- a class-data-sharing archive of Spark's classes on that class path: a JVM starts ~4 s
  sooner.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["build_file_system_jar", "class_archive", "configure", "file_system_jar",
           "write_class_archive"]

FILE_SYSTEM_CLASS = "deltamark.NioLocalFileSystem"
FILE_SYSTEM_SOURCE = Path(__file__).parent / "java" / "deltamark" / "NioLocalFileSystem.java"


def configure(conf: dict[str, str]) -> None:
    """Add to a local session's ``conf`` what the set-up prepared."""
    if (jar := file_system_jar()).exists():
        conf.setdefault("spark.hadoop.fs.file.impl", FILE_SYSTEM_CLASS)
        given = conf.get("spark.driver.extraClassPath")
        conf["spark.driver.extraClassPath"] = os.pathsep.join(filter(None, [given, str(jar)]))
    if (archive := class_archive(conf.get("spark.driver.extraClassPath", ""))).exists():
        _add_java_options(conf, f"-XX:SharedArchiveFile={archive}")


def file_system_jar() -> Path:
    """Where the set-up puts the compiled local file system (named after its source)."""
    return _shared() / f"local-fs-{_digest(FILE_SYSTEM_SOURCE.read_bytes())}.jar"


def class_archive(class_path: str) -> Path:
    """The class archive of this virtualenv's Spark on this Java, with ``class_path`` (the
    driver's extra class path) before Spark's jars: a JVM maps only an archive that its own
    Java build wrote for its own class path."""
    from pyspark import __version__

    return _shared() / f"spark-{__version__}-{_digest(f'{_java()}|{class_path}'.encode())}.jsa"


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
    javac = _java_tool("javac")
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
    from pyspark import SparkContext

    from framework.config import Settings
    from framework.errors import SparkStartError
    from framework.spark import session_conf, spark_session

    default = session_conf(Settings(), master="local[*]")
    archive = class_archive(default.get("spark.driver.extraClassPath", ""))
    if archive.exists():
        return archive
    if SparkContext._gateway is not None:
        raise SparkStartError("the class archive is written by a JVM of its own: run "
                              "python -m framework.local_jvm in a process without Spark")

    def record(partial: Path) -> None:
        java_options: dict[str, str] = {}
        _add_java_options(java_options, f"-XX:ArchiveClassesAtExit={partial}")
        spark = spark_session(Settings(), master="local[*]",
                              app_name="deltamark class archive", conf=java_options)
        with tempfile.TemporaryDirectory() as scratch:
            rows = spark.range(1000).selectExpr("id", "CAST(id AS STRING) AS name",
                                                "current_timestamp() AS at")
            rows.write.parquet(f"{scratch}/parquet")
            rows.write.json(f"{scratch}/json")
            spark.read.parquet(f"{scratch}/parquet").groupBy("name").count().collect()
            spark.createDataFrame(spark.read.json(f"{scratch}/json").toArrow()).count()
        jvm = SparkContext._gateway.proc  # type: ignore[union-attr]
        spark.stop()
        jvm.stdin.close()  # the gateway exits at the end of its input, writing the archive
        jvm.wait()

    _replace(archive, record, stale="spark-*.jsa")
    return archive if archive.exists() else None


def _add_java_options(conf: dict[str, str], option: str) -> None:
    """Prepend ``option`` to the driver's JVM options (quiet about sharing: an archive a
    JVM cannot use, e.g. after a Java upgrade, is silently skipped)."""
    given = conf.get("spark.driver.extraJavaOptions", "")
    conf["spark.driver.extraJavaOptions"] = f"{option} -Xlog:cds=off {given}".strip()


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


def _java() -> str:
    """The java that starts Spark's JVM (JAVA_HOME's, else the PATH's), and when it was
    installed: an upgraded Java gets an archive of its own."""
    java = _java_tool("java")
    if java is None:
        return ""
    java = os.path.realpath(java)
    return f"{java}@{os.stat(java).st_mtime_ns}"


def _java_tool(name: str) -> str | None:
    """A JDK tool as Spark finds java: in JAVA_HOME when it is set, else on the PATH."""
    java_home = os.environ.get("JAVA_HOME")
    return shutil.which(name, path=os.path.join(java_home, "bin") if java_home else None)


def _shared() -> Path:
    return Path(sys.prefix) / "share" / "deltamark"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]


if __name__ == "__main__":  # the set-up: python -m framework.local_jvm
    try:
        jar = build_file_system_jar()
        print(f"local file system: {jar}" if jar else
              "local file system: no javac here; Spark's writes start chmod processes")
    except RuntimeError as exc:
        print(f"local file system: not built ({exc})")
    archive = write_class_archive()
    print(f"Spark class archive: {archive}" if archive else
          "Spark class archive: this Java cannot write one (Spark starts without it)")
