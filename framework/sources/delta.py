"""Incremental Delta-table sources: read what an upstream table gained since the last run.

A context's bookmark is the last table version it processed. A run pins the table's
version when it starts and reads the changes after the bookmark up to that version: the
appended rows, or with the table's Change Data Feed every insert, update and delete with
its ``_change_type``. Rows committed to the source during the run belong to the next run.

A context with no bookmark yet reads the whole table at the pinned version, or from its
starting position (the job's ``starting_version`` or ``starting_timestamp``), as Delta's
streaming source does. A cap (``bounded_files``, ``bounded_size``) takes whole versions,
at least one a run, and leaves the rest for the next runs. Planning reads the log's
version and commit entries, never the table's list of files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from framework.delta import log
from framework.errors import ChangesUnavailableError
from framework.sources import Backlog
from framework.sources.limits import TableSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from framework.delta import DeltaEngine
    from framework.sources import Bookmarks

__all__ = ["SOURCE_KIND", "DeltaPlan", "DeltaSource", "DeltaState", "description", "new_items",
           "plan_delta", "read_delta"]

SOURCE_KIND = "delta"


@dataclass(frozen=True)
class DeltaSource(TableSource):
    """How a context reads the Delta table ``table`` (``TableSource``: ``start`` is the
    job's ``starting_version``; the cap counts data files added, whole versions)."""

    POSITION: ClassVar[str] = "starting_version"
    UNIT: ClassVar[str] = "version (0 or more)"


@dataclass(frozen=True)
class DeltaState:
    """A Delta context's bookmark: the last version of ``table`` it processed (after
    ``from_version``: the run's range, pinned for a replay); ``starting``: the starting
    position its first run was given."""

    kind: ClassVar[str] = SOURCE_KIND
    state_version: ClassVar[int] = 1

    table: str
    version: int
    from_version: int | None = None
    starting: str | None = field(default=None, metadata={"stored_when_set": True})

    def describe(self) -> list[tuple[str, str]]:
        lines = [("table", self.table),
                 ("processed up to", f"version {self.version} (the next run reads the "
                  "versions after it)")]
        return [*lines, ("started at", self.starting)] if self.starting else lines


@dataclass(frozen=True)
class DeltaPlan:
    """Read versions ``after + 1`` to ``to`` (``after`` None: the whole table at ``to``);
    ``backlog``: the versions after ``to`` a cap left for later runs.

    ``advance``: the plan's state is committed when the run succeeds.
    """

    table: str
    after: int | None
    to: int
    advance: bool = False
    backlog: int = 0
    starting: str | None = None

    def state(self) -> DeltaState:
        """The bookmark to commit; it also pins the range for a replay."""
        return DeltaState(table=self.table, version=self.to, from_version=self.after,
                          starting=self.starting)

    @classmethod
    def pinned(cls, state: DeltaState) -> DeltaPlan:
        return cls(table=state.table, after=state.from_version, to=state.version,
                   advance=True, starting=state.starting)

    def counts(self) -> dict[str, int]:
        first = 0 if self.after is None else self.after + 1
        found = {"from_version": first, "to_version": self.to,
                 "versions": max(0, self.to - first + 1)}
        if self.backlog:
            found["backlog"] = self.backlog
        return found


def plan_delta(source: DeltaSource, *, start: DeltaState | None, end: DeltaState | None = None,
               advance: bool) -> DeltaPlan:
    """Pin the range: after ``start``'s version (without one: the starting position, or
    the whole table) up to ``end``'s version, or the table's current version; when the
    plan advances the bookmark, at most ``source``'s cap of whole versions.

    Raises:
        TableNotFoundError: no Delta table at ``source.table``.
        ChangesUnavailableError: the table is older than the bookmark (it was recreated),
            or the starting position is not in its history.
    """
    table = source.table
    latest = end.version if end is not None else log.latest_version(table)
    if start is not None:
        after: int | None = start.version
        starting = start.starting
    else:
        after, starting = _starting_point(source, latest), source.starting
    if after is not None and after > latest:
        raise ChangesUnavailableError(
            table, f"is at version {latest}, before the bookmark's version {after}: it was "
            "recreated. Reset the reading context to read it in full.")
    to = _capped(source, after, latest) if advance and after is not None else latest
    return DeltaPlan(table=table, after=after, to=to, advance=advance, backlog=latest - to,
                     starting=starting)


def _starting_point(source: DeltaSource, latest: int) -> int | None:
    """The version before the first one a context without a bookmark reads (None: the
    whole table, as of ``latest``)."""
    if source.start == "latest":
        return latest
    if isinstance(source.start, int):
        version = source.start
        if version > latest:
            raise ChangesUnavailableError(
                source.table, f"starting_version={version} is past its latest version "
                f"{latest}. Give a version up to {latest}, or starting_version='latest'.")
        if not log.has_commit(source.table, version):
            raise ChangesUnavailableError(
                source.table, f"starting_version={version}: its log entry is gone (log "
                "retention). Give a later version, or read the table whole (no starting "
                "position).")
        return version - 1
    when = source.starting_time
    if when is None:
        return None
    commits = sorted(log.history(source.table), key=lambda c: c.version)
    first = next((c for c in commits if c.timestamp >= when), None)
    if first is None:
        raise ChangesUnavailableError(
            source.table, f"starting_timestamp={when.isoformat()} is after its latest commit "
            f"(version {commits[-1].version} at {commits[-1].timestamp.isoformat()}). Give "
            "an earlier time, or starting_version='latest' for what comes next.")
    if first is commits[0] and first.version > 0 and first.timestamp > when:
        raise ChangesUnavailableError(
            source.table, f"starting_timestamp={when.isoformat()} is before its oldest kept "
            f"commit (version {first.version} at {first.timestamp.isoformat()}; log "
            "retention removed the ones before). Give a later time.")
    return first.version - 1


def _capped(source: DeltaSource, after: int, latest: int) -> int:
    """The last version of ``after + 1 .. latest`` within the cap (a version whose log
    entry is gone counts as empty: reading it fails)."""
    if not source.cap:
        return latest
    added = (log.added(source.table, v) for v in range(after + 1, latest + 1))
    return after + source.cap.taken((a.files, a.bytes) if a else (0, 0) for a in added)


class DeltaDescription(TypedDict, total=False):
    """A Delta read as its run records it (``Run.sources``): the table and, for a tracked
    read, its options (``DeltaSource.plain``); for a whole-table read, the version asked
    for (None: the latest) and the version it read."""

    kind: str
    table: str
    read: int
    asked: int | None
    options: dict[str, Any]


def description(plan: DeltaPlan, source: DeltaSource, *, tracked: bool, version: int | None
                ) -> DeltaDescription:
    """What planning the read again needs, as plain data (``preflight``): a whole-table read
    also records the version it read (``version``: the one it was asked for, if any)."""
    if tracked:
        return {"kind": SOURCE_KIND, "table": plan.table, "options": source.plain()}
    return {"kind": SOURCE_KIND, "table": plan.table, "asked": version, "read": plan.to}


def new_items(context: str, description: DeltaDescription, bookmarks: Bookmarks,
              connections: Callable[[str], Any]) -> Backlog:
    """The versions a read described by ``description`` would find past ``context``'s
    bookmark (for a whole-table read: since the version it read, or 1 when the version
    to read changed otherwise; a context without a bookmark has at least 1: its first run
    records where it starts): ``framework.sources.SourceKind``."""
    state = bookmarks.state(context, SOURCE_KIND)
    if "read" in description:  # a whole-table read: anything other than what it read
        latest = description["asked"]
        if latest is None:
            latest = log.latest_version(description["table"])
        read = description["read"]
        return Backlog(max(latest - read, int(latest != read)), "version")
    options = DeltaSource.from_plain(description.get("options") or description)
    versions = plan_delta(options, start=state, advance=False).counts()["versions"]
    return Backlog(versions if state is not None else max(versions, 1), "version")


def read_delta(engine: DeltaEngine, plan: DeltaPlan, *, change_feed: bool | None) -> DataFrame:
    """The rows the plan covers (see the module docstring)."""
    if plan.after is not None:  # (change_feed None: the engine asks the table once)
        return engine.read_changes(plan.table, after=plan.after, to=plan.to,
                                   change_feed=change_feed)
    df = engine.read(plan.table, version=plan.to)
    if change_feed is None:
        change_feed = log.change_feed_on(plan.table, plan.to)
    return _as_inserts(df, plan.to) if change_feed else df


def _as_inserts(df: DataFrame, version: int) -> DataFrame:
    """The whole table in the change feed's shape, so every run has the same columns."""
    from pyspark.sql import functions as F

    return (df.withColumn("_change_type", F.lit("insert"))
            .withColumn("_commit_version", F.lit(version).cast("long"))
            .withColumn("_commit_timestamp", F.lit(None).cast("timestamp")))
