"""Iceberg targets: each run's commit is one snapshot that names the run.

A run writes through Spark (``append``, ``overwrite`` of the whole table, or ``merge`` on
keys); with ``merge_schema``, the table's schema first takes the rows' new columns and
struct fields and Iceberg's type promotions (int -> long, float -> double, decimal
precision), by Spark's ``ALTER TABLE`` (schema changes, not snapshots). The run's
identity and record are in the snapshot's summary (``deltamark.job``,
``deltamark.run_seq``, ``deltamark.run_id``, ``deltamark.record``): recovery and replays
read them back with pyiceberg (``framework.iceberg``) to find what landed, and never write
a run twice. Rolling back and restoring are Iceberg's ``rollback_to_snapshot`` (Spark).
"""

from __future__ import annotations

import itertools
import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from framework import iceberg
from framework.delta.changes import DELETE, DROP, SEQUENCE, ApplyChanges, forget_tombstones
from framework.delta.log import AppTransaction, Merge
from framework.errors import IcebergError
from framework.sinks.delta import app_id
from framework.sinks.target import RestoredTarget, TargetRun, Written
from framework.spark.lines import at_least
from framework.spark.session import quoted, temporary_conf, to_arrow
from framework.spark.types import same, sql_type, widens
from state_tables.model import RunOutput, RunRecord

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, DataFrameWriterV2, SparkSession
    from pyspark.sql.types import DataType

__all__ = ["OUTPUT_TAG", "IcebergTarget", "IcebergWrite", "WriteMode", "is_output", "write"]

logger = logging.getLogger(__name__)

#: the tag of an Iceberg target's entry in ``Run.outputs``
OUTPUT_TAG: RunOutput = {"format": "iceberg"}

WriteMode = Literal["append", "overwrite", "merge", "apply_changes"]
#: Iceberg's session conf whose keys a SQL statement's snapshot summary takes (1.11, Spark 4)
_SESSION_PROPERTY = "spark.sql.iceberg.snapshot-property."


def is_output(output: RunOutput) -> bool:
    """Whether a run's output entry is an Iceberg target's."""
    return output.get("format") == OUTPUT_TAG["format"]


@dataclass(frozen=True)
class IcebergWrite:
    """What a run's write did: the snapshot it committed (None: the table has none),
    ``replayed`` when an earlier attempt of the run had committed it."""

    snapshot: int | None
    replayed: bool = False


def write(spark: SparkSession, df: DataFrame, table: str, *, mode: WriteMode,
          keys: Sequence[str], job: str, run_id: str, run_seq: int, record: RunRecord,
          before_commit: Callable[[], object], merge_schema: bool = False,
          changes: ApplyChanges | None = None) -> IcebergWrite:
    """Write ``df`` to ``table`` as run ``run_seq`` of ``job``, once: when the table holds
    the run already, nothing is written. ``before_commit`` runs before the snapshot is
    committed (the runner records the run's plan then). ``apply_changes`` applies change
    records as ``changes`` says (``framework.delta.changes``; tombstones beside the
    table's location, ``tombstones_at``).

    Raises:
        IcebergError: a merge without keys, or keys the rows lack; new columns without
            ``merge_schema``, or a type the table's cannot take.
        ChangeRecordsError: bad apply_changes options or change records.
    """
    if (mode == "apply_changes") != (changes is not None):
        raise IcebergError(table, "mode='apply_changes' takes keys and sequence_by (and only "
                           "that mode does)")
    if mode == "merge":
        if not keys:
            raise IcebergError(table, "mode='merge' needs keys=[the columns that identify a "
                               "row]")
        if missing := [key for key in keys if key not in df.columns]:
            raise IcebergError(table, f"merge keys {missing} are not columns of the rows "
                               f"written ({', '.join(df.columns)})")
    target = IcebergTarget(table)
    if landed := target.runs(job, after_seq=run_seq - 1):
        return IcebergWrite(landed[0].version, replayed=True)
    mark = {f"{iceberg.MARK_PREFIX}{key}": value for key, value in (
        ("job", job), ("run_seq", str(run_seq)), ("run_id", run_id),
        ("record", json.dumps(record, default=str)))}
    if changes is not None:
        _apply(spark, df, table, changes, run=AppTransaction(app_id(job), run_seq),
               mark=mark, before_commit=before_commit, merge_schema=merge_schema)
    else:
        if iceberg.exists(table):
            _evolve(spark, df, table, merge_schema=merge_schema)
        before_commit()
        if not iceberg.exists(table):
            _with_options(df.writeTo(table), mark).using("iceberg").create()
        elif mode == "merge":
            _merge(spark, df, table, lambda t, s: Merge(" AND ".join(
                f"{t}.{quoted(key)} = {s}.{quoted(key)}" for key in keys)), mark)
        elif mode == "overwrite":
            from pyspark.sql import functions as F

            _with_options(df.writeTo(table), mark).overwrite(F.lit(True))
        else:
            _with_options(df.writeTo(table), mark).append()
    [written] = target.runs(job, after_seq=run_seq - 1)
    return IcebergWrite(written.version)


