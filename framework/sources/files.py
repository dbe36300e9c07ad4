"""Incremental file sources: list the files, plan against the bookmark, read with Spark.

A file context tracks every file it has met by name, in the ``processed_files`` state
table: its path, size and modification time, and its outcome (read, or set aside and why).
A file not tracked yet is new, whatever its modification time: a file copied in with an
old one (``rsync -a``, ``cp -p``, ``tar x``), an S3 multipart upload older than the last
listing, a writer with a skewed clock. Nothing is left unread without being named:

- ``max_file_age`` (opt-in, as Glue's and Structured Streaming's): a new file older than
  that is not read but tracked with outcome ``too_old``, counted, and named in the log;
- a file read before that shows up again with another size or modification time has been
  rewritten: policy ``ignore`` (default) tracks its new version as ``rewritten`` without
  reading it, ``reprocess`` reads it again;
- a bounded run (``bounded_files``, ``bounded_size``) reads the oldest first and leaves
  the rest, untracked, to the next runs.

Listing (``listing``): ``full`` lists everything under the roots every run. Where keys
arrive in lexical order, ``start_after`` lists only the keys after the greatest key
tracked, and ``partitions`` lists the date-named or ``key=value`` directory holding it and
those after it; ``notifications`` takes what S3 event notifications in an SQS queue
announce (``framework.sources.file_events``). Each lists in full every
``reconcile_every`` (keys are sometimes out of order, events are not guaranteed), and a
file found so is read like any new one.

A bookmark written by a deltamark that counted every file modified before a *settled*
time as processed keeps that meaning for the files it saw: the next run tracks those
files by name (outcome ``adopted``), and from then on only names count.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from framework.common import humanize
from framework.errors import one_line
from framework.sources import Backlog, file_events, json_schema, malformed, schema_drift
from framework.sources.bookmark_codec import encode
from framework.sources.file_listing import Listing, list_found, list_roots
from framework.sources.listed_reads import ListedFile, read_listed
from framework.spark.lines import lacking, require
from framework.spark.session import is_connect, temporary_conf
from framework.spark.types import CHOICE
from framework.storage import filesystem
from state_tables.rows import arrow_array, arrow_scalar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from framework.sources import Bookmarks

__all__ = [
    "DEFAULT_RECONCILE_MS",
    "LISTING_MODES",
    "NOT_READ",
    "SOURCE_KIND",
    "TRACKED",
    "FileBookmark",
    "FileFormat",
    "FilePlan",
    "FileSource",
    "FileState",
    "ListedFile",
    "ListingMode",
    "Outcome",
    "RewritePolicy",
    "SetAside",
    "first_malformed",
    "list_files",
    "listed_for_run",
    "new_items",
    "parse_exclusions",
    "plan_files",
    "read_files",
]

FileFormat = Literal["json", "csv", "parquet", "orc", "xml", "text", "avro"]
FORMATS: tuple[str, ...] = ("json", "csv", "parquet", "orc", "xml", "text", "avro")
RewritePolicy = Literal["ignore", "reprocess"]
ListingMode = Literal["full", "start_after", "partitions", "notifications"]
LISTING_MODES: tuple[str, ...] = ("full", "start_after", "partitions", "notifications")
#: what became of a tracked file: read, or set aside (and why)
Outcome = Literal["read", "too_old", "rewritten", "adopted"]
#: why a file was set aside, in words, by outcome (the run's report and log)
NOT_READ: Mapping[str, str] = {
    "too_old": "older than max_file_age",
    "rewritten": "rewritten since read (rewritten='ignore')",
    "adopted": "counted as processed by an earlier deltamark's bookmark"}
DEFAULT_RECONCILE_MS = 24 * 60 * 60 * 1000
SOURCE_KIND = "files"
log = logging.getLogger("deltamark.sources")

#: the files a context tracks: one row per file and run that tracked it
TRACKED = pa.schema([("path", pa.string()), ("size", pa.int64()),
                     ("modified_ms", pa.int64()), ("outcome", pa.string())])


@dataclass(frozen=True)
class FileState:
    """A file context's bookmark: what ``state`` holds in the ``bookmarks`` table (the
    files themselves are tracked in ``processed_files``)."""

    kind: ClassVar[str] = SOURCE_KIND
    state_version: ClassVar[int] = 2

    files_total: int = 0
    bytes_total: int = 0
    #: files never read because older than ``max_file_age``, by all runs
    too_old_total: int = 0
    #: root -> the key (below the root) up to which every file is tracked: where the
    #: next partial listing starts
    listed_up_to: Mapping[str, str] = field(default_factory=dict)
    #: when the last full listing was made (epoch ms; None: never)
    full_listing_ms: int | None = None
    #: a bookmark from a deltamark that did not track every file by name: files modified
    #: at or before this time (epoch ms) count as processed until the next run names them
    #: (stored only while set: later bookmarks have none)
    settled_ms: int | None = field(default=None, metadata={"stored_when_set": True})
    #: the schema of what the context has read (Spark's JSON of a struct; None: not
    #: tracked), and what its run changed in it (``schema_drift.Drift.changes``)
    schema: Mapping[str, Any] | None = field(default=None, metadata={"stored_when_set": True})
    schema_changes: tuple[str, ...] | None = field(default=None,
                                                   metadata={"stored_when_set": True})
    #: the column the context's reads put what does not fit in (None: none)
    rescued_column: str | None = field(default=None, metadata={"stored_when_set": True})

    def describe(self) -> list[tuple[str, str]]:
        lines = [("totals", f"{humanize.plural(self.files_total, 'file')} "
                  f"({humanize.size(self.bytes_total)}) read by all runs"
                  + (f"; {self.too_old_total} older than max_file_age, not read"
                     if self.too_old_total else ""))]
        for root, key in sorted(self.listed_up_to.items()):
            lines.append(("listed up to", f"{root}: {key}"))
        if self.full_listing_ms is not None:
            lines.append(("listed in full", _utc(self.full_listing_ms)))
        if self.schema is not None:
            lines.append(("schema", ", ".join(
                f"{f['name']} {_simple(f['type'])}" for f in self.schema.get("fields", []))))
        if self.schema_changes:
            lines.append(("schema changes", "; ".join(self.schema_changes)))
        if self.settled_ms is not None:
            lines.append(("high-water mark", f"{_utc(self.settled_ms)} (files modified at "
                          "or before it count as processed until the next run names them)"))
        return lines


def _simple(data_type: Any) -> str:
    """A stored field type (Spark's JSON) as Spark writes it in short: ``bigint``,
    ``struct<name:string>``, ``array<struct<sku:string>>``, ``map<string,bigint>``."""
    if isinstance(data_type, str):
        return data_type
    kind = data_type.get("type")
    if kind == "struct":
        return "struct<" + ",".join(f"{f['name']}:{_simple(f['type'])}"
                                    for f in data_type.get("fields", [])) + ">"
    if kind == "array":
        return f"array<{_simple(data_type['elementType'])}>"
    if kind == "map":
        return f"map<{_simple(data_type['keyType'])},{_simple(data_type['valueType'])}>"
    return str(kind)


def _utc(epoch_ms: int) -> str:
    return humanize.utc(datetime.fromtimestamp(epoch_ms / 1000, UTC))


@dataclass(frozen=True)
class FileBookmark:
    """A ``FileState`` with the files it tracks (``TRACKED`` rows of its valid runs), or
    the read of them under way (a run reads them while it lists the source)."""

    state: FileState
    reading: pa.Table | Future[pa.Table]

    @property
    def tracked(self) -> pa.Table:
        return self.reading if isinstance(self.reading, pa.Table) else self.reading.result()


@dataclass(frozen=True)
class SetAside:
    """A file a run tracks without reading it, and why (``Outcome``)."""

    file: ListedFile
    outcome: Outcome


@dataclass(frozen=True)
class FileSource:
    """How to list and read one file source (``ctx.read_files``'s options)."""

    paths: tuple[str, ...]
    format: FileFormat
    options: Mapping[str, str] = field(default_factory=dict)
    schema: StructType | str | None = None
    recurse: bool = True
    exclusions: tuple[str, ...] = ()
    bounded_files: int | None = None
    bounded_size: int | None = None
    rewritten: RewritePolicy = "ignore"
    #: new files modified longer ago than this (ms) are tracked as too old, not read
    max_file_age_ms: int | None = None
    listing: ListingMode = "full"
    #: a partial listing mode lists in full when the last full listing is this old (ms)
    reconcile_ms: int = DEFAULT_RECONCILE_MS
    #: the SQS queue URL S3 event notifications arrive in (``listing="notifications"``)
    queue: str | None = None
    lineage_column: str | None = None
    bad_records: malformed.BadRecords = "fail"
    #: the Delta table malformed records go to (``bad_records="quarantine"``)
    bad_records_table: str | None = None
    #: a Spark SQL condition on the ``key=value`` directories' values (text): files in
    #: directories it leaves out are neither read nor tracked (Glue's push_down_predicate)
    partition_filter: str | None = None
    #: what new fields do to the context's schema (None: ``add_new_columns`` without a
    #: ``schema``, ``none`` with one; ``framework.sources.schema_drift``)
    schema_evolution: schema_drift.EvolutionMode | None = None
    #: column types that the inferred schema takes (Spark DDL: ``"amount DOUBLE, at
    #: TIMESTAMP"``), as Auto Loader's ``schemaHints``
    schema_hints: str | None = None
    #: the column values that do not fit go to: True, ``_rescued_data`` where the schema is
    #: inferred (``_rescued_column``); False, none (such a value fails the run)
    rescued_data_column: str | bool = True
    #: with no rescued-data column, a column some of whose values do not fit its type is a
    #: choice of it and string (Glue's choice type: ``spark_types.CHOICE``), not a failure
    choice_types: bool = False

    @property
    def evolution_mode(self) -> schema_drift.EvolutionMode:
        """``schema_evolution``, or its default: ``none`` with a ``schema``, else
        ``add_new_columns``."""
        return self.schema_evolution or ("none" if self.schema is not None
                                         else "add_new_columns")

    def problems(self) -> list[str]:
        found = []
        if self.bad_records not in malformed.POLICIES:
            found.append(f"bad_records must be one of {', '.join(malformed.POLICIES)}, not "
                         f"{self.bad_records!r}")
        elif self.bad_records != "fail" and self.format not in malformed.TEXT_FORMATS:
            found.append(f"bad_records={self.bad_records!r} applies to "
                         f"{', '.join(sorted(malformed.TEXT_FORMATS))} files, not "
                         f"{self.format}")
        if (self.bad_records == "quarantine") != bool(self.bad_records_table):
            found.append("bad_records='quarantine' and bad_records_table (a Delta table "
                         "path) go together")
        if ignored := [k for k, v in self.options.items()
                       if k.lower() in ("ignorecorruptfiles", "ignoremissingfiles")
                       and str(v).lower() == "true"]:
            found.append(f"option {ignored[0]} would skip files that the bookmark then "
                         "counts as read; fix or exclude those files (exclusions), or use "
                         "bad_records for malformed records")
        if self.format not in FORMATS:
            found.append(f"format '{self.format}' is not one of {', '.join(FORMATS)}")
        if self.format == "xml" and (why := lacking("XML files", since="4.0")):
            found.append(why)
        elif self.format == "xml" and not {k.lower() for k in self.options} & {"rowtag"}:
            found.append("format xml needs options={'rowTag': '<element of one row>'}")
        if self.bounded_files is not None and self.bounded_size is not None:
            found.append("give bounded_files or bounded_size, not both (as in Glue)")
        for name in ("bounded_files", "bounded_size"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                found.append(f"{name} must be a positive integer, not {value!r}")
        if self.rewritten not in ("ignore", "reprocess"):
            found.append(f"rewritten must be 'ignore' or 'reprocess', not {self.rewritten!r}")
        if self.max_file_age_ms is not None and self.max_file_age_ms <= 0:
            found.append("max_file_age must be positive (or None: read every new file)")
        if self.listing not in LISTING_MODES:
            found.append(f"listing must be one of {', '.join(LISTING_MODES)}, not "
                         f"{self.listing!r}")
        elif self.listing != "full" and not self.recurse:
            found.append(f"listing={self.listing!r} lists below the roots: it needs "
                         "recurse=True")
        elif (self.listing == "notifications") != bool(self.queue):
            found.append("listing='notifications' and queue (the SQS queue URL the bucket's "
                         "events arrive in) go together")
        elif self.listing == "notifications" and (
                elsewhere := [p for p in self.paths if not file_events.is_object_store(p)]):
            found.append(f"listing='notifications' reads S3 events: {elsewhere[0]} is not "
                         "an s3:// path")
        if self.schema_hints is not None and self.schema is not None:
            found.append("give schema or schema_hints, not both (hints are for an inferred "
                         "schema)")
        if self.schema_evolution not in (None, *schema_drift.EVOLUTION_MODES):
            found.append(f"schema_evolution must be one of "
                         f"{', '.join(schema_drift.EVOLUTION_MODES)}, not "
                         f"{self.schema_evolution!r}")
        if self.reconcile_ms < 0:
            found.append("reconcile_every must not be negative")
        if not self.paths:
            found.append("no paths given")
        return found

    def description(self) -> FilesDescription:
        """What planning needs (not the reader's options or schema), as plain data: a run
        records it so the next can be planned before Spark starts (``preflight``)."""
        return {"kind": SOURCE_KIND, "paths": list(self.paths), "format": self.format,
                "recurse": self.recurse, "exclusions": list(self.exclusions),
                "bounded_files": self.bounded_files, "bounded_size": self.bounded_size,
                "rewritten": self.rewritten, "max_file_age_ms": self.max_file_age_ms,
                "listing": self.listing, "reconcile_ms": self.reconcile_ms,
                "queue": self.queue, "partition_filter": self.partition_filter}

    @classmethod
    def from_description(cls, data: FilesDescription) -> FileSource:
        return cls(paths=tuple(data["paths"]), format=data["format"],
                   recurse=data["recurse"], exclusions=tuple(data["exclusions"]),
                   bounded_files=data["bounded_files"], bounded_size=data["bounded_size"],
                   rewritten=data["rewritten"], max_file_age_ms=data.get("max_file_age_ms"),
                   listing=data.get("listing", "full"),
                   reconcile_ms=data.get("reconcile_ms", DEFAULT_RECONCILE_MS),
                   queue=data.get("queue"), partition_filter=data.get("partition_filter"))


class FilesDescription(TypedDict, total=False):
    """A file read as its run records it (``Run.sources``), to plan it again without
    Spark: ``FileSource``'s planning fields (runs of older versions lack the newer ones)."""

    kind: str
    paths: list[str]
    format: FileFormat
    recurse: bool
    exclusions: list[str]
    bounded_files: int | None
    bounded_size: int | None
    rewritten: RewritePolicy
    max_file_age_ms: int | None
    listing: ListingMode
    reconcile_ms: int
    partition_filter: str | None
    queue: str | None


@dataclass(frozen=True)
class FilePlan:
    """The files one run reads from one context, pinned before reading.

    ``backlog``: pending files a bounded run leaves for later runs (of ``backlog_bytes``).
    ``rewritten``, ``too_old``: files not read for that reason. ``set_aside``: the files
    the run tracks without reading them (when it advances the bookmark). ``state``: the
    context's state once this run has committed (None when the mode does not advance
    bookmarks).
    """

    files: tuple[ListedFile, ...]
    listed: int
    backlog: int = 0
    backlog_bytes: int = 0
    rewritten: int = 0
    too_old: int = 0
    set_aside: tuple[SetAside, ...] = ()
    state: FileState | None = None
    #: the listing covered every file (not only keys after the bookmark's)
    complete: bool = True
    #: once the run has committed: let go of what the listing consumed (queue messages)
    acknowledge: Callable[[], None] | None = None

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    def counts(self) -> dict[str, int]:
        found = {"files": len(self.files), "bytes": self.bytes, "listed": self.listed,
                 "backlog": self.backlog, "rewritten_skipped": self.rewritten}
        if self.too_old:
            found["too_old"] = self.too_old
        return found


# --- listing --------------------------------------------------------------------------


def list_files(source: FileSource, bookmark: FileBookmark | None = None, *,
               now_ms: int | None = None) -> Listing:
    """The files under ``source.paths`` a plan from ``bookmark`` needs: all of them, or
    with a partial listing mode, the keys after those the bookmark has listed, unless a
    full listing is due (``reconcile_every``, or a bookmark that does not track every
    file by name yet).

    Raises:
        FileNotFoundError: a path does not exist.
        ValueError: the event queue cannot be read.
    """
    full = _full_listing_due(source, bookmark, now_ms)
    if source.listing == "notifications" and source.queue:
        events = file_events.receive(source.queue, source.paths)
        if events.elsewhere:
            log.warning("%d objects announced in %s are not under %s: their messages are "
                        "taken all the same", events.elsewhere, source.queue,
                        ", ".join(source.paths))
        listing = (list_roots(source.paths, recurse=source.recurse,
                              exclusions=source.exclusions) if full else
                   Listing(list_found(source.paths, events.found,
                                      exclusions=source.exclusions), complete=False))
        return dataclasses.replace(listing, acknowledge=events.acknowledge)
    return list_roots(source.paths, recurse=source.recurse, exclusions=source.exclusions,
                      after=None if full or bookmark is None
                      else _listing_bounds(source, bookmark.state))


def _full_listing_due(source: FileSource, bookmark: FileBookmark | None,
                      now_ms: int | None) -> bool:
    """A full listing: the mode's, a first run's, one due by ``reconcile_every``, or a
    bookmark's that does not track every file by name yet."""
    if source.listing == "full" or bookmark is None:
        return True
    state = bookmark.state
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return (state.settled_ms is not None or state.full_listing_ms is None
            or now_ms - state.full_listing_ms >= source.reconcile_ms)


def _listing_bounds(source: FileSource, state: FileState) -> dict[str, str]:
    if source.listing == "start_after":
        return dict(state.listed_up_to)
    # partitions: the directory holding the greatest key is listed again, whole
    return {root: key.rpartition("/")[0] + "/" if "/" in key else ""
            for root, key in state.listed_up_to.items()}


def new_items(context: str, description: FilesDescription, bookmarks: Bookmarks,
              connections: Callable[[str], Any]) -> Backlog:
    """The files a read described by ``description`` would read, newly set aside (named
    in its run) or leave for later runs (a bound) that ``context``'s bookmark does not
    track, with their bytes (``framework.sources.SourceKind``)."""
    source = FileSource.from_description(description)
    bookmark = bookmarks.files(context)
    if source.queue and not _full_listing_due(source, bookmark, None):
        # taking the messages would hide them from the run: the queue says about how many
        return Backlog(file_events.waiting(source.queue), "message", exact=False)
    listing = list_files(source, bookmark)
    plan = plan_files(listing, source, start=bookmark, advance=True)
    new = len(plan.files) + len(plan.set_aside) + plan.backlog
    if new:
        _handed_over[_handover_key(source, bookmark)] = listing
        while len(_handed_over) > MAX_HANDED_OVER:
            del _handed_over[next(iter(_handed_over))]
    return Backlog(new, "file", bytes=plan.bytes + plan.backlog_bytes
                   + sum(s.file.size for s in plan.set_aside))


#: listings the no-op check made and found something new in, for the run that follows
#: (``listed_for_run``): by source description and bookmark state, the newest last
_handed_over: dict[str, Listing] = {}
MAX_HANDED_OVER = 4


def _handover_key(source: FileSource, bookmark: FileBookmark | None) -> str:
    state = encode(bookmark.state) if bookmark else None
    return json.dumps([source.description(), state], sort_keys=True, default=str)


def listed_for_run(source: FileSource, bookmark: FileBookmark | None) -> Listing:
    """The listing a run plans from: the one its no-op check just made against the same
    bookmark, if there is one (listed once, not twice: a file landing since belongs to
    the next run, as one landing during the run does), else a new one (``list_files``).
    """
    return (_handed_over.pop(_handover_key(source, bookmark), None)
            or list_files(source, bookmark))


# --- planning -------------------------------------------------------------------------


def within_partitions(spark: SparkSession, listing: Listing, condition: str) -> Listing:
    """``listing`` without the files whose ``key=value`` directories' values (text) do not
    meet the Spark SQL ``condition`` (one small Spark query over the distinct values).

    Raises:
        ValueError: the condition is not one Spark can evaluate on those values (a column
            that is not a partition key, bad syntax).
    """
    from urllib.parse import unquote

    from pyspark.sql.types import StringType, StructField, StructType

    keys = listing.files["key"].to_pylist()
    found = [dict(unquote(part).split("=", 1) for part in key.split("/")[:-1] if "=" in part)
             for key in keys]
    names = sorted({name for values in found for name in values})
    rows = sorted({tuple(values.get(n) for n in names) for values in found},
                  key=lambda row: tuple(v or "" for v in row))
    schema = StructType([StructField(n, StringType()) for n in names])
    try:
        kept = {tuple(row) for row in spark.createDataFrame(rows, schema).where(condition)
                .collect()}
    except Exception as exc:  # Spark's analysis and parse errors
        raise ValueError(f"the partition predicate {condition!r} does not apply to the "
                         f"partition keys found ({', '.join(names) or 'none'}): "
                         f"{one_line(exc)}") from exc
    mask = [tuple(values.get(n) for n in names) in kept for values in found]
    return dataclasses.replace(listing, files=listing.files.filter(arrow_array(mask, pa.bool_())))


def plan_files(
    listing: Listing,
    source: FileSource,
    *,
    start: FileBookmark | None,
    end: FileBookmark | None = None,
    advance: bool,
    now_ms: int | None = None,
) -> FilePlan:
    """Choose the files to read: those ``start`` does not track (all when None), and,
    with ``end``, that ``end`` had processed; oldest first within the bounds.

    With ``advance``, the plan carries the state to commit once the run succeeds and the
    files it tracks without reading them.
    """
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    listed = listing.files
    candidates = _untracked(listed, start)
    new, changed, adopted = _statuses(candidates, start)
    too_old = _false(len(candidates))
    if source.max_file_age_ms is not None:
        too_old = pc.and_(new, pc.less(candidates["modified_ms"],
                                       now_ms - source.max_file_age_ms))
        new = pc.and_not(new, too_old)
    wanted = pc.or_(new, changed) if source.rewritten == "reprocess" else new
    if end is not None:  # only what ``end`` had processed
        missing = _untracked(candidates, end)
        end_new, end_changed, _ = _statuses(missing, end)
        unprocessed = missing.filter(pc.or_(end_new, end_changed))["path"]
        wanted = pc.and_not(wanted, pc.is_in(candidates["path"], value_set=unprocessed))
    pending = candidates.filter(wanted).sort_by([("modified_ms", "ascending"),
                                                ("path", "ascending")])
    chosen = _bounded(pending, source)
    plan = FilePlan(files=_listed_files(chosen), listed=len(listed),
                    backlog=len(pending) - len(chosen),
                    backlog_bytes=(pc.sum(pending["size"]).as_py() or 0)
                    - (pc.sum(chosen["size"]).as_py() or 0),
                    too_old=_count(too_old),
                    rewritten=0 if source.rewritten == "reprocess" else _count(changed),
                    complete=listing.complete, acknowledge=listing.acknowledge)
    if not advance:
        return plan
    set_aside = [SetAside(f, "too_old") for f in _listed_files(candidates.filter(too_old))]
    if source.rewritten == "ignore":
        set_aside += [SetAside(f, "rewritten")
                      for f in _listed_files(candidates.filter(changed))]
    set_aside += [SetAside(f, "adopted") for f in _listed_files(candidates.filter(adopted))]
    previous = start.state if start else FileState()
    state = FileState(
        files_total=previous.files_total + len(chosen),
        bytes_total=previous.bytes_total + plan.bytes,
        too_old_total=previous.too_old_total + plan.too_old,
        listed_up_to=(_listed_up_to(listed, pending.slice(len(chosen)), source.paths,
                                    previous.listed_up_to)
                      if source.listing in ("start_after", "partitions") else {}),
        full_listing_ms=now_ms if listing.complete else previous.full_listing_ms,
        schema=previous.schema, rescued_column=previous.rescued_column)
    return dataclasses.replace(plan, set_aside=tuple(set_aside), state=state)


def _untracked(files: pa.Table, bookmark: FileBookmark | None) -> pa.Table:
    """``files`` less those tracked as they are (path, size and modification time): a
    hash anti-join, so a million listed and tracked files cost a tenth of a second and
    the rest of planning looks at what is new or changed only."""
    if bookmark is None or not len(files):
        return files
    # Acero's own module: Table.join imports pyarrow.dataset, and with it pandas (0.3 s)
    from pyarrow._acero import Declaration, HashJoinNodeOptions, TableSourceNodeOptions

    identity = ["path", "size", "modified_ms"]
    return Declaration("hashjoin", HashJoinNodeOptions("left anti", identity, identity), [
        Declaration("table_source", TableSourceNodeOptions(files)),
        Declaration("table_source", TableSourceNodeOptions(
            bookmark.tracked.select(identity)))]).to_table().select(files.column_names)


def _statuses(files: pa.Table, bookmark: FileBookmark | None
              ) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Three masks over ``files`` (none tracked as they are), as ``bookmark`` sees each:
    new (its path is not tracked), changed (a path read before, with another size or
    modification time) and adopted (not tracked, but counted as processed by the
    bookmark's settled time). A file only ever set aside as too old is new once changed:
    it was never read.
    """
    if bookmark is None:
        return _true(len(files)), _false(len(files)), _false(len(files))
    tracked = bookmark.tracked
    seen = tracked.filter(pc.is_in(tracked["path"], value_set=files["path"]))
    too_old = arrow_scalar("too_old", pa.string())
    were_read = seen.filter(pc.not_equal(seen["outcome"], too_old))["path"]
    changed = pc.is_in(files["path"], value_set=were_read)
    new = pc.invert(changed)
    adopted = _false(len(files))
    if bookmark.state.settled_ms is not None:
        untracked = pc.invert(pc.is_in(files["path"], value_set=seen["path"]))
        adopted = pc.and_(untracked, pc.less_equal(files["modified_ms"],
                                                   bookmark.state.settled_ms))
        new = pc.and_not(new, adopted)
    return new, changed, adopted


def _false(n: int) -> pa.Array:
    return pc.is_valid(pa.nulls(n, pa.bool_()))


def _true(n: int) -> pa.Array:
    return pc.invert(_false(n))


def _count(mask: pa.Array) -> int:
    return pc.sum(mask).as_py() or 0


def _listed_files(rows: pa.Table) -> tuple[ListedFile, ...]:
    return tuple(ListedFile(path, size, modified) for path, size, modified in zip(
        rows["path"].to_pylist(), rows["size"].to_pylist(), rows["modified_ms"].to_pylist(),
        strict=True))


def _bounded(pending: pa.Table, source: FileSource) -> pa.Table:
    if source.bounded_files is not None:
        return pending.slice(0, source.bounded_files)
    if source.bounded_size is None or not len(pending):
        return pending
    total = pc.cumulative_sum(pending["size"]).to_pylist()
    fits = sum(1 for t in total if t <= source.bounded_size)
    return pending.slice(0, max(fits, 1))


def _listed_up_to(listed: pa.Table, backlog: pa.Table, roots: Sequence[str],
                  previous: Mapping[str, str]) -> dict[str, str]:
    """Each root's greatest key listed below which nothing is left untracked (the
    smallest key of ``backlog``, what a bounded run leaves for later)."""
    found = {}
    for index, root in enumerate(roots):
        keys = listed.filter(pc.equal(listed["root"], index))["key"]
        candidates = [previous[root]] if root in previous else []
        waiting = backlog.filter(pc.equal(backlog["root"], index))["key"]
        if len(waiting):
            first_waiting = pc.min(waiting).as_py()
            keys = keys.filter(pc.less(keys, first_waiting))
            candidates = [k for k in candidates if k < first_waiting]
        if len(keys):
            candidates.append(pc.max(keys).as_py())
        if candidates:
            found[root] = max(candidates)
    return found


# --- reading --------------------------------------------------------------------------


@dataclass(frozen=True)
class FilesRead:
    """A run's read of its planned files: the rows, and what they did to the context's
    schema (``drift``: None where the job gave the schema, or the format has none)."""

    df: DataFrame
    drift: schema_drift.Drift | None = None
    #: values that did not fit, by column (dotted paths), in the rescued-data column
    rescued: Mapping[str, int] = field(default_factory=dict)
    #: the rescued-data column the rows carry (None: none)
    rescued_column: str | None = None


def read_files(spark: SparkSession, source: FileSource, plan: FilePlan, *,
               run_id: str = "") -> FilesRead:
    """The planned files as one DataFrame, every file read by column name (Hive-style
    ``key=value`` directories become columns), with the context's schema
    (``framework.sources.schema_drift``). With no files: an empty DataFrame of the
    context's schema (or ``source.schema``; no columns without either).

    Raises:
        ValueError: Spark would not read every planned file (a reader option filters
            some, or one is outside the ``key=value`` directories of the others); new
            columns under ``fail_on_new_columns``; a value that does not fit the job's
            schema with no rescued-data column.
    """
    from pyspark.sql.types import StructType

    # a schema with no field (only empty files read so far) is inferred again
    stored = (schema_drift.from_json(plan.state.schema)
              if plan.state is not None and plan.state.schema
              and plan.state.schema.get("fields") else None)
    rescued_column = _rescued_column(source, plan)
    if not plan.files:
        schema = stored or source.schema
        if schema is None:
            return FilesRead(spark.createDataFrame([], StructType([])))
        empty = _with_added(spark.createDataFrame([], schema), source, rescued_column,
                            empty=True)
        return FilesRead(empty, rescued_column=rescued_column)
    base_path = _base_path(source)
    if source.format == "avro" and not _spark_avro_available(spark):
        require("Avro files without Spark's Avro jar (spark-avro; python -m framework.spark.jars "
                "adds it)", since="4.0")  # fastavro reads through a Python data source
        from framework.sources import avro

        return FilesRead(avro.read(spark, [f.path for f in plan.files], base_path=base_path,
                                   schema=source.schema, lineage_column=source.lineage_column))
    options = dict(source.options)
    lenient = malformed.applies(source.format, options) and source.bad_records != "fail"
    if malformed.applies(source.format, options):
        options |= malformed.reader_options(source.bad_records)
    if source.format == "text" or (source.schema is not None
                                   and source.format in ("json", "xml")):
        # the job's schema applies as Spark applies it (JSON and XML fields by name)
        schema = (malformed.with_corrupt_column(source.schema)
                  if lenient and source.schema is not None else source.schema)
        df = read_listed(spark, plan.files, format=source.format, options=options,
                         schema=schema, base_path=base_path)
        return FilesRead(_with_added(df, source, None, empty=False))
    # Fields whose names differ only in case are two fields (one of them rescued)
    with temporary_conf(spark, {"spark.sql.caseSensitive": "true"}):
        return _read_by_name(spark, source, plan.files, _ByName(
            options=options, lenient=lenient, base_path=base_path, stored=stored,
            given=None if source.schema is None else
            spark.createDataFrame([], source.schema).schema,
            hints=() if source.schema_hints is None else
            schema_drift.parse_hints(spark, source.schema_hints),
            rescued_column=rescued_column, run_id=run_id))


@dataclass(frozen=True)
class _ByName:
    """How ``_read_by_name`` reads: the reader's ``options``; ``lenient``, malformed records
    set aside; the ``stored`` schema or the one ``given`` by the job."""

    options: Mapping[str, str]
    lenient: bool
    base_path: str | None
    stored: StructType | None
    given: StructType | None
    hints: tuple[schema_drift.Hint, ...]
    rescued_column: str | None
    run_id: str


def _read_by_name(spark: SparkSession, source: FileSource, planned: Sequence[ListedFile],
                  how: _ByName) -> FilesRead:
    """``planned`` read in groups of one layout, each brought to the context's schema by
    name (``schema_drift``)."""
    groups = schema_drift.file_groups(source.format, planned, how.options)
    reads = _group_reads(spark, source, groups, how)
    incoming = schema_drift.first_schema([_data_schema(df.schema) for df in reads])
    mode = source.evolution_mode
    sampled = any(json_schema.UNFIT_FIELDS in df.columns for df in reads)
    drift = (None if how.given is not None
             else schema_drift.Drift(incoming, (
                 "first read, its schema inferred from a sample of its files (what they "
                 f"hold beyond it is in {how.rescued_column})" if sampled else "first read",))
             if how.stored is None else schema_drift.evolve(how.stored, incoming, mode))
    if how.stored is None and how.given is None and not incoming.fields:
        # only empty files (or records of no field) so far: no columns, so that no target
        # is made of the rescued-data or lineage column alone; the next read infers again
        df, _ = _conformed(reads, incoming, dataclasses.replace(source, lineage_column=None),
                           dataclasses.replace(how, rescued_column=None), mode)
        return FilesRead(df, drift, rescued_column=how.rescued_column)
    if drift is not None and how.hints:
        hinted, changes = schema_drift.hinted(drift.schema, how.hints)
        drift = dataclasses.replace(drift, schema=hinted, changes=drift.changes + changes)
    target = how.given if how.given is not None else drift.schema if drift else incoming
    if drift is not None and drift.new and mode == "fail_on_new_columns":
        holding = [f.path for group, df in zip(groups, reads, strict=True)
                   if {n.split(".")[0] for n in drift.new} & set(df.columns)
                   for f in group.files]
        raise ValueError(
            f"new column(s) {', '.join(drift.new)} in {humanize.plural(len(holding), 'file')} "
            f"({', '.join(holding[:3])}{', ...' if len(holding) > 3 else ''}): "
            "schema_evolution='fail_on_new_columns' leaves them unread until the job allows "
            "them (add_new_columns, rescue or none) or fixes its schema")
    df, rescued = _conformed(reads, target, source, how, mode)
    if rescued and how.rescued_column is None:
        if not (source.choice_types and set(rescued) <= set(target.fieldNames())):
            name, count = next(iter(rescued.items()))
            raise ValueError(
                f"{humanize.plural(count, 'value')} of column {name} do not fit its type "
                f"{_type_of(target, name)}: give rescued_data_column to keep them, or a "
                "schema that fits them")
        return _with_choices(reads, target, rescued, source, how, mode, drift)
    return FilesRead(df, drift, rescued, how.rescued_column)


def _conformed(reads: Sequence[DataFrame], target: StructType, source: FileSource,
               how: _ByName, mode: schema_drift.EvolutionMode
               ) -> tuple[DataFrame, dict[str, int]]:
    """The groups' reads brought to ``target``, as one DataFrame, and how many values of
    each column (dotted paths) did not fit it."""
    from pyspark.sql import functions as F

    keep = ([source.lineage_column] if source.lineage_column else []) + (
        [malformed.CORRUPT, malformed.FILE] if how.lenient else [])
    parts: list[DataFrame] = []
    rescued: dict[str, int] = {}
    for df in reads:
        df = _with_added(df, source, None, empty=False)
        if malformed.CORRUPT in df.columns:
            df = df.withColumn(malformed.FILE, F.col("_metadata.file_path"))
        converted, misfits = schema_drift.conform(
            df, target, keep=keep, rescued_column=how.rescued_column, run_id=how.run_id,
            mode=mode, unfit_fields=json_schema.UNFIT_FIELDS
            if json_schema.UNFIT_FIELDS in df.columns else None)
        for name, count in schema_drift.rescue_counts(df, misfits).items():
            rescued[name] = rescued.get(name, 0) + count
        if schema_drift.case_clashes(df.schema):
            # Spark analyses the plan again where the job uses it, case-insensitively:
            # where two fields' names differ only in case, the rows are kept instead
            converted = converted.localCheckpoint(eager=True)
        parts.append(converted)
    return functools.reduce(lambda one, other: one.union(other), parts), rescued


def _with_choices(reads: Sequence[DataFrame], target: StructType, rescued: Mapping[str, int],
                  source: FileSource, how: _ByName, mode: schema_drift.EvolutionMode,
                  drift: schema_drift.Drift | None) -> FilesRead:
    """The read with each column in ``rescued`` a choice of its type and string (Glue's
    choice type): its values' text, its field's metadata naming the type
    (``spark_types.CHOICE``). The context's schema keeps the type."""
    from pyspark.sql.types import StringType, StructField, StructType

    choices = {name: target[name].dataType.simpleString() for name in rescued}
    as_text = StructType([StructField(f.name, StringType(), True) if f.name in choices else f
                          for f in target.fields])
    df, _ = _conformed(reads, as_text, source, how, mode)
    for name, kind in choices.items():
        df = df.withMetadata(name, {CHOICE: kind})
    if drift is not None:
        drift = dataclasses.replace(drift, changes=drift.changes + tuple(
            f"{name}: a choice of {kind} and string ({humanize.plural(rescued[name], 'value')}"
            f" not of its type)" for name, kind in choices.items()))
    return FilesRead(df, drift)


def _group_reads(spark: SparkSession, source: FileSource,
                 groups: Sequence[schema_drift.FileGroup], how: _ByName) -> list[DataFrame]:
    """Each group's files read as Spark reads them (CSV files by their header's names)."""
    from pyspark.sql.types import StructField, StructType

    reads = []
    # CSV headers match these names (or earlier groups')
    known = how.given if how.given is not None else how.stored
    inferred = str(next((v for k, v in how.options.items() if k.lower() == "inferschema"),
                        "false")).lower() == "true"
    for group in groups:
        schema: StructType | str | None = None
        if group.header is not None:
            header = schema_drift.header_schema(group.header, known,
                                                typed=how.given is not None)
            known = schema_drift.first_schema([known, header]) if known else header
            if inferred and how.given is None:  # Spark's types, by position, renamed
                found = read_listed(spark, group.files, format=source.format,
                                    options=how.options, schema=None,
                                    base_path=how.base_path).schema
                header = StructType([StructField(f.name, typed.dataType, True) for f, typed
                                     in zip(header.fields, found.fields, strict=False)])
            schema = header
        elif source.format == "json" and how.given is None:
            reads.append(_json_read(spark, group.files, how))
            continue
        if how.lenient and (schema is not None or source.format != "json"):
            if schema is None:  # only JSON's inference adds the malformed records' column
                schema = read_listed(spark, group.files, format=source.format,
                                     options=how.options, schema=None,
                                     base_path=how.base_path).schema
            schema = malformed.with_corrupt_column(schema)
        reads.append(read_listed(spark, group.files, format=source.format,
                                 options=how.options, schema=schema,
                                 base_path=how.base_path))
    return reads


def _json_read(spark: SparkSession, files: Sequence[ListedFile], how: _ByName) -> DataFrame:
    """JSON files read with the schema the driver infers (where it cannot, Spark infers
    it); a context's first read of more, with the schema of a sample of them."""
    schema = json_schema.infer(files, how.options)
    sample = (json_schema.sample(files, how.options) if schema is None and how.stored is None
              and how.rescued_column is not None else None)
    if sample:
        sampled = json_schema.infer(sample, how.options) or _data_schema(read_listed(
            spark, sample, format="json", options=how.options, schema=None,
            base_path=None).schema)
        if sampled.fields:
            return json_schema.read_sampled(
                spark, files, sampled, base_path=how.base_path,
                corrupt_column=malformed.CORRUPT if how.lenient else None)
    return read_listed(spark, files, format="json", options=how.options, schema=(
        malformed.with_corrupt_column(schema) if schema is not None and how.lenient
        else schema), base_path=how.base_path)


def _type_of(schema: StructType, name: str) -> str:
    """The simple type of the top-level field ``name`` splits from."""
    top = name.split(".")[0]
    return schema[top].dataType.simpleString() if top in schema.fieldNames() else "?"


def _data_schema(schema: StructType) -> StructType:
    from pyspark.sql.types import StructType

    return StructType([f for f in schema.fields
                       if f.name not in (malformed.CORRUPT, json_schema.UNFIT_FIELDS)])


def _rescued_column(source: FileSource, plan: FilePlan) -> str | None:
    """The rescued-data column of this read: the one the source names; by default
    ``_rescued_data`` where deltamark infers the schema, but not for a context that read
    files before deltamark tracked schemas (its targets keep their columns)."""
    wanted = source.rescued_data_column
    if wanted is False or source.format == "text" or (
            source.schema is not None and source.format in ("json", "xml")):
        return None  # Spark applies a JSON or XML schema given itself: nothing is rescued
    if isinstance(wanted, str):
        return wanted
    if source.schema is not None:
        return None
    state = plan.state
    if state is None:
        return schema_drift.RESCUED_COLUMN
    if state.schema is not None:
        return state.rescued_column
    new_context = state.files_total <= len(plan.files)
    return schema_drift.RESCUED_COLUMN if new_context else None


def _with_added(df: DataFrame, source: FileSource, rescued_column: str | None, *,
                empty: bool) -> DataFrame:
    """``df`` (read from files unless ``empty``) with the lineage and rescued-data
    columns, where the source has them."""
    from pyspark.sql import functions as F

    if source.lineage_column:
        df = df.withColumn(source.lineage_column, F.lit(None).cast("string") if empty
                           else F.col("_metadata.file_path"))
    if rescued_column is not None and rescued_column not in df.columns:
        df = df.withColumn(rescued_column, F.lit(None).cast("string"))
    return df


def first_malformed(spark: SparkSession, source: FileSource, plan: FilePlan) -> str | None:
    """Where a FAILFAST read (schema inference) of ``plan`` met its first malformed record,
    as a message (Spark does not say which file); None when no record is found so."""
    lenient = dataclasses.replace(source, bad_records="drop")
    try:
        _, bad = malformed.set_aside(read_files(spark, lenient, plan).df)
    except Exception:  # noqa: BLE001 - only a better message was at stake
        return None
    if not bad:
        return None
    [(file, line, record)] = malformed.located(bad[:1])
    return (f"malformed {source.format} record in {file}"
            f"{f' line {line}' if line else ''}: {record[:100]!r} (bad_records='drop' or "
            "'quarantine' reads on without it)")


def _base_path(source: FileSource) -> str | None:
    """The one root directory, so Spark parses partition directories below it."""
    if len(source.paths) != 1:
        return None
    fs, base, to_uri = filesystem(source.paths[0])
    info = fs.get_file_info(base)
    return to_uri(base) if info.type == pafs.FileType.Directory else None


def _spark_avro_available(spark: SparkSession) -> bool:
    if is_connect(spark):  # the server's: deltamark's set-up puts spark-avro beside Delta
        return True
    try:
        jvm = spark._jvm
        assert jvm is not None  # a classic session's SparkContext has started the py4j gateway
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            "avro", spark._jsparkSession.sessionState().conf())
    except Exception:  # noqa: BLE001 - no _jvm (Spark Connect), or a Py4J error: no module
        return False
    return True


def parse_exclusions(value: str | Sequence[str]) -> tuple[str, ...]:
    """Glue passes exclusions as a JSON array string; deltamark also takes a list."""
    if isinstance(value, str):
        parsed = json.loads(value) if value.strip().startswith("[") else [value]
        return tuple(str(p) for p in parsed)
    return tuple(value)
