"""The SparkSession factory.

deltamark never sets ``spark.jars.packages``: Maven is unreachable on many clusters (and on
ours). Delta's jars, when a user has them, come through ``spark.jars``; the native Delta path
is switched on only then.

A local JVM starts with Spark's classes mapped from a class-data-sharing archive when the
set-up wrote one (``python -m framework.spark``): a ``deltamark run`` starts ~4 s sooner.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from framework.config import Settings
from framework.errors import SparkStartError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["spark_session"]

log = logging.getLogger("deltamark.spark")

# Defaults a data tool wants; every one can be overridden from conf or the call.
DEFAULT_CONF: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # Delta (and delta-rs statistics) expect INT64 microsecond timestamps, not INT96.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
}

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def spark_session(
    settings: Settings,
    *,
    master: str | None = None,
    app_name: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Get or create the SparkSession described by ``settings``.

    Python workers run the driver's interpreter (otherwise they miss the virtualenv's
    pyarrow). When ``spark.jars`` names a delta-spark jar and the Delta mode allows it,
    Delta's SQL extension and catalog are configured too.

    Args:
        settings: loaded settings (``spark.master``, ``spark.app_name``, ``spark.conf``).
        master, app_name, conf: override the settings for this session.

    Raises:
        SparkStartError: the JVM did not start; the message says what to check.
    """
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    master = master or settings.spark.master
    # PySpark takes the workers' interpreter from PYSPARK_PYTHON. Locally the workers run
    # beside the driver, so a stale value (an interpreter without pyarrow) is overridden;
    # on a cluster, a value set for its machines is kept.
    if master.startswith("local"):
        os.environ["PYSPARK_PYTHON"] = sys.executable
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    merged = {**DEFAULT_CONF, **settings.spark.conf, **(conf or {})}
    if master.startswith("local") and (archive := class_archive()).exists():
        _add_java_options(merged, f"-XX:SharedArchiveFile={archive}")
    if "spark.jars" in merged:
        merged["spark.jars"] = _present_jars(merged["spark.jars"])
    if settings.delta != "embedded" and _names_delta_jar(merged.get("spark.jars", "")):
        merged.setdefault("spark.sql.extensions", DELTA_EXTENSION)
        merged.setdefault("spark.sql.catalog.spark_catalog", DELTA_CATALOG)

    builder = SparkSession.builder.master(master).appName(
        app_name or settings.spark.app_name
    )
    for key, value in merged.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except PySparkRuntimeError as exc:
        if "JAVA_GATEWAY_EXITED" not in str(exc):
            raise
        raise SparkStartError(_gateway_hint(merged)) from exc
    spark.sparkContext.setLogLevel("WARN")
    return spark


def class_archive() -> Path:
    """The class-data-sharing archive of this virtualenv's Spark (it may not exist)."""
    from pyspark import __version__

    return Path(sys.prefix) / "share" / "deltamark" / f"spark-{__version__}.jsa"


def write_class_archive() -> Path | None:
    """Write ``class_archive()``: start a local JVM that records the classes a small
    Spark workload loads and archives them as it exits (Java 13+). Run it in a process
    without a JVM yet. Returns the archive, or None if this Java could not write one.
    """
    from pyspark import SparkContext

    archive = class_archive()
    if archive.exists():
        return archive
    if SparkContext._gateway is not None:
        raise SparkStartError("the class archive is written by a JVM of its own: run "
                              "python -m framework.spark in a process without Spark")
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    java_options: dict[str, str] = {}
    _add_java_options(java_options, f"-XX:ArchiveClassesAtExit={partial}")
    spark = spark_session(Settings(), master="local[*]", app_name="deltamark class archive",
                          conf=java_options)
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
    if not partial.exists():
        return None
    partial.rename(archive)
    return archive


def _add_java_options(conf: dict[str, str], option: str) -> None:
    """Prepend ``option`` to the driver's JVM options (quiet about sharing: an archive a
    JVM cannot use, e.g. after a Java upgrade, is silently skipped)."""
    given = conf.get("spark.driver.extraJavaOptions", "")
    conf["spark.driver.extraJavaOptions"] = f"{option} -Xlog:cds=off {given}".strip()


def _present_jars(jars: str) -> str:
    """``spark.jars`` without the local jars that do not exist, each named in a warning (a
    JDBC driver absent here should not stop jobs that do not read a database)."""
    present = []
    for jar in filter(None, (j.strip() for j in jars.split(","))):
        local = jar.removeprefix("file:") if "://" not in jar or jar.startswith("file:") else None
        if local is not None and not os.path.exists(local):
            log.warning("spark.jars: %s does not exist, so it is left out; sources that need "
                        "it will fail", jar)
        else:
            present.append(jar)
    return ",".join(present)


def _names_delta_jar(jars: str) -> bool:
    return any(os.path.basename(jar).startswith("delta-spark") for jar in jars.split(","))


def _gateway_hint(conf: Mapping[str, str]) -> str:
    if conf.get("spark.jars.packages"):
        return (
            "Spark could not start: spark.jars.packages asks Maven for "
            f"'{conf['spark.jars.packages']}', which is unreachable here. Download the jars "
            "elsewhere and list their paths in spark.jars, or use delta: embedded."
        )
    return (
        "Spark could not start its JVM. Check that Java 17 is installed (java -version) "
        "and that JAVA_HOME, if set, points to it."
    )


if __name__ == "__main__":  # the set-up: python -m framework.spark
    written = write_class_archive()
    print(f"Spark class archive: {written}" if written else
          "Spark class archive: this Java cannot write one (Spark starts without it)")
