"""The interface jobs use for Delta tables, whichever path (native or embedded) is active."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from framework import storage
from framework.common.faults import crash_point
from framework.delta import filters as F
from framework.delta import log
from framework.delta.changes import DELETE, DROP, SEQUENCE, ApplyChanges, tombstones_path
from framework.delta.files import FileRead, read_files, read_schema, spark_schema
from framework.delta.filters import Filter
from framework.delta.log import AppTransaction, Commit, Merge, Snapshot
from framework.errors import (
    ChangesUnavailableError,
    DeltaTableError,
    SchemaMismatchError,
    VersionNotFoundError,
)
from framework.spark.session import quoted, to_arrow
from framework.spark.types import Conversion, same, sql_type, widens

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

__all__ = ["DeltaEngine", "WriteMode", "WriteResult", "check_present"]

WriteMode = Literal["append", "overwrite", "merge", "apply_changes"]
#: what ``_write`` does: a merge into a new table is an append
PlainWriteMode = Literal["append", "overwrite"]

CHANGE_FEED = "delta.enableChangeDataFeed"
#: the table property that lets Delta (4.0+, delta-spark) widen a column's type on write
TYPE_WIDENING = "delta.enableTypeWidening"
_GONE = ("the history after version {after} is no longer there ({detail}). Reset the "
         "reading context to reload the table in full, or run once with --bookmark disable.")


@dataclass(frozen=True)
class WriteResult:
    """What a write did: the table version it created, or that it was a replay."""

    version: int
    skipped: bool = False


class DeltaEngine(ABC):
    """Read and write Delta tables from Spark.

    Log-level questions (version, history, app transactions) are answered from the Delta
    log through delta-rs on both paths: they need no Spark job.
    """

    name: ClassVar[str]
    #: whether writes widen column types where a table allows it (``TYPE_WIDENING``)
    type_widening: ClassVar[bool] = False

    @staticmethod
    @abstractmethod
    def quote(name: str) -> str:
        """``name`` as an identifier of this path's SQL (its MERGE conditions)."""

    def __init__(self, spark: SparkSession):
        self.spark = spark

    @abstractmethod
    def read(
        self,
        path: str,
        *,
        version: int | None = None,
        timestamp: datetime | str | None = None,
        filters: Sequence[Filter] = (),
    ) -> DataFrame:
        """The table as a DataFrame: latest, at ``version`` or at ``timestamp``.

        ``filters`` (``[("col", ">=", 5), ...]``, all ANDed) prune partitions and skip files
        by the statistics in the log, and are applied to the rows.

        Raises:
            TableNotFoundError, VersionNotFoundError, UnsupportedTableFeatureError
        """

    def write(
        self,
        df: DataFrame,
        path: str,
        *,
        mode: WriteMode = "append",
        partition_by: Sequence[str] = (),
        replace_where: Sequence[Filter] = (),
        merge_schema: bool = False,
        merge_on: Sequence[str] = (),
        changes: ApplyChanges | None = None,
        txn: AppTransaction | None = None,
        metadata: Mapping[str, Any] | None = None,
        before_commit: Callable[[], object] = lambda: None,
        placeholders: Collection[str] = (),
    ) -> WriteResult:
        """Write ``df`` in one Delta commit.

        Args:
            mode: ``append``, ``overwrite`` (the whole table, or with ``replace_where``
                only the partitions matching those partition-column filters), or
                ``merge``: upsert on the ``merge_on`` columns (rows with a matching key are
                updated, the others inserted; each key must occur once in ``df``), or
                ``apply_changes``: ``df`` holds change records, applied as ``changes``
                says (``framework.delta.changes``).
            partition_by: partition columns when the table is created; must match after.
            merge_schema: allow new columns (added as nullable).
            txn: the commit carries this app transaction; a write whose version is not
                above the table's version for that app id is a replay and is skipped.
            metadata: JSON-able mapping stored as the commit's ``userMetadata``.
            before_commit: called once the data is ready (on the embedded path: its files
                written), before the commit; raising stops the write.
            placeholders: columns a table may hold before its data has any (a file
                source's rescued-data column): a table of these alone takes new columns
                as with ``merge_schema``.

        Raises:
            SchemaMismatchError, WriteConflictError
            DeltaTableError: a bad ``merge_on`` (missing, NULL or repeated keys).
        """
        log.check_path(path)
        if txn is not None:
            done = log.transaction_version(path, txn.app_id)
            if done is not None and done >= txn.version:
                return WriteResult(version=log.table_version(path) or 0, skipped=True)
        if (mode == "apply_changes") != (changes is not None):
            raise DeltaTableError(path, "mode='apply_changes' takes its keys and sequence_by "
                                  "(and only that mode does).")
        if changes is not None:
            return WriteResult(version=self._apply_changes(
                df, path, changes, partition_by=tuple(partition_by), merge_schema=merge_schema,
                txn=txn, metadata=metadata, before_commit=before_commit))
        if (mode == "merge") != bool(merge_on):
            raise DeltaTableError(path, "mode='merge' and merge_on go together: give the key "
                                  "columns to merge on, or another mode.")
        if merge_on:
            _check_merge_keys(path, df, tuple(merge_on))
        # One set of schema rules and messages for both paths.
        df = _without_char_lengths(df)
        current = log.snapshot(path) if log.is_table(path) else None
        merge_schema = merge_schema or (current is not None and bool(placeholders) and {
            f.name for f in spark_schema(current.schema_json).fields} <= set(placeholders))
        partitions = _partitioning(path, current, tuple(partition_by))
        df, schema = _conform(
            path, df, current, partitions, merge_schema=merge_schema,
            type_widening=self.type_widening and current is not None
            and current.configuration.get(TYPE_WIDENING) == "true")
        if replace_where:
            if mode != "overwrite":
                raise DeltaTableError(path, "replace_where needs mode='overwrite'.")
            F.check(replace_where, partitions,
                    where=f"Delta table {path} (replace_where takes partition columns)")
        if mode == "merge" and current is not None:
            on = " AND ".join(f"t.{self.quote(k)} = s.{self.quote(k)}" for k in merge_on)
            version = self._merge(df, path, Merge(on), merge_schema=merge_schema, txn=txn,
                                  metadata=metadata, before_commit=before_commit)
        else:  # merging into a new table creates it
            version = self._write(df, path, mode="overwrite" if mode == "overwrite" else "append",
                                  current=current, schema=schema, partitions=partitions,
                                  replace_where=tuple(replace_where), txn=txn,
                                  metadata=metadata, before_commit=before_commit)
        return WriteResult(version=version)

    @abstractmethod
    def _write(self, df: DataFrame, path: str, *, mode: PlainWriteMode,
               current: Snapshot | None, schema: StructType, partitions: tuple[str, ...],
               replace_where: tuple[Filter, ...], txn: AppTransaction | None,
               metadata: Mapping[str, Any] | None, before_commit: Callable[[], object]) -> int:
        """Append or overwrite ``df`` (already in the table's layout; ``schema`` is the
        table's after the write), and commit; return the new table version."""

    @abstractmethod
    def _merge(self, df: DataFrame, path: str, merge: Merge, *, merge_schema: bool,
               txn: AppTransaction | None, metadata: Mapping[str, Any] | None,
               before_commit: Callable[[], object]) -> int:
        """MERGE ``df`` into the existing table ``path`` in one commit (its conditions
        quoted with ``quote``); the new version."""

    def _apply_changes(self, df: DataFrame, path: str, changes: ApplyChanges, *,
                       partition_by: tuple[str, ...], merge_schema: bool,
                       txn: AppTransaction | None, metadata: Mapping[str, Any] | None,
                       before_commit: Callable[[], object]) -> int:
        """Apply the change records ``df`` in one commit; the new version."""
        from pyspark.sql import functions as fn

        checked = changes.checked(path, _without_char_lengths(df))
        current = log.snapshot(path) if log.is_table(path) else None
        partitions = _partitioning(path, current, partition_by)
        kept_at = tombstones_path(path)
        tombstones = None if current is None else changes.tombstones(
            self.spark, kept_at, run=txn,
            landed=log.transaction_version(path, txn.app_id) or 0 if txn else 0)
        if changes.scd_type == 1:
            rows, flag = changes.latest(checked, tombstones), DELETE
        else:
            rows = changes.history(checked, None if current is None else self.read(path),
                                   tombstones)
            flag = DROP

        def tombstones_first() -> None:  # the run's deletes, before its commit
            before_commit()
            changes.record_tombstones(kept_at, to_arrow(
                checked.where(fn.col(DELETE)).select(*changes.keys, SEQUENCE)), txn)
            crash_point("tombstones_recorded")

        data = rows.drop(SEQUENCE) if changes.scd_type == 1 else rows
        if current is None:  # the table is created with the rows that stay
            created = data.where(~fn.col(flag)).drop(flag)
            created, schema = _conform(path, created, None, partitions, merge_schema=True)
            return self._write(created, path, mode="append", current=None, schema=schema,
                               partitions=partitions, replace_where=(), txn=txn,
                               metadata=metadata, before_commit=tombstones_first)
        conformed, schema = _conform(path, data, current, partitions,
                                     merge_schema=merge_schema, passthrough=(flag,))
        columns = [f.name for f in schema.fields]
        if schema.json() != spark_schema(current.schema_json).json():
            log.add_columns(storage.absolute(path), schema.json(), user_metadata={
                log.SCHEMA_CHANGE: dict(metadata or {}).get("deltamark", {})})
        merge = changes.upsert if changes.scd_type == 1 else changes.replace_history
        return self._merge(conformed, path, merge(self.quote, columns), merge_schema=False,
                           txn=txn, metadata=metadata, before_commit=tombstones_first)

    def read_changes(self, path: str, *, after: int, to: int,
                     change_feed: bool | None = None) -> DataFrame:
        """What versions ``after + 1`` to ``to`` changed, read by Spark's tasks.

        With the Change Data Feed (``change_feed=None``: when the table has
        ``delta.enableChangeDataFeed=true``): every inserted, updated and deleted row, with
        ``_change_type`` (insert, update_preimage, update_postimage, delete),
        ``_commit_version`` and ``_commit_timestamp``. Without it: the rows appended;
        compactions are skipped, and any commit that changed existing rows is an error.

        Raises:
            ChangesUnavailableError: rows changed without a Change Data Feed, or the log
                entries or data files of the range are gone (log retention, VACUUM).
            UnsupportedTableFeatureError: the range needs a feature this path cannot read.
        """
        snap = log.snapshot(path, version=to, files=False)
        feed_on = snap.configuration.get(CHANGE_FEED) == "true"
        feed = bool(change_feed or (change_feed is None and feed_on))
        if after >= to:  # nothing in the range: its columns, and no file read
            return self.spark.createDataFrame([], read_schema(snap, changes=feed))
        try:
            if feed and not (feed_on and log.change_feed_on(path, after + 1)):
                raise ChangesUnavailableError(
                    path, f"change_feed=True, but the table's Change Data Feed is off at "
                    f"version {after + 1 if feed_on else to}: enable it (ALTER TABLE ... SET "
                    "TBLPROPERTIES (delta.enableChangeDataFeed = true)) before the changes "
                    "to read, or read without change_feed (appended rows only).")
            if feed:
                return self._read_change_feed(path, snap, after=after)
            changes = log.changes(snap, after=after)
        except VersionNotFoundError as exc:
            raise ChangesUnavailableError(path, _GONE.format(after=after, detail=exc)) from exc
        if rewrites := [c for c in changes if c.rewrote]:
            listed = ", ".join(f"v{c.version} {c.operation}" for c in rewrites)
            way = ("Read the table with change_feed=True (its Change Data Feed is on)"
                   if feed_on else "Enable it (delta.enableChangeDataFeed=true)")
            raise ChangesUnavailableError(
                path, f"{listed} changed existing rows, which only a Change Data Feed can "
                f"report. {way}, or reload in full.")
        reads = [FileRead(f.path, f.partition_values) for c in changes for f in c.added]
        check_present(path, reads, after=after)
        return self._read_appended(path, snap, reads)

    def _read_appended(self, path: str, snap: Snapshot, reads: Sequence[FileRead]
                       ) -> DataFrame:
        """The rows of files appended to the table, with its schema at ``snap``."""
        return read_files(self.spark, path, snap, reads)

    @abstractmethod
    def _read_change_feed(self, path: str, snap: Snapshot, *, after: int) -> DataFrame:
        """The Change Data Feed of versions ``after + 1`` to ``snap.version``.

        Raises:
            VersionNotFoundError, ChangesUnavailableError, UnsupportedTableFeatureError
        """

    def version(self, path: str) -> int | None:
        """The latest table version, or None when there is no table."""
        return log.table_version(path)

    def history(self, path: str, *, limit: int | None = None) -> list[Commit]:
        """The table's commits, newest first."""
        return log.history(path, limit=limit)

    def transaction_version(self, path: str, app_id: str) -> int | None:
        """The highest app-transaction version committed by ``app_id``, if any."""
        return log.transaction_version(path, app_id)


