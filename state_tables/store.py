"""Reads and writes the state tables with delta-rs: milliseconds, no Spark, no JVM."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from framework.delta import log
from state_tables.model import Bookmark, Run
from state_tables.schemas import BOOKMARKS, RUNS, StateTable, upgrade

__all__ = ["StateStore"]

# Compact and checkpoint a state table every this many versions, so that reading the
# current state costs the same after 10 or 10,000 runs.
MAINTENANCE_EVERY = 10


class StateStore:
    """The state tables under one state root (``<root>/runs``, ``<root>/bookmarks``).

    Tables are created on first write. Example::

        store = StateStore("data/state")
        store.commit_run(run, [bookmark])
        store.bookmarks("orders_ingest")
    """

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    def path(self, table: StateTable) -> str:
        return str(self.root / table.name)

    # --- writes ---------------------------------------------------------------------

    def commit_run(self, run: Run, bookmarks: Sequence[Bookmark] = ()) -> None:
        """Record a finished run and, if any, the bookmark states it committed."""
        if bookmarks:
            self._append(BOOKMARKS, [_bookmark_row(b) for b in bookmarks])
        self._append(RUNS, [_run_row(run)])

    def _append(self, table: StateTable, rows: list[dict[str, Any]]) -> None:
        log.append_rows(self.path(table), pa.Table.from_pylist(rows, schema=table.schema),
                        compact_every=MAINTENANCE_EVERY)

    # --- reads ----------------------------------------------------------------------

    def runs(self, job: str | None = None) -> list[Run]:
        """Recorded runs, by job then run_seq."""
        rows = self._read(RUNS, {"job": job})
        ordered = rows.sort_by([("job", "ascending"), ("run_seq", "ascending")])
        return [_run(r) for r in _upgraded(RUNS, ordered)]

    def bookmarks(self, job: str, context: str | None = None) -> list[Bookmark]:
        """The current bookmark of each context of ``job`` (the newest row per context)."""
        rows = self._read(BOOKMARKS, {"job": job, "context": context})
        ordered = rows.sort_by([("context", "ascending"), ("run_seq", "descending"),
                                ("committed_at", "descending")])
        if not len(ordered):
            return []
        contexts = ordered["context"].combine_chunks()
        first_of_context = pa.concat_arrays(
            [pa.array([True]), pc.not_equal(contexts[1:], contexts[:-1])])
        return [_bookmark(r) for r in _upgraded(BOOKMARKS, ordered.filter(first_of_context))]

    def _read(self, table: StateTable, equal: Mapping[str, str | None]) -> pa.Table:
        filters = [(column, "=", value) for column, value in equal.items() if value is not None]
        rows = log.read_rows(self.path(table), filters=filters or None)
        return table.schema.empty_table() if rows is None else rows


def _upgraded(table: StateTable, rows: pa.Table) -> Iterable[dict[str, Any]]:
    return (upgrade(table, row) for row in rows.to_pylist())


def _now() -> datetime:
    return datetime.now(UTC)


def _run_row(run: Run) -> dict[str, Any]:
    return {
        "schema_version": RUNS.version, "job": run.job, "run_id": run.run_id,
        "run_seq": run.run_seq, "attempt": run.attempt, "status": run.status,
        "mode": run.mode, "started_at": run.started_at, "ended_at": run.ended_at,
        "arguments": json.dumps(dict(run.arguments), sort_keys=True), "error": run.error,
    }


def _run(row: dict[str, Any]) -> Run:
    return Run(job=row["job"], run_id=row["run_id"], run_seq=row["run_seq"],
               attempt=row["attempt"], status=row["status"], mode=row["mode"],
               started_at=row["started_at"], ended_at=row["ended_at"],
               arguments=json.loads(row["arguments"]), error=row["error"])


def _bookmark_row(bookmark: Bookmark) -> dict[str, Any]:
    return {
        "schema_version": BOOKMARKS.version, "job": bookmark.job, "context": bookmark.context,
        "run_id": bookmark.run_id, "run_seq": bookmark.run_seq,
        "source_kind": bookmark.source_kind,
        "state": json.dumps(dict(bookmark.state), sort_keys=True, default=str),
        "event": bookmark.event, "committed_at": bookmark.committed_at or _now(),
    }


def _bookmark(row: dict[str, Any]) -> Bookmark:
    return Bookmark(job=row["job"], context=row["context"], run_id=row["run_id"],
                    run_seq=row["run_seq"], source_kind=row["source_kind"],
                    state=json.loads(row["state"]), event=row["event"],
                    committed_at=row["committed_at"])
