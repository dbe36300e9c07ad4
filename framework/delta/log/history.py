"""A table's snapshots, versions and history: the files of a version, the changes
between two, a commit's added rows and deletion vectors, app transactions.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from framework import errors, storage
from framework.delta.log.table import (
    PHYSICAL_NAME,
    Commit,
    DataFile,
    FileAction,
    Snapshot,
    VersionChange,
    _checkpointed,
    _log_entry,
    _open,
    check_path,
    is_table,
)
from state_tables.rows import arrow_table, python_rows

__all__ = ["Added", "added", "change_feed_on", "changes", "deleted_rows", "has_commit", "history",
           "latest_version", "physical_names", "snapshot", "table_version",
           "transaction_version", "version_at"]


def snapshot(
    path: str, *, version: int | None = None, timestamp: datetime | str | None = None,
    files: bool = True,
) -> Snapshot:
    """Load the table's state at the latest version, ``version`` or ``timestamp``
    (without ``files``: its schema, partitioning and features, not its list of files).

    Raises:
        TableNotFoundError, VersionNotFoundError
    """
    if not files and version is not None and timestamp is None and (
            found := _described(path, version)) is not None:
        return found
    table = _at(path, version, timestamp)
    metadata = table.metadata()
    protocol = table.protocol()
    return Snapshot(
        path=path,
        version=table.version(),
        schema_json=table.schema().to_json(),
        partition_columns=tuple(metadata.partition_columns),
        files=tuple(_data_files(path, table, metadata.partition_columns)) if files else (),
        reader_features=frozenset(protocol.reader_features or ()),
        configuration=dict(metadata.configuration),
    )


def _described(path: str, version: int) -> Snapshot | None:
    """The table at ``version`` without its files, from the log alone: the metadata and
    protocol of the version's checksum file (``.crc``, which delta-spark writes with each
    commit), else the newest such actions in the commits from ``version`` back to the last
    checkpoint, else in that checkpoint (a single Parquet file: its two columns only).
    delta-rs loads every file's entry to say the same. None when the log has it another
    way (a multi-part or v2 checkpoint, a checkpoint past ``version``, a commit gone)."""
    path = check_path(path)
    checkpoint = _checkpointed(path)
    stop = checkpoint if checkpoint is not None and checkpoint <= version else -1
    actions = _checksum_actions(path, version) or _commit_actions(path, version, stop)
    if actions is not None and len(actions) < 2 and stop >= 0:
        older = _checkpoint_actions(path, stop)
        actions = None if older is None else {**older, **actions}
    if actions is None or len(actions) < 2:
        return None
    meta, protocol = actions["metaData"], actions["protocol"]
    return Snapshot(path=path, version=version, schema_json=meta["schemaString"],
                    partition_columns=tuple(meta.get("partitionColumns") or ()), files=(),
                    reader_features=frozenset(protocol.get("readerFeatures") or ()),
                    # an object in JSON, (key, value) pairs from Parquet
                    configuration=dict(meta.get("configuration") or {}))


def _commit_actions(path: str, version: int, stop: int) -> dict[str, Any] | None:
    """The newest metadata and protocol actions in commits ``version`` down to after
    ``stop`` (either may be missing); None when one of those commits is gone."""
    actions: dict[str, Any] = {}
    for at in range(version, stop, -1):
        entry = storage.read_bytes(_log_entry(path, at))
        if entry is None:
            return None
        for line in entry.splitlines():
            if (b'"metaData"' in line[:16] or b'"protocol"' in line[:16]) and (
                    (action := json.loads(line)).keys() - actions.keys()):
                actions = {**action, **actions}  # the newer one of each kind stands
        if len(actions) == 2:
            break
    return actions


def _checksum_actions(path: str, version: int) -> dict[str, Any]:
    """The metadata and protocol that version ``version``'s checksum file records (none
    without one, or one that cannot be read)."""
    found = storage.read_bytes(storage.join(path, "_delta_log", f"{version:020d}.crc"))
    try:
        checksum = json.loads(found) if found else {}
        return {"metaData": checksum["metadata"], "protocol": checksum["protocol"]}
    except (ValueError, KeyError, TypeError):
        return {}


def _checkpoint_actions(path: str, version: int) -> dict[str, Any] | None:
    """The metadata and protocol actions of the single-file checkpoint at ``version``."""
    import pyarrow.parquet as pq

    uri = storage.join(path, "_delta_log", f"{version:020d}.checkpoint.parquet")
    if not storage.exists(uri):
        return None
    fs, base, _ = storage.filesystem(uri)
    rows = pq.read_table(base, columns=["metaData", "protocol"], filesystem=fs)
    found: dict[str, Any] = {}
    for kind in ("metaData", "protocol"):  # one row holds each, the others are null
        column = rows[kind].combine_chunks()
        if len(at := pc.indices_nonzero(column.is_valid())):
            found[kind] = column[at[0].as_py()].as_py()
    return found


def version_at(path: str, *, version: int | None = None,
               timestamp: datetime | str | None = None) -> int:
    """The table version that ``snapshot`` would load, without listing its files.

    Raises:
        TableNotFoundError, VersionNotFoundError
    """
    return _at(path, version, timestamp).version()


def latest_version(path: str) -> int:
    """The table's latest version, found from its log's last checkpoint by probing the
    commit entries after it (a few stats or HEAD requests), without loading the table's
    files as opening it does: planning costs the same at 500 files and at a million.

    Raises:
        TableNotFoundError, DamagedTableError
    """
    path = check_path(path)
    low = _checkpointed(path)
    if low is None:
        if not storage.exists(_log_entry(path, 0)):
            return _open(path).version()  # no table, or a log cleaned up: delta-rs decides
        low = 0
    step = 1  # the highest entry after ``low``: gallop past it, then halve the gap
    while storage.exists(_log_entry(path, low + step)):
        low, step = low + step, step * 2
    high = low + step
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if storage.exists(_log_entry(path, middle)) else (low, middle)
    return low


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
    configuration = snapshot(path, version=version, files=False).configuration
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
