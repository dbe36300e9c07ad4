"""Commits: files added in one commit, merges, restores, fences, deletes, schema
changes; each finds the version it got.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
from deltalake import CommitProperties, Field, Schema, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction, create_table_with_add_actions

from framework import errors, storage
from framework.delta.log.history import snapshot
from framework.delta.log.table import (
    WRITE_ID_KEY,
    AppTransaction,
    NewFile,
    _log_entry,
    _open,
    check_path,
    is_table,
)

__all__ = ["SCHEMA_CHANGE", "Merge", "add_columns", "commit_files", "delete_all", "delete_where",
           "fence", "merge_rows", "restore"]


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


@dataclass(frozen=True)
class Merge:
    """A MERGE's clauses, SQL on the table aliased ``t`` and the rows aliased ``s``: matched
    rows are deleted where ``delete_when`` holds, else updated where ``update_when`` does;
    unmatched rows inserted where ``insert_when`` does. ``columns``: those set from the
    rows' same-named columns (None: all of them, the table taking new ones with
    ``merge_schema``); ``removing``, a column of the rows true where a row only deletes
    (it is never written, so the table's constraints do not apply to it)."""

    on: str
    columns: tuple[str, ...] | None = None
    delete_when: str | None = None
    update_when: str | None = None
    insert_when: str | None = None
    removing: str | None = None

    def when_clauses(self, quote: Callable[[str], str]) -> str:
        """The WHEN clauses in SQL's MERGE syntax (Spark's), columns named by ``quote``."""
        def when(condition: str | None) -> str:
            return f" AND ({condition})" if condition else ""

        clauses = [f"WHEN MATCHED{when(self.delete_when)} THEN DELETE"] \
            if self.delete_when else []
        if self.columns is None:
            update, insert = "UPDATE SET *", "INSERT *"
        else:
            update = "UPDATE SET " + ", ".join(f"t.{quote(c)} = s.{quote(c)}"
                                               for c in self.columns)
            insert = (f"INSERT ({', '.join(map(quote, self.columns))}) "
                      f"VALUES ({', '.join(f's.{quote(c)}' for c in self.columns)})")
        return " ".join([*clauses, f"WHEN MATCHED{when(self.update_when)} THEN {update}",
                         f"WHEN NOT MATCHED{when(self.insert_when)} THEN {insert}"])


def merge_rows(path: str, rows: pa.Table, *, merge: Merge, merge_schema: bool = False,
               txn: AppTransaction | None = None,
               user_metadata: Mapping[str, Any] | None = None) -> int:
    """Merge ``rows`` into the table in ONE commit (``merge``). Returns the new version.

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
    table = _open(path)
    read_version = table.version()
    try:
        builder = table.merge(rows, merge.on, source_alias="s", target_alias="t",
                              merge_schema=merge_schema, commit_properties=properties)
        if merge.delete_when:
            builder = builder.when_matched_delete(merge.delete_when)
        if merge.columns is None:
            builder = (builder.when_matched_update_all(merge.update_when)
                       .when_not_matched_insert_all(merge.insert_when))
        else:
            sets = {f'"{c}"': f's."{c}"' for c in merge.columns}
            builder = (builder.when_matched_update(sets, merge.update_when)
                       .when_not_matched_insert(sets, merge.insert_when))
        builder.execute()
    except (CommitFailedError, DeltaError) as exc:
        raise errors.WriteConflictError(path, f"merge refused: {exc}") from exc
    return _version_of(path, write_id, after=read_version)


def delete_where(path: str, predicate: str) -> None:
    """Delete the rows ``predicate`` (SQL) holds for, in one commit (none if no row)."""
    _open(path).delete(predicate)


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
