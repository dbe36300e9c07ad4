"""Readable views of a job's state, for the CLI and for people: nothing opaque."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow.compute as pc

from framework.sources import files
from state_tables.store import StateStore

__all__ = ["describe_bookmarks"]


def describe_bookmarks(store: StateStore, job: str, *, context: str | None = None,
                       list_files: bool = False) -> list[dict[str, Any]]:
    """Each context's current bookmark as plain data.

    File contexts add ``tracked_files`` (how many files they track by name) and, with
    ``list_files``, ``files``: each tracked file as its newest run tracked it, with its
    size, modification time, run and outcome (read, or set aside and why).
    """
    described = []
    for context_name, history in store.histories(job, context=context).items():
        bookmark = history.current
        entry: dict[str, Any] = {
            "context": context_name, "kind": bookmark.source_kind,
            "run_seq": bookmark.run_seq, "run_id": bookmark.run_id, "event": bookmark.event,
            "committed_at": bookmark.committed_at, "state": dict(bookmark.state)}
        if bookmark.source_kind == files.SOURCE_KIND and bookmark.event != "reset":
            tracked = store.tracked_files(job, context_name, history.valid_runs)
            entry["tracked_files"] = pc.count_distinct(tracked["path"]).as_py()
            if list_files:
                newest = {f.path: f for f in sorted(
                    store.processed_files(job, context_name, run_seqs=history.valid_runs),
                    key=lambda f: f.run_seq)}
                entry["files"] = [
                    {"path": f.path, "size": f.size, "run_seq": f.run_seq,
                     "outcome": f.outcome,
                     "modified_at": datetime.fromtimestamp(f.modified_ms / 1000, UTC)}
                    for f in sorted(newest.values(), key=lambda f: (f.modified_ms, f.path))]
        described.append(entry)
    return described
