"""A Delta table as deltamark sees it: the plain data it is described with, opened
(the latest version kept per process), checked, and delta-rs's errors put in words.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from framework import errors, storage

__all__ = ["PHYSICAL_NAME", "AppTransaction", "Commit", "DataFile", "FileAction", "NewFile",
           "Snapshot", "VersionChange", "check_path", "file_stats", "is_table"]


# Reader features whose meaning lives in the log only; delta-rs resolves them for us.
LOG_ONLY_READER_FEATURES = frozenset({"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})
# Column mapping: a column's name in the data files, in its schema field's metadata.
PHYSICAL_NAME = "delta.columnMapping.physicalName"
# Every commit deltamark makes carries this key, so it can find its own version afterwards.
WRITE_ID_KEY = "deltamarkWriteId"
MAX_STRING_STAT = 32  # longer strings get no min/max (a truncated max would be wrong)


@dataclass(frozen=True)
class AppTransaction:
    """A Delta app transaction: this write is version ``version`` of writer ``app_id``."""

    app_id: str
    version: int


@dataclass(frozen=True)
class DataFile:
    """One live data file of a snapshot, with what the log says about it."""

    path: str  # absolute local path or URI
    size: int
    partition_values: Mapping[str, Any]
    num_records: int | None
    min_values: Mapping[str, Any]
    max_values: Mapping[str, Any]
    null_counts: Mapping[str, Any]


@dataclass(frozen=True)
class NewFile:
    """A Parquet file written by deltamark, to be added by ``commit_files``."""

    relative_path: str  # as on disk, relative to the table root
    size: int
    partition_values: Mapping[str, str | None]  # Delta's string form; None = null
    modification_time_ms: int
    stats_json: str


@dataclass(frozen=True)
class Snapshot:
    """A table at one version: schema (Spark/Delta JSON), partitioning, live files."""

    path: str
    version: int
    schema_json: str
    partition_columns: tuple[str, ...]
    files: tuple[DataFile, ...]
    reader_features: frozenset[str] = field(default_factory=frozenset)
    configuration: Mapping[str, str | None] = field(default_factory=dict)

    @property
    def column_mapping(self) -> str:
        """The column mapping mode: ``none``, ``name`` or ``id``."""
        return self.configuration.get("delta.columnMapping.mode") or "none"

    def unsupported_features(self) -> list[str]:
        """Features that change how data files must be read, so Parquet alone is wrong."""
        found = sorted(self.reader_features - LOG_ONLY_READER_FEATURES)
        if self.column_mapping != "none" and "columnMapping" not in found:
            found.append(f"columnMapping ({self.column_mapping})")
        return found


@dataclass(frozen=True)
class Commit:
    """One entry of a table's history."""

    version: int
    timestamp: datetime
    operation: str
    user_metadata: Mapping[str, Any]
    info: Mapping[str, Any]


@dataclass(frozen=True)
class FileAction:
    """A data file as one commit's ``add``, ``remove`` or ``cdc`` action names it."""

    path: str  # absolute local path or URI
    partition_values: Mapping[str, str | None]  # by column name, in Delta's string form
    deletion_vector: bool = False  # some of its rows are deleted by a deletion vector


@dataclass(frozen=True)
class VersionChange:
    """What one commit did to a table's data.

    ``added`` and ``removed``: the files it added or removed as data changes (a compaction
    adds and removes files without changing data, so it shows as neither); ``cdc``: the
    change-feed files it wrote; ``timestamp``: the commit's time (UTC).
    """

    version: int
    operation: str
    timestamp: datetime | None
    added: tuple[FileAction, ...]
    removed: tuple[FileAction, ...] = ()
    cdc: tuple[FileAction, ...] = ()

    @property
    def rewrote(self) -> bool:
        """It removed data (delete, update, merge, overwrite)."""
        return bool(self.removed)


#: what delta-rs takes, in a table's path, for an escaped character (``%41`` is ``A``)
_ESCAPE = re.compile("%[0-9A-Fa-f]{2}")


def check_path(path: str | os.PathLike[str]) -> str:
    """``path``, where delta-rs can open or create a table: before a write, so that one
    it would misplace is refused before anything is written.

    Raises:
        DeltaTableError: the path holds what delta-rs would decode (it would write the
            table's log in one directory and look for it in another).
    """
    path = str(path)
    if found := _ESCAPE.search(path):
        raise errors.DeltaTableError(
            path, f"delta-rs reads {found[0]!r} in a table's path as an escaped character "
            "and would look for the table in another directory. Rename it (no '%' "
            "followed by two hex digits).")
    return path


def is_table(path: str | os.PathLike[str]) -> bool:
    path = str(path)
    # A table already open is one still (a local one unless its log directory went): ~2 ms
    # saved on every state read and commit, ~45 ms on S3. Were an object-store table
    # deleted, the next _open fails to update the handle and looks afresh.
    if path in _LATEST and (not storage.is_local(path) or
                            os.path.isdir(os.path.join(path, "_delta_log"))):
        return True
    try:
        return DeltaTable.is_deltatable(path, storage_options=storage.delta_options(path))
    except OSError as exc:  # the object store did not answer
        raise errors.StorageUnreachableError(path, _cause(exc)) from exc


# Latest-version handles, brought up to date on each use: catching up on a few new
# commits costs a fraction of replaying the log from its checkpoint. Beside each, its
# version's commit file as it was then (``_stamp``).
_LATEST: dict[str, tuple[DeltaTable, tuple[int, int] | None]] = {}


