"""Simple filters: a conjunction of ``(column, op, value)`` tuples.

The same form as pyarrow's and delta-rs's ``filters``. One filter list drives three things:
which files a read may skip (partition values and min/max statistics from the Delta log),
the row filter Spark applies, and the SQL predicate for a native ``replaceWhere``.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from framework.errors import DeltamarkError
from framework.spark.session import quoted

if TYPE_CHECKING:
    from pyspark.sql import Column

    from framework.delta.log import DataFile

__all__ = [
    "Filter", "InvalidFilterError", "check", "file_may_match", "partition_matches", "to_column",
    "to_sql",
]

Filter = tuple[str, str, Any]

# a bool on plain values, a Column on Spark Columns
_COMPARE: Mapping[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
}
OPS = (*_COMPARE, "in", "not in")


class InvalidFilterError(DeltamarkError):
    """A filter tuple that is not ``(column, op, value)`` with a known op and column."""


def check(filters: Iterable[Filter], columns: Iterable[str], *, where: str) -> list[Filter]:
    """Validate filters against the table's columns; returns them as a list.

    Raises:
        InvalidFilterError: naming ``where`` (the table) and the bad filter.
    """
    known = set(columns)
    checked = []
    for item in filters:
        if not (isinstance(item, tuple) and len(item) == 3):
            raise InvalidFilterError(f"{where}: filter {item!r} is not a (column, op, value) tuple")
        column, op, value = item
        if op not in OPS:
            raise InvalidFilterError(f"{where}: filter op {op!r} is not one of {', '.join(OPS)}")
        if column not in known:
            raise InvalidFilterError(f"{where}: filter column {column!r} is not in the table "
                                     f"(columns: {', '.join(sorted(known))})")
        if op in ("in", "not in") and not isinstance(value, (list, tuple, set, frozenset)):
            raise InvalidFilterError(f"{where}: filter {item!r} needs a list of values")
        checked.append(item)
    return checked


def file_may_match(file: DataFile, filters: Sequence[Filter]) -> bool:
    """False only when the log proves no row of ``file`` satisfies every filter."""
    return all(_may_match(file, f) for f in filters)


def partition_matches(values: Mapping[str, Any], filters: Sequence[Filter]) -> bool:
    """Whether partition ``values`` satisfy every filter on a partition column."""
    return all(_partition_match(values[c], op, v) for c, op, v in filters if c in values)


def _may_match(file: DataFile, f: Filter) -> bool:
    column, op, value = f
    if column in file.partition_values:
        return _partition_match(file.partition_values[column], op, value)
    low, high = file.min_values.get(column), file.max_values.get(column)
    if low is None or high is None:
        return True  # no statistics: cannot skip
    try:
        if op == "=":
            return low <= _like(value, low) <= high
        if op == "in":
            return any(low <= _like(v, low) <= high for v in value)
        if op == "<":
            return low < _like(value, low)
        if op == "<=":
            return low <= _like(value, low)
        if op == ">":
            return high > _like(value, high)
        if op == ">=":
            return high >= _like(value, high)
        if op == "!=":
            return not (low == high == _like(value, low))
    except TypeError:
        return True
    return True  # "not in": statistics cannot rule a file out cheaply


def _partition_match(actual: Any, op: str, value: Any) -> bool:
    if actual is None:
        return False  # null satisfies no comparison, as in SQL
    try:
        if op == "in":
            return any(actual == _like(v, actual) for v in value)
        if op == "not in":
            return all(actual != _like(v, actual) for v in value)
        return _COMPARE[op](actual, _like(value, actual))
    except TypeError:
        return True


def _like(value: Any, sample: Any) -> Any:
    """Coerce a user's filter value to the type of a log value, so they compare."""
    if isinstance(sample, dt.datetime) and isinstance(value, dt.datetime):
        if sample.tzinfo and not value.tzinfo:
            return value.replace(tzinfo=dt.UTC)
        return value
    if isinstance(sample, dt.datetime) and isinstance(value, str):
        return _like(dt.datetime.fromisoformat(value), sample)
    if isinstance(sample, dt.date) and isinstance(value, str):
        return dt.date.fromisoformat(value)
    if isinstance(sample, (int, float, Decimal)) and isinstance(value, str):
        return type(sample)(value)
    if isinstance(sample, str) and not isinstance(value, str):
        return str(value)
    return value


def to_column(filters: Sequence[Filter]) -> Column:
    """The filters as one Spark boolean Column (AND of all)."""
    from pyspark.sql import functions as F

    conditions = []
    for column, op, value in filters:
        col = F.col(f"`{column}`")
        if op == "in":
            conditions.append(col.isin(list(value)))
        elif op == "not in":
            conditions.append(~col.isin(list(value)))
        else:
            conditions.append(_COMPARE[op](col, F.lit(value)))
    result = conditions[0]
    for condition in conditions[1:]:
        result = result & condition
    return result


def to_sql(filters: Sequence[Filter]) -> str:
    """The filters as a Spark SQL predicate (for Delta's ``replaceWhere``)."""
    parts = []
    for column, op, value in filters:
        name = quoted(column)
        if op in ("in", "not in"):
            parts.append(f"{name} {op.upper()} ({', '.join(_sql_literal(v) for v in value)})")
        else:
            parts.append(f"{name} {op} {_sql_literal(value)}")
    return " AND ".join(parts)


def _sql_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, Decimal)):
        return repr(value) if not isinstance(value, Decimal) else str(value)
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
