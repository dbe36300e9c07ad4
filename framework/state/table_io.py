"""deltamark's state tables on delta-rs: the ``TableIO`` that ``state_tables.store`` reads
and writes them through, and ``open_store`` (``settings_store``), the one way to open a
state root."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from framework import storage
from framework.config import STATE_COMMIT_TIMEOUT_SECONDS, STATE_RETENTION_HOURS, Settings
from framework.delta import log
from state_tables.store import StateStore
from state_tables.tables import Filters

__all__ = ["MAINTENANCE_EVERY", "DeltaTableIO", "open_store", "settings_store"]

# Tidy a state table every this many versions (compact, checkpoint, delete what the
# retention lets go), so that reading and writing the current state, and the state root's
# size, stay the same after 10 or 10,000 runs.
MAINTENANCE_EVERY = 10


def open_store(root: str | os.PathLike[str], *,
               retention_hours: int = STATE_RETENTION_HOURS,
               commit_timeout_seconds: float = STATE_COMMIT_TIMEOUT_SECONDS) -> StateStore:
    """The state tables under ``root`` (a local path or an object-store URI).

    Example::

        store = open_store("data/state")
        store.runs("orders_ingest")

    Args:
        root: the state root; its tables are created on first write.
        retention_hours: how long files and log entries that no current read needs are
            kept (for reads and commits in flight); the rows themselves are never deleted.
        commit_timeout_seconds: how long a commit keeps trying while other processes'
            commits to the same table win (``framework.delta.log.append_rows``).
    """
    return StateStore(root, DeltaTableIO(retention_hours, commit_timeout_seconds))


def settings_store(settings: Settings) -> StateStore:
    """The state root ``settings`` name, with their retention and commit timeout."""
    return open_store(settings.state_root, retention_hours=settings.state_retention_hours,
                      commit_timeout_seconds=settings.state_commit_timeout_seconds)


class DeltaTableIO:
    """State tables read and written with delta-rs (``framework.delta.log``), each kept
    small and fast to read by ``upkeep``: tidied every ``MAINTENANCE_EVERY`` versions."""

    def __init__(self, retention_hours: int = STATE_RETENTION_HOURS,
                 commit_timeout_seconds: float = STATE_COMMIT_TIMEOUT_SECONDS):
        self.upkeep = log.Upkeep(retention_hours, compact_every=MAINTENANCE_EVERY)
        self.commit_timeout_seconds = commit_timeout_seconds

    def join(self, root: str, name: str) -> str:
        return storage.join(root, name)

    def append(self, path: str, rows: pa.Table, *, tag: Mapping[str, Any] | None) -> None:
        log.append_rows(path, rows, upkeep=self.upkeep, user_metadata=tag,
                        timeout_seconds=self.commit_timeout_seconds)

    def read(self, path: str, *, filters: Filters | None, columns: Sequence[str] | None
             ) -> pa.Table | None:
        return log.read_rows(path, filters=filters, columns=columns)

    def read_newest(self, path: str, *, column: str, within: int, filters: Filters,
                    columns: Sequence[str] | None) -> pa.Table | None:
        return log.read_newest(path, column=column, within=within, filters=filters,
                               columns=columns)

    def exists(self, path: str) -> bool:
        return log.is_table(path)

    def tidy(self, path: str) -> int:
        return log.tidy(path, self.upkeep)

    def footprint(self, path: str) -> tuple[int, int]:
        return storage.footprint(path)

    def query(self, sql: str, tables: Mapping[str, tuple[str, pa.Schema]], *,
              setup: Sequence[str], check_plan: Callable[[str], None]) -> pa.Table:
        return log.query(sql, tables, setup=setup, check_plan=check_plan)
