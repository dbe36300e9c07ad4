"""The embedded path: Delta tables from Spark without Delta's jars, through delta-rs.

Design (measured against Spark's own Parquet I/O on 10M rows, see
tests/benchmarks/bench_delta_io.py): delta-rs does what needs the Delta log, Spark's
native Parquet reader and writer move the bytes.

- Read: delta-rs resolves the snapshot (version or timestamp travel, protocol check),
  prunes partitions and skips files by the log's min/max statistics; Spark reads the
  chosen files with the table's schema, partition columns parsed from their Hive-style
  directories (``basePath``).
- Write: Spark tasks write Parquet in parallel into ``<table>/_deltamark_staging/<id>``
  (a small write, see ``_small``, is one file the driver writes from the rows Spark
  collects: no write job, and one file a run rather than one a task); the driver moves
  the files into place, reads their footers for statistics and makes ONE
  Delta commit with delta-rs, carrying the app transaction and commit metadata. Until that
  commit the files are invisible; on failure they are deleted, and what a killed write
  left is deleted by the job's next write to the table. On an object store (``s3://``)
  the same steps run through S3A and pyarrow, a move being a server-side copy.

A Python Data Source (Arrow batches through Python workers) was prototyped first: 1.3-2.8x
slower to write and 1.4-2.5x slower to read than Spark's Parquet on the same data.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from framework import storage
from framework.delta import filters as F
from framework.delta import log
from framework.delta.engine import DeltaEngine, PlainWriteMode, check_present
from framework.delta.files import FileRead, read_files, spark_schema
from framework.delta.log import AppTransaction, Merge, NewFile, Snapshot, VersionChange
from framework.errors import (
    ChangesUnavailableError,
    ConstraintViolationError,
    DeltaTableError,
    UnsupportedTableFeatureError,
)
from framework.spark.session import default_parallelism, is_connect, temporary_conf, to_arrow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = ["EmbeddedEngine"]

STAGING_DIR = "_deltamark_staging"
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: a write the driver makes itself reads at most this much (Spark's estimate)...
DRIVER_WRITE_BYTES = 8 << 20
#: ...through these logical plans only (rows neither multiplied nor computed by a UDF)
DRIVER_WRITE_PLANS = frozenset({"Project", "Filter", "Union", "LogicalRelation",
                                "LocalRelation"})


class EmbeddedEngine(DeltaEngine):
    """Delta reads and writes for a Spark session without Delta's jars."""

    name = "embedded"

    @staticmethod
    def quote(name: str) -> str:
        """``name`` as an identifier of delta-rs's SQL (DataFusion's quoting)."""
        return '"{}"'.format(name.replace('"', '""'))

    # --- read ------------------------------------------------------------------------

    def read(self, path: str, *, version: int | None = None,
             timestamp: dt.datetime | str | None = None, filters: Sequence[F.Filter] = ()
             ) -> DataFrame:
        snap = log.snapshot(storage.absolute(path), version=version, timestamp=timestamp)
        schema = spark_schema(snap.schema_json)
        filters = F.check(filters, schema.fieldNames(), where=f"Delta table {path}")
        deleted = (log.deleted_rows(snap.path, snap.version)
                   if "deletionVectors" in snap.reader_features else {})
        if stray := set(deleted) - {f.path for f in snap.files}:
            raise _vector_mismatch(path, stray)
        df = read_files(self.spark, path, snap, [
            FileRead(f.path, f.partition_values, "but" if f.path in deleted else "all",
                     deleted.get(f.path))
            for f in snap.files if F.file_may_match(f, filters)])
        return df.where(F.to_column(filters)) if filters else df

    def _read_change_feed(self, path: str, snap: Snapshot, *, after: int) -> DataFrame:
        # Read from the log's add, remove and cdc actions by Spark's tasks, as Delta does:
        # a commit's cdc files when it wrote some, else its added files as inserts and its
        # removed files as deletes; a changed deletion vector deletes the rows it adds.
        if snap.version > after and not log.change_feed_on(path, after + 1):
            raise ChangesUnavailableError(
                path, f"its Change Data Feed was off at version {after + 1}, so the changes "
                "after it are not recorded. Reset the reading context to reload the table in "
                "full.")
        reads = [read for change in log.changes(snap, after=after, timestamps=True)
                 for read in _change_reads(path, change)]
        check_present(path, reads, after=after)
        return read_files(self.spark, path, snap, reads, changes=True)

    def can_write(self, path: str) -> bool:
        """Whether this path writes the table ``path`` (absent: it would create it) as
        delta-spark would, i.e. it has no feature this path refuses to write."""
        root = storage.absolute(path)
        return not log.is_table(root) or not _not_written(log.snapshot(root))

    # --- write -----------------------------------------------------------------------

    def _write(self, df: DataFrame, path: str, *, mode: PlainWriteMode,
               current: Snapshot | None, schema: StructType, partitions: tuple[str, ...],
               replace_where: tuple[F.Filter, ...], txn: AppTransaction | None,
               metadata: Mapping[str, Any] | None, before_commit: Callable[[], object]) -> int:
        if current is not None:
            df = _checked(path, df, current)
        root = storage.absolute(path)
        fs, base, spark_uri = storage.filesystem(root)
        staging = _new_staging_dir(fs, base, txn)
        placed: list[str] = []
        try:
            with _constraints_kept(path):
                if not partitions and _small(df):
                    _write_on_driver(df, fs, staging)
                else:
                    _write_by_tasks(df, spark_uri(staging), partitions)
            before_commit()
            files = list(_place_files(fs, staging, base, partitions, schema, placed))
            _check_replace_where(path, files, replace_where)
            if current is not None and mode == "append" and \
                    schema.json() != spark_schema(current.schema_json).json():
                # delta-rs can change the schema only in an overwrite commit: widen first,
                # in a commit saying whose write it prepares (not the write itself)
                log.add_columns(root, schema.json(), user_metadata={
                    log.SCHEMA_CHANGE: dict(metadata or {}).get("deltamark", {})})
            return log.commit_files(
                root, files, mode=mode, schema_json=schema.json(), partition_by=partitions,
                replace_where=replace_where, txn=txn, user_metadata=metadata,
            )
        except BaseException:
            for file in placed:
                with contextlib.suppress(OSError):
                    fs.delete_file(file)
            raise
        finally:
            with contextlib.suppress(OSError):
                fs.delete_dir(staging)
            if storage.is_local(root):  # an object store has no empty directories
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(root, STAGING_DIR))


    def _merge(self, df: DataFrame, path: str, merge: Merge, *, merge_schema: bool,
               txn: AppTransaction | None, metadata: Mapping[str, Any] | None,
               before_commit: Callable[[], object]) -> int:
        # delta-rs merges on the driver: fine for increments, which merges are for.
        root = storage.absolute(path)
        with _constraints_kept(path):
            rows = to_arrow(_checked(path, df, log.snapshot(root, files=False),
                                     removing=merge.removing))
        before_commit()
        return log.merge_rows(root, rows, merge=merge, merge_schema=merge_schema, txn=txn,
                              user_metadata=metadata)


