"""A Glue script as a deltamark job: ``deltamark run --script PATH --arg JOB_NAME=...``.

The script runs as the job's ``run``, unchanged: ``import awsglue...`` and
``SparkContext()`` work (``framework.glue.environment``), and ``sys.argv`` is made of the
run's params the way Glue passes job arguments (``--NAME value``), so
``getResolvedOptions`` reads them.
In a workflow, it also gets ``--WORKFLOW_NAME`` and ``--WORKFLOW_RUN_ID`` as Glue passes
them (``framework.glue.workflow`` reads and publishes the run properties).
Bookmarks follow Glue: ``--job-bookmark-option`` (default job-bookmark-disable) picks the
mode, and they advance only if the script calls ``job.commit()``.
"""

from __future__ import annotations

import contextlib
import runpy
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import ClassVar

from framework.config import CatalogTable
from framework.errors import JobError
from framework.glue.active_run import GlueRun, current_run
from framework.glue.environment import glue_environment
from framework.run.job import IncrementalJob, JobContext, job_run
from framework.run.modes import BookmarkOptions
from framework.run.spec import JobSpec

__all__ = ["script_job"]

#: run params that are Glue's bookmark arguments, not the script's own
BOOKMARK_ARGS = ("job-bookmark-option", "continuation-option", "job-bookmark-from",
                 "job-bookmark-to")


def script_job(script: Path, name: str, args: Mapping[str, str], *,
               catalog: Mapping[str, CatalogTable] | None = None) -> JobSpec:
    """A job spec that runs ``script``; its bookmark mode comes from Glue's arguments, and
    ``catalog`` holds the tables it reads and writes with ``from_catalog``.

    Raises:
        JobError: no such file.
        BookmarkOptionError: an unknown bookmark mode.
    """
    if not script.is_file():
        raise JobError(name, f"--script {script}: no such file; check the path.")
    job_class = type(f"GlueScript[{script.name}]", (_GlueScript,),
                     {"script": script, "catalog": dict(catalog or {})})
    mode = args.get("job-bookmark-option") or args.get("continuation-option") or (
        "job-bookmark-disable")
    return JobSpec(name=name, source=script, load_class=lambda: job_class, code_file=script,
                   bookmark=BookmarkOptions.parse(name, mode).mode,
                   description=f"Glue script {script}")


class _GlueScript(IncrementalJob):
    script: ClassVar[Path]
    catalog: ClassVar[Mapping[str, CatalogTable]]

    def run(self, ctx: JobContext) -> None:
        params: dict[str, str | None] = {k: v for k, v in ctx.params.items()
                                         if k not in BOOKMARK_ARGS}
        params.setdefault("JOB_NAME", ctx.job_name)
        if ctx.workflow_run_id is not None:
            params |= {"WORKFLOW_NAME": ctx.workflow_name, "WORKFLOW_RUN_ID": ctx.workflow_run_id}
        bookmark = {"job-bookmark-option": f"job-bookmark-{ctx.mode}",
                    "job-bookmark-from": ctx.bookmark.from_run,
                    "job-bookmark-to": ctx.bookmark.to_run}
        argv = [str(self.script)] + [word for name, value in {**params, **bookmark}.items()
                                     if value is not None for word in (f"--{name}", value)]
        run = GlueRun(ctx, self.catalog)
        with current_run(run), _argv(argv), glue_environment(ctx.spark):
            runpy.run_path(str(self.script), run_name="__main__")
        if not run.committed:
            job_run(ctx).hold_bookmarks()
            ctx.log.warning("%s never called job.commit(): this run's bookmarks do not "
                            "advance, so the next run reads the same input again (Glue would "
                            "not say so). Call job.commit() at the end of the script.",
                            self.script)


@contextlib.contextmanager
def _argv(argv: list[str]) -> Iterator[None]:
    saved = sys.argv
    sys.argv = argv
    try:
        yield
    finally:
        sys.argv = saved
