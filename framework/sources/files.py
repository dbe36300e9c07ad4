"""Incremental file sources: list the files, plan against the bookmark, read with Spark.

What a file context remembers (``FileState``) is a *settled* time plus the files read
since: every file modified at or before ``settled_ms`` counts as processed; files modified
later are tracked by name in the ``processed_files`` state table (the window). After each
run the settled time moves to ``max_band`` before the listing (Glue's maxBand, 15 minutes
by default), or just before the oldest file a bounded run left for later, whichever is
earlier. So the state stays a few numbers however long the history, and

- files sharing one modification time are told apart by name;
- a file that lands during a run is not in that run's listing and belongs to the next;
- a late file (modified before the newest files already read, listed later) is picked up
  while its modification time is inside the window; older than that it counts as done.

A file read before that shows up again with another size or modification time has been
rewritten: policy ``ignore`` (default) skips it, ``reprocess`` reads it again.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import pyarrow.fs as pafs

from framework.listed_reads import ListedFile, read_listed
from framework.sources import malformed
from framework.spark_lines import lacking, require
from framework.storage import filesystem

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from framework.sources import Bookmarks

__all__ = [
    "DEFAULT_MAX_BAND_MS",
    "FileBookmark",
    "FileFormat",
    "FilePlan",
    "FileSource",
    "FileState",
    "ListedFile",
    "RewritePolicy",
    "SOURCE_KIND",
    "first_malformed",
    "list_files",
    "new_items",
    "parse_exclusions",
    "plan_files",
    "read_files",
]

FileFormat = Literal["json", "csv", "parquet", "orc", "xml", "text", "avro"]
FORMATS: tuple[str, ...] = ("json", "csv", "parquet", "orc", "xml", "text", "avro")
RewritePolicy = Literal["ignore", "reprocess"]
DEFAULT_MAX_BAND_MS = 15 * 60 * 1000
SOURCE_KIND = "files"


@dataclass(frozen=True)
class FileState:
    """A file context's bookmark: what ``state`` holds in the ``bookmarks`` table."""

    kind: ClassVar[str] = SOURCE_KIND
    state_version: ClassVar[int] = 1

    settled_ms: int
    #: ``settled_ms`` as an ISO time, for people reading the table
    settled_at: str = field(init=False, compare=False)
    files_total: int = 0
    bytes_total: int = 0

    def __post_init__(self) -> None:
        settled = datetime.fromtimestamp(self.settled_ms / 1000, UTC)
        object.__setattr__(self, "settled_at", settled.isoformat(timespec="milliseconds"))

    def describe(self) -> list[tuple[str, str]]:
        return [("high-water mark", f"{self.settled_at} (files modified at or before it "
                 "count as processed)"),
                ("totals", f"{self.files_total} files, {self.bytes_total} bytes read by all "
                 "runs")]


@dataclass(frozen=True)
class FileBookmark:
    """A ``FileState`` with what it tracks by name.

    ``window``: path -> (modified_ms, size) of files read with a modification time after
    ``state.settled_ms``. ``seen``: which of some paths were ever read (finds rewrites of
    files older than the window).
    """

    state: FileState
    window: Mapping[str, tuple[int, int]]
    seen: Callable[[Sequence[str]], set[str]]


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
    max_band_ms: int = DEFAULT_MAX_BAND_MS
    lineage_column: str | None = None
    bad_records: malformed.BadRecords = "fail"
    #: the Delta table malformed records go to (``bad_records="quarantine"``)
    bad_records_table: str | None = None

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
        if self.max_band_ms < 0:
            found.append("max_band must not be negative")
        if not self.paths:
            found.append("no paths given")
        return found

    def description(self) -> dict[str, Any]:
        """What planning needs (not the reader's options or schema), as plain data: a run
        records it so the next can be planned before Spark starts (``preflight``)."""
        return {"kind": SOURCE_KIND, "paths": list(self.paths), "format": self.format,
                "recurse": self.recurse, "exclusions": list(self.exclusions),
                "bounded_files": self.bounded_files, "bounded_size": self.bounded_size,
                "rewritten": self.rewritten, "max_band_ms": self.max_band_ms}

    @classmethod
    def from_description(cls, data: Mapping[str, Any]) -> FileSource:
        return cls(paths=tuple(data["paths"]), format=data["format"],
                   recurse=data["recurse"], exclusions=tuple(data["exclusions"]),
                   bounded_files=data["bounded_files"], bounded_size=data["bounded_size"],
                   rewritten=data["rewritten"], max_band_ms=data["max_band_ms"])


