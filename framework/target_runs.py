"""A job's runs as its targets hold them, checked against the state, and read back.

Each target commit of a run carries the run's identity and what it commits to the state
(its record, ``run_record``): in a Delta commit's ``userMetadata`` under ``deltamark``,
in a Parquet target's manifest, in a database target's ``deltamark_commits`` row
(``framework.sinks``: each kind's ``Target`` reads them back). So a state root restored
from a backup, or missing its newest commits, is noticed before a run writes over it
(``check_state_knows``), and the runs it lost are rebuilt from the targets
(``framework.admin.repair``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from framework.errors import StateBehindTargetsError
from framework.sinks import Target, target_of
from framework.sinks.jdbc import DatabaseTargets
from framework.sinks.target import MAX_WINDOW_FILES, TargetRun
from framework.sources.files import FileState
from framework.sources.state import decode
from state_tables.model import Bookmark, ProcessedFile, Run, Watermark

__all__ = ["attempted_targets", "check_state_knows", "check_target_write", "discard_unlanded",
           "landed_targets", "run_record", "runs_in"]


def run_record(job: str, run_id: str, run_seq: int, mode: str,
               bookmarks: Sequence[Bookmark], files: Sequence[ProcessedFile],
               watermarks: Iterable[Watermark]) -> dict[str, Any]:
    """What a target commit of the run carries: its identity and mode, its bookmarks, the
    files each file bookmark tracks by name (read with a modification time after its
    settled time; None when there are more than ``MAX_WINDOW_FILES``) and its watermarks.
    """
    contexts: dict[str, Any] = {}
    for b in bookmarks:
        entry: dict[str, Any] = {"kind": b.source_kind, "state": dict(b.state)}
        if isinstance(state := decode(b.source_kind, b.state), FileState):
            window = [[f.path, f.size, f.modified_ms] for f in files
                      if f.context == b.context and f.modified_ms > state.settled_ms]
            entry["window"] = window if len(window) <= MAX_WINDOW_FILES else None
        contexts[b.context] = entry
    return {"job": job, "run_id": run_id, "run_seq": run_seq, "mode": mode,
            "bookmarks": contexts,
            "watermarks": {w.context: {"column": w.column, "aggregate": w.aggregate,
                                       "value": w.value, "value_type": w.value_type,
                                       "rows": w.rows} for w in watermarks}}


def runs_in(target: str, job: str, *, after_seq: int = 0) -> list[TargetRun]:
    """The runs of ``job`` that committed to ``target`` (its kind found there) with a
    run_seq above ``after_seq``, oldest first."""
    return target_of(target).runs(job, after_seq=after_seq)


def check_target_write(target: str, job: str, run_seq: int, run_id: str) -> None:
    """Before run ``run_seq`` (``run_id``) writes ``target``: the target holds no later
    run of the job, and no other run with this run_seq (its own is a replay, skipped).

    Raises:
        StateBehindTargetsError
    """
    held = runs_in(target, job, after_seq=run_seq - 1)
    if held and (held[-1].run_seq, held[-1].run_id) != (run_seq, run_id):
        raise StateBehindTargetsError(job, target, held[-1].run_seq, held[-1].run_id,
                                      run_seq, run_id)


def check_state_knows(job: str, targets: Iterable[str], last: Run) -> None:
    """Before a run starts: none of the job's ``targets`` holds a run after ``last``,
    the newest run the state knows.

    Raises:
        StateBehindTargetsError
    """
    for target in targets:
        if held := runs_in(target, job, after_seq=last.run_seq):
            raise StateBehindTargetsError(job, target, held[-1].run_seq, held[-1].run_id,
                                          last.run_seq, last.run_id)


def attempted_targets(run: Run, *, databases: DatabaseTargets | None = None) -> list[Target]:
    """The targets ``run`` wrote or was writing (``databases`` reaches database tables)."""
    return [target_of(key, output=output, databases=databases)
            for key, output in run.outputs.items()
            if output.get("pending") or output.get("written")]


def landed_targets(run: Run, *, databases: DatabaseTargets | None = None) -> list[str]:
    """The targets that hold ``run``'s commit (without ``databases`` to ask, a database
    target counts as landed: the next run, which can ask, settles it)."""
    return [t.key for t in attempted_targets(run, databases=databases)
            if t.landed(run.job, run.run_seq)]


def discard_unlanded(run: Run, *, databases: DatabaseTargets | None = None) -> None:
    """Remove what an unfinished ``run`` left in its targets without committing (files in
    Parquet targets, staging tables of database targets reached through ``databases``)."""
    for target in attempted_targets(run, databases=databases):
        target.discard(run.job, run.run_seq)