def check_present(path: str, reads: Sequence[FileRead], *, after: int) -> None:
    """Raise ChangesUnavailableError when a data file to read is gone (VACUUM)."""
    if gone := [r.path for r in reads if not storage.exists(r.path)]:
        raise ChangesUnavailableError(path, _GONE.format(
            after=after, detail=f"{len(gone)} data files removed, e.g. {gone[0]} (VACUUM)"))


def _check_merge_keys(path: str, df: DataFrame, keys: tuple[str, ...]) -> None:
    """Merge keys must exist, and be non-NULL and unique in the incoming rows."""
    from pyspark.sql import functions as F

    if missing := [k for k in keys if k not in df.columns]:
        raise DeltaTableError(path, f"merge_on column(s) {missing} are not in the data "
                              f"(columns: {', '.join(df.columns)})")
    null = F.lit(False)
    for key in keys:
        null = null | F.col(f"`{key}`").isNull()
    bad = (df.groupBy(*[F.col(f"`{k}`") for k in keys]).count()
           .where((F.col("count") > 1) | null).limit(3).collect())
    if bad:
        shown = "; ".join(", ".join(f"{k}={row[k]!r}" for k in keys) for row in bad)
        raise DeltaTableError(path, f"merge_on keys must be unique and not NULL in the rows "
                              f"written; these are not: {shown}. Deduplicate them first.")


