"""The schema of a run's new JSON files, inferred on the driver as Spark infers it.

Without a schema, Spark reads JSON twice: a job that infers the schema from every record,
then the read. Where a run's new files are few and small (``DRIVER_BYTES`` in all), the
driver reads them itself and infers the schema by Spark's rules (``JsonInferSchema``:
integers are bigint, or decimal beyond it; other numbers double; objects structs with
their fields sorted by name; conflicting types a string), and Spark reads them once, with
that schema. Whatever the driver cannot be sure Spark reads alike (reader options,
compressed files, a byte-order mark, a line Python's parser refuses, duplicate keys,
a top-level value that is not an object, an empty object or name) leaves the inference
to Spark.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from framework.storage import filesystem

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

    from framework.sources.listed_reads import ListedFile

__all__ = ["DRIVER_BYTES", "infer"]

#: at most this much new JSON is inferred on the driver
DRIVER_BYTES = 16 << 20
#: files read at once
READERS = 16
#: reader options Spark infers alike with (deltamark's malformed-record policies)
NEUTRAL_OPTIONS = frozenset({"mode", "columnnameofcorruptrecord"})
COMPRESSED = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".zstd", ".xz", ".br")
BYTE_ORDER_MARKS = (b"\xef\xbb\xbf", b"\xfe\xff", b"\xff\xfe")
#: Spark's line separators, as Hadoop's line reader splits
LINES = re.compile(r"\r\n|\r|\n")
LONG_RANGE = (-(1 << 63), 1 << 63)
MAX_PRECISION = 38


class _UnsureError(Exception):
    """Spark might infer otherwise: it infers."""


def infer(files: Sequence[ListedFile], options: Mapping[str, str]) -> StructType | None:
    """The schema Spark infers for the JSON lines in ``files`` read with ``options``, or
    None where the driver leaves it to Spark (see the module's docstring)."""
    if ({name.lower() for name in options} - NEUTRAL_OPTIONS
            or sum(file.size for file in files) > DRIVER_BYTES
            or any(file.path.lower().endswith(COMPRESSED) for file in files)):
        return None
    from pyspark.sql.types import NullType, StructType

    try:
        with ThreadPoolExecutor(min(READERS, max(len(files), 1))) as pool:
            found = list(pool.map(_file_type, files))
        nothing: DataType = NullType()
        root = _canonical(functools.reduce(_compatible, found, nothing))
    except _UnsureError:
        return None
    return root if isinstance(root, StructType) else StructType([])


def _file_type(file: ListedFile) -> DataType:
    """The merged type of ``file``'s records."""
    from pyspark.sql.types import NullType

    fs, path, _ = filesystem(file.path)
    with fs.open_input_stream(path) as stream:
        data = stream.read()
    if data.startswith(BYTE_ORDER_MARKS):
        raise _UnsureError
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _UnsureError from None
    merged: DataType = NullType()
    for line in LINES.split(text):
        if line.strip():
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