def _change_reads(path: str, change: VersionChange) -> Iterator[FileRead]:
    """The files to read for one commit's changes, with the rows each contributes."""
    when = (change.version, change.timestamp)
    if change.cdc:
        for cdc in change.cdc:
            yield FileRead(cdc.path, cdc.partition_values, change=(None, *when))
        return
    now = (log.deleted_rows(path, change.version)
           if any(f.deletion_vector for f in change.added) else {})
    before = (log.deleted_rows(path, change.version - 1)
              if any(f.deletion_vector for f in change.removed) else {})
    removed = {f.path for f in change.removed}
    added = {f.path for f in change.added}
    if bare := ({f.path for f in change.added if f.deletion_vector} - set(now)
                | {f.path for f in change.removed if f.deletion_vector} - set(before)):
        raise _vector_mismatch(path, bare)
    for add in change.added:
        if add.path in removed:  # the same file, more of its rows deleted
            fresh = now.get(add.path, pa.array([], pa.int64()))
            if add.path in before:
                fresh = fresh.filter(pc.invert(pc.is_in(fresh, value_set=before[add.path])))
            yield FileRead(add.path, add.partition_values, "only", fresh,
                           change=("delete", *when))
        else:
            yield FileRead(add.path, add.partition_values, "but" if add.path in now else "all",
                           now.get(add.path), change=("insert", *when))
    for gone in change.removed:
        if gone.path not in added:
            yield FileRead(gone.path, gone.partition_values,
                           "but" if gone.path in before else "all", before.get(gone.path),
                           change=("delete", *when))


def _vector_mismatch(path: str, files: set[str]) -> DeltaTableError:
    """A deletion vector and its data file not matched: left unapplied, the vector would
    bring deleted rows back, so nothing is read."""
    return DeltaTableError(path, f"a deletion vector does not match its data file "
                           f"({min(files)}); nothing was read. Read the table with the native "
                           "path, and report this to deltamark.")