# Spark marks columns read as CHAR(n)/VARCHAR(n) (JDBC) with their length, and delta-spark
# makes that length a constraint of the table (0 where a driver reports none, as SQLite's).
_CHAR_VARCHAR = "__CHAR_VARCHAR_TYPE_STRING"


def _without_char_lengths(df: DataFrame) -> DataFrame:
    """``df`` with CHAR/VARCHAR columns as plain strings: a source's declared lengths are
    not constraints of the target."""
    from pyspark.sql import functions as fn

    if not any(_CHAR_VARCHAR in f.metadata for f in df.schema.fields):
        return df
    return df.select(*[
        fn.col(f"`{f.name}`").alias(f.name, metadata={
            k: v for k, v in f.metadata.items() if k != _CHAR_VARCHAR})
        if _CHAR_VARCHAR in f.metadata else fn.col(f"`{f.name}`")
        for f in df.schema.fields])


def _partitioning(path: str, current: Snapshot | None, asked: tuple[str, ...]) -> tuple[str, ...]:
    if current is None:
        return asked
    if not asked or asked == current.partition_columns:
        return current.partition_columns
    raise SchemaMismatchError(
        path, [f"partition_by {list(asked)} differs from the table's "
               f"{list(current.partition_columns)}"],
        "Leave partition_by out, or write to a new table.")


