"""Incremental Delta-table sources: read what an upstream table gained since the last run.

A context's bookmark is the last table version it processed. A run pins the table's
version when it starts and reads the changes after the bookmark up to that version: the
appended rows, or with the table's Change Data Feed every insert, update and delete with
its ``_change_type``. The first run (no bookmark) reads the whole table at the pinned
version. Rows committed to the source during the run belong to the next run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from framework.delta import log
from framework.errors import ChangesUnavailableError
from framework.sources import Backlog

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from framework.delta import DeltaEngine
    from framework.sources import Bookmarks

__all__ = ["SOURCE_KIND", "DeltaPlan", "DeltaState", "description", "new_items", "plan_delta",
           "read_delta"]

SOURCE_KIND = "delta"


@dataclass(frozen=True)
class DeltaState:
    """A Delta context's bookmark: the last version of ``table`` it processed (after
    ``from_version``: the run's range, pinned for a replay)."""

    kind: ClassVar[str] = SOURCE_KIND
    state_version: ClassVar[int] = 1

    table: str
    version: int
    from_version: int | None = None

    def describe(self) -> list[tuple[str, str]]:
        return [("table", self.table),
                ("processed up to", f"version {self.version} (the next run reads the "
                 "versions after it)")]


@dataclass(frozen=True)
class DeltaPlan:
    """Read versions ``after + 1`` to ``to`` (``after`` None: the whole table at ``to``).

    ``advance``: the plan's state is committed when the run succeeds.
    """

    table: str
    after: int | None
    to: int
    advance: bool = False

    def state(self) -> DeltaState:
        """The bookmark to commit; it also pins the range for a replay."""
        return DeltaState(table=self.table, version=self.to, from_version=self.after)

    @classmethod
    def pinned(cls, state: DeltaState) -> DeltaPlan:
        return cls(table=state.table, after=state.from_version, to=state.version,
                   advance=True)

    def counts(self) -> dict[str, int]:
        first = 0 if self.after is None else self.after + 1
        return {"from_version": first, "to_version": self.to,
                "versions": max(0, self.to - first + 1)}


def plan_delta(table: str, *, start: DeltaState | None, end: DeltaState | None = None,
               advance: bool) -> DeltaPlan:
    """Pin the range: after ``start``'s version (everything when None) up to ``end``'s
    version, or the table's current version.

    Raises:
        TableNotFoundError: no Delta table at ``table``.
        ChangesUnavailableError: the table is older than the bookmark (it was recreated).
    """
    to = end.version if end is not None else log.snapshot(table).version
    after = start.version if start is not None else None
    if after is not None and after > to:
        raise ChangesUnavailableError(
            table, f"is at version {to}, before the bookmark's version {after}: it was "
            "recreated. Reset the reading context to read it in full.")
    return DeltaPlan(table=table, after=after, to=to, advance=advance)


class DeltaDescription(TypedDict, total=False):
    """A Delta read as its run records it (``Run.sources``): the table; for a whole-table
    read, the version asked for (None: the latest) and the version it read."""

    kind: str
    table: str
    asked: int | None
    read: int


def description(plan: DeltaPlan, *, tracked: bool, version: int | None) -> DeltaDescription:
    """What planning the read again needs, as plain data (``preflight``): a whole-table read
    also records the version it read (``version``: the one it was asked for, if any)."""
    if tracked:
        return {"kind": SOURCE_KIND, "table": plan.table}
    return {"kind": SOURCE_KIND, "table": plan.table, "asked": version, "read": plan.to}


def new_items(context: str, description: DeltaDescription, bookmarks: Bookmarks,
              connections: Callable[[str], Any]) -> Backlog:
    """The versions a read described by ``description`` would find past ``context``'s
    bookmark (for a whole-table read: since the version it read, or 1 when the version
    to read changed otherwise): ``framework.sources.SourceKind``."""
    state = bookmarks.state(context, SOURCE_KIND)
    if "read" in description:  # a whole-table read: anything other than what it read
        latest = description["asked"]
        if latest is None:
            latest = log.snapshot(description["table"]).version
        read = description["read"]
        return Backlog(max(latest - read, int(latest != read)), "version")
    return Backlog(plan_delta(description["table"], start=state, advance=False
                              ).counts()["versions"], "version")


def read_delta(engine: DeltaEngine, plan: DeltaPlan, *, change_feed: bool | None) -> DataFrame:
    """The rows the plan covers (see the module docstring)."""
    if change_feed is None:
        change_feed = log.snapshot(plan.table, version=plan.to).configuration.get(
            "delta.enableChangeDataFeed") == "true"
    if plan.after is not None and plan.after < plan.to:
        return engine.read_changes(plan.table, after=plan.after, to=plan.to,
                                   change_feed=change_feed)
    df = engine.read(plan.table, version=plan.to)
    if plan.after is not None:
        df = df.limit(0)
    return _as_inserts(df, plan.to) if change_feed else df


def _as_inserts(df: DataFrame, version: int) -> DataFrame:
    """The whole table in the change feed's shape, so every run has the same columns."""
    from pyspark.sql import functions as F

    return (df.withColumn("_change_type", F.lit("insert"))
            .withColumn("_commit_version", F.lit(version).cast("long"))
            .withColumn("_commit_timestamp", F.lit(None).cast("timestamp")))
