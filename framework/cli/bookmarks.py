"""deltamark bookmarks ..."""

from typing import Annotated

import typer

from framework.cli._common import library_errors, options, render

app = typer.Typer(help="Bookmarks: what each job context has processed.", no_args_is_help=True)


@app.command("show")
def show(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="The job.")],
    context: Annotated[str | None, typer.Option("--ctx", help="Only this context.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Show the current bookmark of each context of JOB."""
    with library_errors(ctx):
        render(options(ctx).store().bookmarks(job, context), as_json=as_json)