def _conform(path: str, df: DataFrame, current: Snapshot | None, partitions: Sequence[str],
             *, merge_schema: bool, type_widening: bool = False,
             passthrough: Sequence[str] = ()) -> tuple[DataFrame, StructType]:
    """Bring ``df`` to the table's layout by name: columns in the table's order, missing
    nullable columns and struct fields NULL, narrower types cast up; with
    ``merge_schema``, new columns and struct fields added (as Delta's ``mergeSchema``),
    and where ``type_widening``, wider types widen the table's.

    Columns named in ``passthrough`` (how to write a row, not data) follow the others
    unchanged, and are not in the returned schema.

    Returns the DataFrame to write and the schema the table will have after the write.
    """
    from pyspark.sql.types import StructField, StructType

    incoming = {f.name: f for f in df.schema.fields if f.name not in passthrough}
    problems = [f"partition column '{c}' is not in the data" for c in partitions
                if c not in incoming]
    if current is None:
        if problems:
            raise SchemaMismatchError(path, problems, "Add the column or fix partition_by.")
        return df, StructType([StructField(f.name, f.dataType, True) for f in df.schema.fields])

    table_fields = spark_schema(current.schema_json).fields
    if sorted((f.name, f.dataType.json()) for f in incoming.values()) == sorted(
            (f.name, f.dataType.json()) for f in table_fields) and not problems:
        # the table's columns, in its order or another: written as they are (Delta's
        # files are read by name), with no projection for Spark to analyse
        return df, StructType(table_fields)
    merger = _Merger(type_widening)
    conversion = Conversion()
    columns, fields = [], []
    for field in table_fields:
        given = incoming.get(field.name)
        wanted = field.dataType if given is None else merger.merged(
            field.dataType, given.dataType, field.name)
        if wanted is None:
            continue
        columns.append(f"CAST(NULL AS {sql_type(wanted)})" if given is None else
                       conversion.convert(quoted(field.name), given.dataType, wanted,
                                          field.name))
        fields.append(StructField(field.name, wanted, field.nullable, field.metadata))
    new = [f for f in incoming.values() if f.name not in {t.name for t in table_fields}]
    added = [f"'{f.name}'" for f in new] + [f"'{name}'" for name in merger.added]
    if added and not merge_schema:
        problems.append("new column(s) or field(s) " + ", ".join(added))
    problems += merger.problems
    if problems:
        raise SchemaMismatchError(
            path, problems, "Cast the data to the table's types; pass merge_schema=True to "
            "add new columns and fields.")
    assert not conversion.misfits  # merged types only add fields and widen
    for field in new:
        columns.append(quoted(field.name))
        fields.append(StructField(field.name, field.dataType, True))
    return (df.selectExpr(*[f"{sql} AS {quoted(f.name)}" for sql, f in zip(
        columns, fields, strict=True)], *map(quoted, passthrough)), StructType(fields))


