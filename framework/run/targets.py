"""A job's runs as its targets hold them, checked against the state, and read back.

Each target commit of a run carries the run's identity and what it commits to the state
(its record, ``run_record``): in a Delta commit's ``userMetadata`` under ``deltamark``,
in a Parquet target's manifest, in a database target's ``deltamark_commits`` row
(``framework.sinks``: each kind's ``Target`` reads them back). So a state root restored
from a backup, or missing its newest commits, is noticed before a run writes over it
(``check_state_knows``), and the runs it lost are rebuilt from the targets
(``framework.ops.actions.repair``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Unpack

from framework.errors import JobError, StateBehindTargetsError
from framework.sinks import Target, target_of
from framework.sinks.jdbc import DatabaseTargets
from framework.sinks.target import MAX_RECORDED_FILES, TargetRun
from framework.sources import files as file_source
from state_tables.model import (
    Bookmark,
    ContextRecord,
    ProcessedFile,
    Run,
    RunOutput,
    RunRecord,
    Watermark,
)

__all__ = ["RunOutputs", "attempted_targets", "check_state_knows", "check_target_write",
           "discard_unlanded", "landed_targets", "run_record", "runs_in"]


class RunOutputs:
    """The targets one run of ``job`` writes, as the run records them (``Run.outputs``).

    Each target has one entry, which goes from pending (being written, or staged) to
    written, or is skipped (nothing to commit), or is rolled back; it holds its target
    kind's tags (``framework.sinks.target_of`` reads them) and what was written.
    """

    def __init__(self, job: str):
        self.job = job
        #: by target (local paths absolute): the entry, and the target as the job named it
        self._entries: dict[str, tuple[str, RunOutput]] = {}

    def claim(self, target: str) -> None:
        """Before ``target`` is written: it is not written twice in one run.

        Raises:
            JobError: the run already wrote it.
        """
        if _key(target) in self._entries:
            raise JobError(self.job, f"target {target} is written twice in one run; union "
                           "the DataFrames and write once.")

    def skip(self, target: str, **tags: Unpack[RunOutput]) -> None:
        """``target`` gets no commit from this run (no rows, or a dry run)."""
        self._entries[_key(target)] = (target, {"written": False, **tags})

    def start(self, target: str, **tags: Unpack[RunOutput]) -> None:
        """``target`` is being written (or its rows are staged): a crash leaves it to
        recovery, which asks the target whether it landed."""
        self._entries[_key(target)] = (target, {"written": False, "pending": True, **tags})

    def land(self, target: str, **written: Unpack[RunOutput]) -> None:
        """``target`` holds this run's commit (``replayed``: an earlier attempt's), with
        what was ``written`` (version, files, rows)."""
        named, entry = self._entries[_key(target)]
        landed: RunOutput = {**entry, "written": True, **written}
        landed.pop("pending", None)
        self._entries[_key(target)] = (named, landed)

    def roll_back(self, target: str) -> None:
        """``target``'s write of this run was undone: it is no longer one of its writes."""
        named, entry = self._entries[_key(target)]
        self._entries[_key(target)] = (named, {**entry, "written": False, "pending": False,
                                               "rolled_back": True})

    def entry(self, target: str) -> RunOutput:
        return self._entries[_key(target)][1]

    def recorded(self) -> dict[str, RunOutput]:
        """``Run.outputs``: each target's entry, by the target as the job named it."""
        return {named: entry.copy() for named, entry in self._entries.values()}


def _key(target: str) -> str:
    return os.path.abspath(target) if "://" not in target else target


def run_record(job: str, run_id: str, run_seq: int, mode: str,
               bookmarks: Sequence[Bookmark], files: Sequence[ProcessedFile],
               watermarks: Iterable[Watermark]) -> RunRecord:
    """What a target commit of the run carries: its identity and mode, its bookmarks, the
    files each file context tracked in the run (None when there are more than
    ``MAX_RECORDED_FILES``) and its watermarks.
    """
    contexts: dict[str, ContextRecord] = {}
    for b in bookmarks:
        entry: ContextRecord = {"kind": b.source_kind, "state": dict(b.state)}
        if b.source_kind == file_source.SOURCE_KIND:
            tracked = [[f.path, f.size, f.modified_ms, f.outcome] for f in files
                       if f.context == b.context]
            entry["files"] = tracked if len(tracked) <= MAX_RECORDED_FILES else None
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
