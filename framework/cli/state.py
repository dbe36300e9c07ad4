"""deltamark state ..."""

from typing import Annotated

import typer

from framework.cli._common import library_errors, options

app = typer.Typer(help="The state tables themselves: repair, vacuum, register.",
                  no_args_is_help=True)


@app.command("repair")
def repair(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="The job.")],
    targets: Annotated[list[str] | None, typer.Option(
        "--target", help="Also search this target (a path or URI) for runs of JOB; "
                         "repeatable. The targets the state knows are always searched.")] = None,
) -> None:
    """Record again the runs of JOB that its targets hold and its state lost (a state
    root restored from a backup, or missing its newest commits)."""
    from framework.ops import actions  # the targets' code: not a read-only command's

    with library_errors(ctx):
        done = actions.repair(options(ctx).settings(), job, targets=targets or ())
    if not done.runs:
        typer.echo(f"{job}: the state knows every run its {len(done.targets)} target(s) "
                   "hold; nothing to repair.")
        return
    for repaired in done.runs:
        run = repaired.run
        typer.echo(f"{job}: recorded run {run.run_seq} ({run.run_id}) from "
                   f"{', '.join(run.outputs)}, with "
                   f"{', '.join(b.context for b in repaired.bookmarks) or 'no bookmarks'}")
        for target in repaired.missing_from:
            typer.echo(f"  warning: {target} does not hold run {run.run_seq}; if the job "
                       "writes it every run, it misses that run's rows (rewind to the run "
                       "before with --restore-targets to redo it).")


@app.command("vacuum")
def vacuum(ctx: typer.Context) -> None:
    """Tidy the state tables now: compact and checkpoint them, and delete the files and log
    entries no current read has needed for state_retention_hours (conf; default 1). Runs
    do the same every 10 versions of a table. Rewinds never need what it deletes.

    Also removes rows that repeat another row exactly (left by two tidies at once before
    tidies took a lease), and says how many."""
    with library_errors(ctx):
        sizes = options(ctx).store().tidy()
        retention_hours = options(ctx).settings().state_retention_hours
    for size in sizes:
        (files, before), (left, after) = size.before, size.after
        copies = f"; removed {size.copies_removed} duplicated row(s)" \
            if size.copies_removed else ""
        typer.echo(f"{size.table}: {files} files, {before / 1e6:.2f} MB -> {left} files, "
                   f"{after / 1e6:.2f} MB{copies}")
    typer.echo(f"Files unneeded for less than {retention_hours} hour(s) "
               "(state_retention_hours) stay until then.")


@app.command("register")
def register(
    ctx: typer.Context,
    database: Annotated[str, typer.Option("--database", help="The database to register "
                                          "them in (created when missing).")],
    catalog: Annotated[str | None, typer.Option(
        "--catalog", help="The Spark catalog of the database (default: the session's).")
    ] = None,
) -> None:
    """Enter the state tables (runs, bookmarks, processed_files) and the views of
    deltamark sql (current_runs, current_bookmarks) in the Spark session's catalog, as
    external tables over the state root: the platform's Spark SQL then queries
    DATABASE.runs. Idempotent; the state is neither moved nor written."""
    from framework.ops.catalog import register_state  # starts Spark

    with library_errors(ctx):
        done = register_state(options(ctx).settings(), database, catalog_name=catalog)
    for entry in done:
        where = f" -> {entry.location}" if entry.location else ""
        typer.echo(f"{entry.name}: {entry.done}{where}")
