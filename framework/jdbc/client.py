"""A database client for the few queries deltamark runs itself (a read's plan, a target's
marks): through the JDBC driver on the Spark driver's JVM, or, without a JVM here (to plan
without Spark, or on Spark Connect), a Python driver (``framework.jdbc.dbapi``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from framework.errors import DatabaseError
from framework.jdbc.connection import Connection
from framework.jdbc.database import Column, Database, shorten
from framework.spark.session import is_connect

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["JvmDatabase", "connect", "java_message", "spark_errors"]

class JvmDatabase:
    """A JDBC connection on the Spark driver's JVM (``Database``)."""

    def __init__(self, jvm_connection: Any, connection: Connection):
        self._conn = jvm_connection
        self.connection = connection

    def columns(self, relation: str) -> list[Column]:
        """The columns of a table or subquery, as the database types them."""
        sql = f"SELECT * FROM {relation} WHERE 1=0"
        with self._calling(sql):
            statement = self._conn.createStatement()
            try:
                meta = statement.executeQuery(sql).getMetaData()
                return [Column(meta.getColumnLabel(i), meta.getColumnType(i),
                               meta.getColumnTypeName(i))
                        for i in range(1, meta.getColumnCount() + 1)]
            finally:
                statement.close()

    def rows(self, sql: str, *, limit: int | None = None) -> list[tuple[str | None, ...]]:
        """The result's rows, values as the database's text, up to ``limit`` rows."""
        with self._calling(sql):
            statement = self._conn.createStatement()
            try:
                if limit is not None:
                    statement.setMaxRows(limit)
                return _fetched(statement.executeQuery(sql))
            finally:
                statement.close()

    def primary_key(self, table: str) -> tuple[str, ...]:
        """The table's primary-key columns in key order (empty when it has none)."""
        schema, _, name = table.rpartition(".")
        meta = self._conn.getMetaData()
        with self._calling(f"primary key of {table}"):
            for candidate in dict.fromkeys((name, name.lower(), name.upper())):
                result = meta.getPrimaryKeys(None, schema or None, candidate.strip('"`'))
                found = []
                while result.next():
                    found.append((result.getInt("KEY_SEQ"), result.getString("COLUMN_NAME")))
                result.close()
                if found:
                    return tuple(column for _, column in sorted(found))
        return ()

    def execute(self, sql: str) -> None:
        """Run one statement on its own (autocommit), e.g. DDL."""
        with self._calling(sql):
            statement = self._conn.createStatement()
            try:
                statement.execute(sql)
            finally:
                statement.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[JvmTransaction]:
        """Statements committed together when the block ends, or rolled back if it raises."""
        self._conn.setAutoCommit(False)
        try:
            yield JvmTransaction(self)
            with self._calling("COMMIT"):
                self._conn.commit()
        except BaseException:
            self._conn.rollback()
            raise
        finally:
            self._conn.setAutoCommit(True)

    def _prepared(self, sql: str, parameters: Sequence[Any]) -> Any:
        statement = self._conn.prepareStatement(sql)
        for i, value in enumerate(parameters, start=1):
            if isinstance(value, int):
                statement.setLong(i, value)
            else:
                statement.setString(i, value)
        return statement

    @contextlib.contextmanager
    def _calling(self, what: str) -> Iterator[None]:
        from py4j.protocol import Py4JJavaError

        try:
            yield
        except Py4JJavaError as exc:
            raise DatabaseError(self.connection.display,
                                f"{java_message(exc)} (in: {shorten(what)})") from None


class JvmTransaction:
    """Parameterised statements in one of ``JvmDatabase.transaction``'s transactions."""

    def __init__(self, db: JvmDatabase):
        self._db = db

    def query(self, sql: str, *parameters: str | int) -> list[tuple[str | None, ...]]:
        """The result's rows, values as the database's text."""
        with self._db._calling(sql):
            statement = self._db._prepared(sql, parameters)
            try:
                return _fetched(statement.executeQuery())
            finally:
                statement.close()

    def update(self, sql: str, *parameters: str | int) -> int:
        """Run a statement: the rows it changed."""
        with self._db._calling(sql):
            statement = self._db._prepared(sql, parameters)
            try:
                return statement.executeUpdate()
            finally:
                statement.close()


def _fetched(result: Any) -> list[tuple[str | None, ...]]:
    """A JDBC result set's rows, values as the database's text."""
    width = result.getMetaData().getColumnCount()
    found = []
    while result.next():
        found.append(tuple(result.getString(i) for i in range(1, width + 1)))
    return found


@contextlib.contextmanager
def connect(spark: SparkSession, connection: Connection) -> Iterator[Database]:
    """A connection through the JDBC driver on ``spark``'s JVM (its jar in spark.jars);
    on Spark Connect, through a Python driver (``dbapi.python_database``).

    Raises:
        DatabaseError: the driver is missing or the database refused the connection.
    """
    if is_connect(spark):  # the JVM and its drivers are the server's
        from framework.jdbc.dbapi import python_database

        with python_database(connection, why="On Spark Connect") as db:
            yield db
        return
    from py4j.protocol import Py4JJavaError

    jvm = spark._jvm
    assert jvm is not None  # a classic session's SparkContext has started the py4j gateway
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    driver_class = connection.driver_class
    try:
        driver = loader.loadClass(driver_class).newInstance()
    except Py4JJavaError:
        raise DatabaseError(connection.display, _missing_driver(driver_class)) from None
    properties = jvm.java.util.Properties()
    for key, value in connection.jdbc_properties().items():
        properties.setProperty(key, value)
    try:
        jvm_connection = driver.connect(connection.url, properties)
    except Py4JJavaError as exc:
        raise DatabaseError(connection.display, f"cannot connect: {java_message(exc)}"
                            ) from None
    if jvm_connection is None:
        raise DatabaseError(connection.display, f"{driver_class} does not accept this URL")
    try:
        yield JvmDatabase(jvm_connection, connection)
    finally:
        jvm_connection.close()


def _missing_driver(driver_class: str) -> str:
    hint = {"org.postgresql.Driver": " (Debian: apt-get install libpostgresql-jdbc-java, "
            "jar /usr/share/java/postgresql.jar)",
            "org.sqlite.JDBC": " (Debian: apt-get install libxerial-sqlite-jdbc-java, jar "
            "/usr/share/java/sqlite-jdbc.jar)"}.get(driver_class, "")
    return (f"JDBC driver {driver_class} is not on the Spark session: list its jar in "
            f"spark.conf spark.jars in conf/deltamark.yaml{hint}")


def spark_errors() -> tuple[type[Exception], ...]:
    """What a failed Spark call raises: pyspark's errors (Spark Connect's among them), and
    py4j's where a JVM is here."""
    from pyspark.errors import PySparkException

    try:
        from py4j.protocol import Py4JJavaError
    except ImportError:  # pyspark-client: Spark Connect only
        return (PySparkException,)
    return (PySparkException, Py4JJavaError)


def java_message(exc: Exception) -> str:
    java = getattr(exc, "java_exception", None)
    message = java.getMessage() if java is not None else None
    return (message or str(exc)).strip().splitlines()[0]
