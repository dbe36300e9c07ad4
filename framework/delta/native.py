"""The native path: Delta Lake's own Spark connector (delta-spark), when its jars are loaded."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from framework import storage
from framework.delta import filters as F
from framework.delta import log
from framework.delta.engine import DeltaEngine, PlainWriteMode
from framework.delta.files import (
    FileRead,
    spark_names,
    spark_schema,
    unreadable,
)
from framework.delta.log import AppTransaction, Merge, Snapshot
from framework.errors import VersionNotFoundError
from framework.spark.session import is_connect, quoted, temporary_conf

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["NativeEngine", "native_available"]

DELTA_CLASS = "io.delta.tables.DeltaTable"
_RETENTION_CHECK = ("spark.databricks.delta.vacuum."
                    "enforceTimeTravelWithinDeletedFileRetentionDuration")


def native_available(spark: SparkSession) -> bool:
    """Whether Delta's classes are on this session's JVM and its SQL extension is set (on
    Spark Connect: the server's extension, which its start loaded)."""
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    if "DeltaSparkSessionExtension" not in extensions:
        return False
    if is_connect(spark):
        return True
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    try:
        jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(DELTA_CLASS)
    except Exception:  # noqa: BLE001 - py4j raises Py4JJavaError wrapping ClassNotFoundException
        return False
    return True


class NativeEngine(DeltaEngine):
    """Reads and writes with ``format("delta")``; Delta Spark skips replayed txns itself."""

    name = "native"
    quote = staticmethod(quoted)
    type_widening = True

    def read(self, path: str, *, version: int | None = None,
             timestamp: datetime | str | None = None, filters: Sequence[F.Filter] = ()
             ) -> DataFrame:
        # The log resolves the version as on the embedded path: the same errors for a
        # missing table or version, and a timestamp means the commit's own (delta-spark
        # would compare it with the log file's modification time). The latest version is
        # read as such: Delta keeps its snapshot, while a time-travel read rebuilds one
        # (~0.2 s a read).
        resolved = log.version_at(path, version=version, timestamp=timestamp)
        reader = self.spark.read.format("delta")
        if version is not None or timestamp is not None:
            reader = reader.option("versionAsOf", resolved)
        df = reader.load(storage.absolute(path))
        if filters:
            df = df.where(F.to_column(F.check(filters, df.columns, where=path)))
        return df

    def _read_change_feed(self, path: str, snap: Snapshot, *, after: int) -> DataFrame:
        # Delta's own reader: deletion vectors, column mapping, every change it records.
        # Delta refuses a range whose commits are older than deletedFileRetentionDuration
        # (7 days), as VACUUM may have removed their files: a weekly job's bookmark would
        # be refused whatever VACUUM did. Its files are read, and missing ones fail the read.
        try:
            with temporary_conf(self.spark, {_RETENTION_CHECK: "false"}):
                return (self.spark.read.format("delta").option("readChangeFeed", "true")
                        .option("startingVersion", after + 1)
                        .option("endingVersion", snap.version).load(storage.absolute(path)))
        except Exception as exc:
            if not log.has_commit(path, after + 1):  # Delta's own error is a Java trace
                raise VersionNotFoundError(path, f"version {after + 1}",
                                           "its log entry is gone (log retention)") from exc
            raise

    def _read_appended(self, path: str, snap: Snapshot, reads: Sequence[FileRead]
                       ) -> DataFrame:
        if not unreadable(snap):  # Parquet reads of the appended files only
            return super()._read_appended(path, snap, reads)
        # Delta's reader for what Parquet and the log cannot say (a widened type, a
        # variant): the table at the range's end, kept to the appended files' rows.
        from pyspark.sql import functions as F

        df = (self.spark.read.format("delta").option("versionAsOf", snap.version)
              .load(storage.absolute(path)))
        if not reads:
            return df.limit(0)
        named = spark_names(path, df, [r.path for r in reads])
        return df.where(F.col("_metadata.file_path").isin(
            [name for names in named.values() for name in names]))

    def _write(self, df: DataFrame, path: str, *, mode: PlainWriteMode,
               current: Snapshot | None, schema: StructType, partitions: tuple[str, ...],
               replace_where: tuple[F.Filter, ...], txn: AppTransaction | None,
               metadata: Mapping[str, Any] | None, before_commit: Callable[[], object]) -> int:
        before_commit()  # Delta writes and commits in one call
        writer = df.write.format("delta").mode(mode)
        if partitions:
            writer = writer.partitionBy(*partitions)
        if replace_where:
            writer = writer.option("replaceWhere", F.to_sql(replace_where))
        if current is not None and schema.json() != spark_schema(current.schema_json).json():
            writer = writer.option("mergeSchema", "true")  # the data adds columns or fields
        if txn is not None:
            writer = writer.option("txnAppId", txn.app_id).option("txnVersion", txn.version)
        if metadata:
            writer = writer.option("userMetadata", json.dumps(dict(metadata), default=str))
        writer.save(storage.absolute(path))
        return log.table_version(path) or 0

    def _merge(self, df: DataFrame, path: str, merge: Merge, *, merge_schema: bool,
               txn: AppTransaction | None, metadata: Mapping[str, Any] | None,
               before_commit: Callable[[], object]) -> int:
        before_commit()
        conf = {"spark.databricks.delta.schema.autoMerge.enabled": str(merge_schema).lower()}
        if txn is not None:  # Delta's idempotent-DML settings carry the app transaction
            conf |= {"spark.databricks.delta.write.txnAppId": txn.app_id,
                     "spark.databricks.delta.write.txnVersion": str(txn.version)}
        if metadata:
            conf["spark.databricks.delta.commitInfo.userMetadata"] = json.dumps(
                dict(metadata), default=str)
        # SQL rather than delta-spark's Python DeltaTable: that package pins one pyspark,
        # while Delta's SQL is the same on every Spark line. Delta takes delta.`path` for a
        # table only when the path is absolute (a relative one is read as a file query).
        table = storage.absolute(path)
        source = f"deltamark_merge_{uuid.uuid4().hex}"
        df.createOrReplaceTempView(source)
        try:
            with temporary_conf(self.spark, conf):
                self.spark.sql(f"MERGE INTO delta.{quoted(table)} AS t USING {source} AS s "
                               f"ON {merge.on} {merge.when_clauses(quoted)}")
        finally:
            self.spark.catalog.dropTempView(source)
        return log.table_version(path) or 0
