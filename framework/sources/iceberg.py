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

A context without a bookmark starts at the job's ``starting_snapshot`` (that snapshot
onwards, or ``"latest"``: what is committed after its first run) or the first snapshot
committed at or after ``starting_timestamp``. A cap (``bounded_files``, ``bounded_size``,
from the snapshots' summaries) takes whole snapshots, at least one a run. Planning reads
the table's metadata (its snapshot log), never its manifests.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict

from framework import iceberg
from framework.errors import IcebergError
from framework.sources import Backlog
from framework.sources.limits import TableSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from framework.sources import Bookmarks

__all__ = ["SOURCE_KIND", "Expired", "IcebergPlan", "IcebergSource", "IcebergState",
           "description", "new_items", "plan_iceberg", "read_iceberg"]

SOURCE_KIND = "iceberg"

#: what a read does when its bookmark's snapshot left the table's history
Expired = Literal["fail", "full_refresh"]


@dataclass(frozen=True)
class IcebergSource(TableSource):
    """How a context reads the Iceberg table ``table`` (``catalog.namespace.table``;
    ``TableSource``: ``start`` is the job's ``starting_snapshot``, a snapshot id; the cap
    counts data files added, whole snapshots)."""

    POSITION: ClassVar[str] = "starting_snapshot"
    UNIT: ClassVar[str] = "snapshot id"


@dataclass(frozen=True)
class IcebergState:
    """An Iceberg context's bookmark: the last snapshot of ``table`` it processed (None:
    the table had none), after ``from_snapshot`` (the run's range, pinned for a replay)."""

    kind: ClassVar[str] = SOURCE_KIND
    state_version: ClassVar[int] = 1

    table: str
    snapshot: int | None
    from_snapshot: int | None = None
    starting: str | None = field(default=None, metadata={"stored_when_set": True})

    def describe(self) -> list[tuple[str, str]]:
        lines = [("table", self.table),
                 ("processed up to", "no snapshot yet" if self.snapshot is None else
                  f"snapshot {self.snapshot} (the next run reads the snapshots after it)")]
        return [*lines, ("started at", self.starting)] if self.starting else lines


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
    #: the snapshots a cap left for later runs
    backlog: int = 0
    starting: str | None = None

    def state(self) -> IcebergState:
        """The bookmark to commit; it also pins the range for a replay."""
        return IcebergState(table=self.table, snapshot=self.to, from_snapshot=self.after,
                            starting=self.starting)

    @classmethod
    def pinned(cls, state: IcebergState) -> IcebergPlan:
        same = state.snapshot == state.from_snapshot
        return cls(table=state.table, after=state.from_snapshot, to=state.snapshot,
                   snapshots=0 if same else 1, advance=True, starting=state.starting)

    def counts(self) -> dict[str, int]:
        return {"snapshots": self.snapshots, "backlog": self.backlog} if self.backlog else {
            "snapshots": self.snapshots}


def plan_iceberg(source: IcebergSource, *, start: IcebergState | None,
                 end: IcebergState | None = None, advance: bool, changes: bool = False,
                 expired: Expired = "fail") -> IcebergPlan:
    """Pin the range: after ``start``'s snapshot (without one: the starting position, or
    everything) up to ``end``'s snapshot, or the table's current one; when the plan
    advances the bookmark, at most ``source``'s cap of whole snapshots.

    Raises:
        IcebergError: no such table; the bookmark's snapshot left the table's history
            (unless ``expired="full_refresh"``); without ``changes``, a snapshot in the
            range changed rows in place; a starting position the history does not have.
    """
    table = source.table
    chain = iceberg.history(table)
    to = end.snapshot if end is not None else (chain[-1].snapshot_id if chain else None)
    ids = [s.snapshot_id for s in chain]
    if to is not None and to in ids:
        chain = chain[:ids.index(to) + 1]
    if start is not None:
        after, starting = start.snapshot, start.starting
    else:
        after, starting = _starting_point(source, chain), source.starting
    if after is None or after == to:
        return IcebergPlan(table, after, to, 0 if after == to and after is not None
                           else len(chain), advance, starting=starting)
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
    backlog = 0
    if advance and source.cap:
        taken = source.cap.taken((int(s.summary.get("added-data-files", "0")),
                                  int(s.summary.get("added-files-size", "0"))) for s in new)
        new, backlog = new[:taken], len(new) - taken
    _check_readable(table, new, changes=changes)
    return IcebergPlan(table, after, new[-1].snapshot_id if new else to, len(new), advance,
                       backlog=backlog, starting=starting)


def _starting_point(source: IcebergSource, chain: Sequence[iceberg.Snapshot]) -> int | None:
    """The snapshot before the first one a context without a bookmark reads (None: the
    whole table)."""
    table, wanted = source.table, source.start
    if wanted == "latest":
        return chain[-1].snapshot_id if chain else None
    ids = [s.snapshot_id for s in chain]
    if wanted is not None:
        if wanted not in ids:
            raise IcebergError(table, f"starting_snapshot={wanted} is not in the table's "
                               "history (expired, rolled back, or never its): give one of "
                               "its snapshots, or starting_snapshot='latest'")
        return chain[ids.index(wanted)].parent_id
    when = source.starting_time
    if when is None:
        return None
    first = next((s for s in chain if s.timestamp_ms >= when.timestamp() * 1000), None)
    if first is None:
        raise IcebergError(table, f"starting_timestamp={when.isoformat()} is after its "
                           "latest snapshot: give an earlier time, or "
                           "starting_snapshot='latest' for what comes next")
    if first is chain[0] and first.parent_id is not None and (
            first.timestamp_ms > when.timestamp() * 1000):
        raise IcebergError(table, f"starting_timestamp={when.isoformat()} is before its "
                           "oldest kept snapshot (the ones before expired): give a later time")
    return first.parent_id


def _check_readable(table: str, new: Sequence[iceberg.Snapshot], *, changes: bool) -> None:
    """Without ``changes``: no snapshot changed rows in place; with them: none has delete
    files, which Iceberg's changelog cannot read."""
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


class IcebergDescription(TypedDict, total=False):
    """An Iceberg read as its run records it (``Run.sources``): the table and, for a
    tracked read, its options (``IcebergSource.plain``); for a whole-table read, the
    snapshot it read."""

    kind: str
    table: str
    read: int | None
    options: dict[str, Any]


def description(plan: IcebergPlan, source: IcebergSource, *, tracked: bool
                ) -> IcebergDescription:
    """What planning the read again needs, as plain data (``preflight``)."""
    if tracked:
        return {"kind": SOURCE_KIND, "table": plan.table, "options": source.plain()}
    return {"kind": SOURCE_KIND, "table": plan.table, "read": plan.to}


def new_items(context: str, description: IcebergDescription, bookmarks: Bookmarks,
              connections: Callable[[str], Any]) -> Backlog:
    """The snapshots a read described by ``description`` would find past ``context``'s
    bookmark (a whole-table read: 1 when the current snapshot is not the one it read; a
    context without a bookmark has at least 1: its first run records where it starts):
    ``framework.sources.SourceKind``."""
    if "read" in description:
        latest = iceberg.current(description["table"])
        return Backlog(int((latest and latest.snapshot_id) != description["read"]),
                       "snapshot")
    state = bookmarks.state(context, SOURCE_KIND)
    source = IcebergSource.from_plain(description.get("options") or description)
    found = plan_iceberg(source, start=state, advance=False, changes=True).snapshots
    return Backlog(found if state is not None else max(found, 1), "snapshot")


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
