"""Readable views of a job's state, for the CLI and for people: nothing opaque."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from framework.sources import files
from framework.sources.state import decode
from state_tables.store import StateStore

__all__ = ["describe_bookmarks"]


def describe_bookmarks(store: StateStore, job: str, *, context: str | None = None,
                       list_files: bool = False) -> list[dict[str, Any]]:
    """Each context's current bookmark as plain data.

    File contexts add ``window_files`` (how many files are tracked by name) and, with
    ``list_files``, ``files``: each tracked file with its size, modification time and run.
    """
    described = []
    for context_name, history in store.histories(job, context=context).items():
        bookmark = history.current
        entry: dict[str, Any] = {
            "context": context_name, "kind": bookmark.source_kind,
            "run_seq": bookmark.run_seq, "run_id": bookmark.run_id, "event": bookmark.event,
            "committed_at": bookmark.committed_at, "state": dict(bookmark.state)}
        if bookmark.source_kind == files.SOURCE_KIND and bookmark.event != "reset":
            state = decode(files.SOURCE_KIND, bookmark.state)
            window = store.processed_files(job, context_name, run_seqs=history.valid_runs,
                                           modified_after_ms=state.settled_ms)
            entry["window_files"] = len({f.path for f in window})
            if list_files:
                entry["files"] = [
                    {"path": f.path, "size": f.size, "run_seq": f.run_seq,
                     "modified_at": datetime.fromtimestamp(f.modified_ms / 1000, UTC)}
                    for f in sorted(window, key=lambda f: (f.modified_ms, f.path))]
        described.append(entry)
    return described
