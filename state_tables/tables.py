"""The state tables under one state root, as Arrow rows through a ``TableIO``: what the
store and its context reads share."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from state_tables.rows import empty_rows, python_rows, rows_table
from state_tables.schemas import RUNS, StateTable, upgrade

__all__ = ["Filters", "StateTables", "TableIO", "upgraded"]

#: filters on a table's rows: (column, operator, value), all of which a row passes
Filters = Sequence[tuple[str, str, Any]]


class TableIO(Protocol):
    """The Delta tables under a state root, as the store reads and writes them.

    ``framework.state.table_io.DeltaTableIO`` is deltamark's (delta-rs);
    ``framework.state.table_io.open_store`` gives a store on it. Each state table is a
    small unpartitioned Delta table that only grows by appends.
    """

    def join(self, root: str, name: str) -> str:
        """The path or URI of table ``name`` under ``root``."""

    def append(self, path: str, rows: pa.Table, *, tag: Mapping[str, Any] | None) -> None:
        """Append ``rows`` in one commit (creating the table), ``tag`` in its commit info."""

    def read(self, path: str, *, filters: Filters | None, columns: Sequence[str] | None
             ) -> pa.Table | None:
        """The rows passing ``filters`` (only ``columns`` if given); None if no table."""

    def read_newest(self, path: str, *, column: str, within: int, filters: Filters,
                    columns: Sequence[str] | None) -> pa.Table | None:
        """As ``read``, less the rows whose integer ``column`` is more than ``within`` below
        its largest value among them."""

    def exists(self, path: str) -> bool:
        """Whether a table is there."""

    def tidy(self, path: str) -> int:
        """Remove rows that repeat another row exactly, compact the table and delete what
        its retention lets go, now; returns how many rows it removed."""

    def footprint(self, path: str) -> tuple[int, int]:
        """The table's files and bytes."""

    def query(self, sql: str, tables: Mapping[str, tuple[str, pa.Schema]], *,
              setup: Sequence[str], check_plan: Callable[[str], None]) -> pa.Table:
        """Run one SQL statement over the tables ``{name: (path, schema)}`` (see
        ``framework.delta.log.query``)."""


class StateTables:
    """The tables under ``root`` (``<root>/runs``, ``<root>/bookmarks``, ...), read and
    appended through ``io``."""

    def __init__(self, root: str | os.PathLike[str], io: TableIO):
        self.root = os.fspath(root)
        self.io = io

    def path(self, table: StateTable) -> str:
        return self.io.join(self.root, table.name)

    def append(self, table: StateTable, rows: list[dict[str, Any]],
               tag: Mapping[str, Any] | None = None) -> None:
        self.io.append(self.path(table), rows_table(rows, table.schema), tag=tag)

    def read(self, table: StateTable, filters: list[tuple[str, str, Any]],
             columns: Sequence[str] | None = None, *,
             newest_within: int | None = None) -> pa.Table:
        """The rows passing ``filters``; with ``newest_within``, only those whose run_seq
        is at most that far below the newest of them."""
        if newest_within is None:
            rows = self.io.read(self.path(table), filters=filters or None, columns=columns)
        else:
            rows = self.io.read_newest(self.path(table), column="run_seq", within=newest_within,
                                       filters=filters, columns=columns)
        wanted = table.schema if columns is None else pa.schema(
            [table.schema.field(c) for c in columns])
        if rows is None:
            return empty_rows(wanted)
        for missing in (f for f in wanted if f.name not in rows.column_names):
            # a nullable column added after this table was created: null in its old rows
            rows = rows.append_column(missing, pa.nulls(len(rows), missing.type))
        return rows

    def committed_seqs(self, job: str, *, since: int = 0) -> pa.Array:
        """run_seq of the job's runs (from run ``since`` on) that succeeded in enable mode
        (a final status)."""
        runs = self.read(RUNS, [("job", "=", job), ("status", "=", "succeeded"),
                                ("mode", "=", "enable"), ("run_seq", ">=", since)],
                         columns=["run_seq"])
        return pc.unique(runs["run_seq"])


def upgraded(table: StateTable, rows: pa.Table) -> Iterable[dict[str, Any]]:
    """``rows`` as Python rows of the table's current layout."""
    return (upgrade(table, row) for row in python_rows(rows))
