"""What the set-up prepares for local Spark JVMs, and how a local session uses it.

``python -m framework.setup.local_jvm`` (run by ``.ci/setup.sh``) writes two files into the
virtualenv's ``share/deltamark``. A local session uses each one that exists; Spark works
without them, only slower:

- a Hadoop local file system that sets permissions through java.nio
  (``java/deltamark/NioLocalFileSystem.java``, compiled with javac). Without Hadoop's native
  library, which pyspark does not ship, Hadoop starts a ``chmod`` process for every file and
  directory it creates: ~7 ms each, ~50-70 ms per Spark write;
- a class-data-sharing archive of Spark's classes (and Delta's, where its jars are) on that
  class path: a JVM starts ~4 s sooner, and a first Delta write takes ~0.3 s less.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

__all__ = ["FILE_SYSTEM_CLASS", "FILE_SYSTEM_SOURCE", "add_java_option", "class_archive",
           "configure", "file_system_jar", "java_tool", "shared_directory"]

FILE_SYSTEM_CLASS = "deltamark.NioLocalFileSystem"
FILE_SYSTEM_SOURCE = Path(__file__).parent / "java" / "deltamark" / "NioLocalFileSystem.java"


def configure(conf: dict[str, str]) -> None:
    """Add to a local session's ``conf`` what the set-up prepared."""
    if (jar := file_system_jar()).exists():
        conf.setdefault("spark.hadoop.fs.file.impl", FILE_SYSTEM_CLASS)
        given = conf.get("spark.driver.extraClassPath")
        conf["spark.driver.extraClassPath"] = os.pathsep.join(filter(None, [given, str(jar)]))
    if (archive := class_archive(conf.get("spark.driver.extraClassPath", ""))).exists():
        add_java_option(conf, f"-XX:SharedArchiveFile={archive}")


def file_system_jar() -> Path:
    """Where the set-up puts the local file system, compiled against this virtualenv's
    Spark (named after its source and that Spark's version)."""
    from pyspark import __version__

    source = FILE_SYSTEM_SOURCE.read_bytes()
    return shared_directory() / f"local-fs-{__version__}-{_digest(source)}.jar"


def class_archive(class_path: str) -> Path:
    """The class archive of this virtualenv's Spark on this Java, with ``class_path`` (the
    driver's extra class path) before Spark's jars: a JVM maps only an archive that its own
    Java build wrote for its own class path."""
    from pyspark import __version__

    digest = _digest(f"{_java()}|{class_path}".encode())
    return shared_directory() / f"spark-{__version__}-{digest}.jsa"


def add_java_option(conf: dict[str, str], option: str) -> None:
    """Prepend ``option`` to the driver's JVM options (quiet about sharing: an archive a
    JVM cannot use, e.g. after a Java upgrade, is silently skipped)."""
    given = conf.get("spark.driver.extraJavaOptions", "")
    conf["spark.driver.extraJavaOptions"] = f"{option} -Xlog:cds=off {given}".strip()


def _java() -> str:
    """The java that starts Spark's JVM (JAVA_HOME's, else the PATH's), and when it was
    installed: an upgraded Java gets an archive of its own."""
    java = java_tool("java")
    if java is None:
        return ""
    java = os.path.realpath(java)
    return f"{java}@{os.stat(java).st_mtime_ns}"


def java_tool(name: str) -> str | None:
    """A JDK tool as Spark finds java: in JAVA_HOME when it is set, else on the PATH."""
    java_home = os.environ.get("JAVA_HOME")
    return shutil.which(name, path=os.path.join(java_home, "bin") if java_home else None)


def shared_directory() -> Path:
    return Path(sys.prefix) / "share" / "deltamark"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]
