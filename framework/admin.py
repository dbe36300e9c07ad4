"""Operator actions on a job's state: abort a run, rewind, reset, and read the history.

Every change is appended (history is never rewritten) and made under the job's lease, so
it cannot interleave with a run.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from framework.config import Settings
from framework.delta import log
from framework.errors import RewindError, RunNotFoundError, RunStateError, StateHistoryError
from framework.lease import job_lease
from framework.runner import discard_unlanded, landed_targets
from framework.sinks import parquet
from state_tables.model import Bookmark, Run
from state_tables.store import StateStore

__all__ = ["PrunedTarget", "RestoredTarget", "Rewind", "abort_run", "bookmark_history",
           "glue_bookmark_entry", "reset", "rewind"]


@dataclass(frozen=True)
class RestoredTarget:
    """A target returned to its content right after the run rewound to."""

    target: str
    from_version: int
    to_version: int | None  # None: the table was created later, so it is now emptied
    new_version: int


@dataclass(frozen=True)
class PrunedTarget:
    """A Parquet target whose files from runs after the run rewound to were deleted."""

    target: str
    removed_runs: tuple[int, ...]
    removed_files: int


@dataclass(frozen=True)
class Rewind:
    """What a rewind or reset recorded."""

    job: str
    to_run: Run | None
    bookmarks: tuple[Bookmark, ...]
    restored: tuple[RestoredTarget | PrunedTarget, ...] = ()


def abort_run(settings: Settings, run_id: str) -> Run:
    """Mark an unfinished run aborted, so its plan never counts.

    Raises:
        RunNotFoundError: no such run.
        RunStateError: already finished, or some target already has its data (the next
            run completes it).
        ConcurrentRunError: its process (or another run of the job) holds the lease.
    """
    store = StateStore(settings.state_root)
    run = store.find_run(run_id)
    if run is None:
        raise RunNotFoundError(run_id)
    if run.status != "running":
        raise RunStateError(run.job, f"run {run_id} has already ended ({run.status}).")
    with job_lease(settings.state_root, run.job, f"abort {run_id}", take_over_from=run_id):
        if landed := landed_targets(run):
            raise RunStateError(
                run.job, f"run {run_id} already committed to {', '.join(landed)}; the next "
                "run completes it (replay). To undo it instead, rewind to an earlier run "
                "with --restore-targets.")
        aborted = dataclasses.replace(run, status="aborted", ended_at=datetime.now(UTC),
                                      recovery="aborted_by_operator")
        store.record_run(aborted)
        discard_unlanded(run)
    return aborted


def rewind(settings: Settings, job: str, *, to_run: str, context: str | None = None,
           restore_targets: bool = False) -> Rewind:
    """Make the next run resume from the state right after run ``to_run`` committed.

    The state is read with Delta time travel on the bookmarks table and recorded as
    ``rewind`` rows; contexts that did not exist then are reset. With
    ``restore_targets``, the job's targets also return to their content right after
    ``to_run`` (RESTORE, or emptied when created later), but only when no other writer
    committed to them since.

    Raises:
        RewindError: unknown or uncommitted run; history no longer reachable; foreign
            commits in a target.
    """
    store = StateStore(settings.state_root)
    with job_lease(settings.state_root, job, f"rewind to {to_run}"):
        runs = store.runs(job)
        run = next((r for r in runs if r.run_id == to_run), None)
        if run is None or run.status != "succeeded" or run.mode != "enable":
            raise RewindError(job, f"run {to_run} is not a run of this job that committed "
                              "bookmarks (succeeded in enable mode). See deltamark runs list "
                              f"{job}.")
        try:
            then = store.histories_after_run(job, run.run_seq, context)
        except StateHistoryError as exc:
            oldest = next((r for r in runs if r.run_seq >= exc.oldest_seq
                           and r.status == "succeeded"), None)
            raise RewindError(
                job, f"cannot rewind to run {to_run} (run {run.run_seq}): the state history "
                "no longer reaches it (log retention or VACUUM). The oldest run still "
                f"reachable is {oldest.run_id if oldest else '?'} (run {exc.oldest_seq}).",
            ) from exc
        restored = _restore_targets(job, run, runs) if restore_targets else ()
        seq = max(r.run_seq for r in runs)
        now = datetime.now(UTC)
        rows = [dataclasses.replace(h.current, event="rewind", run_seq=seq, committed_at=now,
                                    restored_from_seq=run.run_seq)
                for h in then.values() if h.current.event != "reset"]
        known = set(store.histories(job, context))
        rows += [_reset_row(job, c, seq, now) for c in sorted(known - {r.context for r in rows})]
        if rows:
            store.record_bookmarks(rows, {"job": job, "event": "rewind", "run_seq": seq})
        _supersede_unfinished(store, runs)
    return Rewind(job=job, to_run=run, bookmarks=tuple(rows), restored=tuple(restored))


def reset(settings: Settings, job: str, *, context: str | None = None) -> Rewind:
    """Make the next run start from nothing (one context, or all of the job's)."""
    store = StateStore(settings.state_root)
    with job_lease(settings.state_root, job, "reset"):
        runs = store.runs(job)
        seq = max((r.run_seq for r in runs), default=0)
        now = datetime.now(UTC)
        rows = [_reset_row(job, c, seq, now) for c in sorted(store.histories(job, context))]
        if rows:
            store.record_bookmarks(rows, {"job": job, "event": "reset", "run_seq": seq})
        _supersede_unfinished(store, runs)
    return Rewind(job=job, to_run=None, bookmarks=tuple(rows))


def _supersede_unfinished(store: StateStore, runs: Sequence[Run]) -> None:
    """An interrupted last run is not recovered after a rewind or reset: the operator
    chose where the job resumes."""
    if runs and runs[-1].status in ("running", "failed"):
        store.record_run(dataclasses.replace(runs[-1], status="aborted",
                                             ended_at=datetime.now(UTC), recovery="rewound"))
        discard_unlanded(runs[-1])


def _reset_row(job: str, context: str, seq: int, now: datetime) -> Bookmark:
    return Bookmark(job=job, context=context, run_id="-", run_seq=seq, source_kind="none",
                    state={}, event="reset", committed_at=now)


def _restore_targets(job: str, run: Run, runs: Sequence[Run]
                     ) -> list[RestoredTarget | PrunedTarget]:
    """Check every Delta target first; act only when none has a foreign commit since
    ``run``. Parquet targets lose this job's files of later runs (no one else's)."""
    written = {t: out for r in runs if r.run_seq >= run.run_seq
               for t, out in r.outputs.items() if out.get("written")}
    targets = sorted(t for t, out in written.items() if not parquet.is_output(out))
    plans, foreign = [], []
    for target in targets:
        if not log.is_table(target):
            continue
        commits = log.history(target)  # newest first
        mine = {c.version: c.user_metadata.get("deltamark", {}) for c in commits}
        keep = next((c.version for c in commits
                     if mine[c.version].get("job") == job
                     and mine[c.version].get("run_seq", 0) <= run.run_seq), None)
        later = [c for c in commits if keep is None or c.version > keep]
        foreign += [f"{target} v{c.version} ({c.operation} at {c.timestamp:%Y-%m-%d %H:%M:%S})"
                    for c in later if mine[c.version].get("job") != job
                    and not c.user_metadata.get("deltamarkRestore")]
        if later:
            plans.append((target, commits[0].version, keep))
    if foreign:
        raise RewindError(
            job, "not restoring the targets: other writers committed to them after run "
            f"{run.run_id}: {'; '.join(foreign)}. Nothing was changed; restore them by "
            "hand, or rewind without --restore-targets.")
    restored: list[RestoredTarget | PrunedTarget] = []
    for target in sorted(t for t, out in written.items() if parquet.is_output(out)):
        if removed := parquet.remove_runs_after(target, job, run.run_seq):
            restored.append(PrunedTarget(target, tuple(c.run_seq for c in removed),
                                         sum(len(c.files) for c in removed)))
    for target, current, keep in plans:
        tag = {"deltamarkRestore": {"job": job, "to_run": run.run_id}}
        new = (log.restore(target, keep, user_metadata=tag) if keep is not None
               else log.delete_all(target, user_metadata=tag))
        restored.append(RestoredTarget(target, current, keep, new))
    return restored


def bookmark_history(store: StateStore, job: str, context: str | None = None
                     ) -> list[dict[str, Any]]:
    """Every state change of ``job``'s contexts, oldest first, with whether it counts."""
    return [{"context": b.context, "event": b.event, "run_seq": b.run_seq,
             "run_id": b.run_id, "restored_from_seq": b.restored_from_seq,
             "committed_at": b.committed_at, "counts": counts, "state": dict(b.state)}
            for b, counts in store.bookmark_log(job, context)]


def glue_bookmark_entry(store: StateStore, job: str, run_id: str | None = None
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
