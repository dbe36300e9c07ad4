"""deltamark sql ..."""

from typing import Annotated

import typer

from framework.cli._common import library_errors, options, render
from state_tables.rows import python_rows
from state_tables.sql import run_sql


def sql(
    ctx: typer.Context,
    statement: Annotated[str, typer.Argument(help="One read-only SQL query.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Query the state tables (runs, bookmarks) and views (current_bookmarks). Read-only."""
    with library_errors(ctx):
        render(python_rows(run_sql(options(ctx).store(), statement)), as_json=as_json)
