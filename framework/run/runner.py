"""Run a declared job with the exactly-once commit protocol.

The target commit is the point of truth. A run, holding its job's lease:

1. **recovers** the previous run if it was interrupted (``framework.run.recovery``);
2. numbers itself (run_seq only grows; attempt counts retries) and records ``running``;
3. runs the job. Sources pin what they read. The plan so far (bookmark states, files) is
   recorded with the run before each target commits (while Spark writes its data); each
   target commit carries the app transaction (``deltamark:<job>``, run_seq), so a replay
   of the run is skipped. Rows for a database table are staged meanwhile, and land when
   the job's code has returned, with the run's mark (``framework.sinks.jdbc``);
4. records ``succeeded`` once the job's code returned: from then on its bookmarks count.
   A job that raises is ``failed`` and its bookmarks never count; when a data-quality
   gate raised, the writes the run had landed are rolled back first, so it fails whole
   (``framework.run.commit``).

Steps 2 to 4 are ``framework.run.commit``'s; step 1, ``framework.run.recovery``'s.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from framework.config import Settings
from framework.errors import BookmarkOptionError
from framework.jdbc import settings_connections
from framework.run import preflight, slots
from framework.run.modes import BookmarkOptions
from framework.run.plan import RunIdentity, WorkflowRun
from framework.run.spec import JobSpec, load_job
from framework.state.table_io import settings_store
from framework.storage.lease import job_lease
from state_tables.model import Run, RunOutput
from state_tables.store import StateStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from framework.delta import DeltaEngine
    from framework.run.recovery import Recovery

__all__ = ["RunReport", "run_job"]

logger = logging.getLogger("deltamark.runner")

#: a run first checks the targets of the job's last this many runs (each write checks its
#: own target again): reading every run's outputs would grow with the job's history
KNOWN_TARGETS_RUNS = 100


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
    fingerprint = preflight.fingerprint(settings, spec, options.recorded_arguments(params),
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
        slots.give_back()  # a real run's work is Spark's to schedule
        _ = spec.job_class  # the job's module, imported now: an error before Spark starts
        # a run's modules: not a skip's
        from framework.run.commit import execute
        from framework.run.lineage import RunEvents
        from framework.run.recovery import recover
        from framework.run.targets import check_state_knows

        last = store.last_run(job)
        if last is not None:
            check_state_knows(job, store.written_targets(
                job, since_seq=last.run_seq - KNOWN_TARGETS_RUNS), last)
        events = RunEvents() if dry_run else RunEvents.configured(settings)
        session = spark or _session(settings, spec, events.spark_conf(job, run_id))
        engine = _engine(settings, session)
        recovered = None if dry_run else recover(spec, last, store, session, engine,
                                                  connections, params, workflow, events)
        if recovered is not None:  # it settled the last run: read its new status
            last = store.last_run(job)
        identity = RunIdentity(job=job, run_id=run_id,
                               run_seq=last.run_seq + 1 if last else 1, range_seqs=range_seqs,
                               attempt=last.attempt + 1 if last and last.status == "failed"
                               else 1, workflow=workflow)
        job_run, run = execute(spec, identity, params, options, store, session, engine,
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
              arguments=options.recorded_arguments(params), fingerprint=fingerprint,
              sources=last.sources, properties=last.properties)
    if not dry_run:
        store.record_run(run)
    logger.info("%s: run %d skipped: %s", spec.name, run.run_seq, ahead.reason)
    return RunReport(job=spec.name, run_id=run_id, run_seq=run.run_seq, attempt=1,
                     mode=options.mode, status="skipped", dry_run=dry_run,
                     seconds=time.perf_counter() - started, properties=last.properties,
                     preflight=ahead.reason)


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
