"""What a database connection offers deltamark's own queries, whichever driver serves it
(the JDBC driver on Spark's JVM, ``client``; a Python driver, ``dbapi``)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Protocol

__all__ = ["NUMERIC_TYPES", "TEXT_TYPES", "Column", "Database", "Transaction", "shorten"]

# java.sql.Types
NUMERIC_TYPES = frozenset({-7, -6, 5, 4, -5, 6, 7, 8, 2, 3})
TEXT_TYPES = frozenset({1, 12, -1, -9, -15, -16})


@dataclass(frozen=True)
class Column:
    """A column as the database reports it."""

    name: str
    jdbc_type: int
    type_name: str

    @property
    def numeric(self) -> bool:
        return self.jdbc_type in NUMERIC_TYPES


class Database(Protocol):
    """A connection for the queries that plan a read or land a write (values as the
    database's text)."""

    def columns(self, relation: str) -> list[Column]:
        """The columns of a table or subquery, as the database types them."""
        ...

    def rows(self, sql: str, *, limit: int | None = None) -> list[tuple[str | None, ...]]:
        """The result's rows, values as the database's text, up to ``limit`` rows."""
        ...

    def primary_key(self, table: str) -> tuple[str, ...]:
        """The table's primary-key columns in key order (empty when it has none)."""
        ...

    def execute(self, sql: str) -> None:
        """Run one statement on its own (autocommit), e.g. DDL."""
        ...

    def transaction(self) -> contextlib.AbstractContextManager[Transaction]:
        """Statements committed together when the block ends, or rolled back if it raises."""
        ...


class Transaction(Protocol):
    """Parameterised statements (``?``) in one of ``Database.transaction``'s transactions."""

    def query(self, sql: str, *parameters: str | int) -> list[tuple[str | None, ...]]:
        """The result's rows, values as the database's text."""
        ...

    def update(self, sql: str, *parameters: str | int) -> int:
        """Run a statement: the rows it changed."""
        ...


def shorten(sql: str, limit: int = 200) -> str:
    """``sql`` on one line, cut at ``limit`` characters, to be shown in a message."""
    sql = " ".join(sql.split())
    return sql if len(sql) <= limit else sql[:limit] + "..."
