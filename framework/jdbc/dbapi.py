"""deltamark's own queries through a Python driver, where no JVM is at hand: SQLite
(sqlite3) and PostgreSQL (psycopg). A run planned without Spark uses it read-only
(``python_connection``); a run on Spark Connect, whose JVM is the server's, plans its
reads and lands its database writes with it (``PythonDatabase``), with the values, column
types and errors the JDBC path gives."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from typing import Any

from framework.errors import DatabaseError
from framework.jdbc.connection import Connection
from framework.jdbc.database import Column, shorten

__all__ = ["PythonDatabase", "python_connection", "python_database"]

#: PostgreSQL JDBC properties with the same meaning for libpq (psycopg); others: no preflight
_LIBPQ_PROPERTIES = frozenset({"user", "password", "sslmode", "sslrootcert", "sslcert",
                               "sslkey", "connect_timeout"})

#: java.sql.Types of PostgreSQL's types (by type OID), as its JDBC driver reports them
_PG_TYPES = {16: (-7, "bool"), 20: (-5, "int8"), 21: (5, "int2"), 23: (4, "int4"),
             700: (7, "float4"), 701: (8, "float8"), 1700: (2, "numeric"),
             25: (12, "text"), 1043: (12, "varchar"), 1042: (1, "bpchar"),
             1082: (91, "date"), 1083: (92, "time"), 1114: (93, "timestamp"),
             1184: (93, "timestamptz"), 2950: (1111, "uuid")}


@contextlib.contextmanager
def python_connection(connection: Connection) -> Iterator[Any]:
    """A read-only DB-API connection with an ``execute`` method, or None without a
    driver here (or, for SQLite, without the file)."""
    if connection.dialect == "sqlite":
        path = connection.sqlite_file
        if not path or not os.path.isfile(path):
            yield None
            return
        import sqlite3

        db: Any = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    elif connection.dialect == "postgresql" and (params := _libpq_params(connection)):
        db = _psycopg(connection, params)
    else:
        yield None
        return
    try:
        yield db
    finally:
        db.close()


@contextlib.contextmanager
def python_database(connection: Connection, *, why: str) -> Iterator[PythonDatabase]:
    """A read-write connection (``why`` names what has no JVM driver to use).

    Raises:
        DatabaseError: no Python driver reaches this database, or it refused.
    """
    if path := connection.sqlite_file:
        import sqlite3

        db: Any = sqlite3.connect(path, isolation_level=None)  # transactions: BEGIN..COMMIT
    elif connection.dialect == "postgresql" and (params := _libpq_params(connection)):
        db = _psycopg(connection, params)
    else:
        raise DatabaseError(connection.display, f"{why}, deltamark reaches databases "
                            "through Python drivers: SQLite, and PostgreSQL with psycopg "
                            "(pip install 'psycopg[binary]'), with libpq's properties only")
    try:
        yield PythonDatabase(db, connection)
    finally:
        db.close()


class PythonDatabase:
    """A DB-API connection, for the queries that plan a read or land a write (as the
    JDBC ``Database``: values as the database's text, parameters as ``?``)."""

    def __init__(self, db: Any, connection: Connection):
        self._db, self.connection = db, connection
        self._sqlite = connection.dialect == "sqlite"

    def columns(self, relation: str) -> list[Column]:
        sql = f"SELECT * FROM {relation} WHERE 1=0"
        with self._cursor(sql) as cursor:
            cursor.execute(sql)
            names = [d[0] for d in cursor.description]
            if not self._sqlite:
                return [Column(name, *_PG_TYPES.get(d[1], (1111, str(d[1]))))
                        for name, d in zip(names, cursor.description, strict=True)]
        declared = self._declared(relation)
        return [Column(name, *_sqlite_type(declared.get(name, ""))) for name in names]

    def rows(self, sql: str, *, limit: int | None = None) -> list[tuple[str | None, ...]]:
        with self._cursor(sql) as cursor:
            cursor.execute(sql)
            found = cursor.fetchall() if limit is None else cursor.fetchmany(limit)
        return _texts(found)

    def primary_key(self, table: str) -> tuple[str, ...]:
        if self._sqlite:
            rows = self._query(f"PRAGMA table_info({table})")
            return tuple(r[1] for r in sorted((r for r in rows if r[5]), key=lambda r: r[5]))
        rows = self._query(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) AND "
            "i.indisprimary ORDER BY array_position(i.indkey, a.attnum)", table)
        return tuple(r[0] for r in rows)

    def execute(self, sql: str) -> None:
        with self._cursor(sql) as cursor:
            cursor.execute(sql)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[PythonTransaction]:
        """Statements committed together when the block ends, or rolled back if it raises."""
        self.execute("BEGIN")
        try:
            yield PythonTransaction(self)
            self.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                self.execute("ROLLBACK")
            raise

    def _declared(self, relation: str) -> dict[str, str]:
        """A SQLite table's declared column types (none for a subquery)."""
        if not re.fullmatch(r"[\w\"`]+", relation):
            return {}
        return {r[1]: str(r[2]) for r in self._query(f"PRAGMA table_info({relation})")}

    def _query(self, sql: str, *parameters: Any) -> list[tuple[Any, ...]]:
        with self._cursor(sql) as cursor:
            cursor.execute(sql, parameters)
            return cursor.fetchall()

    @contextlib.contextmanager
    def _cursor(self, what: str) -> Iterator[Any]:
        cursor = self._db.cursor()
        try:
            yield cursor
        except Exception as exc:
            if not _is_database_error(exc):
                raise
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DatabaseError(self.connection.display,
                                f"{message} (in: {shorten(what)})") from None
        finally:
            cursor.close()


