"""Glue Studio's visual transforms: the ``gs_*`` modules its generated scripts import.

A Studio script says ``import gs_flatten`` and then calls ``node.gs_flatten()`` on a
DynamicFrame (or ``df.gs_now(...)`` on a Spark DataFrame): each module adds one method to
both. While ``deltamark run --script`` runs a script, these modules are importable and the
methods are there (``framework.glue.environment``). Each method takes keyword arguments,
as Studio writes them, and a frame with no fields (a run with nothing new) comes back as
it is. The meaning of each follows AWS's documentation of the Studio node
(docs.aws.amazon.com/glue/latest/dg/transforms-*.html).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from framework.errors import GlueUnsupportedError
from framework.spark.session import default_parallelism, json_schema, named_column, quoted

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["STUDIO_TRANSFORMS", "flatten", "spark_date_format"]


def flatten(df: DataFrame, *, maxLevels: int = 0, separator: str = ".") -> DataFrame:  # noqa: N803
    """Fields of structs as top-level columns named by their path (``a.b``), to
    ``maxLevels`` levels of nesting (0: all); arrays stay as they are."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    def columns(kind: StructType, path: list[str], level: int) -> list[Column]:
        found = []
        for field in kind.fields:
            inner = [*path, field.name]
            if isinstance(field.dataType, StructType) and field.dataType.fields and (
                    not maxLevels or level < int(maxLevels)):
                found += columns(field.dataType, inner, level + 1)
            else:
                found.append(F.col(".".join(map(quoted, inner))).alias(separator.join(inner)))
        return found

    return df.select(*columns(df.schema, [], 0))


def explode(df: DataFrame, *, colName: str, newCol: str | None = None,  # noqa: N803
            outer: bool = False) -> DataFrame:
    """A row per element of the array ``colName`` in ``newCol`` (the same name replaces
    it), or per entry of a map, in ``newCol_key`` and ``newCol_value``; a row whose array
    is empty or null is left out, unless ``outer``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType

    source = _column(df, colName, "gs_explode")
    target = newCol or _unquoted(colName)
    exploded = (F.explode_outer if outer else F.explode)(source)
    if isinstance(df.select(source).schema.fields[0].dataType, MapType):
        keys = [f"{target}_key", f"{target}_value"]
        return df.select(*[c for c in df.columns if c not in keys], exploded.alias(*keys))
    if target in df.columns:
        return df.select(*[exploded.alias(c) if c == target else named_column(c)
                           for c in df.columns])
    return df.select("*", exploded.alias(target))


def derived(df: DataFrame, *, colName: str, expr: str) -> DataFrame:  # noqa: N803
    """``colName`` (new, or replaced) computed by the Spark SQL expression ``expr``."""
    from pyspark.sql import functions as F

    return df.withColumn(colName, F.expr(expr))


def concat(df: DataFrame, *, colName: str, colList: Sequence[str],  # noqa: N803
           spacer: str = "", nullString: str = "") -> DataFrame:  # noqa: N803
    """``colName``: the ``colList`` columns as text, in order, ``spacer`` between; a null
    value counts as ``nullString`` (empty unless given)."""
    from pyspark.sql import functions as F

    parts = [F.coalesce(_column(df, c, "gs_concat").cast("string"), F.lit(nullString))
             for c in colList]
    return df.withColumn(colName, F.concat_ws(spacer, *parts))


def to_timestamp(df: DataFrame, *, colName: str, colType: str = "autodetect",  # noqa: N803
                 newColName: str | None = None) -> DataFrame:  # noqa: N803
    """``colName`` as a timestamp (in ``newColName``, or in place): numbers of ``seconds``,
    ``milliseconds`` or ``microseconds`` since 1970, ``iso`` text, or ``autodetect`` (a
    number by its size: up to 1e11 seconds, up to 1e14 milliseconds, else microseconds;
    text as ISO 8601)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import NumericType

    value = _column(df, colName, "gs_to_timestamp")
    number = value.cast("double")
    by_unit = {"seconds": F.timestamp_seconds(number),
               "milliseconds": F.timestamp_micros((number * 1000).cast("long")),
               "microseconds": F.timestamp_micros(number.cast("long")),
               "iso": F.to_timestamp(value.cast("string"))}
    kind = colType.lower()
    if kind == "autodetect":
        numeric = isinstance(df.select(value).schema.fields[0].dataType, NumericType)
        converted = F.when(F.abs(number) < 1e11, by_unit["seconds"]).when(
            F.abs(number) < 1e14, by_unit["milliseconds"]).otherwise(
            by_unit["microseconds"]) if numeric else by_unit["iso"]
    elif kind in by_unit:
        converted = by_unit[kind]
    else:
        raise GlueUnsupportedError(f"gs_to_timestamp(colType={colType!r})",
                                   "give seconds, milliseconds, microseconds, iso or autodetect")
    return df.withColumn(newColName or _unquoted(colName), converted)


