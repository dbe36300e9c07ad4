"""The schema of a run's new JSON files, inferred on the driver as Spark infers it.

Without a schema, Spark reads JSON twice: a job that infers the schema from every record,
then the read. Where a run's new files are few and small (``DRIVER_FILES`` files and
``DRIVER_BYTES`` in all), the driver reads them itself and infers the schema by Spark's
rules (``JsonInferSchema``: integers are bigint, or decimal beyond it; other numbers
double; objects structs with their fields sorted by name; conflicting types a string), and
Spark reads them once, with that schema. Whatever the driver cannot be sure Spark reads
alike (reader options, compressed files, a byte-order mark, a line Python's parser
refuses, duplicate keys, a top-level value that is not an object, an empty object or
name) leaves the inference to Spark.

A context's first run over more than that (a backlog of a million files) infers from a
``sample`` of its files instead, spread over them, and reads them all in one pass
(``read_sampled``): each line parsed with that schema, and what does not fit it (a field
the sample never had, at any depth, or a value of another type) kept as the line's
``UNFIT_FIELDS``, which the read puts in the rescued-data column. Nothing is left out,
and no pass reads everything twice.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from framework.sources.files.listed_reads import ListedFile, read_each, read_listed
from framework.spark.session import quoted
from framework.spark.types import literal, sql_type
from framework.storage import filesystem

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

__all__ = ["DRIVER_BYTES", "DRIVER_FILES", "SAMPLE_FILES", "UNFIT_FIELDS", "infer",
           "read_sampled", "sample"]

#: at most this much new JSON is inferred on the driver (and sampled, beyond it)
DRIVER_BYTES = 16 << 20
DRIVER_FILES = 10_000
SAMPLE_FILES = 1_000
#: the column of a sampled read holding what of each line does not fit (path, value text)
UNFIT_FIELDS = "_deltamark_unfit_fields"
_NO_FIELDS = "CAST(array() AS ARRAY<STRUCT<path: STRING, value: STRING>>)"
#: reader options Spark infers alike with (deltamark's malformed-record policies)
NEUTRAL_OPTIONS = frozenset({"mode", "columnnameofcorruptrecord"})
COMPRESSED = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".zstd", ".xz", ".br")
BYTE_ORDER_MARKS = (b"\xef\xbb\xbf", b"\xfe\xff", b"\xff\xfe")
#: Spark's line separators, as Hadoop's line reader splits
LINES = re.compile(r"\r\n|\r|\n")
JSON_WHITESPACE = " \t\r\n"
LONG_RANGE = (-(1 << 63), 1 << 63)
MAX_PRECISION = 38


class _UnsureError(Exception):
    """Spark might infer otherwise: it infers."""


def infer(files: Sequence[ListedFile], options: Mapping[str, str]) -> StructType | None:
    """The schema Spark infers for the JSON lines in ``files`` read with ``options``, or
    None where the driver leaves it to Spark (see the module's docstring)."""
    if not _plain(files, options) or not _within_bounds(files):
        return None
    from pyspark.sql.types import NullType, StructType

    try:
        found = read_each(_file_type, files)
        nothing: DataType = NullType()
        root = _canonical(functools.reduce(_compatible, found, nothing))
    except _UnsureError:
        return None
    return root if isinstance(root, StructType) else StructType([])


def sample(files: Sequence[ListedFile], options: Mapping[str, str]
           ) -> list[ListedFile] | None:
    """The files to infer the schema of a backlog beyond the driver's bounds from: up to
    ``SAMPLE_FILES`` of those holding something, spread over ``files``, ``DRIVER_BYTES`` in
    all. None where ``files`` are within the bounds, or not JSON lines read plainly."""
    if not _plain(files, options) or _within_bounds(files):
        return None
    holding = [file for file in files if file.size]
    picked: list[ListedFile] = []
    size = 0
    for file in holding[::max(1, len(holding) // SAMPLE_FILES)][:SAMPLE_FILES]:
        if size + file.size > DRIVER_BYTES and picked:
            break
        picked.append(file)
        size += file.size
    return picked


def read_sampled(spark: SparkSession, files: Sequence[ListedFile], schema: StructType, *,
                 corrupt_column: str | None, base_path: str | None) -> DataFrame:
    """``files``' JSON lines parsed with ``schema``, each with its ``UNFIT_FIELDS``: the
    fields it holds that ``schema`` lacks, and those whose values do not parse as its
    types (NULL in their columns). A line that is not a JSON object is malformed: its text
    in ``corrupt_column``, or (None) the read fails naming its file."""
    lines = read_listed(spark, files, format="text", options={}, schema=None,
                        base_path=base_path)
    partitions = [quoted(c) for c in lines.columns if c != "value"]
    malformed = "json_object_keys(value) IS NULL"
    # a value that does not parse is NULL, and so is the rest of its record unless Spark
    # keeps partial results (spark.sql.json.enablePartialResults, on by default): either
    # way _unfit finds the values that are NULL in the row but not in the line
    parsed = f"from_json(value, {literal(sql_type(schema))})"
    if corrupt_column is None:
        parsed = (f"CASE WHEN {malformed} THEN raise_error(concat('malformed JSON record in ', "
                  f"_metadata.file_path, ': ', left(value, 200))) ELSE {parsed} END")
    return lines.where("value RLIKE '[^ \\t\\r\\n]'").selectExpr(  # not blank
        f"{parsed} AS __parsed", "value", *partitions,
    ).selectExpr(
        *[f"__parsed.{quoted(f.name)}" for f in schema.fields],
        *([f"CASE WHEN {malformed} THEN value END AS {quoted(corrupt_column)}"]
          if corrupt_column else []),
        *partitions,
        f"{_unfit('value', '__parsed', schema, literal(''), 0)} AS {UNFIT_FIELDS}")


def _unfit(raw: str, parsed: str, schema: StructType, prefix: str, depth: int) -> str:
    """SQL: the fields of the JSON object text ``raw`` that ``schema`` lacks or that did not
    parse into ``parsed`` (SQL of the struct parsed from it), at any depth, as an array of
    (path, value text), the paths beginning with the SQL ``prefix``."""
    fields, entry = f"m{depth}", f"e{depth}"
    known = ", ".join(literal(name) for name in schema.fieldNames())
    unknown = (f"filter(map_entries({fields}), {entry} -> NOT array_contains(array({known}), "
               f"{entry}.key))")
    parts = [f"transform({unknown}, {entry} -> named_struct('path', concat({prefix}, "
             f"{entry}.key), 'value', {entry}.value))"]
    for f in schema.fields:
        parts.append(_unparsed(f"{fields}[{literal(f.name)}]", f"{parsed}.{quoted(f.name)}",
                               f.dataType, f"concat({prefix}, {literal(f.name)})", depth + 1))
    body = "concat(" + ", ".join(f"coalesce({part}, {_NO_FIELDS})" for part in parts) + ")"
    return (f"transform(array(from_json({raw}, 'map<string,string>')), {fields} -> {body})"
            "[0]")


def _unparsed(raw: str, parsed: str, data_type: DataType, path: str, depth: int) -> str:
    """SQL: the value text ``raw`` (of a field named ``path``) where it did not parse into
    ``parsed`` at all, else the unfit fields inside it."""
    from pyspark.sql import types as T

    whole = f"array(named_struct('path', {path}, 'value', {raw}))"
    inner = _NO_FIELDS
    if isinstance(data_type, T.StructType):
        inner = _unfit(raw, parsed, data_type, f"concat({path}, '.')", depth)
    elif isinstance(data_type, T.ArrayType):
        element, index = f"x{depth}", f"i{depth}"
        each = _unparsed(element, f"try_element_at({parsed}, {index} + 1)",
                         data_type.elementType, f"concat({path}, '[', {index}, ']')", depth + 1)
        inner = (f"flatten(transform(from_json({raw}, 'array<string>'), "
                 f"({element}, {index}) -> {each}))")
    elif isinstance(data_type, T.MapType):
        entry = f"v{depth}"
        each = _unparsed(f"{entry}.value", f"try_element_at({parsed}, {entry}.key)",
                         data_type.valueType, f"concat({path}, '[', {entry}.key, ']')",
                         depth + 1)
        inner = (f"flatten(transform(map_entries(from_json({raw}, 'map<string,string>')), "
                 f"{entry} -> {each}))")
    return (f"CASE WHEN {raw} IS NULL THEN {_NO_FIELDS} WHEN {parsed} IS NULL THEN {whole} "
            f"ELSE coalesce({inner}, {_NO_FIELDS}) END")


def _within_bounds(files: Sequence[ListedFile]) -> bool:
    """Whether the driver reads ``files`` whole to infer their schema."""
    return len(files) <= DRIVER_FILES and sum(file.size for file in files) <= DRIVER_BYTES


def _plain(files: Sequence[ListedFile], options: Mapping[str, str]) -> bool:
    """Whether ``files`` are JSON lines read with no option the driver does not know."""
    return not ({name.lower() for name in options} - NEUTRAL_OPTIONS
                or any(file.path.lower().endswith(COMPRESSED) for file in files))


def _file_type(file: ListedFile) -> DataType:
    """The merged type of ``file``'s records."""
    from pyspark.sql.types import NullType

    try:
        fs, path, _ = filesystem(file.path)
        with fs.open_input_stream(path) as stream:
            data = stream.read()
    except (OSError, ValueError):  # a store pyarrow does not reach from here: Spark does
        raise _UnsureError from None
    if data.startswith(BYTE_ORDER_MARKS):
        raise _UnsureError
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _UnsureError from None
    merged: DataType = NullType()
    for line in LINES.split(text):
        if line.strip(JSON_WHITESPACE):
            merged = _compatible(merged, _record_type(line))
    return merged


def _record_type(line: str) -> DataType:
    try:
        record = json.loads(line, object_pairs_hook=_object, parse_float=_float)
    except (ValueError, RecursionError):
        raise _UnsureError from None
    if not isinstance(record, _Struct):
        raise _UnsureError
    return record.data_type


class _Struct:
    """An object's inferred type, built as the parser closes it."""

    def __init__(self, data_type: DataType) -> None:
        self.data_type = data_type


def _object(pairs: list[tuple[str, Any]]) -> _Struct:
    from pyspark.sql.types import StructField, StructType

    names = [name for name, _ in pairs]
    if len(set(names)) != len(names) or "" in names or not names:
        raise _UnsureError  # duplicate keys, an empty name or object: Spark's own rules
    fields = sorted((StructField(name, _value_type(value), True) for name, value in pairs),
                    key=lambda f: f.name.encode("utf-16-be"))  # as Java compares strings
    return _Struct(StructType(fields))


def _float(text: str) -> float:
    if len(text) > 100:
        raise _UnsureError  # Jackson limits a number's length
    return float(text)


def _value_type(value: Any) -> DataType:
    from pyspark.sql import types as T

    if isinstance(value, _Struct):
        return value.data_type
    if value is None:
        return T.NullType()
    if isinstance(value, bool):
        return T.BooleanType()
    if isinstance(value, int):
        if LONG_RANGE[0] <= value < LONG_RANGE[1]:
            return T.LongType()
        digits = len(str(abs(value)))
        if digits > MAX_PRECISION:
            raise _UnsureError
        return T.DecimalType(digits, 0)
    if isinstance(value, float):
        return T.DoubleType()
    if isinstance(value, str):
        return T.StringType()
    if isinstance(value, list):
        nothing: DataType = T.NullType()
        return T.ArrayType(functools.reduce(_compatible, map(_value_type, value), nothing),
                           True)
    raise _UnsureError


def _compatible(one: DataType, other: DataType) -> DataType:
    """The type of a field holding both, as Spark's ``JsonInferSchema.compatibleType``."""
    from pyspark.sql import types as T

    if one == other or isinstance(other, T.NullType):
        return one
    if isinstance(one, T.NullType):
        return other
    numbers = (T.LongType, T.DoubleType, T.DecimalType)
    if isinstance(one, numbers) and isinstance(other, numbers):
        if isinstance(one, T.DoubleType) or isinstance(other, T.DoubleType):
            return T.DoubleType()
        first, second = (T.DecimalType(20, 0) if isinstance(t, T.LongType) else t
                         for t in (one, other))  # a bigint's digits
        scale = max(first.scale, second.scale)
        whole = max(first.precision - first.scale, second.precision - second.scale)
        return (T.DoubleType() if whole + scale > MAX_PRECISION
                else T.DecimalType(whole + scale, scale))
    if isinstance(one, T.StructType) and isinstance(other, T.StructType):
        theirs = {f.name: f.dataType for f in other.fields}
        mine = {f.name: f.dataType for f in one.fields}
        names = sorted(mine.keys() | theirs.keys(), key=lambda n: n.encode("utf-16-be"))
        return T.StructType([T.StructField(name, _compatible(
            mine.get(name, T.NullType()), theirs.get(name, T.NullType())), True)
            for name in names])
    if isinstance(one, T.ArrayType) and isinstance(other, T.ArrayType):
        return T.ArrayType(_compatible(one.elementType, other.elementType), True)
    return T.StringType()


def _canonical(data_type: DataType) -> DataType:
    """A field never seen but null is a string (``canonicalizeType``)."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.NullType):
        return T.StringType()
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(_canonical(data_type.elementType), True)
    if isinstance(data_type, T.StructType):
        return T.StructType([T.StructField(f.name, _canonical(f.dataType), True)
                             for f in data_type.fields])
    return data_type
