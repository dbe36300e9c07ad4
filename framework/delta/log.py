"""The one place that talks to delta-rs (the ``deltalake`` package).

Everything else in deltamark sees plain data (``Snapshot``, ``DataFile``, ``Commit``) and
calls these functions; no other module imports ``deltalake``.

Never call ``DeltaTable.to_pyarrow_table()`` here: processes that do abort at exit about
half the time (delta-rs issue 2184). Rows are read with pyarrow from the snapshot's files.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import random
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import (
    CommitProperties,
    DeltaTable,
    Field,
    PostCommitHookProperties,
    QueryBuilder,
    Schema,
    Transaction,
    write_deltalake,
)
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import AddAction, create_table_with_add_actions

from framework import errors, storage
from framework.config import STATE_COMMIT_TIMEOUT_SECONDS
from framework.storage import lease
from state_tables.rows import arrow_table, empty_rows, mask, python_rows

logger = logging.getLogger(__name__)

__all__ = [
    "SCHEMA_CHANGE",
    "Added",
    "AppTransaction",
    "Commit",
    "DataFile",
    "FileAction",
    "NewFile",
    "Snapshot",
    "Upkeep",
    "VersionChange",
    "add_columns",
    "added",
    "append_rows",
    "change_feed_on",
    "changes",
    "check_path",
    "commit_files",
    "delete_all",
    "deleted_rows",
    "forget_open_tables",
    "has_commit",
    "history",
    "is_table",
    "merge_rows",
    "physical_names",
    "query",
    "read_newest",
    "read_rows",
    "restore",
    "snapshot",
    "table_version",
    "tidy",
    "transaction_version",
    "version_at",
]

# Reader features whose meaning lives in the log only; delta-rs resolves them for us.
LOG_ONLY_READER_FEATURES = frozenset({"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})
# Column mapping: a column's name in the data files, in its schema field's metadata.
PHYSICAL_NAME = "delta.columnMapping.physicalName"
# Every commit deltamark makes carries this key, so it can find its own version afterwards.
WRITE_ID_KEY = "deltamarkWriteId"


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
# commits costs a fraction of replaying the log from its checkpoint.
_LATEST: dict[str, DeltaTable] = {}


def _open(path: str, version: int | None = None) -> DeltaTable:
    path = check_path(path)
    known = _LATEST.get(path) if version is None else None
    if known is not None and _version_gone(path, known.version()):
        del _LATEST[path]  # the table went back (restored from a backup): open afresh
        known = None
    if known is not None:
        try:
            if not _has_newer_commit(path, known.version()):
                return known
            known.update_incremental()
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
        _LATEST[path] = table
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


def forget_open_tables() -> None:
    """Drop the table handles and data files kept in memory: what follows reads as a new
    process does (for benchmarks)."""
    _LATEST.clear()
    _read_file.cache_clear()


def _version_gone(path: str, version: int) -> bool:
    """Whether a local table no longer has ``version``'s commit file (a table replaced by
    an older copy of itself, or log cleanup past a handle kept that long)."""
    return storage.is_local(path) and not os.path.exists(_log_entry(path, version))


def _has_newer_commit(path: str, version: int) -> bool:
    """Whether the table moved past ``version``. For a local table a few stats answer, where
    delta-rs's update lists the whole log (~5 ms for a state table): the next commit file
    exists, or log cleanup removed ``version``'s, or a later checkpoint was written."""
    if not storage.is_local(path):
        return True
    if os.path.exists(_log_entry(path, version + 1)):
        return True
    try:
        with open(os.path.join(path, "_delta_log", "_last_checkpoint"),
                  encoding="utf-8") as found:
            return int(json.load(found)["version"]) > version
    except (OSError, ValueError, KeyError):
        return False


def snapshot(
    path: str, *, version: int | None = None, timestamp: datetime | str | None = None
) -> Snapshot:
    """Load the table's state at the latest version, ``version`` or ``timestamp``.

    Raises:
        TableNotFoundError, VersionNotFoundError
    """
    table = _at(path, version, timestamp)
    metadata = table.metadata()
    protocol = table.protocol()
    return Snapshot(
        path=path,
        version=table.version(),
        schema_json=table.schema().to_json(),
        partition_columns=tuple(metadata.partition_columns),
        files=tuple(_data_files(path, table, metadata.partition_columns)),
        reader_features=frozenset(protocol.reader_features or ()),
        configuration=dict(metadata.configuration),
    )


