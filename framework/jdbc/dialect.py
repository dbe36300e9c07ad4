"""What differs between databases in the SQL deltamark writes: quoting names, typing
literals."""

from __future__ import annotations

from framework.jdbc.database import TEXT_TYPES, Column

__all__ = ["literal", "nth_row", "quote"]


def quote(dialect: str, name: str) -> str:
    """``name`` quoted as an identifier (backticks for MySQL and MariaDB)."""
    mark = "`" if dialect in ("mysql", "mariadb") else '"'
    return f"{mark}{name.replace(mark, mark * 2)}{mark}"


def literal(dialect: str, value: str, column: Column) -> str:
    """``value`` (the database's text of it) as a SQL literal of ``column``'s type."""
    quoted = "'" + value.replace("'", "''") + "'"
    if dialect == "sqlite" or column.jdbc_type in TEXT_TYPES:
        return quoted
    return f"CAST({quoted} AS {column.type_name})"


def nth_row(dialect: str, ordered_select: str, n: int) -> str:
    """The ``n``-th row (from 1) of ``ordered_select`` (a SELECT with its ORDER BY) alone:
    ``LIMIT``/``OFFSET`` where the database has no standard ``FETCH``."""
    if dialect in ("mysql", "mariadb", "sqlite"):
        return f"{ordered_select} LIMIT 1 OFFSET {n - 1}"
    return f"{ordered_select} OFFSET {n - 1} ROWS FETCH NEXT 1 ROWS ONLY"
