"""Rows read with pyarrow from a snapshot's files (only those a filter may match),
the newest rows of a column, and read-only SQL on tables.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder

from framework import errors, storage
from framework.delta.log.table import _LATEST, _open, is_table
from state_tables.rows import empty_rows, mask

__all__ = ["forget_open_tables", "query", "read_newest", "read_rows"]


def read_rows(path: str, *, version: int | None = None,
              filters: Sequence[tuple[str, str, Any]] | None = None,
              columns: Sequence[str] | None = None) -> pa.Table | None:
    """The rows of an unpartitioned table (at ``version``; only ``columns`` if given), or
    None if there is no table.

    Files are read one by one with ``ParquetFile``: ``pq.read_table`` would load
    pyarrow.dataset, whose import pulls in pandas (about 0.3 s of every CLI command).
    """
    if not is_table(path):
        return None
    table = _open(path, version)
    filters = list(filters or ())
    wanted, needed = _schemas(table, [c for c, _, _ in filters], columns)
    parts = []
    for uri, stats in _files_for(table, filters):
        # a filter every row of the file passes costs neither its column nor a copy
        open_filters = [f for f in filters if not _all_pass(stats[f[0]], f, needed)]
        used = {c for c, _, _ in open_filters}
        schema = pa.schema([f for f in needed if f.name in wanted.names or f.name in used])
        parts.append(_kept(_read_file(uri, schema), open_filters).select(wanted.names))
    return pa.concat_tables(parts) if parts else empty_rows(wanted)


def _kept(rows: pa.Table, filters: Sequence[tuple[str, str, Any]]) -> pa.Table:
    """The rows passing ``filters``: ``rows`` itself when all do (no copy of a large read)."""
    if not filters:
        return rows
    passing = mask(rows, filters)
    return (rows if passing.null_count == 0 and pc.all(passing).as_py()
            else rows.filter(passing))


def read_newest(path: str, *, column: str, within: int = 0,
                filters: Sequence[tuple[str, str, Any]] | None = None,
                columns: Sequence[str] | None = None) -> pa.Table | None:
    """The rows passing ``filters`` whose integer ``column`` is at most ``within`` below its
    largest value among them (None if there is no table).

    The files are read in descending order of their statistics' largest ``column`` and no
    further than the last that may hold such a row: the newest runs of a long history cost
    the newest files only.
    """
    if not is_table(path):
        return None
    table = _open(path)
    filters = list(filters or ())
    wanted, needed = _schemas(table, [*(c for c, _, _ in filters), column], columns)
    found, top = [], None
    newest_first = sorted(_files_for(table, filters, also=[column]),
                          key=lambda f: _largest(f[1][column]), reverse=True)
    for uri, stats in newest_first:
        if top is not None and _largest(stats[column]) < top - within:
            break
        rows = _read_file(uri, needed)
        rows = rows.filter(mask(rows, filters)) if filters else rows
        if len(rows) and (most := pc.max(rows[column]).as_py()) is not None:
            top = most if top is None else max(top, most)
            found.append(rows)
    if top is None:
        return empty_rows(wanted)
    rows = pa.concat_tables(found)
    return rows.filter(mask(rows, [(column, ">=", top - within)])).select(wanted.names)


def _schemas(table: DeltaTable, used: Sequence[str], columns: Sequence[str] | None
             ) -> tuple[pa.Schema, pa.Schema]:
    """The columns asked for, and those to read: with the ``used`` ones (filtered on). A
    column the table does not have (added to its layout since) is left to the caller."""
    schema = pa.schema(table.schema().to_arrow())
    wanted = schema if columns is None else pa.schema([schema.field(c) for c in columns
                                                       if c in schema.names])
    needed = pa.schema([f for f in schema if f.name in wanted.names or f.name in used])
    return wanted, needed


def _largest(bounds: tuple[Any, Any]) -> float:
    """A file's largest value of an integer column; unknown: it may hold any."""
    return bounds[1] if type(bounds[1]) is int else float("inf")


#: a string statistic shorter than this is the value itself: writers truncate longer ones
#: (delta-rs at 64 characters, Delta Spark at 32)
_EXACT_STRING_STATISTICS = 32


def _files_for(table: DeltaTable, filters: Sequence[tuple[str, str, Any]], *,
               also: Sequence[str] = ()) -> list[tuple[str, dict[str, tuple[Any, Any]]]]:
    """The table's data files with their (min, max) statistics of the filtered columns and
    of ``also``, less those whose statistics show that no row passes ``filters``: so a read
    of the newest runs (``run_seq >= n``) opens the newest files only, however long the
    history. Only exact bounds are used: integers, and strings too short to be truncated.
    """
    uris = table.file_uris()
    columns = list(dict.fromkeys([*(c for c, _, _ in filters), *also]))
    if not columns or len(uris) < 2:
        return [(uri, dict.fromkeys(columns, (None, None))) for uri in uris]
    adds = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
    bounds = {c: (adds[f"min.{c}"].to_pylist(), adds[f"max.{c}"].to_pylist())
              if f"min.{c}" in adds.column_names else ([None] * len(adds),) * 2
              for c in columns}
    by_name = {unquote(path).rsplit("/", 1)[-1]: i
               for i, path in enumerate(adds["path"].to_pylist())}
    kept = []
    for uri in uris:
        i = by_name[unquote(uri).rsplit("/", 1)[-1]]
        stats = {c: (low[i], high[i]) for c, (low, high) in bounds.items()}
        if all(op not in _MAY_MATCH or not _exact(stats[c], value)
               or _MAY_MATCH[op](*stats[c], value) for c, op, value in filters):
            kept.append((uri, stats))
    return kept


