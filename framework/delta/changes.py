"""Change records applied to a Delta table (``write_delta(mode="apply_changes")``), as
Databricks' AUTO CDC applies them: the latest change of each key by ``sequence_by`` wins,
``apply_as_deletes`` rows delete, a change older than what the table holds for its key
is ignored, in later runs too; SCD type 2 keeps each key's history in ``__START_AT`` /
``__END_AT`` rows.

Each run is one MERGE (``Merge``), so one commit carrying the run, on both Delta paths:

A delete leaves a tombstone (key, sequence) in ``<table>/_deltamark_tombstones``, a Delta
table of its own, for ``tombstone_retention``. Tombstones are committed before the
table's commit and count once that commit landed (its app transaction); the target's
discard, rollback and restore remove those of the runs they undo (``forget_tombstones``).

- SCD 1: the source is each key's latest change, with ``__deltamark_delete``; a matched
  row is deleted or updated only when the change's sequence is later than the row's (the
  table keeps the sequence columns), and no change as old as a tombstone of its key is
  applied: a late change older than a delete does not bring the row back.
- SCD 2: the history of every key a run changes is rebuilt from the rows the table holds
  for it (each row an upsert at ``__START_AT``, a closed row no row follows a delete at
  ``__END_AT``), its tombstones and the run's changes, in sequence order; rows of those
  keys the new history no longer has are deleted (``__deltamark_drop``), the others
  written, matched on the key and ``__START_AT``. A late change so lands where it
  belongs in the history.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
import pyarrow.compute as pc

from framework import storage
from framework.delta import log
from framework.delta.log import AppTransaction, Merge
from framework.errors import ChangeRecordsError
from framework.spark.session import from_arrow, quoted

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["END_AT", "START_AT", "ApplyChanges", "forget_tombstones"]

START_AT, END_AT = "__START_AT", "__END_AT"
#: the columns a run's changes carry while they are planned: their sequence, whether
#: they delete (SCD 1) and whether a history row goes (SCD 2)
SEQUENCE, DELETE, DROP = "__deltamark_sequence", "__deltamark_delete", "__deltamark_drop"
_NEW, _ORDER, _GROUP, _LAST = ("__deltamark_new", "__deltamark_order", "__deltamark_group",
                               "__deltamark_last")
TOMBSTONES = "_deltamark_tombstones"
#: a tombstone's columns besides the key's: its sequence, the run (app transaction) and
#: when it was written (epoch milliseconds)
_T_SEQUENCE, _T_APP, _T_RUN, _T_AT = "__sequence", "__app_id", "__run", "__deleted_ms"


@dataclass(frozen=True)
class ApplyChanges:
    """How ``write_delta(mode="apply_changes")`` applies a run's change records (AUTO CDC's
    options in snake case)."""

    keys: tuple[str, ...]
    #: one column, or several compared in order (ties of the first broken by the next)
    sequence_by: tuple[str, ...]
    #: a SQL condition on a change: the rows it holds for delete their key
    apply_as_deletes: str | None = None
    #: columns of the changes the table does not store (an ``Op`` column)
    except_columns: tuple[str, ...] = ()
    scd_type: Literal[1, 2] = 1
    #: SCD 2: a new history row only when one of these changes (default: every column
    #: but the keys and the sequence); other changes update the open row
    track_history_columns: tuple[str, ...] | None = None
    #: how long a delete's tombstone keeps an older change from bringing the row back
    tombstone_retention: timedelta = timedelta(days=7)

    def problems(self) -> list[str]:
        """What is wrong with these options, each in one line."""
        problems = []
        if not self.keys:
            problems.append("keys: give the key columns the changes apply to")
        if not self.sequence_by:
            problems.append("sequence_by: give the column that orders the changes of a key")
        if self.scd_type not in (1, 2):
            problems.append(f"scd_type={self.scd_type!r}: 1 or 2")
        if self.track_history_columns is not None and self.scd_type != 2:
            problems.append("track_history_columns needs scd_type=2")
        if kept := [c for c in self.except_columns if c in self.keys or (
                self.scd_type == 1 and c in self.sequence_by)]:
            problems.append(f"except_columns {kept}: the table keeps the keys"
                            + (" and, with SCD 1, the sequence_by columns" if self.scd_type
                               == 1 else ""))
        if self.tombstone_retention <= timedelta(0):
            problems.append("tombstone_retention: a positive duration")
        return problems

    def checked(self, target: str, df: DataFrame) -> DataFrame:
        """``df`` with its sequence (``SEQUENCE``) and whether each change deletes
        (``DELETE``), without the ``except_columns`` it has.

        Raises:
            ChangeRecordsError: these options are wrong, a column they name (but
                ``except_columns``) is missing, the delete condition is not valid SQL on
                the changes, or a key or sequence is NULL (naming the column and the
                change).
        """
        from pyspark.errors import AnalysisException
        from pyspark.sql import functions as F

        if problems := self.problems():
            raise ChangeRecordsError(target, "; ".join(problems) + ".")
        named = {"keys": self.keys, "sequence_by": self.sequence_by,
                 "track_history_columns": self.track_history_columns or ()}
        for option, columns in named.items():
            if missing := [c for c in columns if c not in df.columns]:
                raise ChangeRecordsError(target, f"{option} column(s) {missing} are not in "
                                         f"the changes (columns: {', '.join(df.columns)})")
        sequence = (_col(self.sequence_by[0]) if len(self.sequence_by) == 1
                    else F.struct(*[_col(c) for c in self.sequence_by]))
        try:
            deleting = (F.coalesce(F.expr(self.apply_as_deletes), F.lit(False))
                        if self.apply_as_deletes else F.lit(False))
            checked = df.withColumn(SEQUENCE, sequence).withColumn(DELETE, deleting)
        except AnalysisException as exc:
            first = str(exc).strip().splitlines()[0]
            raise ChangeRecordsError(target, f"apply_as_deletes={self.apply_as_deletes!r} is "
                                     f"not a condition on the changes: {first}") from None
        needed = [*self.keys, *self.sequence_by]
        null = F.lit(False)
        for column in needed:
            null = null | _col(column).isNull()
        if bad := checked.where(null).limit(1).collect():
            row = bad[0].asDict()
            column = next(c for c in needed if row[c] is None)
            shown = ", ".join(f"{c}={row[c]!r}" for c in needed)
            raise ChangeRecordsError(target, f"{column} is NULL in a change ({shown}); keys "
                                     "and sequence_by columns need a value in every change")
        return checked.drop(*[c for c in self.except_columns if c in df.columns])

    # --- SCD 1 -----------------------------------------------------------------------

    def latest(self, changes: DataFrame, tombstones: DataFrame | None) -> DataFrame:
        """Each key's latest change, unless a tombstone is as late."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        order = Window.partitionBy(*[_col(k) for k in self.keys]).orderBy(
            F.col(SEQUENCE).desc(), F.col(DELETE).desc())
        latest = (changes.withColumn(_ORDER, F.row_number().over(order))
                  .where(F.col(_ORDER) == 1).drop(_ORDER))
        if tombstones is None:
            return latest
        newest = tombstones.groupBy(*self.keys).agg(F.max(_T_SEQUENCE).alias(_T_SEQUENCE))
        return (latest.join(newest, list(self.keys), "left")
                .where(F.col(_T_SEQUENCE).isNull() | (F.col(SEQUENCE) > F.col(_T_SEQUENCE)))
                .drop(_T_SEQUENCE))

    def upsert(self, quote: Callable[[str], str], columns: Sequence[str], *,
               target: str = "t", source: str = "s") -> Merge:
        """The MERGE of ``latest`` rows (``columns`` written) into the table, its conditions
        naming the table ``target`` and the rows ``source``."""
        later = _later([f"{source}.{quote(c)}" for c in self.sequence_by],
                       [f"{target}.{quote(c)}" for c in self.sequence_by])
        flag = f"{source}.{quote(DELETE)}"
        return Merge(on=self._on(quote, target, source), columns=tuple(columns),
                     delete_when=f"{flag} AND ({later})",
                     update_when=f"NOT {flag} AND ({later})", insert_when=f"NOT {flag}",
                     removing=DELETE)

    # --- SCD 2 -----------------------------------------------------------------------

    def history(self, changes: DataFrame, table: DataFrame | None,
                tombstones: DataFrame | None) -> DataFrame:
        """The history rows of every key in ``changes``, rebuilt with what ``table`` holds
        for them and their ``tombstones`` (deletes that closed no row: of a key the table
        did not hold yet); with ``DROP`` true on the table's rows of those keys the
        history no longer has."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        keys = list(self.keys)
        data = [c for c in changes.columns if c not in (SEQUENCE, DELETE, START_AT, END_AT)]
        events = changes.select(*data, SEQUENCE, DELETE, F.lit(1).alias(_NEW))
        held = None
        if table is not None:
            # the rows of the keys changed, read once: the table is scanned once, not
            # for each of the four uses below
            held = table.join(changes.select(*keys).distinct(), keys, "left_semi") \
                .localCheckpoint(eager=True)
            upserts = held.select(*data, F.col(START_AT).alias(SEQUENCE),
                                  F.lit(False).alias(DELETE), F.lit(0).alias(_NEW))
            starts = held.select(*keys, F.col(START_AT).alias(SEQUENCE))
            deletes = (held.where(F.col(END_AT).isNotNull())
                       .select(*keys, F.col(END_AT).alias(SEQUENCE))
                       .join(starts, [*keys, SEQUENCE], "left_anti")
                       .select(*keys, SEQUENCE, F.lit(True).alias(DELETE), F.lit(0).alias(_NEW)))
            events = events.unionByName(upserts).unionByName(deletes, allowMissingColumns=True)
        if tombstones is not None:
            events = events.unionByName(
                tombstones.join(changes.select(*keys).distinct(), keys, "left_semi")
                .select(*keys, F.col(_T_SEQUENCE).alias(SEQUENCE), F.lit(True).alias(DELETE),
                        F.lit(0).alias(_NEW)), allowMissingColumns=True)
        # one partitioning and one order for every step (one shuffle, one sort): each
        # key's events by sequence, at one sequence the run's change first, then a delete
        by_key = Window.partitionBy(*[_col(k) for k in keys])
        ordered = by_key.orderBy(F.col(SEQUENCE), F.col(_NEW).desc(), F.col(DELETE).desc())
        earlier = F.lag(F.col(SEQUENCE)).over(ordered)
        events = (events.withColumn(_ORDER, earlier.isNull() | (earlier != F.col(SEQUENCE)))
                  .where(F.col(_ORDER)).drop(_ORDER))
        tracked = self.track_history_columns or [
            c for c in data if c not in self.keys and c not in self.sequence_by]
        previous = F.lag(F.col(DELETE)).over(ordered)
        starts_row = F.col(DELETE) | previous.isNull() | previous
        for column in tracked:
            starts_row = starts_row | ~_col(column).eqNullSafe(F.lag(_col(column)).over(ordered))
        grouped = (events.withColumn(_GROUP, F.sum(starts_row.cast("int")).over(
            ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow))))
        versions = grouped.groupBy(*keys, _GROUP).agg(
            F.min(SEQUENCE).alias(START_AT), F.max(DELETE).alias(DELETE),
            F.max_by(F.struct(*[_col(c) for c in data if c not in keys]),
                     F.col(SEQUENCE)).alias(_LAST))
        rows = (versions.withColumn(END_AT, F.lead(F.col(START_AT)).over(
            by_key.orderBy(F.col(START_AT))))
            .where(~F.col(DELETE))
            .select(*keys, *[F.col(f"{_LAST}.{quoted(c)}").alias(c)
                             for c in data if c not in keys], START_AT, END_AT)
            .withColumn(DROP, F.lit(False)))
        if held is None:
            return rows
        gone = (held.select(*keys, START_AT)
                .join(rows.select(*keys, START_AT), [*keys, START_AT], "left_anti")
                .withColumn(DROP, F.lit(True)))
        return rows.unionByName(gone, allowMissingColumns=True)

    def replace_history(self, quote: Callable[[str], str], columns: Sequence[str], *,
                        target: str = "t", source: str = "s") -> Merge:
        """The MERGE of ``history`` rows (``columns`` written) into the table, its
        conditions naming the table ``target`` and the rows ``source``."""
        flag = f"{source}.{quote(DROP)}"
        on = (f"{self._on(quote, target, source)} AND "
              f"{target}.{quote(START_AT)} = {source}.{quote(START_AT)}")
        return Merge(on=on, columns=tuple(columns), delete_when=flag,
                     update_when=f"NOT {flag}", insert_when=f"NOT {flag}", removing=DROP)

    def _on(self, quote: Callable[[str], str], target: str, source: str) -> str:
        return " AND ".join(f"{target}.{quote(k)} = {source}.{quote(k)}" for k in self.keys)

    # --- tombstones ------------------------------------------------------------------

    def tombstones(self, spark: SparkSession, at: str, *, run: AppTransaction | None,
                   landed: int) -> DataFrame | None:
        """The tombstones kept at ``at`` within the retention, but those of runs of
        ``run``'s job after ``landed`` (its newest run whose target commit landed): None
        when there are none."""
        rows = log.read_rows(at)
        if rows is None or rows.num_rows == 0:
            return None
        cutoff = int((time.time() - self.tombstone_retention.total_seconds()) * 1000)
        kept = pc.greater_equal(rows[_T_AT], cutoff)
        if run is not None:
            kept = pc.and_(kept, pc.or_(pc.not_equal(rows[_T_APP], run.app_id),
                                        pc.less_equal(rows[_T_RUN], landed)))
        rows = rows.filter(kept).select([*self.keys, _T_SEQUENCE])
        return from_arrow(spark, rows) if rows.num_rows else None

    def record_tombstones(self, at: str, deletes: pa.Table, run: AppTransaction | None
                          ) -> None:
        """Commit tombstones at ``at`` for ``deletes`` (keys and ``SEQUENCE``) of ``run``,
        and drop those past the retention."""
        if deletes.num_rows == 0:
            return
        now = int(time.time() * 1000)
        n = deletes.num_rows
        rows = (deletes.rename_columns([*self.keys, _T_SEQUENCE])
                .append_column(_T_APP, pa.array([run.app_id if run else ""] * n, pa.string()))
                .append_column(_T_RUN, pa.array([run.version if run else 0] * n, pa.int64()))
                .append_column(_T_AT, pa.array([now] * n, pa.int64())))
        log.append_rows(at, rows)
        cutoff = now - int(self.tombstone_retention.total_seconds() * 1000)
        log.delete_where(at, f'"{_T_AT}" < {cutoff}')


def tombstones_path(path: str) -> str:
    """Where the tombstones of the Delta table ``path`` are kept."""
    return storage.join(storage.absolute(path), TOMBSTONES)


def forget_tombstones(where: str, app_id: str, *, from_run: int) -> None:
    """Remove the tombstones kept at ``where`` that runs ``from_run`` and later of
    ``app_id`` wrote (their target commits were discarded, rolled back or restored away)."""
    if log.is_table(where):
        app = app_id.replace("'", "''")
        log.delete_where(where, f"\"{_T_APP}\" = '{app}' AND \"{_T_RUN}\" >= {from_run}")


def _col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(quoted(name))


def _later(new: Sequence[str], old: Sequence[str]) -> str:
    """SQL: the sequence ``new`` (columns compared in order) is later than ``old``; an
    ``old`` with no sequence (NULL) is earlier than any."""
    first_new, first_old = new[0], old[0]
    later = f"{first_old} IS NULL OR {first_new} > {first_old}"
    if len(new) > 1:
        later += f" OR ({first_new} = {first_old} AND ({_later(new[1:], old[1:])}))"
    return later
