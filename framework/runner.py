"""Run a declared job: number the run, hand the job its context, commit or fail.

The steps of a run (the exactly-once protocol grows from these):

1. load and validate ``conf/jobs/<job>.yaml`` and the bookmark options;
2. number the run (run_seq only grows, attempt counts retries after a failure) and
   record it as ``running``;
3. run the job: each source pins what it reads against the bookmark, each target commit
   carries the app transaction (``deltamark:<job>``, run_seq) and the new bookmarks;
4. commit: processed files, then bookmarks, then the ``succeeded`` run row. A job that
   raises is recorded ``failed`` and its bookmarks stay where they were.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from framework.config import Settings
from framework.errors import BookmarkOptionError, JobFailedError
from framework.job import JobContext, RunIdentity
from framework.job_config import JobSpec, load_job
from framework.modes import BookmarkOptions
from state_tables.model import Run
from state_tables.store import StateStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["RunReport", "run_job"]


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
    outputs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    planned_files: Mapping[str, Sequence[str]] = field(default_factory=dict)


def run_job(
    settings: Settings,
    job: str,
    *,
    bookmark: str | None = None,
    bookmark_from: str | None = None,
    bookmark_to: str | None = None,
    args: Mapping[str, str] | None = None,
    dry_run: bool = False,
    spark: SparkSession | None = None,
) -> RunReport:
    """Run ``job`` once.

    Args:
        bookmark: enable | disable | pause (Glue's names too); default: the job's conf.
        bookmark_from, bookmark_to: run ids bounding a pause (both or neither).
        args: override the job's params.
        dry_run: plan and report what would be read; write and record nothing.
        spark: a session to use; by default one is started from ``settings``.

    Raises:
        JobNotFoundError, ConfigError, BookmarkOptionError: before anything runs.
        JobFailedError: the job raised; the run is recorded as failed.
    """
    started = time.perf_counter()
    spec = load_job(settings, job)
    options = BookmarkOptions.parse(job, bookmark or spec.bookmark, bookmark_from, bookmark_to)
    store = StateStore(settings.state_root)
    history = store.runs(job)
    run_seq = max((r.run_seq for r in history), default=0) + 1
    attempt = history[-1].attempt + 1 if history and history[-1].status == "failed" else 1
    identity = RunIdentity(job=job, run_id=uuid.uuid4().hex, run_seq=run_seq,
                           range_seqs=_range(job, options, history))
    params = {**spec.params, **(args or {})}
    arguments = {**params, **{k: v for k, v in (("bookmark_from", options.from_run),
                                                ("bookmark_to", options.to_run)) if v}}
    run = Run(job=job, run_id=identity.run_id, run_seq=run_seq, status="running",
              mode=options.mode, started_at=datetime.now(UTC), attempt=attempt,
              arguments=arguments)

    ctx = _context(settings, spec, identity, params, options, store, dry_run, spark)
    if not dry_run:
        store.record_run(run)
    try:
        spec.job_class().run(ctx)
    except Exception as exc:
        if not dry_run:
            store.record_run(_finished(run, ctx, "failed",
                                       error=f"{type(exc).__name__}: {exc}"[:2000]))
        raise JobFailedError(job, identity.run_id, exc) from exc
    if not dry_run:
        store.commit_run(_finished(run, ctx, "succeeded"), ctx.bookmarks(),
                         ctx.processed_files())
    return RunReport(job=job, run_id=identity.run_id, run_seq=run_seq, attempt=attempt,
                     mode=options.mode, status="planned" if dry_run else "succeeded",
                     dry_run=dry_run, seconds=time.perf_counter() - started,
                     inputs=ctx.inputs(), outputs=ctx.outputs(),
                     planned_files=ctx.planned_files())


def _context(settings: Settings, spec: JobSpec, identity: RunIdentity,
             params: Mapping[str, str], options: BookmarkOptions, store: StateStore,
             dry_run: bool, spark: SparkSession | None) -> JobContext:
    from framework.delta import delta_engine
    from framework.spark import spark_session

    session = spark or spark_session(settings, app_name=f"deltamark {spec.name}")
    return JobContext(spark=session, run=identity, params=params, bookmark=options,
                      store=store, engine=delta_engine(session, settings.delta),
                      dry_run=dry_run)


def _range(job: str, options: BookmarkOptions, history: Sequence[Run]
           ) -> tuple[int, int] | None:
    """run_seq of the runs a pause range names; they must have committed bookmarks."""
    if options.from_run is None or options.to_run is None:
        return None
    committed = {r.run_id: r for r in history if r.status == "succeeded" and r.mode == "enable"}
    missing = [run_id for run_id in (options.from_run, options.to_run)
               if run_id not in committed]
    if missing:
        recent = ", ".join(r.run_id for r in list(committed.values())[-5:]) or "none"
        raise BookmarkOptionError(
            job, f"{' and '.join(missing)}: not a run of this job that committed bookmarks "
            f"(succeeded in enable mode). Recent such runs: {recent}. "
            "See deltamark runs list.")
    first, last = committed[options.from_run].run_seq, committed[options.to_run].run_seq
    if first > last:
        raise BookmarkOptionError(
            job, f"--bookmark-from {options.from_run} (run {first}) comes after "
            f"--bookmark-to {options.to_run} (run {last}); swap them.")
    return first, last


def _finished(run: Run, ctx: JobContext, status: str, *, error: str | None = None) -> Run:
    return Run(job=run.job, run_id=run.run_id, run_seq=run.run_seq, status=status,
               mode=run.mode, started_at=run.started_at, ended_at=datetime.now(UTC),
               attempt=run.attempt, arguments=run.arguments, inputs=ctx.inputs(),
               outputs=ctx.outputs(), error=error)