def version_at(path: str, *, version: int | None = None,
               timestamp: datetime | str | None = None) -> int:
    """The table version that ``snapshot`` would load, without listing its files.

    Raises:
        TableNotFoundError, VersionNotFoundError
    """
    return _at(path, version, timestamp).version()


def _at(path: str, version: int | None, timestamp: datetime | str | None) -> DeltaTable:
    table = _open(path, version)
    if timestamp is not None:
        try:
            table.load_as_version(timestamp)
        except (DeltaError, ValueError) as exc:
            raise errors.VersionNotFoundError(path, f"timestamp {timestamp}", str(exc)) from exc
    return table


def _data_files(path: str, table: DeltaTable, partition_columns: Sequence[str]
                ) -> Iterator[DataFile]:
    try:
        actions = arrow_table(table.get_add_actions(flatten=True))
    except DeltaError:  # a table with no files at all
        return
    for row in python_rows(actions):
        yield DataFile(
            path=storage.join(path, unquote(row["path"])),
            size=row["size_bytes"],
            partition_values={c: row.get(f"partition.{c}") for c in partition_columns},
            num_records=row.get("num_records"),
            min_values=_prefixed(row, "min."),
            max_values=_prefixed(row, "max."),
            null_counts=_prefixed(row, "null_count."),
        )


def _prefixed(row: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in row.items() if k.startswith(prefix)}


def changes(snap: Snapshot, *, after: int, timestamps: bool = False) -> list[VersionChange]:
    """The data changes of versions ``after + 1`` to ``snap.version``, read from their log
    entries; with ``timestamps``, each commit's time as Delta's change feed gives it (the
    in-commit timestamp, else the log entry's modification time, in milliseconds).

    Raises:
        VersionNotFoundError: a log entry in the range is gone (log retention).
    """
    path = snap.path
    names = physical_names(snap.schema_json)
    found = []
    for version in range(after + 1, snap.version + 1):
        entry = storage.read_bytes(_log_entry(path, version))
        if entry is None:
            raise errors.VersionNotFoundError(
                path, f"version {version}", "its log entry is gone (log retention)")
        actions = [json.loads(line) for line in entry.splitlines() if line.strip()]
        info: dict[str, Any] = next(
            (a["commitInfo"] for a in actions if "commitInfo" in a), {})
        when = None
        if "inCommitTimestamp" in info:
            when = datetime.fromtimestamp(info["inCommitTimestamp"] / 1000, UTC)
        elif timestamps and (when := storage.modified(_log_entry(path, version))):
            when = when.replace(microsecond=when.microsecond // 1000 * 1000)

        added, removed, cdc = (_file_actions(path, actions, kind, names)
                               for kind in ("add", "remove", "cdc"))
        found.append(VersionChange(version, info.get("operation", ""), when, added, removed,
                                   cdc))
    return found


def _file_actions(path: str, actions: Sequence[Mapping[str, Any]], kind: str,
                  names: Mapping[str, str]) -> tuple[FileAction, ...]:
    """The files a commit's ``kind`` actions (add, remove, cdc) name as data changes;
    partition values by column name (``names``: physical to logical, column mapping)."""
    return tuple(
        FileAction(storage.join(path, unquote(a[kind]["path"])),
                   {names.get(k, k): v for k, v in (a[kind].get("partitionValues") or {}).items()},
                   bool(a[kind].get("deletionVector")))
        # cdc files say dataChange false: they are not the table's data
        for a in actions if kind in a and (kind == "cdc" or a[kind].get("dataChange", True)))


def has_commit(path: str, version: int) -> bool:
    """Whether the log still holds commit ``version``'s entry (log retention removes old
    ones once a checkpoint covers them)."""
    return storage.exists(_log_entry(path, version))


def change_feed_on(path: str, version: int) -> bool:
    """Whether the table had its Change Data Feed on at ``version``."""
    configuration = _open(path, version).metadata().configuration
    return configuration.get("delta.enableChangeDataFeed") == "true"


def physical_names(schema_json: str) -> dict[str, str]:
    """The top-level columns' names in the data files (column mapping), to their names."""
    return {field["metadata"][PHYSICAL_NAME]: field["name"]
            for field in json.loads(schema_json)["fields"]
            if PHYSICAL_NAME in (field.get("metadata") or {})}


def deleted_rows(path: str, version: int) -> dict[str, pa.Array]:
    """The row indexes (int64) that deletion vectors delete at ``version``, by data file
    (its absolute path, as ``Snapshot.files`` and ``changes`` give it)."""
    table = _open(path, version)
    root = table.table_uri.rstrip("/") + "/"
    vectors = arrow_table(table.deletion_vectors())
    return {
        storage.join(path, unquote(uri.removeprefix(root))):
            pc.indices_nonzero(pc.invert(keep.values)).cast(pa.int64())
        for uri, keep in zip(vectors["filepath"].to_pylist(),
                             vectors["selection_vector"].combine_chunks(), strict=True)}


@dataclass(frozen=True)
class Added:
    """What one commit added to a table: data files, their bytes, and their rows (from
    the files' statistics; None when a file has none)."""

    files: int
    bytes: int
    rows: int | None


@functools.lru_cache(maxsize=4096)
def added(path: str, version: int) -> Added | None:
    """What commit ``version`` of the table added, read from its log entry (a commit
    never changes: remembered); None when the entry is gone (log retention)."""
    entry = storage.read_bytes(_log_entry(path, version))
    if entry is None:
        return None
    actions = [json.loads(line) for line in entry.splitlines() if line.strip()]
    adds = [a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)]
    stats = [json.loads(a["stats"]) if a.get("stats") else {} for a in adds]
    rows = [s.get("numRecords") for s in stats]
    return Added(files=len(adds), bytes=sum(int(a.get("size", 0)) for a in adds),
                 rows=None if None in rows else sum(rows))


