"""Run a declared job with the exactly-once commit protocol.

The target commit is the point of truth. A run, holding its job's lease:

1. **recovers** the previous run if it was interrupted (see ``_recover``);
2. numbers itself (run_seq only grows; attempt counts retries) and records ``running``;
3. runs the job. Sources pin what they read. The plan so far (bookmark states, files) is
   recorded with the run before each target commits (while Spark writes its data); each
   target commit carries the app transaction (``deltamark:<job>``, run_seq), so a replay
   of the run is skipped. Rows for a database table are staged meanwhile, and land when
   the job's code has returned, with the run's mark (``framework.sinks.jdbc``);
4. records ``succeeded`` once the job's code returned: from then on its bookmarks count.
   A job that raises is ``failed`` and its bookmarks never count; when a data-quality
   gate raised, the writes the run had landed are rolled back first, so it fails whole
   (see ``_roll_back``).

Recovery of the last run when it did not succeed: if none of its targets has its
transaction (a Parquet target: its manifest), nothing landed: it is aborted, the files
it moved into Parquet targets are deleted, and its input stays pending. Otherwise some
target has it and its job may not have finished: it is replayed with the same run_seq on
the same pinned input, the targets that have it skip their write, the missing ones get
theirs (when the job had finished, that is all of them: the replay only records it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from framework.common.faults import crash_point
from framework.common.redaction import redact, redact_values
from framework.config import Settings
from framework.errors import (
    BookmarkOptionError,
    DataQualityError,
    JobError,
    JobFailedError,
    one_line,
)
from framework.jdbc import settings_connections
from framework.run import preflight
from framework.run.modes import BookmarkOptions
from framework.run.plan import PinnedRead, RunIdentity, WorkflowRun
from framework.run.spec import JobSpec, load_job
from framework.run.targets import (
    attempted_targets,
    check_state_knows,
    discard_unlanded,
    landed_targets,
)
from framework.sources.bookmark_codec import decode
from framework.sources.files import ListedFile
from framework.sources.listed_reads import release_manifests
from framework.state.table_io import settings_store
from framework.storage.lease import job_lease
from state_tables.model import Bookmark, ProcessedFile, Run, RunOutput, RunStatus, Watermark
from state_tables.store import StateStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from framework.delta import DeltaEngine
    from framework.run.job import JobContext
    from framework.run.job_run import Connections, JobRun
    from framework.run.lineage import RunEvents

__all__ = ["Recovery", "RunReport", "run_job"]

logger = logging.getLogger("deltamark.runner")

#: a run first checks the targets of the job's last this many runs (each write checks its
#: own target again): reading every run's outputs would grow with the job's history
KNOWN_TARGETS_RUNS = 100


@dataclass(frozen=True)
class Recovery:
    """What the start of a run did about the interrupted run before it."""

    run_id: str
    run_seq: int
    action: str  # aborted | replayed


@dataclass(frozen=True)
class RunReport:
    """What a run did (or, for a dry run, would do)."""

    job: str
    run_id: str
    run_seq: int
    attempt: int
    mode: str
    status: str
    dry_run: bool
    seconds: float
    inputs: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    outputs: Mapping[str, RunOutput] = field(default_factory=dict)
    planned_files: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: context -> the files it tracked without reading them: (path, outcome)
    set_aside: Mapping[str, Sequence[tuple[str, str]]] = field(default_factory=dict)
    recovered: Recovery | None = None
    #: run properties the job published (``ctx.publish``)
    properties: Mapping[str, str] = field(default_factory=dict)
    #: why the run started Spark, or (status ``skipped``) why it did not
    preflight: str = ""
    #: context -> what the run's files changed in its schema, and the values rescued
    schema_changes: Mapping[str, Sequence[str]] = field(default_factory=dict)


def run_job(
    settings: Settings,
    job: str,
    *,
    bookmark: str | None = None,
    bookmark_from: str | None = None,
    bookmark_to: str | None = None,
    args: Mapping[str, str] | None = None,
    dry_run: bool = False,
    force: bool = False,
    spark: SparkSession | None = None,
    spec: JobSpec | None = None,
    workflow: WorkflowRun | None = None,
) -> RunReport:
    """Run ``job`` once (first recovering an interrupted earlier run), unless it has nothing
    new to read: then the run is recorded as ``skipped`` before Spark starts
    (``framework.run.preflight``). Example::

        from framework import load_settings, run_job

        report = run_job(load_settings(), "orders_ingest", args={"landing": "data/in"})
        print(report.status, report.inputs)  # succeeded {'orders_src': {'files': 3, ...}}

    Args:
        spec: the job to run, where it is not ``job``'s conf: an AWS Glue script's
            (``framework.glue.script.script_job``, its bookmark mode from Glue's
            arguments; ``job-bookmark-from`` / ``-to`` in ``args`` bound a pause).
        bookmark: enable | disable | pause (Glue's names too); default: the job's conf.
        bookmark_from, bookmark_to: run ids bounding a pause (both or neither).
        args: override the job's params.
        dry_run: plan and report what would be read; write, recover and record nothing.
        force: run even when there is nothing new.
        spark: a session to use; by default one is started from ``settings``.
        workflow: the workflow run this run is part of, and its run properties (the job
            sees them as ``ctx.run_properties``; a change in them is a reason to run).

    Raises:
        JobNotFoundError, ConfigError, BookmarkOptionError: before anything runs.
        ConcurrentRunError: another run of the job is in progress.
        StateBehindTargetsError: a target holds a run of the job the state does not know.
        JobFailedError: the job (or the replay of an interrupted run) raised.
    """
    started = time.perf_counter()
    if spec is None:
        spec = load_job(settings, job)
    else:  # a Glue script's: Glue's arguments bound a pause
        bookmark_from = bookmark_from or (args or {}).get("job-bookmark-from")
        bookmark_to = bookmark_to or (args or {}).get("job-bookmark-to")
    options = BookmarkOptions.parse(job, bookmark or spec.bookmark, from_run=bookmark_from,
                                    to_run=bookmark_to)
    store = settings_store(settings)
    range_seqs = _range(job, options, store)  # argument errors before Spark starts
    params = {**spec.params, **(args or {})}
    workflow = workflow or WorkflowRun()
    fingerprint = preflight.fingerprint(settings, spec, _arguments(params, options),
                                        options.mode, run_properties=workflow.properties)
    connections = settings_connections(settings)
    run_id = uuid.uuid4().hex
    lease = contextlib.nullcontext() if dry_run else job_lease(settings.state_root, job, run_id)
    with lease:
        ahead = preflight.preflight(spec, store, fingerprint=fingerprint, mode=options.mode,
                                    force=force, connections=connections,
                                    skip_when_nothing_new=spec.skip_when_nothing_new)
        if ahead.skip:
            return _skip(ahead, spec, run_id, params, options, fingerprint, store,
                         dry_run=dry_run, started=started)
        logger.info("%s: %s: starting the run", job, ahead.reason)
        _ = spec.job_class  # the job's module, imported now: an error before Spark starts
        from framework.run.lineage import RunEvents  # a run's modules: not a skip's

        last = store.last_run(job)
        if last is not None:
            check_state_knows(job, store.written_targets(
                job, since_seq=last.run_seq - KNOWN_TARGETS_RUNS), last)
        events = RunEvents() if dry_run else RunEvents.configured(settings)
        session = spark or _session(settings, spec, events.spark_conf(job, run_id))
        engine = _engine(settings, session)
        recovered = None if dry_run else _recover(spec, last, store, session, engine,
                                                  connections, params, workflow, events)
        if recovered is not None:  # it settled the last run: read its new status
            last = store.last_run(job)
        identity = RunIdentity(job=job, run_id=run_id,
                               run_seq=last.run_seq + 1 if last else 1, range_seqs=range_seqs,
                               attempt=last.attempt + 1 if last and last.status == "failed"
                               else 1, workflow=workflow)
        job_run, run = _execute(spec, identity, params, options, store, session, engine,
                                connections, dry_run=dry_run, fingerprint=fingerprint,
                                events=events)
    return RunReport(job=job, run_id=run.run_id, run_seq=run.run_seq, attempt=run.attempt,
                     mode=options.mode, status="planned" if dry_run else run.status,
                     dry_run=dry_run, seconds=time.perf_counter() - started,
                     inputs=job_run.plan.inputs(), outputs=job_run.outputs(),
                     planned_files=job_run.plan.planned_files(),
                     set_aside=job_run.plan.set_aside(), recovered=recovered,
                     properties=job_run.published(), preflight=ahead.reason,
                     schema_changes=job_run.schema_changes)


def _skip(ahead: preflight.Preflight, spec: JobSpec, run_id: str, params: Mapping[str, str],
          options: BookmarkOptions, fingerprint: str | None, store: StateStore, *, dry_run: bool,
          started: float) -> RunReport:
    """Record (unless a dry run) a run that found nothing new: it repeats the last one's
    sources and run properties, and touches nothing else."""
    last = ahead.compared
    assert last is not None  # preflight decides a skip only against the last run
    now = datetime.now(UTC)
    run = Run(job=spec.name, run_id=run_id, run_seq=last.run_seq + 1, status="skipped",
              mode=options.mode, started_at=now, ended_at=now,
              arguments=_arguments(params, options), fingerprint=fingerprint,
              sources=last.sources, properties=last.properties)
    if not dry_run:
        store.record_run(run)
    logger.info("%s: run %d skipped: %s", spec.name, run.run_seq, ahead.reason)
    return RunReport(job=spec.name, run_id=run_id, run_seq=run.run_seq, attempt=1,
                     mode=options.mode, status="skipped", dry_run=dry_run,
                     seconds=time.perf_counter() - started, properties=last.properties,
                     preflight=ahead.reason)


def _arguments(params: Mapping[str, str], options: BookmarkOptions) -> dict[str, str]:
    """A run's effective arguments as recorded (secrets masked): its params, and a pause's
    range."""
    return redact_values({**params, **{k: v for k, v in (("bookmark_from", options.from_run),
                                                         ("bookmark_to", options.to_run)) if v}})


def _execute(spec: JobSpec, identity: RunIdentity, params: Mapping[str, str],
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
              attempt=identity.attempt, arguments=_arguments(params, options),
              recovery=recovery, fingerprint=fingerprint)
    from framework.run.job import JobContext
    from framework.run.job_run import JobRun
    from framework.run.lineage import RunEvents

    steps = None if dry_run else _Steps(store, run, events or RunEvents())
    job_run = JobRun(spark=spark, run=identity, bookmark=options, store=store, engine=engine,
                     connections=connections, checks=spec.checks, hooks=steps,
                     dry_run=dry_run)
    ctx = JobContext(job_run, params)
    if steps is None:
        _run_code(spec, ctx)
        return job_run, run
    steps.record(job_run, "running")
    crash_point("started")
    try:
        _run_code(spec, ctx)
        job_run.land_staged()
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
            job_run.rolled_back(target.key)
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


def _recover(spec: JobSpec, last: Run | None, store: StateStore, spark: SparkSession,
             engine: DeltaEngine, connections: Connections, params: Mapping[str, str],
             workflow: WorkflowRun, events: RunEvents) -> Recovery | None:
    """Settle the job's ``last`` run if it did not succeed (see the module docstring).

    A replay takes the last run's arguments; one recorded masked (it held a secret) is
    this run's ``params`` value that masks the same. It sees this run's ``workflow`` (run
    properties are not recorded with a run)."""
    # "committing": a status older versions recorded after the job returned; replayed too
    if last is None or last.status not in ("running", "committing", "failed"):
        return None
    from framework.sinks.jdbc import DatabaseTargets

    databases = DatabaseTargets(spark, connections)
    if not landed_targets(last, databases=databases):
        discard_unlanded(last, databases=databases)
        if last.status == "failed":
            return None
        aborted = dataclasses.replace(last, status="aborted", ended_at=datetime.now(UTC),
                                      recovery="aborted")
        store.record_run(aborted)
        events.emit(aborted)
        return Recovery(last.run_id, last.run_seq, "aborted")
    bookmarks, files = store.run_plan(spec.name, last.run_seq)
    by_context: dict[str, list[ListedFile]] = defaultdict(list)
    for f in files:
        by_context[f.context].append(ListedFile(f.path, f.size, f.modified_ms))
    states = {b.context: decode(b.source_kind, b.state) for b in bookmarks}
    pinned = {c: PinnedRead(tuple(by_context.get(c, ())), states.get(c))
              for c in {*by_context, *states}}
    identity = RunIdentity(job=spec.name, run_id=last.run_id, run_seq=last.run_seq,
                           pinned=pinned, attempt=last.attempt + 1, workflow=workflow)
    replayed = {k: params[k] if k in params and redact(params[k]) == v else v
                for k, v in last.arguments.items() if k not in ("bookmark_from", "bookmark_to")}
    options = BookmarkOptions.parse(spec.name, last.mode)
    _execute(spec, identity, replayed, options, store, spark, engine, connections,
             recovery="replayed", events=events)
    return Recovery(last.run_id, last.run_seq, "replayed")


def _session(settings: Settings, spec: JobSpec, conf: Mapping[str, str]) -> SparkSession:
    from framework.spark.session import spark_session

    return spark_session(settings, app_name=f"deltamark {spec.name}", conf=conf)


def _engine(settings: Settings, spark: SparkSession) -> DeltaEngine:
    from framework.delta import delta_engine

    return delta_engine(spark, mode=settings.delta)


def _range(job: str, options: BookmarkOptions, store: StateStore) -> tuple[int, int] | None:
    """run_seq of the runs a pause range names; they must have committed bookmarks."""
    if options.from_run is None or options.to_run is None:
        return None
    found = {run_id: store.find_run(run_id) for run_id in (options.from_run, options.to_run)}
    missing = [run_id for run_id, run in found.items()
               if run is None or run.job != job or run.status != "succeeded"
               or run.mode != "enable"]
    if missing:
        recent = ", ".join(r.run_id for r in store.runs(job)
                           if r.status == "succeeded" and r.mode == "enable")
        raise BookmarkOptionError(
            job, f"{' and '.join(dict.fromkeys(missing))}: not a run of this job that "
            f"committed bookmarks (succeeded in enable mode). Recent such runs: "
            f"{', '.join(recent.split(', ')[-5:]) or 'none'}. See deltamark runs list.")
    first_run, last_run = found[options.from_run], found[options.to_run]
    assert first_run is not None and last_run is not None  # else they are missing
    first, last = first_run.run_seq, last_run.run_seq
    if first > last:
        raise BookmarkOptionError(
            job, f"--bookmark-from {options.from_run} (run {first}) comes after "
            f"--bookmark-to {options.to_run} (run {last}); swap them.")
    return first, last