#: what a row breaking a constraint fails the write with (Spark's raise_error)
_VIOLATION = re.compile(r"deltamark constraint: (.+?)(?:\.? SQLSTATE|\n|$)")


def _not_written(snap: Snapshot) -> list[str]:
    """What of ``snap``'s table the embedded writer cannot honour: it writes data files
    with the columns' names and values as given, where column mapping names them apart and
    generated, identity and invariant columns take values of the table's own."""
    refused = [f for f in snap.unsupported_features() if f.startswith("columnMapping")]
    for field in json.loads(snap.schema_json)["fields"]:
        metadata = field.get("metadata") or {}
        if "delta.generationExpression" in metadata:
            refused.append(f"generated column {field['name']}")
        if any(key.startswith("delta.identity.") for key in metadata):
            refused.append(f"identity column {field['name']}")
        if "delta.invariants" in metadata:
            refused.append(f"invariant on column {field['name']}")
    return refused


def _checked(path: str, df: DataFrame, snap: Snapshot, *, removing: str | None = None
             ) -> DataFrame:
    """``df`` to write to ``snap``'s table: refused if the table has a feature this path
    would write wrong; else failing (as delta-spark's write does, see ``_constraints_kept``)
    on a row that leaves a NOT NULL column NULL or breaks a CHECK constraint (one whose
    expression is NULL breaks it too), but for rows the column ``removing`` marks as only
    deleting (never written)."""
    from pyspark.sql import functions as fn

    if refused := _not_written(snap):
        raise UnsupportedTableFeatureError(path, refused, writing=True)
    broken = [(f"NOT NULL column {'.'.join(column)} is NULL in a row",
               fn.col(".".join(f"`{name.replace('`', '``')}`" for name in column)).isNull())
              for column in _not_null(spark_schema(snap.schema_json).fields)]
    broken += [(f"CHECK constraint {key.removeprefix('delta.constraints.')} ({sql}) is "
                "broken by a row", ~fn.coalesce(fn.expr(sql), fn.lit(False)))
               for key, sql in snap.configuration.items()
               if key.startswith("delta.constraints.") and sql]
    if not broken:
        return df
    if removing is not None:
        written = ~fn.coalesce(fn.col(removing), fn.lit(False))
        broken = [(text, written & test) for text, test in broken]
    return df.where(fn.coalesce(*(fn.when(test, fn.raise_error(fn.lit(
        f"deltamark constraint: {text}"))) for text, test in broken), fn.lit(True)))


@contextlib.contextmanager
def _constraints_kept(path: str) -> Iterator[None]:
    """Turn the failure of a Spark job over ``_checked`` rows into the constraint it names."""
    try:
        yield
    except Exception as exc:
        if broken := _VIOLATION.search(str(exc)):
            raise ConstraintViolationError(path, broken[1]) from None
        raise


def _small(df: DataFrame) -> bool:
    """Whether the driver writes ``df`` itself: a plan of ``DRIVER_WRITE_PLANS`` reading
    at most ``DRIVER_WRITE_BYTES``, with types Arrow carries as Spark writes them, in a
    session with its JVM here (not Spark Connect)."""
    if is_connect(df.sparkSession) or not all(_arrow_written(f.dataType)
                                               for f in df.schema.fields):
        return False
    plan = df._jdf.queryExecution().optimizedPlan()
    if int(plan.stats().sizeInBytes()) > DRIVER_WRITE_BYTES:
        return False
    nodes = [plan]
    while nodes:
        node = nodes.pop()
        if node.nodeName() not in DRIVER_WRITE_PLANS:
            return False
        children = node.children()
        nodes += [children.apply(i) for i in range(children.size())]
    return True