def _open(path: str, version: int | None = None) -> DeltaTable:
    path = check_path(path)
    known, stamp = _LATEST.get(path, (None, None)) if version is None else (None, None)
    if known is not None and _stamp(path, known.version()) != stamp:
        # the table went back (restored from a backup) or was made anew: open afresh
        del _LATEST[path]
        known = None
    if known is not None:
        try:
            if not _has_newer_commit(path, known.version()):
                return known
            known.update_incremental()
            _LATEST[path] = (known, _stamp(path, known.version()))
            return known
        except DeltaError:
            del _LATEST[path]  # the log changed under us (e.g. cleaned up): open afresh
    try:
        table = DeltaTable(path, version=version, storage_options=storage.delta_options(path))
    except (TableNotFoundError, DeltaError) as exc:
        damaged = _damage(exc)
        if not damaged and not is_table(path):
            raise errors.TableNotFoundError(path) from exc
        if not damaged and version is not None:
            raise errors.VersionNotFoundError(path, f"version {version}", str(exc)) from exc
        raise errors.DamagedTableError(path, damaged or _first_line(exc)) from exc
    if version is None:
        _LATEST[path] = (table, _stamp(path, table.version()))
    return table


#: what delta-rs says about a damaged log, and how deltamark says it
_DAMAGE = {"No table metadata or protocol found": "its first commit (metadata) is missing",
           "Expected contiguous commit files": "a commit file is missing (a gap in the log)",
           "Json error": "a commit file is not valid JSON",
           "Failed to parse": "a commit file cannot be parsed"}


def _damage(exc: Exception) -> str | None:
    return next((said for found, said in _DAMAGE.items() if found in str(exc)), None)


def _cause(exc: Exception) -> str:
    """delta-rs's chain of causes (one per line, arrows, colour codes) as one line: the
    first, and the innermost."""
    lines = [line.strip(" ↳") for line in re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return type(exc).__name__
    return lines[0] if len(lines) == 1 else f"{lines[0]}: {lines[-1]}"


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def _log_entry(path: str, version: int) -> str:
    """The file (or object) of the table's commit ``version``."""
    return storage.join(path, "_delta_log", f"{version:020d}.json")


def _stamp(path: str, version: int) -> tuple[int, int] | None:
    """For a local table, what tells ``version``'s commit file from another one of that
    version (its inode and modification time); None where it is gone, or not local.
    A handle whose stamp changed belongs to a table replaced (by an older copy of itself,
    or by a new table at the same path) or cleaned up past it."""
    if not storage.is_local(path):
        return None
    try:
        found = os.stat(_log_entry(path, version))
    except FileNotFoundError:
        return None
    return found.st_ino, found.st_mtime_ns


def _has_newer_commit(path: str, version: int) -> bool:
    """Whether the table moved past ``version``. For a local table a few stats answer, where
    delta-rs's update lists the whole log (~5 ms for a state table): the next commit file
    exists, or log cleanup removed ``version``'s, or a later checkpoint was written."""
    if not storage.is_local(path):
        return True
    if os.path.exists(_log_entry(path, version + 1)):
        return True
    checkpoint = _checkpointed(path)
    return checkpoint is not None and checkpoint > version


def _checkpointed(path: str) -> int | None:
    """The version of the table's last checkpoint, as ``_last_checkpoint`` says; None
    without one (or one that cannot be read)."""
    try:
        found = storage.read_bytes(storage.join(path, "_delta_log", "_last_checkpoint"))
        return None if found is None else int(json.loads(found)["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def file_stats(metadata: pq.FileMetaData, columns: Collection[str]) -> str:
    """A Parquet file's Delta statistics (numRecords; min, max and nullCount of
    ``columns``), from its footer."""
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for index in range(metadata.num_columns):
        name = metadata.schema.column(index).path
        if name not in columns:
            continue  # nested fields and partition columns
        chunks = [metadata.row_group(g).column(index).statistics
                  for g in range(metadata.num_row_groups)]
        if not chunks or any(s is None for s in chunks):
            continue
        nulls[name] = sum(s.null_count for s in chunks)
        if all(s.has_min_max for s in chunks):
            if chunks[0].logical_type.type == "TIMESTAMP":  # raw: .min imports pandas
                kind = json.loads(chunks[0].logical_type.to_json())
                lo = _timestamp(min(s.min_raw for s in chunks), kind, ceiling=False)
                hi = _timestamp(max(s.max_raw for s in chunks), kind, ceiling=True)
            else:
                lo = _stat_value(min(s.min for s in chunks))
                hi = _stat_value(max(s.max for s in chunks))
            if lo is not None and hi is not None:
                low[name], high[name] = lo, hi
    return json.dumps({"numRecords": metadata.num_rows, "minValues": low,
                       "maxValues": high, "nullCount": nulls})


def _timestamp(raw: int, kind: Mapping[str, Any], *, ceiling: bool) -> str:
    """A Parquet timestamp statistic in Delta's form, to the microsecond (a nanosecond
    maximum rounded up, so that it still bounds the column)."""
    unit = kind["timeUnit"]
    micros = raw * 1000 if unit == "milliseconds" else raw if unit == "microseconds" \
        else -(-raw // 1000) if ceiling else raw // 1000
    value = (_EPOCH + dt.timedelta(microseconds=micros)).isoformat(timespec="microseconds")
    return value + "Z" if kind["isAdjustedToUTC"] else value


_EPOCH = dt.datetime(1970, 1, 1)


def _stat_value(value: Any) -> Any:
    if isinstance(value, (bool, bytes)):
        return None
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, int):
        return value
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return value.isoformat(timespec="microseconds")
        utc = value.astimezone(dt.UTC).replace(tzinfo=None)
        return utc.isoformat(timespec="microseconds") + "Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, str):
        return value if len(value) <= MAX_STRING_STAT else None
    return None
