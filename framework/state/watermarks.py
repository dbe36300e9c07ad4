"""The watermark API people use with DynamoDB, backed by a Delta table instead.

    from framework.state.watermarks import Watermarks

    wm = Watermarks(table_name="glue-watermarks")
    item = wm.create_watermark_item(job_id=job, run_id=run,
                                    latest_data="2023-03-16 15:45:00", rows_collected=808)
    wm.add_watermark(item)
    last = wm.get_watermark(job_id=job, run_id=wm.get_most_recent_run_id(job_id=job))
    last["watermarks"]["latest_data"]

The table lives under the state root (``<state_root>/<table_name>``), one row per item,
written with delta-rs in milliseconds. "Most recent" is by commit order (the Delta log),
never by anyone's clock.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from framework import storage
from framework.config import load_settings
from framework.delta import log
from framework.errors import DeltamarkError
from state_tables.rows import python_rows, rows_table

__all__ = ["WatermarkNotFoundError", "Watermarks"]

SCHEMA = pa.schema([
    pa.field("job_id", pa.string(), nullable=False),
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("item", pa.string(), nullable=False),  # the whole item as JSON
    pa.field("written_at", pa.timestamp("us", tz="UTC"), nullable=False),
])
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,255}")
# "most recent" reads the log's commit order, so the log is kept as long as Delta's default
UPKEEP = log.Upkeep(retention_hours=30 * 24)


class WatermarkNotFoundError(DeltamarkError):
    """No watermark for the job, or for the run, in the table."""


class Watermarks:
    """Watermark items in a Delta table, with DynamoDB-style calls.

    Args:
        table_name: the table's name (letters, digits, ``_ . -``).
        state_root: where it lives; default: the configured state root.
    """

    def __init__(self, table_name: str, *, state_root: str | Path | None = None):
        if not _NAME.fullmatch(table_name):
            raise DeltamarkError(f"watermark table '{table_name}': use letters, digits, "
                                 "'_', '.' or '-' (as DynamoDB table names).")
        self.table_name = table_name
        root = state_root if state_root is not None else load_settings().state_root
        self.path = storage.join(root, table_name)

    def create_watermark_item(self, *, job_id: str, run_id: str, **watermarks: Any
                              ) -> dict[str, Any]:
        """An item for ``job_id`` and ``run_id``; every other keyword is a watermark."""
        return {"job_id": job_id, "run_id": run_id, "watermarks": dict(watermarks)}

    def add_watermark(self, item: Mapping[str, Any]) -> None:
        """Store an item (one Delta commit)."""
        missing = [k for k in ("job_id", "run_id") if not item.get(k)]
        if missing:
            raise DeltamarkError(f"watermark table {self.table_name}: the item lacks "
                                 f"{', '.join(missing)}; build it with create_watermark_item.")
        row = {"job_id": str(item["job_id"]), "run_id": str(item["run_id"]),
               "item": json.dumps(dict(item), default=str),
               "written_at": datetime.now(UTC)}
        log.append_rows(self.path, rows_table([row], SCHEMA),
                        upkeep=UPKEEP,
                        user_metadata={"job_id": row["job_id"], "run_id": row["run_id"]})

    def get_watermark(self, *, job_id: str, run_id: str) -> dict[str, Any]:
        """The item stored for ``job_id`` and ``run_id`` (the last written, if stored twice).

        Raises:
            WatermarkNotFoundError: unknown job, or no item for that run.
        """
        rows = self._rows(job_id)
        mine = [r for r in rows if r["run_id"] == run_id]
        if not mine:
            runs = ", ".join(r["run_id"] for r in rows[-5:])
            raise WatermarkNotFoundError(
                f"watermark table {self.table_name}: job {job_id} has no watermark for run "
                f"{run_id} (its latest runs: {runs}).")
        return json.loads(mine[-1]["item"])

    def get_most_recent_run_id(self, *, job_id: str) -> str:
        """The run of ``job_id`` whose item was committed last (by the Delta log's order).

        Raises:
            WatermarkNotFoundError: no item for the job.
        """
        self._rows(job_id)
        for commit in log.history(self.path):
            if commit.user_metadata.get("job_id") == job_id:
                return commit.user_metadata["run_id"]
        raise WatermarkNotFoundError(
            f"watermark table {self.table_name}: job {job_id}'s commits are past the log "
            "retention, so which came last is unknown; read items with get_watermark.")

    def _rows(self, job_id: str) -> list[dict[str, Any]]:
        """The job's rows, in written order."""
        rows = log.read_rows(self.path, filters=[("job_id", "=", job_id)])
        found = sorted(python_rows(rows), key=lambda r: r["written_at"]) if rows else []
        if not found:
            every = log.read_rows(self.path, columns=["job_id"])
            known = sorted(set(every["job_id"].to_pylist())) if every is not None else []
            raise WatermarkNotFoundError(
                f"watermark table {self.table_name}: no watermarks for job {job_id} (jobs "
                f"there: {', '.join(known[:10]) or 'none'}).")
        return found
