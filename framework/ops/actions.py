"""Operator actions on a job's state, and on its targets with it: abort a run, rewind,
reset, set a bookmark, repair a state that lost runs its targets hold.

Every change is appended (history is never rewritten) and made under the job's lease, so
it cannot interleave with a run.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from framework.config import Settings
from framework.delta import log
from framework.errors import RepairError, RewindError, RunNotFoundError, RunStateError
from framework.ops.admin import SET_BOOKMARK, require_job
from framework.run.targets import discard_unlanded, landed_targets, runs_in
from framework.sinks import iceberg as iceberg_sink
from framework.sinks import target_of
from framework.sinks.target import PrunedTarget, RestoredTarget, TargetRun
from framework.sources import delta as delta_source
from framework.sources import iceberg as iceberg_source
from framework.sources.bookmark_codec import BookmarkState, decode, encode
from framework.state.table_io import settings_store
from framework.storage.lease import job_lease
from state_tables.model import Bookmark, ProcessedFile, Run, Watermark
from state_tables.store import StateStore

__all__ = ["Repair", "RepairedRun", "Rewind", "abort_run", "repair", "reset", "rewind",
           "set_bookmark"]


@dataclass(frozen=True)
class Rewind:
    """What a rewind or reset recorded."""

    job: str
    to_run: Run | None
    bookmarks: tuple[Bookmark, ...]
    restored: tuple[RestoredTarget | PrunedTarget, ...] = ()


def _require_context(store: StateStore, job: str, context: str | None) -> None:
    if context is not None and not store.histories(job, context=context):
        known = ", ".join(sorted(store.histories(job))) or "none"
        raise RewindError(job, f"no context {context} (its contexts: {known}). Nothing was "
                          "changed.")


def abort_run(settings: Settings, run_id: str) -> Run:
    """Mark an unfinished run aborted, so its plan never counts.

    Raises:
        RunNotFoundError: no such run.
        RunStateError: already finished, or some target already has its data (the next
            run completes it).
        ConcurrentRunError: its process (or another run of the job) holds the lease.
    """
    store = settings_store(settings)
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

    The bookmark rows (only ever appended, in run order) are resolved up to that run and
    recorded again as ``rewind`` rows; contexts that did not exist then are reset. Every
    run stays reachable, whatever the state tables' retention removed. With
    ``restore_targets``, the job's targets also return to their content right after
    ``to_run`` (RESTORE, or emptied when created later), but only when no other writer
    committed to them since.

    Raises:
        RewindError: unknown or uncommitted run; foreign commits in a target.
    """
    store = settings_store(settings)
    with job_lease(settings.state_root, job, f"rewind to {to_run}"):
        _require_context(store, job, context)
        runs = store.runs(job)
        run = next((r for r in runs if r.run_id == to_run), None)
        if run is None or run.status != "succeeded" or run.mode != "enable":
            raise RewindError(job, f"run {to_run} is not a run of this job that committed "
                              "bookmarks (succeeded in enable mode). See deltamark runs list "
                              f"{job}.")
        then = store.histories(job, context=context, up_to_seq=run.run_seq)
        restored = _restore_targets(settings, job, run, runs) if restore_targets else ()
        seq = max(r.run_seq for r in runs)
        now = datetime.now(UTC)
        rows = [dataclasses.replace(h.current, event="rewind", run_seq=seq, committed_at=now,
                                    restored_from_seq=run.run_seq)
                for h in then.values() if h.current.event != "reset"]
        known = set(store.histories(job, context=context))
        rows += [_reset_row(job, c, seq, now) for c in sorted(known - {r.context for r in rows})]
        if rows:
            store.record_bookmarks(rows, tag={"job": job, "event": "rewind", "run_seq": seq})
        _supersede_unfinished(store, runs)
    return Rewind(job=job, to_run=run, bookmarks=tuple(rows), restored=tuple(restored))


def reset(settings: Settings, job: str, *, context: str | None = None) -> Rewind:
    """Make the next run start from nothing (one context, or all of the job's)."""
    store = settings_store(settings)
    require_job(settings, job)
    with job_lease(settings.state_root, job, "reset"):
        _require_context(store, job, context)
        runs = store.runs(job)
        seq = max((r.run_seq for r in runs), default=0)
        now = datetime.now(UTC)
        rows = [_reset_row(job, c, seq, now) for c in sorted(store.histories(job, context=context))]
        if rows:
            store.record_bookmarks(rows, tag={"job": job, "event": "reset", "run_seq": seq})
        _supersede_unfinished(store, runs)
    return Rewind(job=job, to_run=None, bookmarks=tuple(rows))