def table_version(path: str) -> int | None:
    """The latest version, or None when there is no table at ``path``."""
    return _open(path).version() if is_table(path) else None


def transaction_version(path: str, app_id: str) -> int | None:
    """The highest app-transaction version ``app_id`` committed to the table, if any."""
    return _open(path).transaction_version(app_id) if is_table(path) else None


def history(path: str, *, limit: int | None = None) -> list[Commit]:
    """Commits newest first; ``user_metadata`` is the commit's parsed ``userMetadata``."""
    commits = []
    for info in _open(path).history(limit):
        raw = info.get("userMetadata")
        try:
            user_metadata = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            user_metadata = {"userMetadata": raw}
        commits.append(
            Commit(
                version=info["version"],
                timestamp=datetime.fromtimestamp(info["timestamp"] / 1000, tz=UTC),
                operation=info.get("operation", ""),
                user_metadata=user_metadata,
                info=info,
            )
        )
    return commits


def _commit_properties(
    txn: AppTransaction | None, user_metadata: Mapping[str, Any] | None,
    write_id: str | None = None, *, retries: int | None = None,
) -> CommitProperties:
    custom = {WRITE_ID_KEY: write_id} if write_id else {}
    if user_metadata:
        custom["userMetadata"] = json.dumps(dict(user_metadata), default=str)
    apps = [Transaction(txn.app_id, txn.version)] if txn else None
    return CommitProperties(custom_metadata=custom, app_transactions=apps,
                            max_commit_retries=retries)


def _version_of(path: str, write_id: str, *, after: int) -> int:
    """The version our commit got, past version ``after`` (other writers may have committed
    right before or after it); only the commits since ``after`` are read, for a local
    table straight from its log entries."""
    version = after + 1
    while storage.is_local(path) and os.path.exists(entry := _log_entry(path, version)):
        with open(entry, encoding="utf-8") as commit:
            if write_id in commit.read():
                return version
        version += 1
    table = _open(path)
    for info in table.history(max(table.version() - after, 1)):
        if info.get(WRITE_ID_KEY) == write_id:
            return info["version"]
    raise errors.WriteConflictError(path, f"commit {write_id} not found in recent history")


def _created(path: str, create: Callable[[], object]) -> bool:
    """Run ``create``, a table's first commit made without retries; False when another
    writer created the table meanwhile, so the caller commits to that table instead.

    Not retried because delta-rs retries a creation that lost the race for version 0 as a
    second creation at version 1: a new table id and schema, which fail the other writer's
    next commit ("Metadata changed since last commit") or replace the schema it wrote.
    """
    check_path(path)
    try:
        create()
    except DeltaError:
        if is_table(path):
            return False
        raise
    return True


