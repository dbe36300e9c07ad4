"""deltamark runs ..."""

from typing import Annotated

import typer

from framework.cli._common import library_errors, options, render

app = typer.Typer(help="Runs of jobs, from the runs state table.", no_args_is_help=True)


@app.command("list")
def list_runs(
    ctx: typer.Context,
    job: Annotated[str | None, typer.Argument(help="Only this job's runs.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List recorded runs, oldest first."""
    with library_errors(ctx):
        render(options(ctx).store().runs(job), as_json=as_json)