def tombstones_at(table: str) -> str:
    """Where the delete tombstones of apply_changes writes to ``table`` are kept: a Delta
    table beside its location (not in it, where Iceberg's orphan-file removal would
    delete them)."""
    return iceberg.location(table).rstrip("/") + "__deltamark_tombstones"


def _apply(spark: SparkSession, df: DataFrame, table: str, changes: ApplyChanges, *,
           run: AppTransaction, mark: Mapping[str, str], before_commit: Callable[[], object],
           merge_schema: bool) -> None:
    """Apply the change records ``df`` in one snapshot (see ``framework.delta.changes``)."""
    from pyspark.sql import functions as F

    checked = changes.checked(table, df)
    exists = iceberg.exists(table)
    tombstones = None
    if exists:
        landed = max((s.mark().get("run_seq", 0) for s in iceberg.history(table)
                      if s.mark().get("job") == run.app_id.removeprefix("deltamark:")),
                     default=0)
        tombstones = changes.tombstones(spark, tombstones_at(table), run=run, landed=landed)
    if changes.scd_type == 1:
        rows, flag = changes.latest(checked, tombstones).drop(SEQUENCE), DELETE
    else:
        rows = changes.history(checked, spark.table(table) if exists else None, tombstones)
        flag = DROP

    def record_tombstones() -> None:
        changes.record_tombstones(tombstones_at(table), to_arrow(
            checked.where(F.col(DELETE)).select(*changes.keys, SEQUENCE)), run)

    if not exists:  # created with the rows that stay; then its tombstones have a place
        before_commit()
        _with_options(rows.where(~F.col(flag)).drop(flag).writeTo(table), mark) \
            .using("iceberg").create()
        record_tombstones()
        return
    _evolve(spark, rows.drop(flag), table, merge_schema=merge_schema)
    before_commit()
    record_tombstones()
    columns = [c for c in rows.columns if c != flag]
    merge = changes.upsert if changes.scd_type == 1 else changes.replace_history
    _merge(spark, rows, table,
           lambda t, s: merge(quoted, columns, target=t, source=s), mark)


def _evolve(spark: SparkSession, df: DataFrame, table: str, *, merge_schema: bool) -> None:
    """``table``'s schema altered to take ``df``'s new fields and promotions.

    Raises:
        IcebergError: new fields without ``merge_schema``, or a type that cannot promote.
    """
    changes: dict[str, str] = {}
    problems: list[str] = []
    _changes(spark.table(table).schema, df.schema, (), changes, problems)
    if changes and not merge_schema:
        problems.insert(0, f"the rows bring {', '.join(changes.values())}: pass "
                        "merge_schema=True to add and promote them")
    if problems:
        raise IcebergError(table, "; ".join(problems))
    for clause in changes:
        spark.sql(f"ALTER TABLE {table} {clause}")