def commit_files(
    path: str,
    files: Sequence[NewFile],
    *,
    mode: Literal["append", "overwrite"],
    schema_json: str,
    partition_by: Sequence[str],
    replace_where: Sequence[tuple[str, str, Any]] | None = None,
    txn: AppTransaction | None = None,
    user_metadata: Mapping[str, Any] | None = None,
) -> int:
    """Add ``files`` to the table in ONE commit (creating the table if needed).

    ``overwrite`` removes every live file, or with ``replace_where`` (partition filters)
    only the files of matching partitions; a changed schema is part of that commit.
    Returns the new table version.

    Raises:
        WriteConflictError: the commit was refused.
    """
    schema = Schema.from_json(schema_json)
    adds = [
        AddAction(f.relative_path, f.size, dict(f.partition_values), f.modification_time_ms,
                  True, f.stats_json)
        for f in files
    ]
    write_id = uuid.uuid4().hex
    properties = _commit_properties(txn, user_metadata, write_id)
    read_version = -1

    def create() -> None:
        create_table_with_add_actions(
            path, schema, adds, mode="error", partition_by=list(partition_by) or None,
            storage_options=storage.delta_options(path),
            commit_properties=_commit_properties(txn, user_metadata, write_id, retries=0))

    try:
        if is_table(path) or not _created(path, create):
            filters = [(c, op, _filter_value(v)) for c, op, v in replace_where or ()] or None
            table = _open(path)
            read_version = table.version()
            table.create_write_transaction([*adds], mode, schema, list(partition_by) or None,
                                           filters, commit_properties=properties)
    except (CommitFailedError, DeltaError) as exc:
        raise errors.WriteConflictError(path, f"commit refused: {exc}") from exc
    return _version_of(path, write_id, after=read_version)


def merge_rows(path: str, rows: pa.Table, *, keys: Sequence[str], merge_schema: bool = False,
               txn: AppTransaction | None = None,
               user_metadata: Mapping[str, Any] | None = None) -> int:
    """Upsert ``rows`` into the table in ONE commit: rows whose ``keys`` match are updated,
    the others inserted. Returns the new table version.

    Raises:
        WriteConflictError: the commit was refused.
    """
    if rows.num_rows == 0:  # still one commit: it records the app transaction
        current = snapshot(path)
        return commit_files(path, [], mode="append", schema_json=current.schema_json,
                            partition_by=current.partition_columns, txn=txn,
                            user_metadata=user_metadata)
    write_id = uuid.uuid4().hex
    properties = _commit_properties(txn, user_metadata, write_id)
    predicate = " AND ".join(f't."{k}" = s."{k}"' for k in keys)
    table = _open(path)
    read_version = table.version()
    try:
        (table.merge(rows, predicate, source_alias="s", target_alias="t",
                     merge_schema=merge_schema, commit_properties=properties)
         .when_matched_update_all()
         .when_not_matched_insert_all()
         .execute())
    except (CommitFailedError, DeltaError) as exc:
        raise errors.WriteConflictError(path, f"merge refused: {exc}") from exc
    return _version_of(path, write_id, after=read_version)


def restore(path: str, version: int, *, user_metadata: Mapping[str, Any]) -> int:
    """Make the table's content that of ``version`` again, in a new commit (history kept).

    Raises:
        VersionNotFoundError: ``version`` (or its files) is no longer reachable.
    """
    table = _open(path)
    try:
        table.restore(version, commit_properties=_commit_properties(None, user_metadata))
    except DeltaError as exc:
        raise errors.VersionNotFoundError(path, f"version {version}", str(exc)) from exc
    return table.version()


def fence(path: str, txn: AppTransaction, *, user_metadata: Mapping[str, Any]) -> None:
    """Commit ``txn`` with no data (unless the table already holds it): a write of that
    app transaction still under way elsewhere then either finds it done and skips, or
    fails on the conflict (Delta, delta-spark and delta-rs check the app transactions a
    commit read)."""
    table = _open(path)
    if (table.transaction_version(txn.app_id) or -1) >= txn.version:
        return
    metadata = table.metadata()
    try:
        table.create_write_transaction(
            [], "append", table.schema(), list(metadata.partition_columns) or None, None,
            commit_properties=_commit_properties(txn, user_metadata))
    except (CommitFailedError, DeltaError) as exc:
        raise errors.WriteConflictError(path, f"fence refused: {exc}") from exc


def delete_all(path: str, *, user_metadata: Mapping[str, Any]) -> int:
    """Remove every row in a new commit (history kept); returns the new version."""
    table = _open(path)
    table.delete(commit_properties=_commit_properties(None, user_metadata))
    return table.version()


#: the userMetadata key of a commit that only changes the schema for a write that follows
#: (the embedded path's), holding that write's ``deltamark`` metadata
SCHEMA_CHANGE = "deltamarkSchema"


