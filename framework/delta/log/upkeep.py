"""The small tables deltamark owns (the state tables): appends that take turns and
retry, and the tidies that keep them small and fast to read.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, PostCommitHookProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import AddAction

from framework import errors, storage
from framework.config import STATE_COMMIT_TIMEOUT_SECONDS
from framework.delta.log.commit import _commit_properties, _created, _version_of
from framework.delta.log.read import read_rows
from framework.delta.log.table import (
    AppTransaction,
    NewFile,
    _first_line,
    _open,
    file_stats,
    is_table,
)
from framework.storage import lease

logger = logging.getLogger(__name__)

__all__ = ["Upkeep", "append_rows", "tidy"]

_T = TypeVar("_T")


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

    Many processes may append at once. The rows' data file is written first; then, on a
    local disk, they take turns (``lease.commit_turn``) for the log entry alone; a commit
    that loses the race to other writers more often than delta-rs retries is tried again
    after a jittered pause, for up to ``timeout_seconds``. With ``upkeep``, the table is
    tidied every ``upkeep.compact_every`` versions (by one process at a time:
    ``lease.upkeep_lease``), so reads of a table that gains a file per run do not grow
    with its history.

    Raises:
        WriteConflictError: other writers kept winning for ``timeout_seconds``; nothing
            of these rows was committed.
    """
    if not is_table(path) and _created(path, lambda: write_deltalake(
            path, rows, mode="append", storage_options=storage.delta_options(path),
            configuration=upkeep.properties() if upkeep else None,
            commit_properties=_commit_properties(txn, user_metadata, retries=0))):
        return 0
    added = _new_file(path, rows)
    write_id = uuid.uuid4().hex
    hooks = _TIDIED if upkeep else None

    def commit(table: DeltaTable) -> int:  # through the open table: no log replay
        if set(rows.schema.names) - {f.name for f in table.schema().fields}:
            # new columns (a newer deltamark's rows): delta-rs merges the schema, and
            # writes the rows in a file of its own
            write_deltalake(table, rows, mode="append", schema_mode="merge",
                            commit_properties=_commit_properties(txn, user_metadata, write_id),
                            post_commithook_properties=hooks)
            storage.delete(storage.join(path, added.relative_path))
        else:
            table.create_write_transaction(
                [AddAction(added.relative_path, added.size, {}, added.modification_time_ms,
                           True, added.stats_json)], "append", table.schema(),
                commit_properties=_commit_properties(txn, user_metadata, write_id),
                post_commithook_properties=hooks)
        return _version_of(path, write_id, after=table.version())

    try:
        with lease.commit_turn(path, timeout_seconds):
            version = _patiently(path, timeout_seconds, commit)
    except errors.WriteConflictError:
        storage.delete(storage.join(path, added.relative_path))  # in no version: unused
        raise
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


def _new_file(path: str, rows: pa.Table) -> NewFile:
    """``rows`` as a new data file of the table at ``path``, not yet in its log."""
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink)
    data = sink.getvalue()
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    storage.write_bytes(storage.join(path, name), data)
    return NewFile(name, data.size, {}, int(time.time() * 1000),
                   file_stats(pq.read_metadata(pa.BufferReader(data)), rows.schema.names))


def _patiently(path: str, timeout_seconds: float, commit: Callable[[DeltaTable], _T]) -> _T:
    """Run ``commit`` on the table's latest version until it lands; what it returned.
    delta-rs rebases a commit on each newer version up to 15 times; past that, this
    pauses (a random part of a pause that doubles up to 2 s, so that contenders spread
    out) and tries again, for up to ``timeout_seconds``."""
    deadline = time.monotonic() + timeout_seconds
    pause, attempts = 0.05, 0
    while True:
        table = _open(path)
        attempts += 1
        try:
            return commit(table)
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