class _Merger:
    """The type a table's column has once data of another type is written to it (Delta's
    schema merging), collecting the fields it adds and what it cannot merge."""

    def __init__(self, type_widening: bool):
        self.type_widening = type_widening
        self.added: list[str] = []
        self.problems: list[str] = []

    def merged(self, table: DataType, data: DataType, name: str) -> DataType | None:
        from pyspark.sql.types import ArrayType, MapType, StructField, StructType

        if same(table, data) or widens(data, table):
            return table
        if isinstance(table, StructType) and isinstance(data, StructType):
            given = {f.name: f for f in data.fields}
            fields = []
            for f in table.fields:
                inner = f.dataType if f.name not in given else self.merged(
                    f.dataType, given[f.name].dataType, f"{name}.{f.name}")
                if inner is None:
                    return None
                fields.append(StructField(f.name, inner, f.nullable, f.metadata))
            for f in data.fields:
                if f.name not in table.fieldNames():
                    self.added.append(f"{name}.{f.name}")
                    fields.append(StructField(f.name, f.dataType, True))
            return StructType(fields)
        if isinstance(table, ArrayType) and isinstance(data, ArrayType):
            element = self.merged(table.elementType, data.elementType, f"{name}[]")
            return None if element is None else ArrayType(element, table.containsNull)
        if isinstance(table, MapType) and isinstance(data, MapType) and \
                same(table.keyType, data.keyType):
            value = self.merged(table.valueType, data.valueType, f"{name}{{}}")
            return None if value is None else MapType(table.keyType, value,
                                                      table.valueContainsNull)
        if self.type_widening and widens(table, data):
            return data
        hint = (" (a wider type: Delta widens a column only where the table has "
                "delta.enableTypeWidening=true, on the native path)"
                if widens(table, data) else "")
        self.problems.append(f"column '{name}' is {data.simpleString()} in the data but "
                             f"{table.simpleString()} in the table{hint}")
        return None