@dataclass(frozen=True)
class FilePlan:
    """The files one run reads from one context, pinned before reading.

    ``backlog``: pending files a bounded run leaves for later runs. ``rewritten``: files
    skipped as rewrites (policy ignore). ``state``: the context's state once this run has
    committed (None when the mode does not advance bookmarks). ``carried``: files earlier
    runs read that ``state`` still tracks by name (modified after its settled time).
    """

    files: tuple[ListedFile, ...]
    listed: int
    backlog: int = 0
    rewritten: int = 0
    state: FileState | None = None
    carried: tuple[ListedFile, ...] = ()

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    def counts(self) -> dict[str, int]:
        return {"files": len(self.files), "bytes": self.bytes, "listed": self.listed,
                "backlog": self.backlog, "rewritten_skipped": self.rewritten}


# --- listing --------------------------------------------------------------------------


def list_files(source: FileSource) -> list[ListedFile]:
    """Every data file under ``source.paths``, minus hidden files and ``exclusions``.

    Like Spark, names starting with ``_`` or ``.`` are hidden (``_SUCCESS``, ``.crc``,
    ``_delta_log``), except ``key=value`` partition directories.

    Raises:
        SourceError: a path does not exist (``job`` and context are filled in by the caller).
    """
    found: list[ListedFile] = []
    for root in source.paths:
        fs, base, to_uri = filesystem(root)
        info = fs.get_file_info(base)
        if info.type == pafs.FileType.File:
            infos, prefix = [info], os.path.dirname(base)
        elif info.type == pafs.FileType.Directory:
            selector = pafs.FileSelector(base, recursive=source.recurse)
            infos, prefix = fs.get_file_info(selector), base.rstrip("/")
        else:
            raise FileNotFoundError(f"{root} does not exist")
        for item in infos:
            relative = item.path[len(prefix):].lstrip("/")
            if item.type != pafs.FileType.File or (
                    ("/_" in f"/{relative}" or "/." in f"/{relative}") and _hidden(relative)):
                continue
            uri = to_uri(item.path)
            if any(fnmatch.fnmatchcase(uri, p) or fnmatch.fnmatchcase(relative, p)
                   for p in source.exclusions):
                continue
            found.append(ListedFile(uri, item.size, item.mtime_ns // 1_000_000))
    return found


def new_items(context: str, description: Mapping[str, Any], bookmarks: Bookmarks,
              connections: Callable[[str], Any]) -> int:
    """The files a read described by ``description`` would find that ``context``'s
    bookmark has not processed (``framework.sources.SourceKind``)."""
    source = FileSource.from_description(description)
    return len(plan_files(list_files(source), source, start=bookmarks.files(context),
                          advance=False).files)


def _hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) and "=" not in part
               for part in relative.split("/"))


# --- planning -------------------------------------------------------------------------


def plan_files(
    listed: Sequence[ListedFile],
    source: FileSource,
    *,
    start: FileBookmark | None,
    end: FileBookmark | None = None,
    advance: bool,
    now_ms: int | None = None,
) -> FilePlan:
    """Choose the files to read: those ``start`` has not processed (all when None), and,
    with ``end``, that ``end`` had processed; oldest first within the bounds.

    With ``advance``, the plan carries the state to commit once the run succeeds.
    """
    status = _statuses(listed, start)
    wanted = {"new", "rewritten"} if source.rewritten == "reprocess" else {"new"}
    pending = [f for f in listed if status[f.path] in wanted]
    if end is not None:
        at_end = _statuses(pending, end)
        pending = [f for f in pending if at_end[f.path] == "done"]
    pending.sort(key=lambda f: (f.modified_ms, f.path))
    chosen = _bounded(pending, source)
    plan = FilePlan(files=tuple(chosen), listed=len(listed), backlog=len(pending) - len(chosen),
                    rewritten=sum(1 for f in listed if status[f.path] == "rewritten"
                                  and "rewritten" not in wanted))
    if not advance:
        return plan
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    settled = now_ms - source.max_band_ms
    if plan.backlog:
        settled = min(settled, pending[len(chosen)].modified_ms - 1)
    previous = start.state if start else FileState(settled_ms=settled)
    state = FileState(settled_ms=max(previous.settled_ms, settled),
                      files_total=previous.files_total + len(chosen),
                      bytes_total=previous.bytes_total + plan.bytes)
    read = {f.path for f in chosen}
    carried = tuple(ListedFile(path, size, modified)
                    for path, (modified, size) in (start.window.items() if start else ())
                    if modified > state.settled_ms and path not in read)
    return dataclasses.replace(plan, state=state, carried=carried)


