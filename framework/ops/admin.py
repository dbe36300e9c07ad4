"""What the operator commands read of a job's state: its bookmarks and their history (readable
views: nothing opaque), whether a job or workflow exists, what a run wrote. The actions
that change the state are ``framework.ops.actions``.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

import pyarrow.compute as pc

from framework import storage
from framework.config import SETTINGS_FILE, Settings
from framework.errors import JobNotFoundError, RunStateError, WorkflowNotFoundError
from framework.sources import files
from framework.state.table_io import open_store
from state_tables.model import RunOutput
from state_tables.store import StateStore

__all__ = ["SET_BOOKMARK", "bookmark_history", "describe_bookmarks", "describe_write",
           "glue_bookmark_entry", "no_state", "require_job", "require_workflow"]

#: the argument a run that set a bookmark by hand (``set_bookmark``) records, saying what
SET_BOOKMARK = "--set-bookmark"


def no_state(settings: Settings) -> str | None:
    """The one line to show when ``settings``' state root holds no state table (None when
    it holds some): the place looked at, and how to name another."""
    root = settings.state_root
    if open_store(root).holds_state():
        return None
    where = os.path.abspath(root) if storage.is_local(root) else root
    return (f"no deltamark state at {where}: no job has run with it as its state root. "
            "Name another with deltamark --state-root PATH, DELTAMARK_STATE_ROOT or "
            f"state_root in {settings.conf_dir / SETTINGS_FILE}")


def describe_write(target: str, output: RunOutput, *, dry_run: bool = False) -> str:
    """What a run did to ``target`` (its entry in ``Run.outputs``), in words."""
    if output.get("rolled_back"):
        return "rolled back"
    if output.get("pending"):
        return "being written"
    if not output.get("written"):
        return "would be written" if dry_run else "nothing written"
    from framework.sinks import target_of  # the targets' code: not a read-only command's

    try:
        said = target_of(target, output=output).describe(output)
    except KeyError:  # an entry of another shape (an older deltamark's): as it is
        said = ", ".join(f"{key} {value}" for key, value in output.items()
                         if key not in ("written", "replayed")) or "written"
    return f"{said} (an earlier attempt's commit)" if output.get("replayed") else said


def require_job(settings: Settings, job: str) -> None:
    """``job`` is declared in conf or has runs in the state.

    Raises:
        JobNotFoundError: neither; it lists the jobs known.
    """
    from framework.run.spec import job_names

    store = open_store(settings.state_root)
    declared = job_names(settings)
    if job not in declared and store.last_run(job) is None:
        known = sorted({*declared, *store.job_names()})
        raise JobNotFoundError(job, str(settings.conf_dir), known)


def require_workflow(settings: Settings, name: str) -> None:
    """``name`` is declared in conf or has runs in the state.

    Raises:
        WorkflowNotFoundError: neither; it lists the workflows declared.
    """
    from framework.workflows.definition import workflow_names

    store = open_store(settings.state_root)
    if name not in workflow_names(settings) and not store.workflow_run(name):
        raise WorkflowNotFoundError(name, str(settings.conf_dir), workflow_names(settings))


def bookmark_history(store: StateStore, job: str, *, context: str | None = None
                     ) -> list[dict[str, Any]]:
    """Every state change of ``job``'s contexts, oldest first, with whether it counts."""
    return [{"context": b.context, "kind": b.source_kind, "event": b.event,
             "run_seq": b.run_seq, "run_id": b.run_id,
             "restored_from_seq": b.restored_from_seq,
             "committed_at": b.committed_at, "counts": counts, "state": dict(b.state)}
            for b, counts in store.bookmark_log(job, context=context)]


def glue_bookmark_entry(store: StateStore, job: str, *, run_id: str | None = None
                        ) -> dict[str, Any]:
    """The job's bookmark shaped like Glue's GetJobBookmark ``JobBookmarkEntry``.

    ``Run``: successful runs so far; ``Version``: bookmark updates so far (commits,
    rewinds, resets); ``JobBookmark``: a JSON string of every context's state.

    Raises:
        RunStateError: ``run_id`` is not a committed run of the job.
    """
    succeeded = [r for r in store.runs(job) if r.status == "succeeded"]
    if run_id is None and not succeeded:
        raise RunStateError(job, "no successful run yet, so no bookmark.")
    run = succeeded[-1] if run_id is None else next(
        (r for r in succeeded if r.run_id == run_id), None)
    if run is None:
        raise RunStateError(job, f"run {run_id} is not a successful run of this job.")
    earlier = [r for r in succeeded if r.run_seq < run.run_seq]
    states = store.bookmarks(job, up_to_seq=run.run_seq)
    updates = {(b.run_seq, b.event, None if b.event == "commit" else b.committed_at)
               for b, counts in store.bookmark_log(job) if counts and b.run_seq <= run.run_seq}
    return {
        "JobName": job, "Version": len(updates), "Run": len(earlier) + 1,
        "Attempt": run.attempt, "PreviousRunId": earlier[-1].run_id if earlier else None,
        "RunId": run.run_id,
        "JobBookmark": json.dumps({b.context: {"kind": b.source_kind, **b.state}
                                   for b in states}, sort_keys=True),
    }


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