def add_columns(path: str, schema_json: str, *,
                user_metadata: Mapping[str, Any] | None = None) -> None:
    """Add the new (nullable) columns of ``schema_json``, and its new fields of existing
    columns' structs, to the table schema: one commit with no data (its ``userMetadata``
    ``user_metadata``)."""
    table = _open(path)
    properties = _commit_properties(None, user_metadata)
    existing = {f.name: f for f in table.schema().fields}
    wanted = Schema.from_json(schema_json)
    if any(f.name in existing and f.to_json() != existing[f.name].to_json()
           for f in wanted.fields):  # a nested field: delta-rs merges those in a write
        write_deltalake(table, pa.schema(wanted.to_arrow()).empty_table(), mode="append",
                        schema_mode="merge", storage_options=storage.delta_options(path),
                        commit_properties=properties)
    elif new := [f for f in wanted.fields if f.name not in existing]:
        table.alter.add_columns([Field.from_json(f.to_json()) for f in new],
                                commit_properties=properties)


def _filter_value(value: Any) -> str | list[str]:
    if isinstance(value, (list, tuple, set, frozenset)):
        return [str(v) for v in value]
    return str(value)


# --- small tables deltamark owns (state tables) ---------------------------------------


@dataclass(frozen=True)
class Upkeep:
    """How a small table deltamark owns (a state table) stays small and fast to read.

    Every ``compact_every`` versions the table is tidied: its small files are compacted, a
    checkpoint is written, and the data files and log entries no version has needed for
    ``retention_hours`` are deleted (the table's ``delta.deletedFileRetentionDuration``
    and ``delta.logRetentionDuration``). Compaction has two tiers, so that no tidy
    rewrites a table's whole history: files under ``small_file_size`` become files of
    about that size, and every ``compact_every`` tidies those become files of up to
    ``file_size``, which then stay as they are.
    """

    retention_hours: int
    compact_every: int = 10
    small_file_size: int = 64 << 10
    file_size: int = 1 << 20

    def properties(self) -> dict[str, str]:
        interval = f"interval {self.retention_hours} hours"
        return {"delta.logRetentionDuration": interval,
                "delta.deletedFileRetentionDuration": interval}


def append_rows(path: str, rows: pa.Table, *, upkeep: Upkeep | None = None,
                user_metadata: Mapping[str, Any] | None = None,
                txn: AppTransaction | None = None,
                timeout_seconds: float = STATE_COMMIT_TIMEOUT_SECONDS) -> int:
    """Append an Arrow table in one commit (creating the table); returns the new version.

    Many processes may append at once: on a local disk they take turns
    (``lease.commit_turn``); a commit that loses the race to other writers more often
    than delta-rs retries is tried again after a jittered pause, for up to
    ``timeout_seconds``. With ``upkeep``, the table is tidied every
    ``upkeep.compact_every`` versions (by one process at a time: ``lease.upkeep_lease``),
    so reads of a table that gains a file per run do not grow with its history.

    Raises:
        WriteConflictError: other writers kept winning for ``timeout_seconds``; nothing
            of these rows was committed.
    """
    if not is_table(path) and _created(path, lambda: write_deltalake(
            path, rows, mode="append", storage_options=storage.delta_options(path),
            configuration=upkeep.properties() if upkeep else None,
            commit_properties=_commit_properties(txn, user_metadata, retries=0))):
        return 0
    with lease.commit_turn(path, timeout_seconds):
        version = _patiently(path, timeout_seconds, lambda table: write_deltalake(
            # through the open table (not the path): that saves a log replay, ~3 ms, not ~13
            table, rows, mode="append", schema_mode="merge",
            commit_properties=_commit_properties(txn, user_metadata),
            post_commithook_properties=_TIDIED if upkeep else None))
    if upkeep and version % upkeep.compact_every == 0:
        _tidy_unless_busy(path, upkeep, deep=version % upkeep.compact_every ** 2 == 0)
    return version


def _tidy_unless_busy(path: str, upkeep: Upkeep, *, deep: bool) -> None:
    """Tidy the table unless another process holds its upkeep lease (it is tidying it).
    Never fails: the rows are committed, and a tidy left undone falls due again."""
    try:
        with lease.upkeep_lease(path) as mine:
            if mine:
                _tidy(_open(path), upkeep, deep=deep)
    except Exception as exc:  # noqa: BLE001 - delta-rs's, the lease's storage's: all wait
        logger.warning("%s: tidying the table failed, left for later: %s", path,
                       _first_line(exc))