def _statuses(files: Sequence[ListedFile], bookmark: FileBookmark | None) -> dict[str, str]:
    """``done``, ``new`` or ``rewritten`` for each file, as ``bookmark`` sees it."""
    if bookmark is None:
        return {f.path: "new" for f in files}
    status = {}
    for f in files:
        known = bookmark.window.get(f.path)
        if known is not None:
            status[f.path] = "done" if known == (f.modified_ms, f.size) else "rewritten"
        else:
            status[f.path] = "done" if f.modified_ms <= bookmark.state.settled_ms else "new"
    unknown = [path for path, s in status.items() if s == "new"]
    for path in bookmark.seen(unknown) if unknown else ():
        status[path] = "rewritten"
    return status


def _bounded(pending: list[ListedFile], source: FileSource) -> list[ListedFile]:
    if source.bounded_files is not None:
        return pending[:source.bounded_files]
    if source.bounded_size is None:
        return pending
    chosen, total = [], 0
    for f in pending:
        if chosen and total + f.size > source.bounded_size:
            break
        chosen.append(f)
        total += f.size
    return chosen


# --- reading --------------------------------------------------------------------------


def read_files(spark: SparkSession, source: FileSource, plan: FilePlan) -> DataFrame:
    """The planned files as one DataFrame (Hive-style ``key=value`` directories become
    columns). With no files: an empty DataFrame with ``source.schema`` (no columns if none).

    Raises:
        ValueError: Spark would not read every planned file (a reader option filters
            some, or one is outside the ``key=value`` directories of the others).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    if not plan.files:
        if source.schema is None:
            return spark.createDataFrame([], StructType([]))
        empty = spark.createDataFrame([], source.schema)
        if source.lineage_column:
            empty = empty.withColumn(source.lineage_column, F.lit(None).cast("string"))
        return empty
    base_path = _base_path(source)
    if source.format == "avro" and not _spark_avro_available(spark):
        require("Avro files without Spark's Avro jar (spark-avro; python -m framework.jars "
                "adds it)", since="4.0")  # fastavro reads through a Python data source
        from framework.sources import avro

        return avro.read(spark, [f.path for f in plan.files], base_path=base_path,
                         schema=source.schema, lineage_column=source.lineage_column)
    options, schema = source.options, source.schema
    if malformed.applies(source.format, options):
        if source.bad_records != "fail" and schema is None and source.format != "json":
            # only JSON's inference adds the column for malformed records
            schema = read_listed(spark, plan.files, format=source.format, options=options,
                                 schema=None, base_path=base_path).schema
        options = {**options, **malformed.reader_options(source.bad_records)}
        if source.bad_records != "fail" and schema is not None:
            schema = malformed.with_corrupt_column(schema)
    df = read_listed(spark, plan.files, format=source.format, options=options,
                     schema=schema, base_path=base_path)
    if source.lineage_column:
        df = df.withColumn(source.lineage_column, F.col("_metadata.file_path"))
    return df


def first_malformed(spark: SparkSession, source: FileSource, plan: FilePlan) -> str | None:
    """Where a FAILFAST read (schema inference) of ``plan`` met its first malformed record,
    as a message (Spark does not say which file); None when no record is found so."""
    lenient = dataclasses.replace(source, bad_records="drop")
    try:
        _, bad = malformed.set_aside(read_files(spark, lenient, plan))
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
    try:
        spark._jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            "avro", spark._jsparkSession.sessionState().conf())
    except Exception:  # Spark Connect has no _jvm; a missing module raises a Py4J error.
        return False
    return True


def parse_exclusions(value: str | Sequence[str]) -> tuple[str, ...]:
    """Glue passes exclusions as a JSON array string; deltamark also takes a list."""
    if isinstance(value, str):
        parsed = json.loads(value) if value.strip().startswith("[") else [value]
        return tuple(str(p) for p in parsed)
    return tuple(value)