def _write_by_tasks(df: DataFrame, staging: str, partitions: Sequence[str]) -> None:
    """``df`` written by Spark's tasks into ``staging`` (a URI Spark writes to)."""
    # The staging directory is private and its files are placed by the driver after the
    # job, so task outputs can go straight there (committer v2, no _SUCCESS).
    writer = (df.write.mode("error").option("compression", "snappy")
              .option("mapreduce.fileoutputcommitter.algorithm.version", "2")
              .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false"))
    if partitions:
        writer = writer.partitionBy(*partitions)
    with temporary_conf(df.sparkSession, {"spark.sql.parquet.outputTimestampType":
                                          "TIMESTAMP_MICROS"}):
        writer.parquet(staging)


def _write_on_driver(df: DataFrame, fs: pafs.FileSystem, staging: str) -> None:
    """``df``'s rows, collected as Arrow, as one Parquet file in ``staging``. Read in a task
    a core at most: Spark gives small files 4 MB each when it packs them into tasks, so
    100 of 150 bytes would take 4 tasks (20 ms more on 2 cores)."""
    spark = df.sparkSession
    with temporary_conf(spark, {"spark.sql.files.maxPartitionNum":
                                str(default_parallelism(spark))}):
        rows = to_arrow(df)
    fs.create_dir(staging)
    pq.write_table(rows, f"{staging}/part-00000-{uuid.uuid4()}.snappy.parquet",
                   filesystem=fs, compression="snappy")


def _arrow_written(data_type: Any) -> bool:
    """Whether ``data_type`` reaches Parquet through Arrow as Spark's writer writes it."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        return all(_arrow_written(f.dataType) for f in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return _arrow_written(data_type.elementType)
    if isinstance(data_type, T.MapType):  # keys of a plain type, as Parquet's maps have
        return _arrow_written(data_type.keyType) and _arrow_written(data_type.valueType) \
            and not isinstance(data_type.keyType, (T.StructType, T.ArrayType, T.MapType))
    return isinstance(data_type, (
        T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType,
        T.DoubleType, T.DecimalType, T.StringType, T.BinaryType, T.DateType, T.TimestampType,
        T.TimestampNTZType))


def _not_null(fields: Sequence[Any], parent: tuple[str, ...] = ()
              ) -> Iterator[tuple[str, ...]]:
    """The paths of the NOT NULL columns among ``fields``, through structs."""
    from pyspark.sql.types import StructType

    for field in fields:
        path = (*parent, field.name)
        if not field.nullable:
            yield path
        if isinstance(field.dataType, StructType):
            yield from _not_null(field.dataType.fields, path)


def _new_staging_dir(fs: pafs.FileSystem, base: str, txn: AppTransaction | None) -> str:
    """A fresh staging directory's path on ``fs``. A job's are tagged with its app id, and
    as one run of a job writes at a time, those found are what a killed run left: they are
    removed."""
    parent = f"{base}/{STAGING_DIR}"
    if txn is None:
        return f"{parent}/{uuid.uuid4().hex}"
    tag = hashlib.sha256(txn.app_id.encode()).hexdigest()[:16]  # app ids may hold ':'
    for left in fs.get_file_info(pafs.FileSelector(parent, allow_not_found=True)):
        if left.base_name.startswith(f"{tag}-"):
            with contextlib.suppress(OSError):
                fs.delete_dir(left.path)
    return f"{parent}/{tag}-{txn.version}-{uuid.uuid4().hex}"


def _place_files(fs: pafs.FileSystem, staging: str, base: str, partitions: Sequence[str],
                 schema: StructType, placed: list[str]) -> Iterator[NewFile]:
    """Move each Parquet file Spark wrote into the table and describe it for the log."""
    stat_columns = {f.name for f in schema.fields if f.name not in partitions}
    written = fs.get_file_info(pafs.FileSelector(staging, recursive=True))
    for staged in sorted((f for f in written if f.path.endswith(".parquet")),
                         key=lambda f: f.path):
        relative = staged.path[len(staging) + 1:]
        target = f"{base}/{relative}"
        if isinstance(fs, pafs.LocalFileSystem):
            fs.create_dir(target.rsplit("/", 1)[0])
        fs.move(staged.path, target)
        placed.append(target)
        info = fs.get_file_info(target)
        yield NewFile(
            relative_path=relative,
            size=info.size,
            partition_values=_partition_values(relative, partitions),
            modification_time_ms=info.mtime_ns // 1_000_000,
            stats_json=log.file_stats(pq.read_metadata(target, filesystem=fs), stat_columns),
        )


def _partition_values(relative: str, partitions: Sequence[str]) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for segment, column in zip(relative.split("/"), partitions, strict=False):
        raw = unquote(segment.split("=", 1)[1])
        values[column] = None if raw == NULL_PARTITION else raw
    return values


def _check_replace_where(path: str, files: Sequence[NewFile],
                         replace_where: Sequence[F.Filter]) -> None:
    """Like Delta's replaceWhere: every written row must satisfy the predicate."""
    for new in files:
        if not F.partition_matches(new.partition_values, replace_where):
            raise DeltaTableError(
                path, f"data written to partition {dict(new.partition_values)} does not match "
                f"replace_where {F.to_sql(replace_where)}; nothing was committed. Filter the "
                "data to the partitions being replaced.")


