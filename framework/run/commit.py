"""Steps 2 to 4 of a run (``framework.run.runner``): record it ``running``, run the job's
code with the commit hooks its target writes call (the plan recorded while Spark writes
each target's data), then record ``succeeded``, or ``failed`` after rolling back what a
data-quality gate's run had landed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from framework.common.faults import crash_point
from framework.common.redaction import redact
from framework.errors import DataQualityError, JobError, JobFailedError, one_line
from framework.run.modes import BookmarkOptions
from framework.run.plan import RunIdentity
from framework.run.spec import JobSpec
from framework.run.targets import attempted_targets
from framework.sources.files.listed_reads import release_manifests
from state_tables.model import Bookmark, ProcessedFile, Run, RunStatus, Watermark
from state_tables.store import StateStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from framework.delta import DeltaEngine
    from framework.run.job import JobContext
    from framework.run.job_run import JobRun
    from framework.run.lineage import RunEvents
    from framework.run.scope import Connections

__all__ = ["execute"]


def execute(spec: JobSpec, identity: RunIdentity, params: Mapping[str, str],
             options: BookmarkOptions, store: StateStore,
             spark: SparkSession, engine: DeltaEngine, connections: Connections, *,
             dry_run: bool = False, recovery: str | None = None,
             fingerprint: str | None = None, events: RunEvents | None = None
             ) -> tuple[JobRun, Run]:
    """Steps 2-4 of the protocol for one run (a new one, or the replay of one: it has no
    fingerprint, so the run after it is never skipped); its lineage ``events`` as its
    status is recorded."""
    run = Run(job=spec.name, run_id=identity.run_id, run_seq=identity.run_seq,
              status="running", mode=options.mode, started_at=datetime.now(UTC),
              attempt=identity.attempt, arguments=options.recorded_arguments(params),
              recovery=recovery, fingerprint=fingerprint)
    from framework.run.job import JobContext
    from framework.run.job_run import JobRun
    from framework.run.lineage import RunEvents

    steps = None if dry_run else _Steps(store, run, events or RunEvents())
    job_run = JobRun(spark=spark, run=identity, bookmark=options, store=store, engine=engine,
                     connections=connections, checks=spec.checks, hooks=steps,
                     dry_run=dry_run, tombstone_retention=spec.tombstone_retention)
    ctx = JobContext(job_run, params)
    if steps is None:
        _run_code(spec, ctx)
        return job_run, run
    steps.record(job_run, "running")
    crash_point("started")
    try:
        _run_code(spec, ctx)
        job_run.writes.land_staged()
    except Exception as exc:
        error = redact(one_line(exc))
        if isinstance(exc, DataQualityError) and (undone := _roll_back(job_run, run)):
            error += f" The run's earlier writes were rolled back: {', '.join(undone)}."
        steps.record(job_run, "failed", error=error[:2000])
        raise JobFailedError(spec.name, identity.run_id, exc) from exc
    crash_point("returned")
    succeeded = steps.record(job_run, "succeeded")
    job_run.plan.committed()
    return job_run, succeeded


def _run_code(spec: JobSpec, ctx: JobContext) -> None:
    """The job's ``run``: ``sys.exit(0)`` in it ends it as a return, another exit code as
    an error, so the run always ends with a recorded outcome. The DataFrames of its file
    reads stay readable until it ends (``release_manifests``)."""
    spec.send_by_value()
    try:
        spec.job_class().run(ctx)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise JobError(spec.name, f"the job called sys.exit({exc.code!r})") from exc
    finally:
        release_manifests()


def _roll_back(job_run: JobRun, run: Run) -> list[str]:
    """Undo the writes of ``run`` that landed before a data-quality gate rejected a later
    one, so the run fails whole and is not replayed (the gate would reject it again).

    Each landed target undoes the run's commit (``Target.roll_back``): a Delta target
    returns to its version before it (a RESTORE, or emptied if the run created it), only
    if that commit is still its newest; a Parquet target loses the run's files; a
    database target never received the rows. A target that cannot be undone stays
    written, and the run is replayed as after any failure. Returns the targets rolled back.
    """
    undone = []
    attempt = dataclasses.replace(run, outputs=job_run.outputs())
    for target in attempted_targets(attempt):
        if target.landed(run.job, run.run_seq) and target.roll_back(run.job, run.run_seq,
                                                                    run.run_id):
            job_run.writes.rolled_back(target.key)
            undone.append(target.key)
    return undone


#: bookmark rows, processed files and watermarks to record with a run
_Plan = tuple[list[Bookmark], list[ProcessedFile], list[Watermark]]


class _Steps:
    """Records a run's progress in the state tables (the ``TargetWriteHooks``)."""

    def __init__(self, store: StateStore, run: Run, events: RunEvents):
        self.store, self.run, self.events = store, run, events

    def record(self, job_run: JobRun, status: RunStatus, *, error: str | None = None) -> Run:
        """Record the run in ``status``, then send its lineage event."""
        run, plan = self._progress(job_run, status, error)
        self._write(run, *plan)
        if self.events.enabled:  # what the event says costs reads: only when it is sent
            self.events.emit(run, job_run.datasets(), () if status == "running" else
                             self.store.dq_results(run.job, run_id=run.run_id))
        return run

    def before_target_write(self, job_run: JobRun) -> Callable[[], object]:
        """Record the plan so far on a thread of its own, while Spark writes the target's
        data (its commit waits for the returned callable)."""
        run, plan = self._progress(job_run, "running", None)
        worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="deltamark-state")
        recorded = worker.submit(self._write, run, *plan, crash_after="planned")
        worker.shutdown(wait=False)  # its thread ends with the record
        return recorded.result

    def after_target_write(self, job_run: JobRun) -> None:
        crash_point("target_committed")

    def _progress(self, job_run: JobRun, status: RunStatus, error: str | None
                  ) -> tuple[Run, _Plan]:
        final = status in ("succeeded", "failed")
        plan = job_run.plan.unpersisted() if status != "failed" else ([], [], [])
        run = dataclasses.replace(self.run, status=status, inputs=job_run.plan.inputs(),
                                  outputs=job_run.outputs(), error=error,
                                  sources=job_run.plan.sources(), properties=job_run.published(),
                                  ended_at=datetime.now(UTC) if final else None,
                                  mode="pause" if job_run.plan.held else self.run.mode)
        return run, plan

    def _write(self, run: Run, bookmarks: list[Bookmark], files: list[ProcessedFile],
               marks: list[Watermark], *, crash_after: str | None = None) -> None:
        if bookmarks or files or marks:
            self.store.record_plan(run, bookmarks=bookmarks, files=files, watermarks=marks)
            crash_point("plan_recorded")
        self.store.record_run(run)
        if crash_after:
            crash_point(crash_after)