def _changes(table: DataType, data: DataType, path: tuple[str, ...],
             changes: dict[str, str], problems: list[str]) -> None:
    """The ``ALTER TABLE`` clauses (with what each says) bringing the ``table`` type at
    ``path`` to take ``data`` (Iceberg's: fields added at any depth, int -> long,
    float -> double, decimal precision up), and what cannot."""
    from pyspark.sql import types as T

    column = ".".join(quoted(part) for part in path)
    if same(table, data) or widens(data, table):
        return  # Spark casts the rows up as it writes them
    if isinstance(table, T.StructType) and isinstance(data, T.StructType):
        known = {f.name.lower(): f for f in table.fields}  # Spark resolves names so
        for f in data.fields:
            if (match := known.get(f.name.lower())) is not None:
                _changes(match.dataType, f.dataType, (*path, match.name), changes, problems)
            else:
                name = ".".join(quoted(part) for part in (*path, f.name))
                changes[f"ADD COLUMN {name} {sql_type(f.dataType)}"] = (
                    f"+ {'.'.join((*path, f.name))} {f.dataType.simpleString()}")
    elif isinstance(table, T.ArrayType) and isinstance(data, T.ArrayType):
        _changes(table.elementType, data.elementType, (*path, "element"), changes, problems)
    elif isinstance(table, T.MapType) and isinstance(data, T.MapType) and same(
            table.keyType, data.keyType):
        _changes(table.valueType, data.valueType, (*path, "value"), changes, problems)
    elif _promotes(table, data):
        changes[f"ALTER COLUMN {column} TYPE {sql_type(data)}"] = (
            f"{'.'.join(path)} {table.simpleString()} -> {data.simpleString()}")
    else:
        problems.append(f"column {'.'.join(path)} is {data.simpleString()} in the rows but "
                        f"{table.simpleString()} in the table, and Iceberg cannot promote it")


def _promotes(table: DataType, data: DataType) -> bool:
    """Whether Iceberg promotes a column of type ``table`` to ``data``."""
    from pyspark.sql import types as T

    if isinstance(table, T.DecimalType) and isinstance(data, T.DecimalType):
        return data.scale == table.scale and data.precision > table.precision
    return ((isinstance(table, T.IntegerType) and isinstance(data, T.LongType))
            or (isinstance(table, T.FloatType) and isinstance(data, T.DoubleType)))


def _with_options(writer: DataFrameWriterV2, mark: Mapping[str, str]) -> DataFrameWriterV2:
    """``writer``, whose snapshot's summary takes ``mark``."""
    for key, value in mark.items():
        writer = writer.option(f"snapshot-property.{key}", value)
    return writer


#: how a MERGE's conditions name the rows (Spark 4's DataFrame merge names the table itself)
_ROWS = "deltamark_rows"


def _merge(spark: SparkSession, df: DataFrame, table: str,
           merge_of: Callable[[str, str], Merge], mark: Mapping[str, str]) -> None:
    """MERGE ``df`` into ``table`` (``merge_of(target, source)``: the clauses, naming the
    table and the rows so) in one snapshot whose summary takes ``mark``.

    On Spark 4, Spark's DataFrame merge with Iceberg's session conf for a statement's
    snapshot properties (4.1's SQL MERGE fails to plan a source that reads an Iceberg
    table: "No plan for TableReference"). Spark 3.5's Iceberg gives a SQL statement's
    snapshot no properties: the MERGE, then an empty append whose summary takes ``mark``
    and says the run made two snapshots. A crash between them leaves the run unlanded;
    its replay merges the same rows again, changing nothing."""
    from pyspark.sql import functions as F

    if at_least("4.0"):
        merge = merge_of(table, _ROWS)
        writer = df.alias(_ROWS).mergeInto(table, F.expr(merge.on))
        if merge.delete_when:
            writer = writer.whenMatched(F.expr(merge.delete_when)).delete()
        matched = writer.whenMatched(*_condition(merge.update_when))
        writer = (matched.updateAll() if merge.columns is None else matched.update(
            {c: F.col(f"{_ROWS}.{quoted(c)}") for c in merge.columns}))
        missing = writer.whenNotMatched(*_condition(merge.insert_when))
        writer = (missing.insertAll() if merge.columns is None else missing.insert(
            {c: F.col(f"{_ROWS}.{quoted(c)}") for c in merge.columns}))
        with temporary_conf(spark, {_SESSION_PROPERTY + k: v for k, v in mark.items()}):
            writer.merge()
        return
    merge = merge_of("t", "s")
    view = f"deltamark_merge_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(view)
    try:
        spark.sql(f"MERGE INTO {table} t USING {view} s ON {merge.on} "
                  f"{merge.when_clauses(quoted)}")
    finally:
        spark.catalog.dropTempView(view)
    _with_options(spark.table(table).limit(0).writeTo(table),
                  {**mark, f"{iceberg.MARK_PREFIX}commits": "2"}).append()


def _condition(sql: str | None) -> tuple[Column, ...]:
    """A MERGE clause's condition as Spark's DataFrame merge takes it (none: always)."""
    from pyspark.sql import functions as F

    return () if sql is None else (F.expr(sql),)


