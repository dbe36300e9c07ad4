"""deltamark watermarks ..."""

from typing import Annotated

import typer

from framework.cli._common import library_errors, options, render
from framework.errors import RunNotFoundError

app = typer.Typer(help="Column watermarks jobs record with ctx.watermark.",
                  no_args_is_help=True)


@app.command("list")
def list_watermarks(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """The current watermark of every job and context."""
    with library_errors(ctx):
        render(options(ctx).store().watermarks(), as_json=as_json)


@app.command("get")
def get(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="The job.")],
    run: Annotated[str | None, typer.Option(help="As of this run (run id).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """JOB's watermarks: current, or as they stood after --run."""
    with library_errors(ctx):
        store = options(ctx).store()
        up_to = None
        if run is not None:
            found = store.find_run(run)
            if found is None or found.job != job:
                raise RunNotFoundError(run)
            up_to = found.run_seq
        render(store.watermarks(job, up_to_seq=up_to), as_json=as_json)
