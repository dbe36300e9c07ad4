"""A file source as a job declares it, its bookmark state, and a run's plan of it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict

import pyarrow as pa

from framework.common import humanize
from framework.sources.files import events as file_events
from framework.sources.files import malformed, schema_drift
from framework.sources.files.listed_reads import ListedFile
from framework.spark.lines import lacking

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


__all__ = ["DEFAULT_RECONCILE_MS", "LISTING_MODES", "NOT_READ", "SOURCE_KIND", "TRACKED",
           "FileBookmark", "FileFormat", "FilePlan", "FileSource", "FileState",
           "ListingMode", "Outcome", "RewritePolicy", "SetAside"]


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
    #: ``schema``, ``none`` with one; ``framework.sources.files.schema_drift``)
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
