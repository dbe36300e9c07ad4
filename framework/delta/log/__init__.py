"""The one place that talks to delta-rs (the ``deltalake`` package).

Everything else in deltamark sees plain data (``Snapshot``, ``DataFile``, ``Commit``) and
calls these functions; no other package imports ``deltalake``. By phase: table.py (a
table opened, checked, its errors in words), history.py (snapshots, versions, changes,
commits), commit.py (commits of files, merges, restores, fences, schema changes),
upkeep.py (the small tables deltamark owns: appends that take turns, tidies), read.py
(rows read with pyarrow from a snapshot's files, SQL on them).

Never call ``DeltaTable.to_pyarrow_table()`` here: processes that do abort at exit about
half the time (delta-rs issue 2184). Rows are read with pyarrow from the snapshot's files.
"""

from framework.delta.log.commit import (
    SCHEMA_CHANGE,
    Merge,
    add_columns,
    commit_files,
    delete_all,
    delete_where,
    fence,
    merge_rows,
    restore,
)
from framework.delta.log.history import (
    Added,
    added,
    change_feed_on,
    changes,
    deleted_rows,
    has_commit,
    history,
    latest_version,
    physical_names,
    snapshot,
    table_version,
    transaction_version,
    version_at,
)
from framework.delta.log.read import forget_open_tables, query, read_newest, read_rows
from framework.delta.log.table import (
    PHYSICAL_NAME,
    AppTransaction,
    Commit,
    DataFile,
    FileAction,
    NewFile,
    Snapshot,
    VersionChange,
    check_path,
    file_stats,
    is_table,
)
from framework.delta.log.upkeep import Upkeep, append_rows, tidy

__all__ = [
    "PHYSICAL_NAME",
    "SCHEMA_CHANGE",
    "Added",
    "AppTransaction",
    "Commit",
    "DataFile",
    "FileAction",
    "Merge",
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
    "delete_where",
    "deleted_rows",
    "fence",
    "file_stats",
    "forget_open_tables",
    "has_commit",
    "history",
    "is_table",
    "latest_version",
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
