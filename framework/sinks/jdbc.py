"""Database targets: a run's rows appended to a table over JDBC, exactly once.

Spark's JDBC writer commits each partition in a transaction of its own, so a crash can
leave part of a write. A run's rows therefore go first to a staging table of the run
(``deltamark_stage_<digest>`` beside the target, replaced if the run is retried), and
reach the target only when the job's code has returned: one database transaction
inserts them and a row of ``deltamark_commits`` naming the job, the target and the run
(with the run's record, as a Delta commit carries it). That row is the run's mark: a
replay finds it and skips the insert, recovery finds it to know the run landed, and a
later run of the job found there means the state is behind. A data-quality gate that
rejects a later write leaves the rows unlanded, so nothing needs rolling back.

Tested on PostgreSQL and SQLite; the SQL is plain (``CREATE TABLE ... AS SELECT``,
``CREATE TABLE IF NOT EXISTS``), which MySQL and MariaDB take too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, cast

from framework.errors import DatabaseError, StateBehindTargetsError
from framework.jdbc import Connection, Database, Transaction, connect, dialect, java_message
from framework.jdbc.client import spark_errors
from framework.sinks.target import TargetRun, Written
from state_tables.model import RunOutput, RunRecord

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["MARKS_TABLE", "OUTPUT_TAG", "DatabaseTarget", "DatabaseTargets", "check_table_name",
           "is_output", "is_target", "land", "output_connection", "stage", "target_key",
           "with_database"]

log = logging.getLogger(__name__)

OUTPUT_TAG: RunOutput = {"format": "jdbc"}
#: the table, beside each target, whose rows mark the runs that landed there
MARKS_TABLE = "deltamark_commits"

_NAME = re.compile(r'(?:[A-Za-z_][A-Za-z0-9_$]*|"[^"]+"|`[^`]+`)'
                   r'(?:\.(?:[A-Za-z_][A-Za-z0-9_$]*|"[^"]+"|`[^`]+`)){0,2}')


def target_key(connection: str, table: str) -> str:
    """How a run names a database target: ``jdbc://<connection>/<table>``."""
    return f"jdbc://{connection}/{table}"


def is_target(target: str) -> bool:
    """Whether ``target`` (a run's name for a target) is a database table."""
    return target.startswith("jdbc://")


def is_output(output: RunOutput) -> bool:
    """Whether a run's output entry (``Run.outputs[target]``) is a database target."""
    return output.get("format") == OUTPUT_TAG["format"]


def check_table_name(table: str) -> str:
    """``table`` if it is a table name (``name``, ``schema.name``, quoted parts).

    Raises:
        ValueError: it is not one.
    """
    if not _NAME.fullmatch(table):
        raise ValueError(f"{table!r} is not a table name (name or schema.name)")
    return table


def stage(spark: SparkSession, df: DataFrame, connection: Connection, table: str, *,
          job: str, run_seq: int) -> int:
    """Write ``df`` to run ``run_seq``'s staging table for ``table`` (replacing what an
    earlier attempt left there): the rows staged.

    Raises:
        DatabaseError: the database refused the write.
    """
    staging = _staging(table, job, run_seq)
    properties = {**connection.jdbc_properties(), "driver": connection.driver_class}
    with connect(spark, connection) as db:
        # Spark 4 asks whether the table exists and, where its dialect cannot tell a
        # missing table from another error (SQLite has none), fails: one made here is
        # dropped and made again with the rows' columns by the overwrite
        db.execute(f"CREATE TABLE IF NOT EXISTS {staging} (deltamark_placeholder INTEGER)")
        try:
            df.write.jdbc(connection.spark_url(), staging, mode="overwrite",
                          properties=properties)
        except spark_errors() as exc:
            raise DatabaseError(connection.display, f"staging the rows for {table} failed: "
                                f"{java_message(exc)}") from None
        [(count,)] = db.rows(f"SELECT COUNT(*) FROM {staging}")
    return int(cast(str, count))  # COUNT(*) is never NULL


def land(spark: SparkSession, connection: Connection, table: str, *, job: str, run_id: str,
         run_seq: int, record: RunRecord) -> tuple[int, bool]:
    """Insert run ``run_seq``'s staged rows into ``table`` with the run's mark, in one
    transaction (``table`` is made from the staged rows' columns if it does not exist):
    the rows inserted, and whether the run had landed there already (a replay).

    Raises:
        StateBehindTargetsError: ``table`` holds a later run of ``job``, or another run
            with this run_seq.
        DatabaseError: the database refused a statement (nothing landed).
    """
    marks, staging = _beside(table, MARKS_TABLE), _staging(table, job, run_seq)
    target = target_key(connection.display, table)
    with connect(spark, connection) as db:
        _ensure_marks(db, marks)
        # looked up before the transaction: a failed statement would abort it
        columns = [c.name for c in db.columns(staging)]
        exists = _exists(db, table)
        with db.transaction() as tx:
            held = tx.query(f"SELECT run_seq, run_id FROM {marks} WHERE job = ? AND "
                            "target_table = ? AND run_seq >= ? ORDER BY run_seq DESC",
                            job, table, run_seq)
            # run_seq is NOT NULL in the marks table
            replayed = bool(held) and (
                int(cast(str, held[0][0])), held[0][1]) == (run_seq, run_id)
            if held and not replayed:
                raise StateBehindTargetsError(job, target, int(cast(str, held[0][0])),
                                              str(held[0][1]), run_seq, run_id)
            rows = 0
            if not replayed:
                rows = _insert(tx, connection, table, staging, columns, create=not exists)
                tx.update(f"INSERT INTO {marks} (job, target_table, run_seq, run_id, "
                          "row_count, record, committed_at) VALUES (?, ?, ?, ?, ?, ?, "
                          "CURRENT_TIMESTAMP)", job, table, run_seq, run_id, rows,
                          json.dumps(record, default=str))
        _drop(db, staging)
    return rows, replayed