def _all_pass(bounds: tuple[Any, Any], condition: tuple[str, str, Any],
              schema: pa.Schema) -> bool:
    """Whether a file's (min, max) statistics show that all its rows pass ``condition``
    (an equality on a column that holds no nulls, the value its only one)."""
    column, op, value = condition
    return (op == "=" and not schema.field(column).nullable and _exact(bounds, value)
            and bounds[0] == bounds[1] == value)


def _exact(bounds: tuple[Any, Any], value: Any) -> bool:
    """Whether a file's (min, max) statistics may be compared with ``value``."""
    if type(value) is int:
        return all(type(b) is int for b in bounds)
    return type(value) is str and all(type(b) is str and len(b) < _EXACT_STRING_STATISTICS
                                      for b in bounds)


#: whether a file whose column spans [low, high] may hold a row passing (op, value)
_MAY_MATCH: Mapping[str, Callable[[Any, Any, Any], bool]] = {
    "=": lambda low, high, v: low <= v <= high, "!=": lambda low, high, v: not low == v == high,
    "<": lambda low, high, v: low < v, "<=": lambda low, high, v: low <= v,
    ">": lambda low, high, v: high > v, ">=": lambda low, high, v: high >= v}


@functools.lru_cache(maxsize=256)
def _read_file(uri: str, schema: pa.Schema) -> pa.Table:
    """``schema``'s columns of one data file; columns added after it was written are null.

    Cached: a data file never changes once written, and a state table is read again and
    again while most of its files stay (a run reads the runs table three times).
    """
    fs, local, _ = storage.filesystem(uri)
    file = pq.ParquetFile(local, filesystem=fs)
    present = [name for name in schema.names if name in file.schema_arrow.names]
    rows = file.read(columns=present)
    columns = [rows[f.name].cast(f.type) if f.name in present else pa.nulls(len(rows), f.type)
               for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def query(sql: str, tables: Mapping[str, tuple[str, pa.Schema]], *,
          setup: Sequence[str] = (), check_plan: Callable[[str], None] | None = None
          ) -> pa.Table:
    """Run one SQL statement (DataFusion) over the Delta tables ``{name: (path, schema)}``;
    a table not created yet is queried as empty, with ``schema``.

    ``setup`` statements (e.g. ``CREATE VIEW``) run first, in the same session. Before the
    statement runs, ``check_plan`` gets the kind of its logical plan, as DataFusion plans
    it (the root node's name: ``Projection``, ``Dml``, ``CreateView``, ...; ``Explain``
    for an EXPLAIN, ``Statements`` for several), and may refuse it by raising.

    Raises:
        DeltamarkError: the SQL failed to plan or run (message from DataFusion).
    """
    builder = QueryBuilder({"datafusion.catalog.information_schema": "true"})
    views = []
    for name, (path, schema) in tables.items():
        if is_table(path):
            builder.register(name, _open(path))
        else:
            views.append(_empty_view(name, schema))
    try:
        for statement in [*views, *setup]:
            builder.execute(statement).read_all()
        if check_plan is not None:
            check_plan(_plan_kind(builder, sql))
        return pa.RecordBatchReader.from_stream(builder.execute(sql)).read_all()
    except errors.DeltamarkError:
        raise
    except Exception as exc:  # DataFusion raises plain Exception subclasses
        message = " ".join(str(exc).split())
        raise errors.DeltamarkError(f"sql: {message}") from exc


def _plan_kind(builder: QueryBuilder, sql: str) -> str:
    try:
        plans = pa.RecordBatchReader.from_stream(builder.execute(f"EXPLAIN {sql}")).read_all()
    except Exception as exc:
        if "Nested EXPLAINs" in str(exc):
            return "Explain"
        if "single SQL statement" in str(exc):
            return "Statements"  # more than one
        raise
    logical = next(p for t, p in zip(plans["plan_type"].to_pylist(), plans["plan"].to_pylist(),
                                     strict=True) if t == "logical_plan")
    return logical.split(":", 1)[0].split()[0]


_SQL_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "int32": "INT", "double": "DOUBLE",
              "bool": "BOOLEAN", "timestamp[us, tz=UTC]": "TIMESTAMP"}


def _empty_view(name: str, schema: pa.Schema) -> str:
    columns = ", ".join(f'CAST(NULL AS {_SQL_TYPES.get(str(f.type), "VARCHAR")}) AS "{f.name}"'
                        for f in schema)
    return f'CREATE VIEW "{name}" AS SELECT {columns} WHERE false'


def forget_open_tables() -> None:
    """Drop the table handles and data files kept in memory: what follows reads as a new
    process does (for benchmarks)."""
    _LATEST.clear()
    _read_file.cache_clear()
