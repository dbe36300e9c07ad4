"""deltamark bookmarks ..."""

import json
from typing import Annotated, Any

import typer

from framework.cli._common import library_errors, options, plain, render, zoned
from framework.common import humanize
from framework.ops import admin
from framework.ops.admin import describe_bookmarks
from framework.sources.bookmark_codec import describe

app = typer.Typer(help="Bookmarks: what each job context has processed.", no_args_is_help=True)


@app.command("show")
def show(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="The job.")],
    context: Annotated[str | None, typer.Option("--ctx", help="Only this context.")] = None,
    files: Annotated[bool, typer.Option(
        "--files", help="List the files each file context tracks by name.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Show the current bookmark of each context of JOB, readably."""
    with library_errors(ctx):
        described = describe_bookmarks(options(ctx).store(), job, context=context, list_files=files)
        if not described:
            admin.require_job(options(ctx).settings(), job)
    if as_json:
        typer.echo(json.dumps([plain(d) for d in described], default=str))
    elif not described:
        typer.echo(f"{job}: no bookmarks yet (no run has committed one).")
    else:
        typer.echo("\n".join(_text(job, d) for d in described))


@app.command("rewind")
def rewind(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="The job.")],
    to_run: Annotated[str, typer.Option(help="Resume from right after this run (run id).")],
    context: Annotated[str | None, typer.Option("--ctx", help="Only this context.")] = None,
    restore_targets: Annotated[bool, typer.Option(
        help="Also return the job's targets to their content right after that run "
             "(refused if another writer committed to them since).")] = False,
) -> None:
    """Make JOB's next run resume from the state right after run --to-run."""
    # the targets' code: not a read-only command's
    from framework.ops import actions
    from framework.sinks.target import PrunedTarget

    with library_errors(ctx):
        done = actions.rewind(options(ctx).settings(), job, to_run=to_run, context=context,
                              restore_targets=restore_targets)
    back_to = done.to_run
    assert back_to is not None  # a rewind always names the run it went back to
    typer.echo(f"{job}: rewound to run {back_to.run_seq} ({back_to.run_id}); the "
               "next run resumes from there.")
    for b in done.bookmarks:
        what = ("reset (it did not exist then)" if b.event == "reset"
                else f"state of run {b.restored_from_seq}")
        typer.echo(f"  {b.context}: {what}")
    for t in done.restored:
        if isinstance(t, PrunedTarget):
            typer.echo(f"  target {t.target}: deleted the {t.removed_files} files of runs "
                       f"{', '.join(map(str, t.removed_runs))}")
            continue
        to = f"version {t.to_version}" if t.to_version is not None else "empty (created later)"
        typer.echo(f"  target {t.target}: restored to {to} as version {t.new_version}")
    if not restore_targets:
        typer.echo("  targets untouched: rows later runs wrote stay there (--restore-targets "
                   "removes them)")


@app.command("reset")
def reset(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="The job.")],
    context: Annotated[str | None, typer.Option("--ctx", help="Only this context.")] = None,
) -> None:
    """Make JOB's next run start from nothing (targets are not touched)."""
    from framework.ops import actions

    with library_errors(ctx):
        done = actions.reset(options(ctx).settings(), job, context=context)
    typer.echo(f"{job}: reset {', '.join(b.context for b in done.bookmarks) or 'nothing'}; "
               "the next run reads everything.")