def format_timestamp(df: DataFrame, *, colName: str, dateFormat: str,  # noqa: N803
                     newColName: str | None = None) -> DataFrame:  # noqa: N803
    """``colName`` as text in ``dateFormat`` (Spark's pattern, or Python's ``%Y-%m-%d``)."""
    from pyspark.sql import functions as F

    value = _column(df, colName, "gs_format_timestamp")
    return df.withColumn(newColName or _unquoted(colName),
                         F.date_format(value, spark_date_format(dateFormat)))


def now(df: DataFrame, *, colName: str = "timestamp", dateFormat: str | None = None  # noqa: N803
        ) -> DataFrame:
    """``colName``: the time the rows are computed (as text in ``dateFormat`` if given)."""
    from pyspark.sql import functions as F

    value = F.current_timestamp()
    return df.withColumn(colName, F.date_format(value, spark_date_format(dateFormat))
                         if dateFormat else value)


def uuid(df: DataFrame, *, colName: str = "uuid") -> DataFrame:  # noqa: N803
    """``colName``: a random UUID per row (36 characters)."""
    from pyspark.sql import functions as F

    return df.withColumn(colName, F.expr("uuid()"))


def null_rows(df: DataFrame, *, extended: bool = False) -> DataFrame:
    """Without the rows whose every column is null (``extended``: or an empty string,
    array or map)."""
    from functools import reduce

    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StringType

    def empty(field: Any) -> Column:
        column = named_column(field.name)
        if extended and isinstance(field.dataType, StringType):
            return column.isNull() | (column == "")
        if extended and isinstance(field.dataType, ArrayType | MapType):
            return column.isNull() | (F.size(column) == 0)
        return column.isNull()

    every = reduce(lambda a, b: a & b, (empty(f) for f in df.schema.fields))
    return df.where(~every)


def split(df: DataFrame, *, colName: str, pattern: str, newColName: str | None = None  # noqa: N803
          ) -> DataFrame:
    """``colName`` split by the regular expression ``pattern`` into an array."""
    from pyspark.sql import functions as F

    value = _column(df, colName, "gs_split")
    return df.withColumn(newColName or _unquoted(colName), F.split(value, pattern))


def array_to_cols(df: DataFrame, *, colName: str, colList: str,  # noqa: N803
                  indexes: str | None = None) -> DataFrame:
    """The elements of the array ``colName`` as columns named by ``colList`` (``"a,b"``):
    the first ones, or those at ``indexes`` (``"0,2"``)."""
    value = _column(df, colName, "gs_array_to_cols")
    names = [n.strip() for n in colList.split(",")]
    positions = [int(i) for i in indexes.split(",")] if indexes else list(range(len(names)))
    if len(positions) != len(names):
        raise GlueUnsupportedError(f"gs_array_to_cols(colList={colList!r}, indexes="
                                   f"{indexes!r})", "give as many indexes as names")
    return df.select("*", *(value.getItem(i).alias(n) for n, i in zip(names, positions,
                                                                      strict=True) if n))


def regex_extract(df: DataFrame, *, colName: str, regex: str, newCols: str  # noqa: N803
                  ) -> DataFrame:
    """The groups of ``regex`` in ``colName`` as the columns ``newCols`` (``"a,,b"``: an
    empty name skips its group; one name and no group: the whole match); a value that does
    not match gives empty strings, a null gives nulls."""
    from pyspark.sql import functions as F

    value = _column(df, colName, "gs_regex_extract")
    names = [n.strip() for n in newCols.split(",")]
    groups = re.compile(regex).groups
    first = 0 if groups == 0 else 1
    return df.select("*", *(F.regexp_extract(value, regex, first + i).alias(n)
                            for i, n in enumerate(names) if n))


def repartition(df: DataFrame, *, numPartitionsStr: str = "") -> DataFrame:  # noqa: N803
    """Rows spread evenly over ``numPartitionsStr`` partitions (Studio's Autobalance)."""
    return df.repartition(int(numPartitionsStr)) if numPartitionsStr else df.repartition(
        default_parallelism(df.sparkSession))