class PythonTransaction:
    """Parameterised statements (``?``) in one of ``PythonDatabase.transaction``'s."""

    def __init__(self, db: PythonDatabase):
        self._db = db

    def query(self, sql: str, *parameters: str | int) -> list[tuple[str | None, ...]]:
        with self._db._cursor(sql) as cursor:
            cursor.execute(self._placeholders(sql), parameters)
            return _texts(cursor.fetchall())

    def update(self, sql: str, *parameters: str | int) -> int:
        with self._db._cursor(sql) as cursor:
            cursor.execute(self._placeholders(sql), parameters)
            return int(cursor.rowcount)

    def _placeholders(self, sql: str) -> str:
        return sql if self._db._sqlite else sql.replace("%", "%%").replace("?", "%s")


def _texts(rows: list[tuple[Any, ...]]) -> list[tuple[str | None, ...]]:
    """Rows with each value as JDBC's ``getString`` gives it."""
    return [tuple(_text(v) for v in row) for row in rows]


def _text(value: Any) -> str | None:
    """A value as JDBC's ``getString`` gives it."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "t" if value else "f"
    return str(value)


def _sqlite_type(declared: str) -> tuple[int, str]:
    """java.sql.Types of a SQLite column's declared type, as sqlite-jdbc reports it."""
    upper = declared.upper()
    for fragment, jdbc_type in (("INT", 4), ("CHAR", 12), ("CLOB", 12), ("TEXT", 12),
                                ("REAL", 7), ("FLOA", 6), ("DOUB", 8), ("DEC", 3),
                                ("NUM", 2), ("DATETIME", 93), ("TIMESTAMP", 93),
                                ("DATE", 91), ("BOOL", 16)):
        if fragment in upper:
            return jdbc_type, declared or "TEXT"
    return 12, declared or "TEXT"


def _is_database_error(exc: Exception) -> bool:
    """Whether ``exc`` is a DB-API driver's error (sqlite3's or psycopg's)."""
    return type(exc).__module__.startswith(("sqlite3", "psycopg")) or type(
        exc).__name__ in ("OperationalError", "ProgrammingError", "IntegrityError")


def _psycopg(connection: Connection, params: dict[str, Any]) -> Any:
    try:
        import psycopg
    except ImportError:
        raise DatabaseError(connection.display, "psycopg is not installed here: pip install "
                            "'psycopg[binary]'") from None
    try:
        return psycopg.connect(**params, autocommit=True)
    except psycopg.Error as exc:
        raise DatabaseError(connection.display, f"cannot connect: {exc}") from None


def _libpq_params(connection: Connection) -> dict[str, Any] | None:
    """psycopg's parameters for a ``jdbc:postgresql://host[:port]/db?...`` URL, or None
    when the URL or a property has no libpq equivalent (several hosts, ...)."""
    from urllib.parse import parse_qsl, urlsplit

    url = urlsplit(connection.url.removeprefix("jdbc:"))
    if "," in url.netloc or not url.hostname:
        return None
    properties = {**dict(parse_qsl(url.query)), **connection.jdbc_properties()}
    if not set(properties) <= _LIBPQ_PROPERTIES:
        return None
    return {"host": url.hostname, "port": url.port or 5432,
            "dbname": url.path.lstrip("/") or None, **properties}