@app.command("set")
def set_bookmark(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="The job.")],
    context: Annotated[str, typer.Option("--ctx", help="The context.")],
    version: Annotated[int | None, typer.Option(
        help="A Delta context: as if a run had read the table through this version.", min=0)
    ] = None,
    snapshot: Annotated[int | None, typer.Option(
        help="An Iceberg context: as if a run had read the table through this snapshot.")
    ] = None,
    latest: Annotated[bool, typer.Option(
        "--latest", help="A Delta or Iceberg context: as if a run had read through the "
                         "table's latest version or snapshot.")] = False,
    value: Annotated[list[str] | None, typer.Option(
        help="A database context: as if a run had read the rows up to this value of its "
             "bookmark key (one per key, in order, for several).")] = None,
    table: Annotated[str | None, typer.Option(
        help="A Delta context's table, when it has no bookmark yet.")] = None,
) -> None:
    """Set a context's bookmark without running JOB; the next run reads what comes after
    it. Recorded as a run: rewinding to the run before it undoes it."""
    if [version is not None, snapshot is not None, latest, bool(value)].count(True) != 1:
        raise typer.BadParameter("give exactly one",
                                 param_hint="--version/--snapshot/--latest/--value")
    from framework.ops import actions

    with library_errors(ctx):
        before = [r for r in options(ctx).store().runs(job)
                  if r.status == "succeeded" and r.mode == "enable"]
        run = actions.set_bookmark(options(ctx).settings(), job, context=context,
                                   version=version, snapshot=snapshot, latest=latest,
                                   values=value or (), table=table)
    typer.echo(f"{job}: run {run.run_seq} ({run.run_id}) set {run.arguments[admin.SET_BOOKMARK]}"
               "; the next run reads what comes after it.")
    typer.echo("  to undo: deltamark bookmarks " + (
        f"rewind {job} --ctx {context} --to-run {before[-1].run_id}" if before
        else f"reset {job} --ctx {context}"))


@app.command("history")
def history(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="The job.")],
    context: Annotated[str | None, typer.Option("--ctx", help="Only this context.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Every state change of JOB's contexts, oldest first (counts: whether it applies), in
    words (--json: every field, the state as stored)."""
    with library_errors(ctx):
        rows = admin.bookmark_history(options(ctx).store(), job, context=context)
        if not rows:
            admin.require_job(options(ctx).settings(), job)
    if as_json:
        render(rows, as_json=True)
        return
    render([{"context": r["context"], "run": r["run_seq"],
             "event": r["event"] + (f" to run {r['restored_from_seq']}"
                                    if r["restored_from_seq"] else ""),
             "counts": "yes" if r["counts"] else "no",
             zoned("committed"): humanize.local_time(r["committed_at"])
             if r["committed_at"] else "",
             "state": "nothing (starts over)" if r["event"] == "reset" else "; ".join(
                 f"{label}: {text}" for label, text in describe(r["kind"], r["state"]))}
            for r in rows], as_json=False)


@app.command("get")
def get(
    ctx: typer.Context,
    job: Annotated[str, typer.Argument(help="The job.")],
    run: Annotated[str | None, typer.Option(help="As of this run (run id).")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="One line of JSON (default: indented JSON).")] = False,
) -> None:
    """JOB's bookmark shaped like Glue's GetJobBookmark JobBookmarkEntry."""
    with library_errors(ctx):
        entry = admin.glue_bookmark_entry(options(ctx).store(), job, run_id=run)
    typer.echo(json.dumps(entry, indent=None if as_json else 2))


def _text(job: str, entry: dict[str, Any]) -> str:
    committed = entry["committed_at"]
    lines = [f"{job} / {entry['context']}  ({entry['kind']}; {entry['event']} by run "
             f"{entry['run_seq']}, {entry['run_id']}, at {humanize.local_time(committed)} "
             f"{committed.astimezone().tzname()}, {humanize.ago(committed)})"]
    if entry["event"] == "reset":
        return "\n".join([*lines, "  reset: the next run starts from nothing"])
    lines += [f"  {label:<16}: {text}" for label, text in describe(entry["kind"], entry["state"])]
    if "tracked_files" in entry:
        lines.append(f"  {'tracked':<16}: {entry['tracked_files']} files, by name")
    for f in entry.get("files", []):
        outcome = "" if f["outcome"] == "read" else f"  ({f['outcome']}, not read)"
        lines.append(f"    {f['modified_at']:%Y-%m-%d %H:%M:%S.%f}"[:-3]
                     + f"  {f['size']:>10}  run {f['run_seq']:<4} {f['path']}{outcome}")
    return "\n".join(lines)
