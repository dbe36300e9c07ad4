"""Incremental Iceberg sources: read what an upstream table gained since the last run.

A context's bookmark is the last snapshot it processed. A run pins the table's current
snapshot when it plans (with pyiceberg, no JVM: ``framework.iceberg``) and reads the
snapshots after the bookmark up to it: the rows they appended or, with ``changes=True``,
every insert, update and delete through Iceberg's changelog, with ``_change_type``,
``_change_ordinal`` and ``_commit_snapshot_id``. The first run reads the whole table at the
pinned snapshot. Without ``changes``, a snapshot that changed rows in place (an overwrite
or a delete) stops the read with the way out; compactions (``replace``) change no rows.
With ``changes``, so do delete files (merge-on-read), which Iceberg's changelog cannot
read.

A bookmark whose snapshot left the table's history (expired, or the table was rolled back
before it) cannot be continued: the read fails naming the way out, or with
``expired="full_refresh"`` reads the whole table again.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict

from framework import iceberg
from framework.errors import IcebergError
from framework.sources import Backlog

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from framework.sources import Bookmarks

__all__ = ["SOURCE_KIND", "Expired", "IcebergPlan", "IcebergState", "description",
           "new_items", "plan_iceberg", "read_iceberg"]

SOURCE_KIND = "iceberg"

#: what a read does when its bookmark's snapshot left the table's history
Expired = Literal["fail", "full_refresh"]

@dataclass(frozen=True)
class IcebergState:
    """An Iceberg context's bookmark: the last snapshot of ``table`` it processed (None:
    the table had none), after ``from_snapshot`` (the run's range, pinned for a replay)."""

    kind: ClassVar[str] = SOURCE_KIND
    state_version: ClassVar[int] = 1

    table: str
    snapshot: int | None
    from_snapshot: int | None = None

    def describe(self) -> list[tuple[str, str]]:
        return [("table", self.table),
                ("processed up to", "no snapshot yet" if self.snapshot is None else
                 f"snapshot {self.snapshot} (the next run reads the snapshots after it)")]


@dataclass(frozen=True)
class IcebergPlan:
    """Read the snapshots after ``after`` up to ``to`` (``after`` None: the whole table at
    ``to``; ``to`` None: the table has no snapshot). ``snapshots``: how many the range
    holds. ``advance``: the plan's state is committed when the run succeeds."""

    table: str
    after: int | None
    to: int | None
    snapshots: int
    advance: bool = False

    def state(self) -> IcebergState:
        """The bookmark to commit; it also pins the range for a replay."""
        return IcebergState(table=self.table, snapshot=self.to, from_snapshot=self.after)

    @classmethod
    def pinned(cls, state: IcebergState) -> IcebergPlan:
        same = state.snapshot == state.from_snapshot
        return cls(table=state.table, after=state.from_snapshot, to=state.snapshot,
                   snapshots=0 if same else 1, advance=True)

    def counts(self) -> dict[str, int]:
        return {"snapshots": self.snapshots}


def plan_iceberg(table: str, *, start: IcebergState | None, end: IcebergState | None = None,
                 advance: bool, changes: bool = False, expired: Expired = "fail"
                 ) -> IcebergPlan:
    """Pin the range: after ``start``'s snapshot (everything when None) up to ``end``'s
    snapshot, or the table's current one.

    Raises:
        IcebergError: no such table; the bookmark's snapshot left the table's history
            (unless ``expired="full_refresh"``); without ``changes``, a snapshot in the
            range changed rows in place.
    """
    chain = iceberg.history(table)
    to = end.snapshot if end is not None else (chain[-1].snapshot_id if chain else None)
    ids = [s.snapshot_id for s in chain]
    if to is not None and to in ids:
        chain = chain[:ids.index(to) + 1]
    after = start.snapshot if start is not None else None
    if after is None or after == to:
        return IcebergPlan(table, after, to, 0 if after == to and after is not None
                           else len(chain), advance)
    ids = [s.snapshot_id for s in chain]
    if after in ids:
        new = chain[ids.index(after) + 1:]
    elif chain and chain[0].parent_id == after:  # its own entry expired, not its children
        new = chain
    else:
        if expired == "full_refresh":
            return IcebergPlan(table, None, to, len(chain), advance)
        raise IcebergError(table, f"the bookmark's snapshot {after} is no longer in the "
                           "table's history (its snapshots expired, or the table was rolled "
                           "back): read it again in full with read_iceberg(..., expired="
                           "'full_refresh'), or reset the reading context")
    if not changes and (in_place := [s for s in new if s.operation in ("overwrite",
                                                                       "delete")]):
        named = ", ".join(f"{s.snapshot_id} ({s.operation})" for s in in_place[:3])
        raise IcebergError(table, f"snapshot{'s' if len(in_place) > 1 else ''} {named} "
                           f"{'' if len(in_place) <= 3 else f'and {len(in_place) - 3} more '}"
                           "changed rows in place, which a read "
                           "of appended rows would miss: read them with read_iceberg(..., "
                           "changes=True)")
    if changes and (deletes := next((s for s in new if s.operation != "replace" and int(
            s.summary.get("total-delete-files", "0")) > 0), None)):
        raise IcebergError(table, f"snapshot {deletes.snapshot_id} has delete files "
                           "(merge-on-read), which Iceberg's changelog cannot read: write the "
                           "table copy-on-write (write.delete.mode, write.update.mode, "
                           "write.merge.mode), rewrite its delete files away (CALL "
                           f"{table.split('.')[0]}.system.rewrite_position_delete_files with "
                           "rewrite-all), then reset this context to read it in full once")
    return IcebergPlan(table, after, to, len(new), advance)


class IcebergDescription(TypedDict, total=False):
    """An Iceberg read as its run records it (``Run.sources``): the table; for a
    whole-table read, the snapshot it read."""

    kind: str
    table: str
    read: int | None


def description(plan: IcebergPlan, *, tracked: bool) -> IcebergDescription:
    """What planning the read again needs, as plain data (``preflight``)."""
    if tracked:
        return {"kind": SOURCE_KIND, "table": plan.table}
    return {"kind": SOURCE_KIND, "table": plan.table, "read": plan.to}


def new_items(context: str, description: IcebergDescription, bookmarks: Bookmarks,
              connections: Callable[[str], Any]) -> Backlog:
    """The snapshots a read described by ``description`` would find past ``context``'s
    bookmark (a whole-table read: 1 when the current snapshot is not the one it read):
    ``framework.sources.SourceKind``."""
    if "read" in description:
        latest = iceberg.current(description["table"])
        return Backlog(int((latest and latest.snapshot_id) != description["read"]),
                       "snapshot")
    state = bookmarks.state(context, SOURCE_KIND)
    return Backlog(plan_iceberg(description["table"], start=state, advance=False,
                                changes=True).snapshots, "snapshot")


_views = itertools.count(1)


def read_iceberg(spark: SparkSession, plan: IcebergPlan, *, changes: bool,
                 keys: Sequence[str] = ()) -> DataFrame:
    """The rows the plan covers (see the module docstring); ``keys``: the columns that
    identify a row, to pair a change's delete and insert as ``UPDATE_BEFORE`` and
    ``UPDATE_AFTER``."""
    from pyspark.sql import functions as F

    reader = spark.read.format("iceberg")  # options set on a reader stay on it: one a read
    if plan.to is not None:  # None: no snapshot, the table's columns and no rows
        reader = reader.option("versionAsOf", str(plan.to))
    whole = reader.load(plan.table)
    if plan.after is None or plan.to is None or plan.after == plan.to:
        if plan.after is not None or plan.to is None:
            whole = whole.limit(0)
        if not changes:
            return whole
        return (whole.withColumn("_change_type", F.lit("INSERT"))
                .withColumn("_change_ordinal", F.lit(0))
                .withColumn("_commit_snapshot_id", F.lit(plan.to).cast("long")))
    if not changes:
        return (spark.read.format("iceberg").option("start-snapshot-id", str(plan.after))
                .option("end-snapshot-id", str(plan.to)).load(plan.table))
    catalog, identifier = iceberg.split_name(plan.table)
    view = f"deltamark_changes_{next(_views)}"
    updates = ("" if not keys else ", identifier_columns => array("
               + ", ".join(_literal(key) for key in keys) + ")")
    spark.sql(f"CALL {catalog}.system.create_changelog_view(table => "
              f"{_literal('.'.join(identifier))}, options => map('start-snapshot-id', "
              f"'{plan.after}', 'end-snapshot-id', '{plan.to}'), changelog_view => "
              f"'{view}'{updates})")
    return spark.table(view)


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
