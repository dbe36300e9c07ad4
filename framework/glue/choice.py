"""Glue's choice types on Spark's one-type columns.

Glue reads a catalog table's CSV values as the types its columns have, and a column some
of whose values are not of that type becomes a *choice* of that type and string
(``provider id: choice<long, string>``, as aws-glue-samples' medicare data shows). Here
such a column stays text, its field's metadata naming the catalog type it holds
(``choice_of``), so that ``resolveChoice`` resolves it as Glue does: ``cast:long`` and
``project:long`` (values not of the type are NULL), ``make_cols`` (``provider id_long``
and ``provider id_string``), ``make_struct`` (a struct of both) and ``match_catalog``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from framework.errors import GlueCatalogError
from framework.spark.session import named_column, quoted, try_cast
from framework.spark.types import CHOICE

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructField

__all__ = ["CHOICE", "catalog_type", "choice_of", "glue_type_name", "make_cols",
           "make_struct", "typed_by_catalog"]


#: Spark SQL type names -> Glue's (as make_cols names the columns)
_GLUE_NAMES = {"bigint": "long", "int": "int", "smallint": "short", "tinyint": "byte",
               "double": "double", "float": "float", "boolean": "boolean", "date": "date",
               "timestamp": "timestamp", "string": "string"}


def glue_type_name(spark_type: str) -> str:
    """Glue's name of a Spark SQL type (``bigint`` is ``long``)."""
    return "decimal" if spark_type.startswith("decimal") else _GLUE_NAMES.get(spark_type,
                                                                             spark_type)


def choice_of(field: StructField) -> str | None:
    """The type a choice column holds besides text (a Spark SQL type), if it is one."""
    return field.metadata.get(CHOICE) if field.metadata else None


def typed_by_catalog(df: DataFrame, table: str, columns: Mapping[str, str]) -> DataFrame:
    """``df``'s text columns (a CSV read) as the catalog table ``table`` declares them
    (``columns``: name -> type): each the file's column of that name (trimmed, any case),
    or else the one at its position; each value of its type, empty text NULL; a column
    with values not of its type is a choice of it and string (one pass over the rows
    counts them).

    Raises:
        GlueCatalogError: the files have another number of columns than the table.
    """
    from pyspark.sql import functions as F

    if len(df.columns) != len(columns):
        raise GlueCatalogError(
            f"from_catalog({table}): its files have {len(df.columns)} columns and the "
            f"catalog's columns: {len(columns)} ({', '.join(columns)}); declare them all, in "
            "the files' order")
    by_name = {c.strip().lower(): c for c in df.columns}
    sources = [by_name[n.lower()] for n in columns] if all(
        n.lower() in by_name for n in columns) else df.columns
    renamed = df.select(*(F.when(named_column(c) != "", named_column(c)).alias(name)
                          for c, name in zip(sources, columns, strict=True)))
    typed = {name: kind for name, kind in columns.items() if kind != "string"}
    if not typed:
        return renamed
    [misfits] = renamed.agg(*(
        F.count_if(named_column(n).isNotNull() & try_cast(quoted(n), k).isNull())
        for n, k in typed.items())).collect()
    choices = {name for name, found in zip(typed, misfits, strict=True) if found}
    return renamed.select(*(
        named_column(n).alias(n, metadata={CHOICE: columns[n]}) if n in choices
        else try_cast(quoted(n), columns[n]).alias(n) if n in typed
        else named_column(n) for n in columns))


def make_cols(field: StructField) -> list[Column]:
    """A choice column as Glue's ``make_cols`` makes it: ``name_long`` and
    ``name_string`` (the values not of the other type)."""
    value, kind = _parts(field)
    name = field.name
    return [value.alias(f"{name}_{glue_type_name(kind)}"),
            _not_cast(value, named_column(name)).alias(f"{name}_string")]


def make_struct(field: StructField) -> Column:
    """A choice column as Glue's ``make_struct`` makes it: a struct of ``long`` and
    ``string``."""
    from pyspark.sql import functions as F

    value, kind = _parts(field)
    return F.struct(value.alias(glue_type_name(kind)),
                    _not_cast(value, named_column(field.name)).alias("string")
                    ).alias(field.name)


def _parts(field: StructField) -> tuple[Column, str]:
    kind = choice_of(field)
    assert kind is not None  # callers pass choice columns
    return try_cast(quoted(field.name), kind), kind


def _not_cast(value: Column, text: Column) -> Column:
    """``text`` where ``value`` (its cast) is NULL."""
    from pyspark.sql import functions as F

    return F.when(value.isNull(), text)


def catalog_type(columns: Mapping[str, Any], name: str) -> str | None:
    """The type the catalog declares for column ``name`` (names compared ignoring case)."""
    found = {k.lower(): v for k, v in columns.items()}
    return found.get(name.lower())
