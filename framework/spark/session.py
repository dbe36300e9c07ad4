"""The SparkSession factory.

deltamark never sets ``spark.jars.packages`` (Ivy at session start). Delta's, S3A's and
Avro's jars come from the set-up (``framework.spark.jars``, resolved from Maven into the
virtualenv) and are put on the driver's and executors' class path; a user whose cluster
ships its own Delta jars names them in ``spark.jars`` and deltamark adds none. Delta's SQL
extension and catalog are configured whenever a delta-spark jar is on the session, and
Iceberg's SQL extensions whenever the conf names an Iceberg catalog.

A local JVM also gets what the set-up prepared (``framework.spark.local_jvm``): a local file
system that sets permissions without chmod processes, and an archive of Spark's classes.

A command that a deltamark server forked (``framework.server``) starts no JVM: the server
has it take a session of its own in the server's (``sessions_from``).

With a Spark Connect server named (``spark.remote`` or ``SPARK_REMOTE``), the session is
a Connect client's and this process starts no JVM: the server has its own jars and static
conf, and the session gets deltamark's SQL defaults and the conf's ``spark.sql.*`` settings.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from framework import iceberg, storage
from framework.config import Settings
from framework.errors import SparkFeatureError, SparkStartError, one_line
from framework.spark import jars, local_jvm
from framework.spark.lines import at_least, spark_line

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

__all__ = ["ThreadWrapper", "default_parallelism", "inheriting_threads", "is_connect",
           "json_schema", "named_column", "quoted", "require_classic", "session_conf",
           "sessions_from", "spark_session", "temporary_conf", "to_arrow", "try_cast"]

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
    # Delta rebuilds a new version's snapshot with this many tasks (default 50): seconds of
    # task overhead per read on small tables. Raise it for tables of many thousand files.
    "spark.databricks.delta.snapshotPartitions": "2",
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

    Python workers run ``spark.pyspark.python`` when the conf names it, else the driver's
    interpreter (otherwise they miss the virtualenv's pyarrow). The conf is
    ``session_conf``'s. In a command a deltamark server forked, the session is the one
    the server's provider gives (``sessions_from``): a new session in the server's JVM,
    whose master, name and static conf are the server's.

    Args:
        settings: loaded settings (``spark.master``, ``spark.app_name``, ``spark.conf``).
        master, app_name, conf: override the settings for this session.

    Raises:
        SparkVersionError: pyspark is missing or of a Spark line deltamark does not support.
        SparkStartError: the JVM did not start; the message says what to check.
        ServerError: the server that forked this command could not start its JVM.
    """
    spark_line()  # refuses a Spark outside the supported lines before anything starts
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    if (remote := settings.spark.remote_url()) and _provider is None:
        return _connect_session(remote, settings, conf)
    master = master or settings.spark.master
    merged = session_conf(settings, master=master, conf=conf)
    # A Python driver gives its workers the interpreter named by PYSPARK_PYTHON (only
    # spark-submit reads spark.pyspark.python), so the conf's is put there. Otherwise,
    # locally, the workers run beside the driver: a stale value (an interpreter without
    # pyarrow) is overridden; on a cluster, a value set for its machines is kept.
    if python := merged.get("spark.pyspark.python"):
        os.environ["PYSPARK_PYTHON"] = python
    elif master.startswith("local"):
        os.environ["PYSPARK_PYTHON"] = sys.executable
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if _provider is not None:
        return _provider()
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


def _connect_session(url: str, settings: Settings, conf: Mapping[str, str] | None
                     ) -> SparkSession:
    """A Spark Connect session on ``url``, with the SQL conf deltamark sets (the rest of
    the conf is the server's own, set where it starts)."""
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    sql_conf = {key: value for key, value in
                {**DEFAULT_CONF, **settings.spark.conf, **(conf or {})}.items()
                if key.startswith(RUNTIME_PREFIXES)}
    if servers := sorted(set(settings.spark.conf) - set(sql_conf)):
        log.info("Spark Connect: %s set where the server starts, not from here",
                 ", ".join(servers))
    _check_reachable(url)  # Connect's client retries an unreachable server for minutes
    try:
        spark = SparkSession.builder.remote(url).getOrCreate()
        for key, value in sql_conf.items():
            spark.conf.set(key, value)
    except ImportError as exc:
        raise SparkStartError(
            f"Spark Connect ({url}): the client's packages are missing "
            f"({exc.name or one_line(exc)}): pip install 'deltamark[connect]'") from exc
    except PySparkException as exc:
        raise SparkStartError(f"Spark Connect server {url} refused the session: "
                              f"{one_line(exc)}") from exc
    return spark


