"""A job's runs as its targets hold them, checked against the state, and read back.

Each target commit of a run carries the run's identity and what it commits to the state
(its record, ``run_record``): in a Delta commit's ``userMetadata`` under ``deltamark``,
in a Parquet target's manifest. So a state root restored from a backup, or missing its newest
commits, is noticed before a run writes over it (``check_state_knows``), and the runs it
lost are rebuilt from the targets (``framework.admin.repair``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from framework.delta import log
from framework.errors import StateBehindTargetsError
from framework.sinks import jdbc, parquet
from state_tables.model import Bookmark, ProcessedFile, Run, Watermark
from state_tables.store import typed_value

__all__ = ["TargetRun", "app_id", "check_state_knows", "check_target_write",
           "discard_unlanded", "landed_targets", "run_record", "runs_in"]

#: a file context's window (files newer than its settled time) is kept up to this size
MAX_WINDOW_FILES = 1000


def app_id(job: str) -> str:
    """The Delta app-transaction id of ``job``'s target commits (version = run_seq)."""
    return f"deltamark:{job}"


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
        if "settled_ms" in b.state:
            window = [[f.path, f.size, f.modified_ms] for f in files
                      if f.context == b.context and f.modified_ms > b.state["settled_ms"]]
            entry["window"] = window if len(window) <= MAX_WINDOW_FILES else None
        contexts[b.context] = entry
    return {"job": job, "run_id": run_id, "run_seq": run_seq, "mode": mode,
            "bookmarks": contexts,
            "watermarks": {w.context: {"column": w.column, "aggregate": w.aggregate,
                                       "value": w.value, "value_type": w.value_type,
                                       "rows": w.rows} for w in watermarks}}


@dataclass(frozen=True)
class TargetRun:
    """One run of a job as a target holds it."""

    target: str
    run_seq: int
    run_id: str
    committed_at: datetime
    #: the Delta version of its commit; None in a Parquet target
    version: int | None
    #: its ``run_record`` (empty for commits made before deltamark wrote one)
    record: Mapping[str, Any]

    def plan(self) -> tuple[list[Bookmark], list[ProcessedFile], list[Watermark]]:
        """The state rows the run committed, rebuilt from its record.

        Raises:
            ValueError: the record lacks what the rows need (named in the message).
        """
        if not self.record:
            raise ValueError("its commit carries no record (made before deltamark kept "
                             "one, or no longer in the table's log)")
        job, run_id, seq = self.record["job"], self.run_id, self.run_seq
        bookmarks, files = [], []
        for context, entry in self.record.get("bookmarks", {}).items():
            if "kind" not in entry:
                raise ValueError(f"its commit predates the records deltamark keeps in "
                                 f"targets (context {context} has no kind)")
            if entry.get("window", []) is None:
                raise ValueError(f"context {context} read more than {MAX_WINDOW_FILES} "
                                 "files within its settling window, which the commit does "
                                 "not list")
            bookmarks.append(Bookmark(job=job, context=context, run_id=run_id, run_seq=seq,
                                      source_kind=entry["kind"], state=entry["state"]))
            files += [ProcessedFile(job=job, context=context, run_id=run_id, run_seq=seq,
                                    path=path, size=size, modified_ms=modified)
                      for path, size, modified in entry.get("window", [])]
        marks = [Watermark(job=job, context=context, run_id=run_id, run_seq=seq,
                           column=m["column"], aggregate=m["aggregate"],
                           value=typed_value(m["value"], m["value_type"]),
                           value_type=m["value_type"], rows=m["rows"])
                 for context, m in self.record.get("watermarks", {}).items()]
        return bookmarks, files, marks


def runs_in(target: str, job: str, *, after_seq: int = 0) -> list[TargetRun]:
    """The runs of ``job`` that committed to ``target`` (a Delta table or a Parquet
    directory) with a run_seq above ``after_seq``, oldest first. A database table is not
    read here (it needs its connection): its own commit checks its marks
    (``framework.sinks.jdbc.land``)."""
    if jdbc.is_target(target):
        return []
    if log.is_table(target):
        newest = log.transaction_version(target, app_id(job)) or 0
        if newest <= after_seq:
            return []  # the usual answer, from the log's snapshot without its history
        found = []
        for commit in log.history(target):
            mine = commit.user_metadata.get("deltamark", {})
            if mine.get("job") == job and mine.get("run_seq", 0) > after_seq:
                found.append(TargetRun(target, mine["run_seq"], mine.get("run_id", "?"),
                                       commit.timestamp, commit.version, mine))
        if not found:  # its commit left the log (log retention): known by number only
            found.append(TargetRun(target, newest, "?", datetime.fromtimestamp(0, UTC),
                                   None, {}))
        return found[::-1]
    return [TargetRun(target, c.run_seq, c.run_id, c.committed_at, None, c.record)
            for c in sorted(parquet.commits(target, job), key=lambda c: c.run_seq)
            if c.run_seq > after_seq]


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


def landed_targets(run: Run, databases: jdbc.DatabaseTargets | None = None) -> list[str]:
    """The targets that hold ``run``'s commit: a Delta table whose app transaction reached
    its run_seq, a Parquet directory with its manifest, a database table with its mark
    (without ``databases`` to ask, a database target counts as landed: the next run,
    which can ask, settles it)."""
    return [t for t in _attempted(run) if _landed(run, t, databases)]


def discard_unlanded(run: Run, databases: jdbc.DatabaseTargets | None = None) -> None:
    """Delete the files an unfinished ``run`` left in Parquet targets it did not land in,
    and (with ``databases``) the staging tables of its database targets (Delta targets
    need nothing: an uncommitted write is invisible)."""
    for target in _attempted(run):
        output = run.outputs[target]
        if parquet.is_output(output):
            parquet.discard(target, run.job, run.run_seq)
        elif jdbc.is_output(output) and databases is not None:
            databases.discard(run.job, run.run_seq, output)


def _attempted(run: Run) -> list[str]:
    return [t for t, out in run.outputs.items() if out.get("pending") or out.get("written")]


def _landed(run: Run, target: str, databases: jdbc.DatabaseTargets | None) -> bool:
    output = run.outputs[target]
    if jdbc.is_output(output):
        return databases is None or databases.landed(run.job, run.run_seq, output)
    if parquet.is_output(output):
        return parquet.committed(target, run.job, run.run_seq) is not None
    return (log.is_table(target)
            and (log.transaction_version(target, app_id(run.job)) or 0) >= run.run_seq)
