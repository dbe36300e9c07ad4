"""Avro files without Spark's Avro module: fastavro inside a Spark Python data source.

Spark's Avro reader is an external jar (``spark-avro``), absent from pyspark. When it is
missing, ``read_files(format="avro")`` comes here: the driver reads the files' headers to
build the schema (the union of their top-level fields, all nullable), and each Spark task
decodes one file with fastavro.

Type mapping follows spark-avro: records -> structs, enums -> strings, fixed and bytes ->
binary, arrays, maps (string keys), ``[null, T]`` unions -> nullable T, logical types
date, timestamp-millis/micros (-> timestamp), local-timestamp-* (-> timestamp_ntz),
decimal and uuid (-> string). time-millis/micros are read as strings (``HH:MM:SS.ffffff``).
Unions of several non-null types are refused. Hive-style partition directories become
string columns.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

__all__ = ["read", "spark_schema"]

FORMAT = "deltamark_avro"

_PRIMITIVES: Mapping[str, DataType] = {
    "boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
    "double": DoubleType(), "bytes": BinaryType(), "string": StringType(),
    "null": StringType(),
}
_LOGICAL: Mapping[str, DataType] = {
    "date": DateType(), "timestamp-millis": TimestampType(),
    "timestamp-micros": TimestampType(), "local-timestamp-millis": TimestampNTZType(),
    "local-timestamp-micros": TimestampNTZType(), "uuid": StringType(),
    "time-millis": StringType(), "time-micros": StringType(),
}


def read(spark: SparkSession, paths: Sequence[str], *, base_path: str | None,
         schema: StructType | str | None, lineage_column: str | None) -> DataFrame:
    """The Avro files ``paths`` as one DataFrame (one Spark task per file)."""
    partitions = _partition_columns(paths, base_path)
    if schema is None:
        fields = _union_fields(_header_schema(p) for p in paths)
        fields += [StructField(name, StringType(), True) for name in partitions]
        if lineage_column:
            fields.append(StructField(lineage_column, StringType(), True))
        schema = StructType(fields)
    spark.dataSource.register(_AvroFiles)
    return (spark.read.format(FORMAT).schema(schema)
            .option("paths", json.dumps(list(paths)))
            .option("base_path", base_path or "")
            .option("partition_columns", json.dumps(partitions))
            .option("lineage_column", lineage_column or "")
            .load())


def spark_schema(avro_schema: Mapping[str, Any] | str | list[Any]) -> StructType:
    """The Spark schema of a top-level Avro record schema (any other schema raises ValueError)."""
    struct = _spark_type(avro_schema, {})
    if not isinstance(struct, StructType):
        raise ValueError("the top-level Avro schema is not a record")
    return struct


def _header_schema(path: str) -> StructType:
    import fastavro

    with open(_local(path), "rb") as stream:
        return spark_schema(fastavro.reader(stream).writer_schema)


def _union_fields(schemas: Iterator[StructType]) -> list[StructField]:
    fields: dict[str, StructField] = {}
    for schema in schemas:
        for f in schema.fields:
            fields.setdefault(f.name, StructField(f.name, f.dataType, True))
    return list(fields.values())


def _spark_type(avro: Any, named: dict[str, DataType]) -> DataType:
    if isinstance(avro, str):
        if avro in _PRIMITIVES:
            return _PRIMITIVES[avro]
        if avro in named:
            return named[avro]
        raise ValueError(f"unknown Avro type name '{avro}'")
    if isinstance(avro, list):
        members = [m for m in avro if m != "null"]
        if len(members) != 1:
            raise ValueError(f"Avro union {avro} of several types is not supported without "
                             "spark-avro")
        return _spark_type(members[0], named)
    logical = avro.get("logicalType")
    if logical == "decimal":
        return DecimalType(int(avro["precision"]), int(avro.get("scale", 0)))
    if logical in _LOGICAL:
        return _LOGICAL[logical]
    kind = avro["type"]
    if kind == "record":
        struct = StructType([StructField(f["name"], _spark_type(f["type"], named), True)
                             for f in avro["fields"]])
        named[avro["name"]] = struct
        return struct
    if kind == "enum":
        named[avro["name"]] = StringType()
        return StringType()
    if kind == "fixed":
        named[avro["name"]] = BinaryType()
        return BinaryType()
    if kind == "array":
        return ArrayType(_spark_type(avro["items"], named), True)
    if kind == "map":
        return MapType(StringType(), _spark_type(avro["values"], named), True)
    return _spark_type(kind, named)


def _partition_columns(paths: Sequence[str], base_path: str | None) -> list[str]:
    columns: dict[str, None] = {}
    for path in paths:
        columns.update(dict.fromkeys(_partition_values(path, base_path)))
    return list(columns)


def _partition_values(path: str, base_path: str | None) -> dict[str, str]:
    if not base_path:
        return {}
    relative = path[len(base_path):].strip("/").split("/")[:-1]
    return dict(part.split("=", 1) for part in relative if "=" in part)


def _local(path: str) -> str:
    return path.removeprefix("file://") if path.startswith("file://") else path


def _convert(value: Any, dtype: DataType) -> Any:
    if value is None:
        return None
    if isinstance(dtype, StructType):
        return tuple(_convert(value.get(f.name), f.dataType) for f in dtype.fields)
    if isinstance(dtype, ArrayType):
        return [_convert(v, dtype.elementType) for v in value]
    if isinstance(dtype, MapType):
        return {k: _convert(v, dtype.valueType) for k, v in value.items()}
    if isinstance(dtype, StringType) and not isinstance(value, str):
        return value.isoformat() if hasattr(value, "isoformat") else str(value)
    return value


class _AvroFiles(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def reader(self, schema: StructType) -> DataSourceReader:
        return _AvroReader(self.options, schema)


class _AvroReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str], schema: StructType):
        self.paths = json.loads(options["paths"])
        self.base_path = options.get("base_path") or None
        self.partition_columns = set(json.loads(options.get("partition_columns", "[]")))
        self.lineage_column = options.get("lineage_column") or None
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(path) for path in self.paths]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        import fastavro

        path = partition.value
        extra = {**_partition_values(path, self.base_path)}
        if self.lineage_column:
            extra[self.lineage_column] = path if "://" in path else f"file:{path}"
        fields = self.schema.fields
        with open(_local(path), "rb") as stream:
            for message in fastavro.reader(stream):
                # a file behind a record schema (as _header_schema requires) yields dicts
                record = cast(dict[str, Any], message)
                yield tuple(
                    extra.get(f.name) if f.name in extra or f.name in self.partition_columns
                    else _convert(record.get(f.name), f.dataType)
                    for f in fields)