@dataclass(frozen=True)
class IcebergTarget:
    """An Iceberg table written by runs (``Target``)."""

    key: str

    def describe(self, output: RunOutput) -> str:
        return f"snapshot {output.get('version', '?')}"

    def written(self, output: RunOutput) -> Written:
        found = next((s for s in iceberg.history(self.key)
                      if s.snapshot_id == output.get("version")), None)
        if found is None:
            return Written()
        return Written(_number(found.summary.get("added-records")),
                       _number(found.summary.get("added-data-files")),
                       _number(found.summary.get("added-files-size")))

    def runs(self, job: str, *, after_seq: int = 0) -> list[TargetRun]:
        found = []
        for snapshot in iceberg.history(self.key, missing_ok=True):
            mine = snapshot.mark()
            if mine.get("job") == job and mine["run_seq"] > after_seq:
                found.append(TargetRun(
                    self.key, mine["run_seq"], mine.get("run_id", "?"),
                    datetime.fromtimestamp(snapshot.timestamp_ms / 1000, UTC),
                    snapshot.snapshot_id, mine["record"],
                    {**OUTPUT_TAG, "written": True, "version": snapshot.snapshot_id}))
        return found

    def landed(self, job: str, run_seq: int) -> bool:
        return bool(self.runs(job, after_seq=run_seq - 1))

    def discard(self, job: str, run_seq: int) -> None:
        """An uncommitted write is invisible: only the run's delete tombstones go."""
        self._forget_tombstones(job, from_run=run_seq)

    def roll_back(self, job: str, run_seq: int, run_id: str) -> bool:
        chain = iceberg.history(self.key)
        mine = chain[-1].mark() if chain else {}
        if (mine.get("job"), mine.get("run_seq")) != (job, run_seq):
            logger.warning("cannot roll back %s: another writer committed since", self.key)
            return False
        first = chain[-int(mine.get("commits", 1))]  # a merge on Spark 3.5 made two
        _rollback(self.key, first.parent_id)
        self._forget_tombstones(job, from_run=run_seq)
        return True

    def restore_blockers(self, job: str, run_seq: int) -> list[str]:
        _, later = self._since(job, run_seq)
        return [f"{self.key} snapshot {s.snapshot_id} ({s.operation} at "
                f"{datetime.fromtimestamp(s.timestamp_ms / 1000, UTC):%Y-%m-%d %H:%M:%S}) "
                "by another writer" for s in later if s.mark().get("job") != job]

    def restore(self, job: str, run_seq: int, run_id: str) -> RestoredTarget | None:
        keep, later = self._since(job, run_seq)
        if not later:
            return None
        _rollback(self.key, keep)
        self._forget_tombstones(job, from_run=run_seq + 1)
        return RestoredTarget(self.key, later[0].snapshot_id, keep,
                              keep if keep is not None else 0)

    def _forget_tombstones(self, job: str, *, from_run: int) -> None:
        if iceberg.exists(self.key):
            forget_tombstones(tombstones_at(self.key), app_id(job), from_run=from_run)

    def _since(self, job: str, run_seq: int) -> tuple[int | None, list[iceberg.Snapshot]]:
        """The snapshot of ``job``'s newest commit up to run ``run_seq`` (None: the table
        had none then), and the snapshots after it, newest first."""
        chain = iceberg.history(self.key, missing_ok=True)[::-1]
        keep = next((s.snapshot_id for s in chain
                     if (mine := s.mark()).get("job") == job and mine["run_seq"] <= run_seq),
                    None)
        return keep, list(itertools.takewhile(lambda s: s.snapshot_id != keep, chain))


def _rollback(table: str, snapshot: int | None) -> None:
    """Make ``snapshot`` the table's current one again (None: empty the table), in the
    running Spark session."""
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        raise IcebergError(table, "rolling an Iceberg table back needs Spark; run the "
                           "command with the job's Spark conf (deltamark runs it in a "
                           "session)")
    catalog, identifier = iceberg.split_name(table)
    if snapshot is None:
        spark.sql(f"DELETE FROM {table}")
        return
    spark.sql(f"CALL {catalog}.system.rollback_to_snapshot('{'.'.join(identifier)}', "
              f"{snapshot})")


def _number(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None
