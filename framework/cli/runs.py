"""deltamark runs ..."""

from typing import Annotated, Any

import typer

from framework.cli._common import (
    SKIPPED_OPTION,
    Skipped,
    library_errors,
    options,
    render,
    zoned,
)
from framework.common import humanize
from framework.ops import admin
from state_tables.model import Run

app = typer.Typer(help="Runs of jobs, from the runs state table.", no_args_is_help=True)


@app.command("list")
def list_runs(
    ctx: typer.Context,
    job: Annotated[str | None, typer.Argument(help="Only this job's runs.")] = None,
    last: Annotated[int | None, typer.Option(
        help="Only each job's newest N runs (with --skipped hide: N that were not "
             "skipped).", min=1)] = None,
    skipped: SKIPPED_OPTION = Skipped.fold,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List recorded runs, oldest first: what each read and wrote, in words (--json: every
    column, raw)."""
    with library_errors(ctx):
        store = options(ctx).store()
        if last is not None:
            runs = store.recent_runs(last, job, skipped=skipped is not Skipped.hide)
        else:
            runs = [r for r in store.runs(job)
                    if skipped is not Skipped.hide or r.status != "skipped"]
        if job and not runs:
            admin.require_job(options(ctx).settings(), job)
    if as_json:
        render(runs, as_json=True)
        return
    if skipped is Skipped.show:
        render([_summary(r) for r in runs], as_json=False)
        return
    render([_stretch(r) if isinstance(r, list) else _summary(r)
            for r in humanize.fold(runs, skipped=lambda r: r.status == "skipped",
                                   group=lambda r: r.job)], as_json=False)


def _summary(run: Run) -> dict[str, Any]:
    status = run.status + (f" (attempt {run.attempt})" if run.attempt > 1 else "")
    note = run.error.splitlines()[0] if run.error else (
        f"recovery: {run.recovery}" if run.recovery else
        f"bookmark set: {run.arguments[admin.SET_BOOKMARK]}"
        if admin.SET_BOOKMARK in run.arguments else "")
    return {"job": run.job, "run": run.run_seq, "status": status, "mode": run.mode,
            zoned("started"): humanize.local_time(run.started_at),
            "took": humanize.duration((run.ended_at - run.started_at).total_seconds())
            if run.ended_at and run.status != "skipped" else "",
            "read": "nothing new" if run.status == "skipped" else "; ".join(
                f"{context}: {humanize.read(counts)}" for context, counts in run.inputs.items()),
            "wrote": "; ".join(f"{target}: {admin.describe_write(target, output)}"
                               for target, output in run.outputs.items()),
            "run_id": run.run_id, "note": _shortened(note)}


def _stretch(runs: list[Run]) -> dict[str, Any]:
    """A stretch of skipped runs, on one line."""
    first, final = runs[0], runs[-1]
    return {"job": first.job, "run": f"{first.run_seq}-{final.run_seq}",
            "status": f"skipped x{len(runs)}", "mode": first.mode,
            zoned("started"): humanize.local_time(first.started_at), "took": "",
            "read": f"nothing new, until {humanize.local_time(final.started_at)}",
            "wrote": "", "run_id": "", "note": "--skipped show lists each"}


def _shortened(text: str, width: int = 100) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


@app.command("abort")
def abort(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="The unfinished run to abort.")],
) -> None:
    """Mark an unfinished run whose process is gone as aborted (nothing of it counts)."""
    from framework.ops import actions  # the targets' code: not a read-only command's

    with library_errors(ctx):
        run = actions.abort_run(options(ctx).settings(), run_id)
    typer.echo(f"{run.job}: run {run.run_seq} ({run.run_id}) aborted; its input stays "
               "pending for the next run.")
