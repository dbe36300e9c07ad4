"""Arrow tables of plain rows, built, filtered and read back without pandas.

pyarrow's own conversions (``Table.from_pylist``, ``to_pylist`` of timestamps,
``pc.equal`` with a Python value) import pandas: about 0.3 s of every CLI command that
only reads or records a run. The state tables and the Delta log reads use these instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import arro3.core as arro3
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["arrow_array", "arrow_scalar", "arrow_table", "empty_rows", "mask", "python_rows",
           "rows_table"]


def python_rows(rows: pa.Table) -> list[dict[str, Any]]:
    """``rows.to_pylist()``, converting top-level UTC and naive timestamps here: pyarrow's
    own conversion imports pandas (about 0.3 s, most of a read-only CLI command)."""
    stamps = {f.name: f.type for f in rows.schema
              if pa.types.is_timestamp(f.type) and f.type.tz in (None, "UTC")}
    if not stamps:
        plain: list[dict[str, Any]] = rows.to_pylist()
        return plain
    as_ticks = rows.cast(pa.schema([pa.field(f.name, pa.int64(), f.nullable)
                                    if f.name in stamps else f for f in rows.schema]))
    found: list[dict[str, Any]] = as_ticks.to_pylist()
    for row in found:
        for name, kind in stamps.items():
            if row[name] is not None:
                row[name] = _timestamp(row[name], kind)
    return found


_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _timestamp(ticks: int, kind: pa.TimestampType) -> datetime:
    seconds, fraction = divmod(ticks, _PER_SECOND[kind.unit])
    since_epoch = timedelta(seconds=seconds,
                            microseconds=fraction * 1_000_000 // _PER_SECOND[kind.unit])
    return datetime(1970, 1, 1, tzinfo=None if kind.tz is None else UTC) + since_epoch


_COMPARE = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
            ">": pc.greater, ">=": pc.greater_equal}


def mask(rows: pa.Table, filters: Sequence[tuple[str, str, Any]]) -> pa.ChunkedArray:
    """Which ``rows`` satisfy every one of the (one or more) ``(column, op, value)``
    filters (null: unknown, which ``Table.filter`` drops). Unlike ``pc.equal(column,
    value)``, it never imports pandas."""
    masks = []
    for column, op, value in filters:
        values = rows[column]
        if op in ("in", "not in"):
            member = pc.is_in(values, value_set=arrow_array(list(value), values.type))
            masks.append(member if op == "in" else pc.invert(member))
        else:
            masks.append(_COMPARE[op](values, arrow_scalar(value, values.type)))
    every = masks[0]
    for more in masks[1:]:
        every = pc.and_kleene(every, more)
    return every


def arrow_array(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    """``pa.array(values, kind)`` built by arro3: pyarrow's own conversion of a list (or a
    numpy array) imports pandas; arro3's is also several times faster (strings: 10x)."""
    if pa.types.is_timestamp(kind):
        per_micro = _PER_SECOND[kind.unit] / 1_000_000
        epoch = datetime(1970, 1, 1, tzinfo=None if kind.tz is None else UTC)
        ticks = [None if v is None else int((v - epoch) // timedelta(microseconds=1) * per_micro)
                 for v in values]
        return pa.array(arro3.Array(ticks, arro3.DataType.int64())).cast(kind)
    return pa.array(arro3.Array(values, arro3.DataType.from_arrow(kind)))


def arrow_scalar(value: Any, kind: pa.DataType) -> pa.Scalar:
    """``pa.scalar(value, kind)``, which imports pandas (as does a compute function given a
    Python value)."""
    return arrow_array([value], kind)[0]


def arrow_table(data: Any) -> pa.Table:
    """``pa.table(data)`` for an object with the Arrow C stream interface (delta-rs's arro3
    tables): ``pa.table`` asks pandas first whether it is a DataFrame, importing it."""
    return pa.RecordBatchReader.from_stream(data).read_all()


def rows_table(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema=schema)``, which would import pandas (~0.2 s of
    a process that only records a run)."""
    return pa.Table.from_arrays(
        [arrow_array([row.get(f.name) for row in rows], f.type) for f in schema],
        schema=schema)


def empty_rows(schema: pa.Schema) -> pa.Table:
    """``schema.empty_table()``, which would import pandas."""
    return pa.Table.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
