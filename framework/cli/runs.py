"""deltamark runs ..."""

from typing import Annotated, Any

import typer

from framework import admin
from framework.cli._common import library_errors, options, render
from state_tables.model import Run

app = typer.Typer(help="Runs of jobs, from the runs state table.", no_args_is_help=True)


@app.command("list")
def list_runs(
    ctx: typer.Context,
    job: Annotated[str | None, typer.Argument(help="Only this job's runs.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List recorded runs, oldest first (--json: every column)."""
    with library_errors(ctx):
        runs = options(ctx).store().runs(job)
        if job and not runs:
            admin.require_job(options(ctx).settings(), job)
    render(runs if as_json else [_summary(r) for r in runs], as_json=as_json)


def _summary(run: Run) -> dict[str, Any]:
    seconds = (run.ended_at - run.started_at).total_seconds() if run.ended_at else None
    read = ", ".join(
        f"{context}: " + (f"v{counts['from_version']}..{counts['to_version']}"
                          if "to_version" in counts else f"{counts.get('files', 0)} files")
        for context, counts in run.inputs.items())
    return {"job": run.job, "run_seq": run.run_seq, "status": run.status, "mode": run.mode,
            "attempt": run.attempt, "started_at": f"{run.started_at:%Y-%m-%d %H:%M:%S}",
            "seconds": f"{seconds:.1f}" if seconds is not None else "", "read": read,
            "run_id": run.run_id, "recovery": run.recovery, "error": run.error}


@app.command("abort")
def abort(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The unfinished run to abort.")],
) -> None:
    """Mark an unfinished run whose process is gone as aborted (nothing of it counts)."""
    with library_errors(ctx):
        run = admin.abort_run(options(ctx).settings(), run_id)
    typer.echo(f"{run.job}: run {run.run_seq} ({run.run_id}) aborted; its input stays "
               "pending for the next run.")