def parse_json(df: DataFrame, *, colName: str, jsonSchema: str | None = None,  # noqa: N803
               newColName: str | None = None, samplingRatio: float = 1.0  # noqa: N803
               ) -> DataFrame:
    """The JSON text in ``colName`` as a struct (or array), its schema read from the values
    (a share ``samplingRatio`` of them) unless ``jsonSchema`` (Spark DDL) gives it."""
    from pyspark.sql import functions as F

    value = _column(df, colName, "gs_parse_json")
    schema: Any = jsonSchema
    if not schema:  # each value inside an object, so that arrays and numbers read too
        texts = df.where(value.isNotNull()).select(
            F.concat(F.lit('{"value": '), value, F.lit("}")).alias("json"))
        read = json_schema(texts, samplingRatio=samplingRatio)
        if "value" not in read.fieldNames():
            return df
        schema = read["value"].dataType
    return df.withColumn(newColName or _unquoted(colName), F.from_json(value, schema))


def pivot(df: DataFrame, *, aggCol: str, aggFunction: str, colList: Sequence[str]  # noqa: N803
          ) -> DataFrame:
    """A column per value of the ``colList`` columns, holding ``aggFunction`` (sum, avg,
    mean, min, max, count, first, last) of ``aggCol`` over the rows alike in the others."""
    from pyspark.sql import functions as F

    functions = {"sum": F.sum, "avg": F.avg, "mean": F.avg, "min": F.min, "max": F.max,
                 "count": F.count, "first": F.first, "last": F.last}
    if aggFunction.lower() not in functions:
        raise GlueUnsupportedError(f"gs_pivot(aggFunction={aggFunction!r})",
                                   f"use one of {', '.join(functions)}")
    pivoted = list(colList)
    others = [c for c in df.columns if c not in (*pivoted, aggCol)]
    key = named_column(pivoted[0]) if len(pivoted) == 1 else F.concat_ws(
        "_", *(named_column(c).cast("string") for c in pivoted))
    return (df.withColumn("__deltamark_pivot", key).groupBy(*others)
            .pivot("__deltamark_pivot").agg(functions[aggFunction.lower()](aggCol)))


#: Studio's module names and the transform each adds as a method of the same name
STUDIO_TRANSFORMS: dict[str, Callable[..., DataFrame]] = {
    "gs_flatten": flatten, "gs_explode": explode, "gs_derived": derived,
    "gs_concat": concat, "gs_to_timestamp": to_timestamp,
    "gs_format_timestamp": format_timestamp, "gs_now": now, "gs_uuid": uuid,
    "gs_null_rows": null_rows, "gs_split": split, "gs_array_to_cols": array_to_cols,
    "gs_regex_extract": regex_extract, "gs_repartition": repartition,
    "gs_parse_json": parse_json, "gs_pivot": pivot,
}

#: Python's strftime codes -> Spark's datetime pattern letters
_PYTHON_CODES = {"Y": "yyyy", "y": "yy", "m": "MM", "d": "dd", "H": "HH", "I": "hh",
                 "M": "mm", "S": "ss", "f": "SSSSSS", "p": "a", "b": "MMM", "B": "MMMM",
                 "a": "E", "A": "EEEE", "j": "DDD", "Z": "z", "z": "Z", "%": "%"}


def spark_date_format(pattern: str) -> str:
    """A date format as Spark's pattern: Python's ``%`` codes are translated (the text
    between them quoted), a Spark pattern is kept."""
    if "%" not in pattern:
        return pattern
    parts, last = [], 0
    for found in re.finditer(r"%(.)", pattern):
        if found.start() > last:
            parts.append(_literal(pattern[last:found.start()]))
        code = found.group(1)
        if code not in _PYTHON_CODES:
            raise GlueUnsupportedError(f"date format {pattern!r}: %{code}",
                                       f"use %{', %'.join(_PYTHON_CODES)} or a Spark pattern")
        parts.append(_PYTHON_CODES[code])
        last = found.end()
    if last < len(pattern):
        parts.append(_literal(pattern[last:]))
    return "".join(parts)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'" if re.search(r"[A-Za-z]", text) else text


def _unquoted(name: str) -> str:
    """A Studio column name without its backticks (``"`a.b`"`` names column ``a.b``)."""
    return name[1:-1] if len(name) > 1 and name.startswith("`") and name.endswith("`") else name


def _column(df: DataFrame, name: str, call: str) -> Column:
    """The top-level column ``name`` (backticks allowed, as Studio quotes a dotted name)."""
    plain = _unquoted(name)
    if plain not in df.columns:
        raise GlueUnsupportedError(f"{call}(colName={name!r}): the frame has no such column",
                                   f"its columns are {', '.join(df.columns) or 'none'}")
    return named_column(plain)