def _patiently(path: str, timeout_seconds: float, commit: Callable[[DeltaTable], object]
               ) -> int:
    """Run ``commit`` on the table's latest version until it lands; its new version.
    delta-rs rebases a commit on each newer version up to 15 times; past that, this
    pauses (a random part of a pause that doubles up to 2 s, so that contenders spread
    out) and tries again, for up to ``timeout_seconds``."""
    deadline = time.monotonic() + timeout_seconds
    pause, attempts = 0.05, 0
    while True:
        table = _open(path)
        attempts += 1
        try:
            commit(table)
            return table.version()
        except CommitFailedError as exc:
            if time.monotonic() + pause > deadline:
                raise errors.WriteConflictError(path, (
                    f"other processes' commits kept winning for {timeout_seconds:.0f} "
                    f"s ({attempts} tries: {_first_line(exc)}); nothing of this commit was "
                    "written. Run again (a run recovers the one before it), or start fewer "
                    "runs at once on this state root.")) from exc
            time.sleep(random.uniform(0, pause))
            pause = min(2 * pause, 2.0)


#: a tidied table's commits leave checkpoints and log cleanup to its tidying
_TIDIED = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def tidy(path: str, upkeep: Upkeep) -> int:
    """Tidy a table now, as ``append_rows`` does every ``upkeep.compact_every`` versions,
    once no other process is tidying it (``lease.upkeep_lease``); first remove the rows
    that repeat another row exactly (two compactions at once, before deltamark held this
    lease, each added a copy of the same rows). Returns how many rows it removed.

    Raises:
        DeltaTableError: delta-rs refused.
    """
    if not is_table(path):
        return 0
    try:
        with _upkeep_held(path):
            removed = _drop_copies(path)
            _tidy(_open(path), upkeep, deep=True)
    except DeltaError as exc:
        raise errors.DeltaTableError(path, f"tidying it failed ({_first_line(exc)}); nothing "
                                     "was lost. Try again.") from exc
    return removed


def _drop_copies(path: str) -> int:
    """Rewrite the table without the rows that repeat an earlier row exactly, keeping the
    order of the rest; how many went. Rows other processes append meanwhile are kept: the
    rewrite removes only the files of the version it read."""
    removed = 0

    def rewrite(table: DeltaTable) -> None:
        nonlocal removed
        rows = read_rows(path, version=table.version())
        assert rows is not None  # is_table(path) held
        numbered = rows.append_column("_row", pa.array(range(len(rows)), pa.int64()))
        first = numbered.group_by(rows.column_names, use_threads=False).aggregate(
            [("_row", "min")])["_row_min"]
        removed = len(rows) - len(first)
        if removed:
            write_deltalake(table, rows.take(pc.sort_indices(first)), mode="overwrite",
                            commit_properties=_commit_properties(None, {"removed_copies": removed}),
                            post_commithook_properties=_TIDIED)

    _patiently(path, STATE_COMMIT_TIMEOUT_SECONDS, rewrite)
    return removed


@contextlib.contextmanager
def _upkeep_held(path: str, *, wait_seconds: float = 60.0) -> Iterator[None]:
    """Hold the table's upkeep lease, waiting for another process's tidy to end."""
    deadline = time.monotonic() + wait_seconds
    while True:
        with lease.upkeep_lease(path) as mine:
            if mine:
                yield
                return
        if time.monotonic() > deadline:
            raise errors.DeltaTableError(path, (
                f"another process has been tidying it for over {wait_seconds:.0f} s "
                f"(its upkeep lease, {storage.join(path, '_upkeep.lock')}); try again later"))
        time.sleep(0.2)


def _tidy(table: DeltaTable, upkeep: Upkeep, *, deep: bool) -> None:
    """Compact (into big files too when ``deep``), vacuum, checkpoint, clean the log."""
    wanted = upkeep.properties()
    if any(table.metadata().configuration.get(k) != v for k, v in wanted.items()):
        table.alter.set_table_properties(wanted)
    table.optimize.compact(target_size=upkeep.file_size if deep else upkeep.small_file_size)
    # VACUUM first: it finds the files to delete from the tombstones the checkpoint drops
    table.vacuum(dry_run=False)
    table.create_checkpoint()
    table.cleanup_metadata()


def read_rows(path: str, *, version: int | None = None,
              filters: Sequence[tuple[str, str, Any]] | None = None,
              columns: Sequence[str] | None = None) -> pa.Table | None:
    """The rows of an unpartitioned table (at ``version``; only ``columns`` if given), or
    None if there is no table.

    Files are read one by one with ``ParquetFile``: ``pq.read_table`` would load
    pyarrow.dataset, whose import pulls in pandas (about 0.3 s of every CLI command).
    """
    if not is_table(path):
        return None
    table = _open(path, version)
    filters = list(filters or ())
    wanted, needed = _schemas(table, [c for c, _, _ in filters], columns)
    parts = []
    for uri, stats in _files_for(table, filters):
        # a filter every row of the file passes costs neither its column nor a copy
        open_filters = [f for f in filters if not _all_pass(stats[f[0]], f, needed)]
        used = {c for c, _, _ in open_filters}
        schema = pa.schema([f for f in needed if f.name in wanted.names or f.name in used])
        parts.append(_kept(_read_file(uri, schema), open_filters).select(wanted.names))
    return pa.concat_tables(parts) if parts else empty_rows(wanted)