def set_bookmark(settings: Settings, job: str, *, context: str, version: int | None = None,
                 snapshot: int | None = None, latest: bool = False,
                 values: Sequence[str] = (), table: str | None = None) -> Run:
    """Set a context's bookmark without running the job, as if a run had read: a Delta
    table through ``version`` (``table`` needed only when the context has no bookmark
    yet), an Iceberg table through ``snapshot``, either through its ``latest``; a
    database table's rows up to its keys' ``values``. The next run reads what comes after.
    Recorded as a run of its own (succeeded, in enable mode; ``SET_BOOKMARK`` among its
    arguments), so that a rewind to the run before it undoes it.

    Raises:
        RewindError: a position of another kind of source than the context's, no table
            known, a version or snapshot the table does not have, not one value per key.
        TableNotFoundError: no Delta table there.
        IcebergError: no such Iceberg table.
    """
    if [version is not None, snapshot is not None, latest, bool(values)].count(True) != 1:
        raise RewindError(job, "set a bookmark to one of a version, a snapshot, the latest "
                          "or key values. Nothing was changed.")
    store = settings_store(settings)
    require_job(settings, job)
    with job_lease(settings.state_root, job, f"set the bookmark of {context}"):
        current = next(iter(store.bookmarks(job, context=context)), None)
        kind = current.source_kind if current else delta_source.SOURCE_KIND
        if values:
            state, said = _database_position(job, context, current, values)
        elif snapshot is not None or (latest and kind == iceberg_source.SOURCE_KIND):
            state, said = _iceberg_position(job, context, current,
                                            "latest" if latest else snapshot)
        else:
            state, said = _delta_position(job, context, current,
                                          "latest" if latest else version, table)
        runs = store.runs(job)
        last = runs[-1] if runs else None
        now = datetime.now(UTC)
        run = Run(job=job, run_id=uuid.uuid4().hex,
                  run_seq=max((r.run_seq for r in runs), default=0) + 1, status="succeeded",
                  mode="enable", started_at=now, ended_at=now,
                  arguments={SET_BOOKMARK: f"{context}: {said}"},
                  # as planned, the job's last run would find what comes after the bookmark
                  fingerprint=last.fingerprint if last else None,
                  sources=last.sources if last else {})
        _supersede_unfinished(store, runs)
        store.record_run(run, bookmarks=[Bookmark(
            job=job, context=context, run_id=run.run_id, run_seq=run.run_seq,
            source_kind=state.kind, state=encode(state), committed_at=now)])
    return run


def _delta_position(job: str, context: str, current: Bookmark | None,
                    version: int | Literal["latest"] | None, table: str | None
                    ) -> tuple[delta_source.DeltaState, str]:
    state = None if current is None else _state_of(
        job, context, current, delta_source.SOURCE_KIND, "--version",
        "read_delta's starting_version")
    assert state is None or isinstance(state, delta_source.DeltaState)
    table = table or (state.table if state else None)
    if table is None:
        raise RewindError(job, f"context {context} has no bookmark yet: name its table with "
                          "--table. Nothing was changed.")
    latest = log.latest_version(table)
    wanted = latest if version == "latest" else version
    assert isinstance(wanted, int)  # set_bookmark checked that one position is given
    if not 0 <= wanted <= latest:
        raise RewindError(job, f"--version {wanted}: {table} has versions 0 to {latest}. "
                          "Nothing was changed.")
    return (delta_source.DeltaState(table, wanted, starting=state.starting if state else None),
            f"version {wanted} of {table}")


def _state_of(job: str, context: str, current: Bookmark | None, kind: str, option: str,
              first_run: str) -> BookmarkState:
    """The bookmark state of ``context``, a source of ``kind`` that ``option`` sets
    (``first_run``: the read's option for where a first run starts)."""
    if current is None or current.source_kind != kind:
        why = (f"has no bookmark yet: run the job once ({first_run} sets where a first run "
               "starts)" if current is None else f"reads a {current.source_kind} source")
        raise RewindError(job, f"context {context} {why}; {option} sets a {kind} context's "
                          "bookmark. Nothing was changed.")
    return decode(kind, current.state)


def _iceberg_position(job: str, context: str, current: Bookmark | None,
                      snapshot: int | Literal["latest"] | None
                      ) -> tuple[iceberg_source.IcebergState, str]:
    from framework import iceberg

    state = _state_of(job, context, current, iceberg_source.SOURCE_KIND, "--snapshot",
                      "read_iceberg's starting_snapshot")
    assert isinstance(state, iceberg_source.IcebergState)
    ids = [s.snapshot_id for s in iceberg.history(state.table)]
    wanted = (ids[-1] if ids else None) if snapshot == "latest" else snapshot
    if wanted not in ids:
        raise RewindError(job, f"--snapshot {wanted}: not in {state.table}'s history (its "
                          f"snapshots: {', '.join(map(str, ids[-5:])) or 'none'}, newest "
                          "last). Nothing was changed.")
    return (iceberg_source.IcebergState(state.table, wanted, starting=state.starting),
            f"snapshot {wanted} of {state.table}")


