"""Glue's workflow run properties, for a Glue script run in a deltamark workflow.

Glue scripts read and publish run properties through boto3's Glue client; these functions
take the same arguments and return the same shapes::

    args = getResolvedOptions(sys.argv, ["WORKFLOW_NAME", "WORKFLOW_RUN_ID"])
    props = get_workflow_run_properties(Name=args["WORKFLOW_NAME"],
                                        RunId=args["WORKFLOW_RUN_ID"])["RunProperties"]
    put_workflow_run_properties(Name=args["WORKFLOW_NAME"], RunId=args["WORKFLOW_RUN_ID"],
                                RunProperties={"silver_version": "12"})

Properties put here reach the jobs started after this one, as ``ctx.publish`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from framework.errors import GlueUnsupportedError
from framework.glue.active_run import active_run
from framework.run.job import JobContext, job_run

__all__ = ["get_workflow_run_properties", "put_workflow_run_properties"]


def get_workflow_run_properties(Name: str, RunId: str) -> dict[str, Any]:  # noqa: N803 (Glue's)
    """``{"RunProperties": {...}}``: the workflow run's properties as the script sees them
    (those it started with, then those it put)."""
    ctx = _workflow_job(Name, RunId)
    return {"RunProperties": {**ctx.run_properties, **job_run(ctx).published()}}


def put_workflow_run_properties(Name: str, RunId: str,  # noqa: N803 (Glue's names)
                                RunProperties: Mapping[str, Any],  # noqa: N803
                                ) -> dict[str, Any]:
    """Add or replace run properties for the jobs after this one; returns ``{}``."""
    ctx = _workflow_job(Name, RunId)
    for name, value in RunProperties.items():
        ctx.publish(name, value)
    return {}


def _workflow_job(name: str, run_id: str) -> JobContext:
    ctx = active_run().ctx
    if ctx.workflow_run_id is None:
        raise GlueUnsupportedError(
            "get/put_workflow_run_properties outside a workflow",
            "run the script as a job of a workflow (deltamark workflow run), or pass "
            "--run-property to deltamark run and read ctx.run_properties")
    if (name, run_id) != (ctx.workflow_name, ctx.workflow_run_id):
        raise GlueUnsupportedError(
            f"workflow run properties of {name} run {run_id}",
            f"a script reads and puts those of its own workflow run ({ctx.workflow_name} run "
            f"{ctx.workflow_run_id}): pass WORKFLOW_NAME and WORKFLOW_RUN_ID from its args")
    return ctx
