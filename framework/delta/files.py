"""A Delta table's data files read by Spark's tasks, with the meaning the log gives them.

Spark's Parquet reader moves the rows, in parallel; the log says what they mean:

- partition values come from the log: a table with column mapping keeps its files under
  random prefixes, not ``col=value`` directories;
- with column mapping, the files name columns (nested ones too) by their physical names:
  they are read by those and renamed;
- the rows a deletion vector deletes are left out (``_metadata.row_index``);
- change-feed entries carry their commit's version, time and change type.

A plain table (Hive-style partitions, no column mapping, no deletion vector in the files
read) is read as a Parquet data set, partition values parsed from its directories.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

import pyarrow as pa

from framework import storage
from framework.delta.log import PHYSICAL_NAME, Snapshot
from framework.errors import DeltaTableError, UnsupportedTableFeatureError
from framework.spark.session import named_column

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

__all__ = ["CHANGE_COLUMNS", "FileRead", "read_files", "read_schema", "spark_names",
           "spark_schema", "unreadable"]

#: the columns a change-feed read adds, after the table's
CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


@dataclass(frozen=True)
class FileRead:
    """One data file to read, and which of its rows come out.

    ``rows``: all of them, all ``but`` the row indexes in ``indexes`` (a deletion vector),
    or ``only`` those. ``change``: for a change-feed read, the change type (None: the
    file's own ``_change_type`` column, as in a ``cdc`` file), commit version and time.
    """

    path: str
    partition_values: Mapping[str, Any]
    rows: Literal["all", "but", "only"] = "all"
    indexes: pa.Array | None = None
    change: tuple[str | None, int, dt.datetime | None] | None = None


def spark_schema(schema_json: str) -> StructType:
    """A Delta schema (its JSON) as Spark's ``StructType``."""
    from pyspark.sql.types import StructType

    return StructType.fromJson(json.loads(schema_json))


#: reader features ``read_files`` honours, or refuses only where the schema uses them
_HONOURED = frozenset({"deletionVectors", "columnMapping", "typeWidening", "variantType"})


def unreadable(snap: Snapshot) -> list[str]:
    """What of ``snap``'s table ``read_files`` cannot honour: a feature it does not know,
    a column whose type was widened (its files hold the narrower type) or a variant column;
    a feature merely enabled is no obstacle."""
    found = [f for f in snap.unsupported_features()
             if f not in _HONOURED and not f.startswith("columnMapping")]
    for name, field_ in _fields(json.loads(snap.schema_json)["fields"]):
        if (field_.get("metadata") or {}).get("delta.typeChanges"):
            found.append(f"typeWidening (column {name})")
        if "variant" in json.dumps(field_["type"]):
            found.append(f"variantType (column {name})")
    return found


def _fields(fields: Sequence[Mapping[str, Any]], parent: str = ""
            ) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every field of a schema (its JSON), nested ones under their dotted names."""
    for field_ in fields:
        name = f"{parent}{field_['name']}"
        yield name, field_
        kind = field_["type"]
        while isinstance(kind, dict) and kind.get("type") in ("array", "map"):
            kind = kind.get("elementType", kind.get("valueType"))
        if isinstance(kind, dict) and kind.get("type") == "struct":
            yield from _fields(kind["fields"], f"{name}.")


def read_schema(snap: Snapshot, *, changes: bool) -> StructType:
    """The columns a read of ``snap``'s table gives: its schema, and ``CHANGE_COLUMNS``
    when ``changes``."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    schema = spark_schema(snap.schema_json)
    if not changes:
        return schema
    return StructType([*schema.fields, StructField("_change_type", StringType()),
                       StructField("_commit_version", LongType()),
                       StructField("_commit_timestamp", TimestampType())])


def read_files(spark: SparkSession, path: str, snap: Snapshot, files: Sequence[FileRead],
               *, changes: bool = False) -> DataFrame:
    """The rows of ``files`` with ``snap``'s schema (and ``CHANGE_COLUMNS`` when
    ``changes``), read by Spark's tasks.

    Raises:
        UnsupportedTableFeatureError: a reader feature Parquet plus the log cannot honour.
    """
    if unknown := unreadable(snap):
        raise UnsupportedTableFeatureError(path, unknown)
    schema = read_schema(snap, changes=changes)
    if not files:
        return spark.createDataFrame([], schema)
    if not changes and all(f.rows == "all" for f in files) and _plain(snap, files):
        reader = spark.read.schema(schema)
        if snap.partition_columns:
            reader = reader.option("basePath", snap.path)
        return (reader.parquet(*dict.fromkeys(f.path for f in files))
                .select(*[named_column(c) for c in schema.fieldNames()]))
    return _read_with_log(spark, path, snap, files, schema, changes=changes)


def _plain(snap: Snapshot, files: Sequence[FileRead]) -> bool:
    """Whether Spark's Parquet data source alone reads ``files`` right: no column mapping,
    partition values in ``col=value`` directories."""
    if snap.column_mapping != "none":
        return False
    if not snap.partition_columns:
        return True
    expected = [f"{c}=" for c in snap.partition_columns]
    for file in files:
        parts = file.path.removeprefix(snap.path.rstrip("/") + "/").split("/")[: len(expected)]
        if len(parts) < len(expected) or not all(
                p.startswith(e) for p, e in zip(parts, expected, strict=True)):
            return False
    return True


def _read_with_log(spark: SparkSession, path: str, snap: Snapshot, files: Sequence[FileRead],
                   schema: StructType, *, changes: bool) -> DataFrame:
    """One Parquet scan of the files' physical columns, joined with what the log says of
    each file (a small broadcast table: partition values, change columns, row selection)
    and with the row indexes that deletion vectors select."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    table = spark_schema(snap.schema_json)
    partitions = set(snap.partition_columns)
    data = [f for f in table.fields if f.name not in partitions]
    read_schema = StructType([StructField(_physical(f), _nullable(f.dataType, physical=True))
                              for f in data])
    if changes:  # cdc files carry the change type; data files have no such column
        read_schema.add("_change_type", StringType())
    selecting = any(f.rows != "all" for f in files)
    paths = list(dict.fromkeys(f.path for f in files))
    scan = spark.read.schema(read_schema).parquet(*paths)
    named = spark_names(path, scan, paths)
    scan = scan.select(
        *[named_column(_physical(f)).cast(_nullable(f.dataType, physical=False))
          .alias(f.name) for f in data],
        *([F.col("_change_type").alias("_file_change_type")] if changes else []),
        F.col("_metadata.file_path").alias("_file"),
        *([F.col("_metadata.row_index").alias("_row")] if selecting else []))

    entries = StructType([StructField("_file", StringType()), StructField("_entry", LongType()),
                          StructField("_rows", StringType()),
                          *[StructField(f"_part_{i}", StringType())
                            for i, _ in enumerate(snap.partition_columns)],
                          StructField("_entry_change_type", StringType()),
                          StructField("_entry_version", LongType()),
                          StructField("_entry_time", TimestampType())])
    described = spark.createDataFrame([
        (name, i, f.rows,
         *[_partition_text(f.partition_values.get(c)) for c in snap.partition_columns],
         *(f.change or (None, None, None)))
        for i, f in enumerate(files) for name in named[f.path]], entries)
    rows = scan.join(F.broadcast(described), "_file", "left")
    # A row of no listed file would be a naming mismatch: fail rather than drop it.
    rows = rows.where(F.when(F.col("_entry").isNull(), F.raise_error(F.concat(
        F.lit(f"Delta table {path}: Spark named a data file apart from its listing ("),
        F.col("_file"), F.lit("); nothing was read. Report this to deltamark."))))
        .otherwise(F.lit(True)))
    if selecting:
        rows = _selected(spark, rows, files)
    columns: list[Column] = []
    for field_ in schema.fields:
        if field_.name in partitions:
            part = f"_part_{snap.partition_columns.index(field_.name)}"
            columns.append(F.col(part).cast(field_.dataType).alias(field_.name))
        elif field_.name == "_change_type":
            columns.append(F.coalesce("_entry_change_type", "_file_change_type")
                           .alias("_change_type"))
        elif field_.name == "_commit_version":
            columns.append(F.col("_entry_version").alias("_commit_version"))
        elif field_.name == "_commit_timestamp":
            columns.append(F.col("_entry_time").alias("_commit_timestamp"))
        else:
            columns.append(named_column(field_.name))
    return rows.select(*columns)


def _selected(spark: SparkSession, rows: DataFrame, files: Sequence[FileRead]) -> DataFrame:
    """``rows`` less those a ``but`` entry leaves out, and of an ``only`` entry only those
    it names."""
    from pyspark.sql import functions as F

    from framework.spark.session import from_arrow

    listed = [(i, f.indexes) for i, f in enumerate(files)
              if f.rows != "all" and f.indexes is not None and len(f.indexes)]
    no_rows = pa.array([], pa.int64())
    vectors = pa.table({
        "_listed_entry": pa.chunked_array([pa.repeat(pa.scalar(i, pa.int64()), len(a))
                                           for i, a in listed] or [no_rows]),
        "_listed_row": pa.chunked_array([a for _, a in listed] or [no_rows])})
    joined = rows.join(from_arrow(spark, vectors).withColumn("_listed", F.lit(True)),
                       (F.col("_entry") == F.col("_listed_entry"))
                       & (F.col("_row") == F.col("_listed_row")), "left")
    listed_row = F.col("_listed").isNotNull()
    return joined.where((F.col("_rows") == "all") | ((F.col("_rows") == "but") & ~listed_row)
                        | ((F.col("_rows") == "only") & listed_row))


def _physical(field_: Any) -> str:
    return str((field_.metadata or {}).get(PHYSICAL_NAME, field_.name))


def _nullable(data_type: DataType, *, physical: bool) -> DataType:
    """``data_type`` with every nested field nullable (as Spark reads files), named as in
    the data files (``physical``) or as in the table."""
    from pyspark.sql.types import ArrayType, MapType, StructField, StructType

    if isinstance(data_type, StructType):
        return StructType([
            StructField(_physical(f) if physical else f.name,
                        _nullable(f.dataType, physical=physical), True)
            for f in data_type.fields])
    if isinstance(data_type, ArrayType):
        return ArrayType(_nullable(data_type.elementType, physical=physical), True)
    if isinstance(data_type, MapType):
        return MapType(_nullable(data_type.keyType, physical=physical),
                       _nullable(data_type.valueType, physical=physical), True)
    return data_type


def spark_names(path: str, df: DataFrame, files: Iterable[str]) -> dict[str, list[str]]:
    """How Spark may name each of ``files`` in ``df``, a read of them: Hadoop's
    percent-encoded URI, as ``inputFiles`` lists it and as ``_metadata.file_path`` gives it
    (``file:///x`` in one is ``file:/x`` in the other).

    Raises:
        DeltaTableError: Spark does not list one of them (its rows would be lost).
    """
    wanted = {_without_scheme(f): f for f in files}
    named = {wanted[key]: sorted({uri, re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*):///", r"\1:/", uri)})
             for uri in df.inputFiles() if (key := unquote(_without_scheme(uri))) in wanted}
    if missing := [f for f in wanted.values() if f not in named]:
        raise DeltaTableError(path, f"Spark does not list the data file {missing[0]} it "
                              "reads; nothing was read. Report this to deltamark.")
    return named


def _without_scheme(path: str) -> str:
    """A local path, or a URI without scheme and authority (``s3://b/k`` is ``/k``)."""
    if storage.is_local(path) and not path.startswith("file:"):
        return storage.absolute(path)
    return re.sub(r"^[A-Za-z][A-Za-z0-9+.-]*:(//[^/]*)?", "", path)


def _partition_text(value: Any) -> str | None:
    """A partition value in Delta's string form (the log's, or delta-rs's typed one)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