def _check_reachable(url: str) -> None:
    """Raises SparkStartError at once when nothing listens at ``url``'s host and port."""
    import socket
    from urllib.parse import urlsplit

    address = urlsplit(url.split(";", 1)[0].replace("sc://", "http://", 1))
    host, port = address.hostname or "localhost", address.port or CONNECT_PORT
    try:
        socket.create_connection((host, port), timeout=10).close()
    except OSError as exc:
        raise SparkStartError(
            f"Spark Connect server {url}: nothing answers at {host}:{port} "
            f"({exc.strerror or exc}). Is the server running, and are spark.remote or "
            "SPARK_REMOTE right?") from exc


#: Spark Connect's port when the URL gives none
CONNECT_PORT = 15002

#: the conf a Connect client sets on its session: runtime SQL settings (the server's JVM
#: has its static conf, jars and storage settings from where it was started)
RUNTIME_PREFIXES = ("spark.sql.", "spark.databricks.delta.")


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect client's session (no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def require_classic(spark: SparkSession, what: str) -> None:
    """Refuse ``what`` on a Spark Connect session, in one line.

    Raises:
        SparkFeatureError: ``spark`` is a Connect session.
    """
    if is_connect(spark):
        raise SparkFeatureError(f"{what} needs a Spark JVM in this process, and this run is "
                                "on Spark Connect: run it with spark.master (no spark.remote "
                                "and no SPARK_REMOTE)")


def default_parallelism(spark: SparkSession) -> int:
    """How many tasks Spark runs at once for this application (over Connect, where the
    SparkContext is out of reach: spark.default.parallelism, else the shuffle
    partitions)."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    return int(spark.conf.get("spark.default.parallelism", None)
               or spark.conf.get("spark.sql.shuffle.partitions") or 8)


def json_schema(texts: DataFrame, **options: Any) -> StructType:
    """The schema Spark's JSON reader (with ``options``) infers from ``texts``, a DataFrame
    of one string column of JSON documents: given as it is on Spark Connect, as an RDD on
    a classic session, whose reader takes a DataFrame only from Spark 4.2."""
    reader = texts.sparkSession.read.options(**options)
    if is_connect(texts.sparkSession):
        return reader.json(texts).schema
    return reader.json(texts.rdd.map(lambda row: row[0])).schema


#: where this process's sessions come from instead (``sessions_from``)
_provider: Callable[[], SparkSession] | None = None


def sessions_from(provider: Callable[[], SparkSession]) -> None:
    """Have ``spark_session`` return ``provider()`` in this process from now on (a
    deltamark server does, in the commands it forks: a session in its JVM)."""
    global _provider
    _provider = provider


def session_conf(settings: Settings, *, master: str,
                 conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark conf deltamark starts a session with: defaults and the object-store conf
    (``storage.spark_conf``), then ``settings``, then ``conf``, plus the set-up's jars and,
    for a JVM of its own, the local extras."""
    merged = {**DEFAULT_CONF, **storage.spark_conf(buckets=settings.buckets), **settings.spark.conf,
              **(conf or {})}
    if "spark.jars" in merged:
        merged["spark.jars"] = _present_jars(merged["spark.jars"])
    if not _names_jar(merged.get("spark.jars", ""), "delta-spark") and (
            installed := jars.class_path()):
        for key in ("spark.driver.extraClassPath", "spark.executor.extraClassPath"):
            merged[key] = os.pathsep.join(filter(None, [merged.get(key), installed]))
    if master == "local" or master.startswith("local["):  # Spark in this JVM alone
        local_jvm.configure(merged)
    extensions = [e for e in merged.get("spark.sql.extensions", "").split(",") if e]
    if settings.delta != "embedded" and _on_session(merged, "delta-spark"):
        if "spark.sql.extensions" not in merged:
            extensions.append(DELTA_EXTENSION)
        merged.setdefault("spark.sql.catalog.spark_catalog", DELTA_CATALOG)
    if (_on_session(merged, iceberg.RUNTIME) and iceberg.is_catalog(merged)
            and iceberg.EXTENSION not in extensions):
        extensions.append(iceberg.EXTENSION)
    if iceberg.is_catalog(merged, of_type="jdbc"):
        # Iceberg's JDBC catalog connects through java.sql.DriverManager, which sees the
        # driver's class path only, not the jars spark.jars adds
        local = [storage.local_path(jar) for jar in merged.get("spark.jars", "").split(",")
                 if jar and storage.is_local(jar)]
        merged["spark.driver.extraClassPath"] = os.pathsep.join(
            filter(None, [merged.get("spark.driver.extraClassPath"), *local]))
    if extensions:
        merged["spark.sql.extensions"] = ",".join(extensions)
    return merged


