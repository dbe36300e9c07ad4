"""The ``deltamark`` command tree: its Typer app, command groups and global options."""

from pathlib import Path
from typing import Annotated

import typer

from framework.cli import bookmarks, dq, runs, server, state, watermarks, workflow
from framework.cli._coercion import Group
from framework.cli._common import CliOptions
from framework.cli.metrics import metrics
from framework.cli.run import run
from framework.cli.sql import sql
from framework.cli.ui import ui

__all__ = ["app"]

app = typer.Typer(
    name="deltamark",
    cls=Group,  # values coerced without importing pydantic
    help="Glue-style job bookmarks for PySpark, with the state in Delta tables.",
    no_args_is_help=True,
    # help texts are Markdown: a paragraph's line breaks are not kept (typer's Rich mode
    # keeps them, breaking the wrapped lines of every docstring), in every command group
    rich_markup_mode="markdown",
    pretty_exceptions_show_locals=False,
)
app.add_typer(runs.app, name="runs")
app.add_typer(bookmarks.app, name="bookmarks")
app.add_typer(watermarks.app, name="watermarks")
app.add_typer(dq.app, name="dq")
app.add_typer(workflow.app, name="workflow")
app.add_typer(server.app, name="server")
app.add_typer(state.app, name="state")
app.command("run")(run)
app.command("sql")(sql)
app.command("ui")(ui)
app.command("metrics")(metrics)


@app.callback()
def _global_options(
    ctx: typer.Context,
    conf_dir: Annotated[Path | None, typer.Option(
        help="Configuration directory (env: DELTAMARK_CONF_DIR; default: conf).")] = None,
    state_root: Annotated[str | None, typer.Option(
        help="Where the state tables live, a path or s3:// URI (env: DELTAMARK_STATE_ROOT)."
    )] = None,
    debug: Annotated[bool, typer.Option(help="Show tracebacks of errors.")] = False,
) -> None:
    # ctx.obj: the command line main() was given (None for a caller of the app)
    ctx.obj = CliOptions(conf_dir=conf_dir, state_root=state_root, debug=debug,
                         argv=ctx.obj)