def _database_position(job: str, context: str, current: Bookmark | None,
                       values: Sequence[str]) -> tuple[BookmarkState, str]:
    from framework.sources.jdbc import SOURCE_KIND, JdbcState, Position

    state = _state_of(job, context, current, SOURCE_KIND, "--value",
                      "read_jdbc's initial_value")
    assert isinstance(state, JdbcState)
    if len(values) != len(state.keys):
        raise RewindError(job, f"--value: give one value per bookmark key of {context} "
                          f"({', '.join(state.keys)}), in that order. Nothing was changed.")
    position = Position(tuple(values))
    return (dataclasses.replace(state, position=position, from_=None, where="1=0", rows=0),
            f"{', '.join(state.keys)} = {', '.join(values)} of {state.source}")


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


def _restore_targets(settings: Settings, job: str, run: Run, runs: Sequence[Run]
                     ) -> list[RestoredTarget | PrunedTarget]:
    """Check every target the job wrote since ``run`` first (``Target.restore_blockers``:
    another writer's commits, a database table); restore them only when none objects.
    Iceberg targets roll back through Spark: a session starts for them."""
    written = {key: output for r in runs if r.run_seq >= run.run_seq
               for key, output in r.outputs.items() if output.get("written")}
    targets = [target_of(key, output=written[key]) for key in sorted(written)]
    if blockers := [b for t in targets for b in t.restore_blockers(job, run.run_seq)]:
        raise RewindError(
            job, f"not restoring the targets since run {run.run_id}: {'; '.join(blockers)}. "
            "Nothing was changed; restore them by hand, or rewind without --restore-targets.")
    if any(iceberg_sink.is_output(written[key]) for key in written):
        from framework.spark.session import spark_session

        spark_session(settings)
    return [restored for t in targets
            if (restored := t.restore(job, run.run_seq, run.run_id)) is not None]


@dataclass(frozen=True)
class RepairedRun:
    """A run the state had lost, recorded again from the targets that hold it."""

    run: Run
    bookmarks: tuple[Bookmark, ...]
    #: the job's known targets that do not hold it (they may miss its rows)
    missing_from: tuple[str, ...]


@dataclass(frozen=True)
class Repair:
    """What ``repair`` found and recorded."""

    job: str
    targets: tuple[str, ...]
    runs: tuple[RepairedRun, ...]


def repair(settings: Settings, job: str, *, targets: Sequence[str] = ()) -> Repair:
    """Rebuild the runs of ``job`` that its targets hold and its state lost (a state root
    restored from a backup, or missing its newest commits), from the records the runs left
    in their target commits: each becomes a ``succeeded`` run (recovery ``repaired``) with
    its bookmarks, the files its bookmarks track by name and its watermarks.

    The targets searched are those the state knows the job wrote, and ``targets``.

    Raises:
        RepairError: two runs with one run_seq, or a run whose record cannot be rebuilt;
            nothing was recorded.
    """
    store = settings_store(settings)
    with job_lease(settings.state_root, job, "repair"):
        last = store.last_run(job)
        searched = tuple(dict.fromkeys([*store.written_targets(job), *targets]))
        by_seq: dict[int, list[TargetRun]] = {}
        for target in searched:
            for held in runs_in(target, job, after_seq=last.run_seq if last else 0):
                by_seq.setdefault(held.run_seq, []).append(held)
        lost = [_lost_run(job, seq, by_seq[seq], searched) for seq in sorted(by_seq)]
        for repaired, plan in lost:
            bookmarks, files, marks = plan
            store.record_plan(repaired.run, bookmarks=bookmarks, files=files, watermarks=marks)
            store.record_run(repaired.run)
    return Repair(job, searched, tuple(r for r, _ in lost))


def _lost_run(job: str, seq: int, held: Sequence[TargetRun], searched: Sequence[str]
              ) -> tuple[RepairedRun, tuple[list[Bookmark], list[ProcessedFile],
                                            list[Watermark]]]:
    if len({h.run_id for h in held}) > 1:
        listed = "; ".join(f"{h.target}: {h.run_id}" for h in held)
        raise RepairError(job, f"run {seq} is a different run in different targets "
                          f"({listed}). Nothing was recorded; rewind to an earlier run with "
                          "--restore-targets to remove both.")
    newest = max(held, key=lambda h: h.committed_at)  # its record is the most complete
    try:
        plan = newest.plan()
    except ValueError as exc:
        raise RepairError(job, f"run {seq} ({newest.run_id}) in {newest.target} cannot be "
                          f"rebuilt: {exc}. Nothing was recorded; rewind to an earlier run "
                          "with --restore-targets instead.") from exc
    outputs = {h.target: h.output for h in held}
    run = Run(job=job, run_id=newest.run_id, run_seq=seq, status="succeeded",
              mode=newest.record.get("mode", "enable"), started_at=min(
                  h.committed_at for h in held), ended_at=newest.committed_at,
              outputs=outputs, recovery="repaired")
    missing = tuple(t for t in searched if t not in outputs)
    return RepairedRun(run, tuple(plan[0]), missing), plan