def _present_jars(jars: str) -> str:
    """``spark.jars`` without the local jars that do not exist, each named in a warning (a
    JDBC driver absent here should not stop jobs that do not read a database)."""
    present = []
    for jar in filter(None, (j.strip() for j in jars.split(","))):
        if storage.is_local(jar) and not os.path.exists(storage.local_path(jar)):
            log.warning("spark.jars: %s does not exist, so it is left out; sources that need "
                        "it will fail", jar)
        else:
            present.append(jar)
    return ",".join(present)


def _names_jar(jars: str, artifact: str, *, separator: str = ",") -> bool:
    return any(os.path.basename(jar).startswith(artifact) for jar in jars.split(separator))


def _on_session(conf: Mapping[str, str], artifact: str) -> bool:
    """Whether ``conf`` puts a jar of ``artifact`` on the session (``spark.jars`` or the
    driver's class path)."""
    return _names_jar(conf.get("spark.jars", ""), artifact) or _names_jar(
        conf.get("spark.driver.extraClassPath", ""), artifact, separator=os.pathsep)


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


@contextlib.contextmanager
def temporary_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """Set Spark SQL confs for the block, then put back what was there."""
    before = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def quoted(name: str) -> str:
    """``name`` as a Spark SQL identifier, backquoted: dots, spaces and backticks in it are
    taken literally (``a.b`` names the column so named, not field ``b`` of ``a``)."""
    return "`{}`".format(name.replace("`", "``"))


def named_column(name: str) -> Column:
    """The top-level column ``name``, taken literally (``quoted``)."""
    from pyspark.sql import functions as F

    return F.col(quoted(name))


# What Spark 4 added that deltamark uses, with Spark 3.5's way where 3.5 has one.


def to_arrow(df: DataFrame) -> pa.Table:
    """``df``'s rows as an Arrow table, collected to the driver (``DataFrame.toArrow``)."""
    if at_least("4.0"):
        return df.toArrow()
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    # Spark 3.5's DataFrame has _collect_as_arrow; the Spark 4 classes mypy reads do not
    spark35_df = cast("Any", df)
    # its batches' timestamps carry the session's time zone, to_arrow_schema's UTC
    batches = spark35_df._collect_as_arrow()
    return (pa.Table.from_batches(batches) if batches
            else to_arrow_schema(df.schema).empty_table())


def from_arrow(spark: SparkSession, table: pa.Table) -> DataFrame:
    """An Arrow table built on the driver as a DataFrame (``createDataFrame``)."""
    if at_least("4.0"):
        return spark.createDataFrame(table)
    from pyspark.sql.pandas.types import from_arrow_schema

    rows = list(zip(*(column.to_pylist() for column in table.columns), strict=True))
    return spark.createDataFrame(rows, from_arrow_schema(table.schema))


def try_cast(column: str, to: DataType | str) -> Column:
    """The column named by ``column`` (as ``F.col`` reads it) cast to ``to`` (a type or its
    SQL name), NULL where a value does not convert (``Column.try_cast``; SQL's
    ``try_cast`` on Spark 3.5)."""
    from pyspark.sql import functions as F

    if at_least("4.0"):
        return F.col(column).try_cast(to)
    return F.expr(f"try_cast({column} AS {to if isinstance(to, str) else to.simpleString()})")


T = TypeVar("T")


class ThreadWrapper(Protocol):
    """Wraps a function to run on another thread; the wrapper returns what it returns."""

    def __call__(self, function: Callable[[], T], /) -> Callable[[], T]: ...


def inheriting_threads(spark: SparkSession) -> ThreadWrapper:
    """A wrapper for functions run on other threads: their Spark jobs take this thread's
    local properties (scheduler pool, job group) and, on Spark 4, the session's tags."""
    from pyspark.util import inheritable_thread_target

    return inheritable_thread_target(spark) if at_least("4.0") else inheritable_thread_target
