"""What differs between databases in the SQL deltamark writes: quoting names, typing
literals."""

from __future__ import annotations

from framework.jdbc.database import TEXT_TYPES, Column

__all__ = ["literal", "quote"]


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