def _kept(rows: pa.Table, filters: Sequence[tuple[str, str, Any]]) -> pa.Table:
    """The rows passing ``filters``: ``rows`` itself when all do (no copy of a large read)."""
    if not filters:
        return rows
    passing = mask(rows, filters)
    return (rows if passing.null_count == 0 and pc.all(passing).as_py()
            else rows.filter(passing))


def read_newest(path: str, *, column: str, within: int = 0,
                filters: Sequence[tuple[str, str, Any]] | None = None,
                columns: Sequence[str] | None = None) -> pa.Table | None:
    """The rows passing ``filters`` whose integer ``column`` is at most ``within`` below its
    largest value among them (None if there is no table).

    The files are read in descending order of their statistics' largest ``column`` and no
    further than the last that may hold such a row: the newest runs of a long history cost
    the newest files only.
    """
    if not is_table(path):
        return None
    table = _open(path)
    filters = list(filters or ())
    wanted, needed = _schemas(table, [*(c for c, _, _ in filters), column], columns)
    found, top = [], None
    newest_first = sorted(_files_for(table, filters, also=[column]),
                          key=lambda f: _largest(f[1][column]), reverse=True)
    for uri, stats in newest_first:
        if top is not None and _largest(stats[column]) < top - within:
            break
        rows = _read_file(uri, needed)
        rows = rows.filter(mask(rows, filters)) if filters else rows
        if len(rows) and (most := pc.max(rows[column]).as_py()) is not None:
            top = most if top is None else max(top, most)
            found.append(rows)
    if top is None:
        return empty_rows(wanted)
    rows = pa.concat_tables(found)
    return rows.filter(mask(rows, [(column, ">=", top - within)])).select(wanted.names)


def _schemas(table: DeltaTable, used: Sequence[str], columns: Sequence[str] | None
             ) -> tuple[pa.Schema, pa.Schema]:
    """The columns asked for, and those to read: with the ``used`` ones (filtered on). A
    column the table does not have (added to its layout since) is left to the caller."""
    schema = pa.schema(table.schema().to_arrow())
    wanted = schema if columns is None else pa.schema([schema.field(c) for c in columns
                                                       if c in schema.names])
    needed = pa.schema([f for f in schema if f.name in wanted.names or f.name in used])
    return wanted, needed


def _largest(bounds: tuple[Any, Any]) -> float:
    """A file's largest value of an integer column; unknown: it may hold any."""
    return bounds[1] if type(bounds[1]) is int else float("inf")


#: a string statistic shorter than this is the value itself: writers truncate longer ones
#: (delta-rs at 64 characters, Delta Spark at 32)
_EXACT_STRING_STATISTICS = 32


def _files_for(table: DeltaTable, filters: Sequence[tuple[str, str, Any]], *,
               also: Sequence[str] = ()) -> list[tuple[str, dict[str, tuple[Any, Any]]]]:
    """The table's data files with their (min, max) statistics of the filtered columns and
    of ``also``, less those whose statistics show that no row passes ``filters``: so a read
    of the newest runs (``run_seq >= n``) opens the newest files only, however long the
    history. Only exact bounds are used: integers, and strings too short to be truncated.
    """
    uris = table.file_uris()
    columns = list(dict.fromkeys([*(c for c, _, _ in filters), *also]))
    if not columns or len(uris) < 2:
        return [(uri, dict.fromkeys(columns, (None, None))) for uri in uris]
    adds = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
    bounds = {c: (adds[f"min.{c}"].to_pylist(), adds[f"max.{c}"].to_pylist())
              if f"min.{c}" in adds.column_names else ([None] * len(adds),) * 2
              for c in columns}
    by_name = {unquote(path).rsplit("/", 1)[-1]: i
               for i, path in enumerate(adds["path"].to_pylist())}
    kept = []
    for uri in uris:
        i = by_name[unquote(uri).rsplit("/", 1)[-1]]
        stats = {c: (low[i], high[i]) for c, (low, high) in bounds.items()}
        if all(op not in _MAY_MATCH or not _exact(stats[c], value)
               or _MAY_MATCH[op](*stats[c], value) for c, op, value in filters):
            kept.append((uri, stats))
    return kept


