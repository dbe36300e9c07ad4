"""Glue's ``Job``: ``init`` names the run, ``commit`` makes its bookmarks count."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from framework.errors import GlueArgumentError
from framework.glue.api import GlueApi

__all__ = ["Job"]


class Job(GlueApi):
    """``job = Job(glueContext); job.init(args["JOB_NAME"], args); ...; job.commit()``.

    As in Glue, the run's bookmarks advance only if ``commit()`` is called; the writes are
    exactly-once either way. deltamark warns at the end of a run that did not commit.
    """

    glue_name = "Job"

    def __init__(self, glue_context: Any):
        self._run = glue_context._run
        self._ctx = self._run.ctx
        self.name: str | None = None

    def init(self, job_name: str, args: Mapping[str, Any] | None = None) -> None:
        if job_name != self._ctx.job_name:
            raise GlueArgumentError(f"Job.init({job_name!r}): this run is job "
                                    f"{self._ctx.job_name!r} (its JOB_NAME argument)")
        self.name = job_name

    def commit(self) -> None:
        """Commit every bookmark of the run when it ends, atomically with its writes."""
        self._run.committed = True