def _insert(tx: Transaction, connection: Connection, table: str, staging: str,
            columns: list[str], *, create: bool) -> int:
    """Copy the staged rows into ``table`` (made from the staging table's columns when
    ``create``): the rows inserted."""
    if create:
        tx.update(f"CREATE TABLE {table} AS SELECT * FROM {staging} WHERE 1 = 0")
    quoted = ", ".join(dialect.quote(connection.dialect, c) for c in columns)
    return tx.update(f"INSERT INTO {table} ({quoted}) SELECT {quoted} FROM {staging}")


@dataclass(frozen=True)
class DatabaseTargets:
    """The database targets of a job's runs, reached through ``spark``'s JVM with the
    connections of the job's conf (``connections`` resolves a name)."""

    spark: SparkSession
    connections: Callable[[str], Connection]

    def landed(self, job: str, run_seq: int, output: RunOutput) -> bool:
        """Whether run ``run_seq``'s mark is in its target's marks table."""
        connection, table = self._target(output)
        marks = _beside(table, MARKS_TABLE)
        with connect(self.spark, connection) as db:
            if not _exists(db, marks):
                return False
            with db.transaction() as tx:
                return bool(tx.query(f"SELECT 1 FROM {marks} WHERE job = ? AND "
                                     "target_table = ? AND run_seq = ?", job, table, run_seq))

    def discard(self, job: str, run_seq: int, output: RunOutput) -> None:
        """Drop the staging table an unlanded run left."""
        connection, table = self._target(output)
        with connect(self.spark, connection) as db:
            _drop(db, _staging(table, job, run_seq))

    def _target(self, output: RunOutput) -> tuple[Connection, str]:
        return output_connection(output, self.connections), output["table"]


@dataclass(frozen=True)
class DatabaseTarget:
    """A database table written by runs (``Target``), through ``databases``: a run landed
    once its mark is in ``deltamark_commits``. Without ``databases`` (or its run's output
    entry) it cannot be reached: it counts as landed (the next run, which can ask, settles
    it) and nothing is discarded."""

    key: str
    #: the run's output entry: its connection, database and table
    output: RunOutput = field(default_factory=RunOutput)
    databases: DatabaseTargets | None = None

    def describe(self, output: RunOutput) -> str:
        return f"{output['rows']} rows"

    def written(self, output: RunOutput) -> Written:
        return Written(rows=output.get("rows"))

    def runs(self, job: str, *, after_seq: int = 0) -> list[TargetRun]:
        """None listed: it needs its connection, and its own commit checks its marks
        (``land``)."""
        return []

    def landed(self, job: str, run_seq: int) -> bool:
        return self.databases is None or not self.output or self.databases.landed(
            job, run_seq, self.output)

    def discard(self, job: str, run_seq: int) -> None:
        if self.databases is not None and self.output:
            self.databases.discard(job, run_seq, self.output)

    def roll_back(self, job: str, run_seq: int, run_id: str) -> bool:
        return False  # its rows land only after the job's code returned: they never did

    def restore_blockers(self, job: str, run_seq: int) -> list[str]:
        return [f"{self.key} is a database table, whose rows deltamark cannot take back "
                f"(delete the later runs' rows by hand: {MARKS_TABLE} lists them)"]

    def restore(self, job: str, run_seq: int, run_id: str) -> None:
        return None


def output_connection(output: RunOutput, connections: Callable[[str], Connection]
                      ) -> Connection:
    """The connection to the database of a run's database target (its output entry)."""
    connection = connections(output["connection"])
    database = output.get("database")
    return with_database(connection, database) if database else connection


def with_database(connection: Connection, database: str) -> Connection:
    """``connection`` to another database of the same server (the path of its URL).

    Raises:
        DatabaseError: its URL has no ``//host/database`` part.
    """
    found = re.fullmatch(r"(jdbc:[^:]+://[^/]+/)([^?;]*)(.*)", connection.url)
    if not found:
        raise DatabaseError(connection.display, f"cannot switch to database {database!r}: "
                            "the URL has no //host/database part")
    return replace(connection, url=f"{found[1]}{database}{found[3]}")


def _staging(table: str, job: str, run_seq: int) -> str:
    digest = hashlib.sha1(f"{job}\0{table}\0{run_seq}".encode()).hexdigest()[:16]
    return _beside(table, f"deltamark_stage_{digest}")


def _beside(table: str, name: str) -> str:
    """``name`` in ``table``'s schema."""
    schema, dot, _ = table.rpartition(".")
    return f"{schema}{dot}{name}"


def _ensure_marks(db: Database, marks: str) -> None:
    if not _exists(db, marks):
        db.execute(f"CREATE TABLE IF NOT EXISTS {marks} (job VARCHAR(255) NOT NULL, "
                   "target_table VARCHAR(512) NOT NULL, run_seq BIGINT NOT NULL, "
                   "run_id VARCHAR(64) NOT NULL, row_count BIGINT NOT NULL, record TEXT, "
                   "committed_at TIMESTAMP NOT NULL, PRIMARY KEY (job, target_table, run_seq))")


def _exists(db: Database, table: str) -> bool:
    try:
        db.columns(table)
    except DatabaseError:
        return False
    return True


def _drop(db: Database, table: str) -> None:
    """Drop ``table`` if it exists; a failure is logged (a leftover staging table is
    replaced by the run's retry, and holds no rows anyone reads)."""
    try:
        db.execute(f"DROP TABLE IF EXISTS {table}")
    except DatabaseError as exc:
        log.warning("could not drop the staging table %s: %s", table, exc)