def _all_pass(bounds: tuple[Any, Any], condition: tuple[str, str, Any],
              schema: pa.Schema) -> bool:
    """Whether a file's (min, max) statistics show that all its rows pass ``condition``
    (an equality on a column that holds no nulls, the value its only one)."""
    column, op, value = condition
    return (op == "=" and not schema.field(column).nullable and _exact(bounds, value)
            and bounds[0] == bounds[1] == value)


def _exact(bounds: tuple[Any, Any], value: Any) -> bool:
    """Whether a file's (min, max) statistics may be compared with ``value``."""
    if type(value) is int:
        return all(type(b) is int for b in bounds)
    return type(value) is str and all(type(b) is str and len(b) < _EXACT_STRING_STATISTICS
                                      for b in bounds)


#: whether a file whose column spans [low, high] may hold a row passing (op, value)
_MAY_MATCH: Mapping[str, Callable[[Any, Any, Any], bool]] = {
    "=": lambda low, high, v: low <= v <= high, "!=": lambda low, high, v: not low == v == high,
    "<": lambda low, high, v: low < v, "<=": lambda low, high, v: low <= v,
    ">": lambda low, high, v: high > v, ">=": lambda low, high, v: high >= v}


@functools.lru_cache(maxsize=256)
def _read_file(uri: str, schema: pa.Schema) -> pa.Table:
    """``schema``'s columns of one data file; columns added after it was written are null.

    Cached: a data file never changes once written, and a state table is read again and
    again while most of its files stay (a run reads the runs table three times).
    """
    fs, local, _ = storage.filesystem(uri)
    file = pq.ParquetFile(local, filesystem=fs)
    present = [name for name in schema.names if name in file.schema_arrow.names]
    rows = file.read(columns=present)
    columns = [rows[f.name].cast(f.type) if f.name in present else pa.nulls(len(rows), f.type)
               for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def query(sql: str, tables: Mapping[str, tuple[str, pa.Schema]], *,
          setup: Sequence[str] = (), check_plan: Callable[[str], None] | None = None
          ) -> pa.Table:
    """Run one SQL statement (DataFusion) over the Delta tables ``{name: (path, schema)}``;
    a table not created yet is queried as empty, with ``schema``.

    ``setup`` statements (e.g. ``CREATE VIEW``) run first, in the same session. Before the
    statement runs, ``check_plan`` gets the kind of its logical plan, as DataFusion plans
    it (the root node's name: ``Projection``, ``Dml``, ``CreateView``, ...; ``Explain``
    for an EXPLAIN, ``Statements`` for several), and may refuse it by raising.

    Raises:
        DeltamarkError: the SQL failed to plan or run (message from DataFusion).
    """
    builder = QueryBuilder({"datafusion.catalog.information_schema": "true"})
    views = []
    for name, (path, schema) in tables.items():
        if is_table(path):
            builder.register(name, _open(path))
        else:
            views.append(_empty_view(name, schema))
    try:
        for statement in [*views, *setup]:
            builder.execute(statement).read_all()
        if check_plan is not None:
            check_plan(_plan_kind(builder, sql))
        return pa.RecordBatchReader.from_stream(builder.execute(sql)).read_all()
    except errors.DeltamarkError:
        raise
    except Exception as exc:  # DataFusion raises plain Exception subclasses
        message = " ".join(str(exc).split())
        raise errors.DeltamarkError(f"sql: {message}") from exc


def _plan_kind(builder: QueryBuilder, sql: str) -> str:
    try:
        plans = pa.RecordBatchReader.from_stream(builder.execute(f"EXPLAIN {sql}")).read_all()
    except Exception as exc:
        if "Nested EXPLAINs" in str(exc):
            return "Explain"
        if "single SQL statement" in str(exc):
            return "Statements"  # more than one
        raise
    logical = next(p for t, p in zip(plans["plan_type"].to_pylist(), plans["plan"].to_pylist(),
                                     strict=True) if t == "logical_plan")
    return logical.split(":", 1)[0].split()[0]


_SQL_TYPES = {"string": "VARCHAR", "int64": "BIGINT", "int32": "INT", "double": "DOUBLE",
              "bool": "BOOLEAN", "timestamp[us, tz=UTC]": "TIMESTAMP"}


def _empty_view(name: str, schema: pa.Schema) -> str:
    columns = ", ".join(f'CAST(NULL AS {_SQL_TYPES.get(str(f.type), "VARCHAR")}) AS "{f.name}"'
                        for f in schema)
    return f'CREATE VIEW "{name}" AS SELECT {columns} WHERE false'
